// Marks the chat search's hits inside a message as it is drawn (the opened chat, after a
// search led there): a QSyntaxHighlighter on the message's text document, so the words are
// found in the text as rendered (Markdown's markers are gone by then) and the message itself
// is never changed. Which words match is the search's own rule
// (ConversationListModel::matchRanges: word starts, case and accents ignored).
//
// QML: SearchHighlighter { document: textEdit.textDocument; search: Chat.conversations;
//                           color: Theme.accent }
#pragma once
#include <QColor>
#include <QObject>
#include <QPointer>
#include <QQuickTextDocument>

namespace ember::app {

class ConversationListModel;
class HitHighlighter;

class SearchHighlighter : public QObject {
    Q_OBJECT
    Q_PROPERTY(QQuickTextDocument* document READ document WRITE setDocument NOTIFY documentChanged)
    Q_PROPERTY(ember::app::ConversationListModel* search READ search WRITE setSearch NOTIFY searchChanged)
    Q_PROPERTY(QColor color READ color WRITE setColor NOTIFY colorChanged)
    Q_PROPERTY(int hits READ hits NOTIFY hitsChanged)  // words marked now (tests, and none: no cost)
public:
    explicit SearchHighlighter(QObject* parent = nullptr);
    ~SearchHighlighter() override;

    QQuickTextDocument* document() const { return document_; }
    void setDocument(QQuickTextDocument* d);
    ConversationListModel* search() const { return search_; }
    void setSearch(ConversationListModel* s);
    QColor color() const { return color_; }
    void setColor(const QColor& c);
    int hits() const { return hits_; }

signals:
    void documentChanged();
    void searchChanged();
    void colorChanged();
    void hitsChanged();

private:
    friend class HitHighlighter;
    void rehighlight();
    void recount();

    QPointer<QQuickTextDocument> document_;
    QPointer<ConversationListModel> search_;
    QColor color_{0xd9, 0x48, 0x0f};
    HitHighlighter* highlighter_ = nullptr;  // owned by the QTextDocument it works on
    int hits_ = 0;
};

}  // namespace ember::app
