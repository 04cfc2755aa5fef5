#include "app/desktop/search_highlighter.h"

#include <QQuickTextDocument>
#include <QSyntaxHighlighter>
#include <QTextBlock>
#include <QTextCharFormat>
#include <QTextDocument>
#include <QVariantMap>

#include "app/core/conversation_list_model.h"

namespace ember::app {

class HitHighlighter : public QSyntaxHighlighter {
public:
    HitHighlighter(QTextDocument* doc, SearchHighlighter& owner) : QSyntaxHighlighter(doc), owner_(owner) {}

protected:
    void highlightBlock(const QString& text) override {
        if (!owner_.search_ || owner_.search_->searchQuery().isEmpty()) return;
        QTextCharFormat f;
        f.setForeground(owner_.color_);
        f.setFontWeight(QFont::Bold);
        f.setFontUnderline(true);
        for (const QVariant& r : owner_.search_->matchRanges(text)) {
            const QVariantMap m = r.toMap();
            setFormat(m.value("start").toInt(), m.value("length").toInt(), f);
        }
    }

private:
    SearchHighlighter& owner_;
};

SearchHighlighter::SearchHighlighter(QObject* parent) : QObject(parent) {}

SearchHighlighter::~SearchHighlighter() = default;  // the highlighter goes with its document

void SearchHighlighter::setDocument(QQuickTextDocument* d) {
    if (d == document_) return;
    delete highlighter_;  // detaches it from the old document
    highlighter_ = nullptr;
    document_ = d;
    if (d && d->textDocument()) {
        highlighter_ = new HitHighlighter(d->textDocument(), *this);
        // The text may arrive (or stream in) after this: count again whenever it changes.
        connect(d->textDocument(), &QTextDocument::contentsChanged, this, &SearchHighlighter::recount);
    }
    emit documentChanged();
    rehighlight();
}

void SearchHighlighter::setSearch(ConversationListModel* s) {
    if (s == search_) return;
    if (search_) disconnect(search_, nullptr, this, nullptr);
    search_ = s;
    if (s) connect(s, &ConversationListModel::filterChanged, this, &SearchHighlighter::rehighlight);
    emit searchChanged();
    rehighlight();
}

void SearchHighlighter::setColor(const QColor& c) {
    if (c == color_) return;
    color_ = c;
    emit colorChanged();
    rehighlight();
}

void SearchHighlighter::rehighlight() {
    if (highlighter_) highlighter_->rehighlight();
    recount();
}

void SearchHighlighter::recount() {
    int n = 0;
    if (search_ && !search_->searchQuery().isEmpty() && document_ && document_->textDocument())
        for (QTextBlock b = document_->textDocument()->begin(); b.isValid(); b = b.next())
            n += static_cast<int>(search_->matchRanges(b.text()).size());
    if (n == hits_) return;
    hits_ = n;
    emit hitsChanged();
}

}  // namespace ember::app
