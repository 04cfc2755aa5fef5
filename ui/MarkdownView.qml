// Message text: Markdown prose (Qt's MarkdownText) with code blocks split out, or plain
// text for the user's own messages (what they typed is shown exactly as typed). Words the
// chat search matched are marked in the prose (not yet inside code blocks).
import QtQuick
import QtQuick.Controls
import Ember.Core
import "markdown.js" as Md

Column {
    id: root
    property string text
    property bool markdown: true
    spacing: 6

    Repeater {
        model: root.markdown ? Md.segments(root.text) : [{ kind: "text", text: root.text, lang: "" }]
        delegate: Loader {
            id: segment
            required property var modelData
            width: root.width
            sourceComponent: segment.modelData.kind === "code" ? codeComponent : textComponent
            Component {
                id: textComponent
                TextEdit {
                    id: textEdit
                    objectName: "segmentText"
                    readonly property int searchHits: highlighter.hits  // words marked now
                    text: segment.modelData.text
                    textFormat: root.markdown ? TextEdit.MarkdownText : TextEdit.PlainText
                    wrapMode: TextEdit.Wrap
                    readOnly: true
                    selectByMouse: true
                    color: Theme.text
                    selectionColor: Theme.accent
                    font.pixelSize: 14
                    onLinkActivated: (link) => Qt.openUrlExternally(link)
                    // The chat search's words, marked where they are drawn.
                    SearchHighlighter {
                        id: highlighter
                        document: textEdit.textDocument
                        search: Chat.conversations
                        color: Theme.accent
                    }
                }
            }
            Component {
                id: codeComponent
                CodeBlock { code: segment.modelData.text; lang: segment.modelData.lang }
            }
        }
    }
}
