// The sidebar: conversations newest first, narrowed by the search field (title or message
// text, full-text). Re-read from the store on refresh(); a list of conversations is small
// and one indexed query, so there is no incremental bookkeeping to get wrong.
//
// While searching, each row's `snippet` is the best matching message text around the hit
// (plain), and `snippetHtml` the same as Qt Quick StyledText with the matched words bold in
// `highlightColor` and every other character escaped (a message's "<b>" or "[x]" shows as
// typed). `searchQuery`, `searchTerms` and matchRanges() tell the opened chat what to highlight.
#pragma once
#include <QAbstractListModel>
#include <QColor>
#include <QSet>
#include <QStringList>
#include <vector>

#include "app/storage/records.h"

namespace ember::app {

class ConversationStore;

class ConversationListModel : public QAbstractListModel {
    Q_OBJECT
    Q_PROPERTY(QString filter READ filter WRITE setFilter NOTIFY filterChanged)
    Q_PROPERTY(int count READ count NOTIFY countChanged)
    // The active search, trimmed: "" while the list is not searched.
    Q_PROPERTY(QString searchQuery READ searchQuery NOTIFY filterChanged)
    // Its words as the search matches them: each the start of a word, ignoring case and accents.
    Q_PROPERTY(QStringList searchTerms READ searchTerms NOTIFY filterChanged)
    // What `snippetHtml` draws matched words in (the sidebar binds the theme's accent).
    Q_PROPERTY(QColor highlightColor READ highlightColor WRITE setHighlightColor NOTIFY highlightColorChanged)
public:
    enum Role { IdRole = Qt::UserRole + 1, TitleRole, UpdatedRole, SnippetRole, SnippetHtmlRole, GeneratingRole };

    explicit ConversationListModel(ConversationStore& store, QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QHash<int, QByteArray> roleNames() const override;
    int count() const { return static_cast<int>(rows_.size()); }

    QString filter() const { return filter_; }
    void setFilter(const QString& f);
    void setGenerating(const QSet<qint64>& ids);
    QString searchQuery() const { return filter_.trimmed(); }
    QStringList searchTerms() const;
    QColor highlightColor() const { return highlight_; }
    void setHighlightColor(const QColor& c);

    // Where the active search matches `text`: [{start, length}] of each matched word, in
    // order (UTF-16 positions, as QML strings count), [] while not searching.
    Q_INVOKABLE QVariantList matchRanges(const QString& text) const;

    Q_INVOKABLE void refresh();
    Q_INVOKABLE int rowOf(qint64 id) const;
    Q_INVOKABLE QVariantMap get(int row) const;

signals:
    void filterChanged();
    void countChanged();
    void highlightColorChanged();

private:
    ConversationStore& store_;
    QString filter_;
    std::vector<Conversation> rows_;
    QHash<qint64, QString> snippets_;  // conversation -> best matching message text
    QSet<qint64> generating_;
    QColor highlight_ = QColor(0xd9, 0x48, 0x0f);
};

// A search snippet (matched words between kHitOpen and kHitClose, app/storage/records.h) as
// plain text, and as StyledText on one line: text escaped, each match bold in `colour`.
QString snippet_plain(const QString& marked);
QString snippet_styled(const QString& marked, const QColor& colour);

}  // namespace ember::app
