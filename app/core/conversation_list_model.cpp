#include "app/core/conversation_list_model.h"

#include <QRegularExpression>
#include <algorithm>

#include "app/storage/conversation_store.h"

namespace ember::app {
namespace {

// The words of a text as the search index splits it (unicode61: runs of letters and digits).
QList<QRegularExpressionMatch> word_matches(const QString& text) {
    static const QRegularExpression kWord(QStringLiteral("[\\p{L}\\p{N}\\p{M}]+"));
    QList<QRegularExpressionMatch> out;
    for (auto it = kWord.globalMatch(text); it.hasNext();) out << it.next();
    return out;
}

// A word as the index compares it (remove_diacritics): accents dropped, case folded.
QString folded(const QString& word) {
    QString out;
    for (const QChar c : word.normalized(QString::NormalizationForm_D))
        if (c.category() != QChar::Mark_NonSpacing) out += c;
    return out.toCaseFolded();
}

}  // namespace

QString snippet_plain(const QString& marked) {
    QString out = marked;
    out.remove(kHitOpen).remove(kHitClose);
    return out;
}

QString snippet_styled(const QString& marked, const QColor& colour) {
    const QString open = QStringLiteral("<b><font color=\"%1\">").arg(colour.name());
    const QString close = QStringLiteral("</font></b>");
    QString out;
    out.reserve(marked.size() + 64);
    bool in_hit = false;
    for (const QChar c : marked) {
        if (c == kHitOpen || c == kHitClose) {
            const bool opens = c == kHitOpen;
            if (opens != in_hit) out += opens ? open : close;  // a repeated marker adds nothing
            in_hit = opens;
            continue;
        }
        if (c == '<') out += QLatin1String("&lt;");
        else if (c == '>') out += QLatin1String("&gt;");
        else if (c == '&') out += QLatin1String("&amp;");
        else if (c == '"') out += QLatin1String("&quot;");
        else if (c == '\n' || c == '\r' || c == '\t') out += ' ';  // one line in the sidebar
        else out += c;
    }
    if (in_hit) out += close;
    return out;
}

ConversationListModel::ConversationListModel(ConversationStore& store, QObject* parent)
    : QAbstractListModel(parent), store_(store) {
    refresh();
}

int ConversationListModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : count(); }

QVariant ConversationListModel::data(const QModelIndex& index, int role) const {
    const int row = index.row();
    if (row < 0 || row >= count()) return {};
    const Conversation& c = rows_[static_cast<size_t>(row)];
    switch (role) {
        case IdRole:
            return QVariant::fromValue<qint64>(c.id);
        case Qt::DisplayRole:
        case TitleRole:
            return c.title.isEmpty() ? QStringLiteral("New chat") : c.title;
        case UpdatedRole:
            return QVariant::fromValue<qint64>(c.updated_at);
        case SnippetRole:
            return snippet_plain(snippets_.value(c.id));
        case SnippetHtmlRole:
            return snippet_styled(snippets_.value(c.id), highlight_);
        case GeneratingRole:
            return generating_.contains(c.id);
        default:
            return {};
    }
}

QHash<int, QByteArray> ConversationListModel::roleNames() const {
    return {{IdRole, "conversationId"},       {TitleRole, "title"},
            {UpdatedRole, "updatedAt"},       {SnippetRole, "snippet"},
            {SnippetHtmlRole, "snippetHtml"}, {GeneratingRole, "generating"}};
}

void ConversationListModel::setFilter(const QString& f) {
    if (f == filter_) return;
    filter_ = f;
    emit filterChanged();
    refresh();
}

QStringList ConversationListModel::searchTerms() const {
    QStringList out;
    for (const QRegularExpressionMatch& m : word_matches(filter_)) out << m.captured();
    return out;
}

void ConversationListModel::setHighlightColor(const QColor& c) {
    if (c == highlight_) return;
    highlight_ = c;
    emit highlightColorChanged();
    if (count() > 0) emit dataChanged(index(0), index(count() - 1), {SnippetHtmlRole});
}

QVariantList ConversationListModel::matchRanges(const QString& text) const {
    QStringList terms = searchTerms();
    for (QString& t : terms) t = folded(t);
    QVariantList out;
    if (terms.isEmpty()) return out;
    for (const QRegularExpressionMatch& m : word_matches(text)) {
        const QString word = folded(m.captured());
        if (std::any_of(terms.begin(), terms.end(), [&](const QString& t) { return word.startsWith(t); }))
            out << QVariantMap{{"start", m.capturedStart()}, {"length", m.capturedLength()}};
    }
    return out;
}

void ConversationListModel::setGenerating(const QSet<qint64>& ids) {
    if (ids == generating_) return;
    generating_ = ids;
    if (count() > 0) emit dataChanged(index(0), index(count() - 1), {GeneratingRole});
}

void ConversationListModel::refresh() {
    const int before = count();
    std::vector<Conversation> rows;
    QHash<qint64, QString> snippets;
    try {
        rows = store_.conversations(filter_);
        if (!filter_.trimmed().isEmpty())
            for (const SearchHit& h : store_.search(filter_, 200))
                if (!snippets.contains(h.conversation_id)) snippets.insert(h.conversation_id, h.snippet);
    } catch (const std::exception& e) {
        // A read the disk refuses mid-session: keep showing the list as it was.
        qWarning("ember: reading the conversation list failed: %s", e.what());
        return;
    }
    beginResetModel();
    rows_ = std::move(rows);
    snippets_ = std::move(snippets);
    endResetModel();
    if (count() != before) emit countChanged();
}

int ConversationListModel::rowOf(qint64 id) const {
    for (int i = 0; i < count(); ++i)
        if (rows_[static_cast<size_t>(i)].id == id) return i;
    return -1;
}

QVariantMap ConversationListModel::get(int row) const {
    QVariantMap out;
    const QHash<int, QByteArray> names = roleNames();
    for (auto it = names.begin(); it != names.end(); ++it)
        out.insert(QString::fromLatin1(it.value()), data(index(row), it.key()));
    return out;
}

}  // namespace ember::app
