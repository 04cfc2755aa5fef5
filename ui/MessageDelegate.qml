// One message: a bubble (user on the right, assistant on the left), the stats line under
// an answer (TTFT, tok/s, tokens, prompt and reused tokens, model, why it ended), and its actions: copy, edit and resend (user),
// regenerate (last answer).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Item {
    id: root
    required property int index
    required property var messageId
    required property string role
    required property string content
    required property string messageState
    required property string stats

    readonly property bool isUser: role === "user"
    readonly property bool isLast: index === ListView.view.count - 1
    readonly property bool streaming: messageState === "streaming"
    property bool editing: false

    width: ListView.view ? ListView.view.width : 400
    implicitHeight: column.implicitHeight + 14

    ColumnLayout {
        id: column
        spacing: 4
        width: Math.min(root.width - 48, 780)
        x: root.isUser ? root.width - width - 24 : 24
        y: 7

        Rectangle {
            id: bubble
            objectName: "bubble"
            Layout.alignment: root.isUser ? Qt.AlignRight : Qt.AlignLeft
            // Short messages get a snug bubble; code (monospace, in its own box) and long
            // text take the full width.
            Layout.preferredWidth: root.editing || root.content.indexOf("```") >= 0 ? column.width
                                   : Math.min(column.width, Math.max(body.implicitTextWidth + 28, 60))
            implicitHeight: (root.editing ? editor.implicitHeight : body.height) + 20
            radius: Theme.radius
            color: root.isUser ? Theme.userBubble : Theme.assistantBubble
            border.color: root.messageState === "interrupted" ? Theme.warning : "transparent"

            MarkdownView {
                id: body
                objectName: "messageText"
                // Widest line of the plain text, for short bubbles; long text wraps.
                property real implicitTextWidth: probe.implicitWidth
                visible: !root.editing
                x: 14; y: 10
                width: bubble.width - 28
                text: root.content
                markdown: !root.isUser
            }
            Text { id: probe; visible: false; text: root.content.length < 400 ? root.content : ""; font.pixelSize: 14 }
            Label {
                visible: root.streaming && root.content.length === 0
                x: 14; y: 10
                text: Chat.busy ? qsTr("Thinking…") : ""
                color: Theme.muted
            }
            ColumnLayout {
                id: editor
                visible: root.editing
                x: 10; y: 10
                width: bubble.width - 20
                FramedTextArea {
                    id: editArea
                    objectName: "editArea"
                    Layout.fillWidth: true
                    text: root.content
                }
                RowLayout {
                    Layout.alignment: Qt.AlignRight
                    Button { text: qsTr("Cancel"); flat: true; onClicked: root.editing = false }
                    PrimaryButton {
                        objectName: "saveEditButton"
                        text: qsTr("Send")
                        onClicked: { root.editing = false; Chat.editAndResend(root.messageId, editArea.text) }
                    }
                }
            }
        }

        RowLayout {
            Layout.alignment: root.isUser ? Qt.AlignRight : Qt.AlignLeft
            spacing: 2
            visible: !root.editing
            Label {
                objectName: "statsLine"
                visible: !root.isUser && text.length > 0
                Layout.maximumWidth: column.width * 0.7  // the line grew (prompt, reuse, stop reason): wrap
                wrapMode: Text.Wrap
                text: root.streaming ? qsTr("writing…") : root.stats
                color: root.messageState === "interrupted" ? Theme.warning : Theme.muted
                font.pixelSize: 11
                rightPadding: 6
            }
            ToolButton {
                objectName: "copyButton"
                visible: !root.streaming && root.content.length > 0
                text: copied.running ? qsTr("Copied") : qsTr("Copy")
                font.pixelSize: 11
                onClicked: { Clipboard.setText(root.content); copied.restart() }
                Timer { id: copied; interval: 1500 }
            }
            ToolButton {
                objectName: "editButton"
                visible: root.isUser && !Chat.generating
                text: qsTr("Edit")
                font.pixelSize: 11
                onClicked: { editArea.text = root.content; root.editing = true; editArea.forceActiveFocus() }
            }
            ToolButton {
                objectName: "regenerateButton"
                visible: !root.isUser && root.isLast && !Chat.generating && Models.ready
                text: qsTr("Regenerate")
                font.pixelSize: 11
                onClicked: Chat.regenerate()
            }
        }
    }
}
