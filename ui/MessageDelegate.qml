// One message: a bubble (user on the right, assistant on the left), the stats line under
// an answer (TTFT, tok/s, tokens, prompt and reused tokens, model, why it ended), and its
// actions: copy, edit and resend (user), regenerate (last answer). An answer that failed
// shows why in its place, with Retry and, for a message too long for the context, a longer
// context; an answer whose prompt left out the oldest messages says so above it. Both are
// stored with the message: they are there after a restart too. Where the latest answer began
// reading, after older messages that no longer fit, a divider across the chat says how many
// messages above it the model no longer reads (they stay in the chat and the history). A reasoning model's thinking
// sits above its answer, collapsed (ThinkingSection.qml); the answer text never holds it.
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
    required property string error
    required property int neededContext
    required property int droppedMessages
    required property string reasoning
    required property real thinkingMs
    required property var thinkingSince
    required property int droppedAbove

    readonly property bool isUser: role === "user"
    readonly property bool isLast: index === ListView.view.count - 1
    readonly property bool streaming: messageState === "streaming"
    readonly property bool failed: error.length > 0
    readonly property bool hasThinking: reasoning.length > 0
    function count(n) { return n.toLocaleString(Qt.locale(), "f", 0) }
    property bool editing: false
    function saveEdit() {
        if (editArea.text.trim().length === 0) return
        root.editing = false
        Chat.editAndResend(root.messageId, editArea.text)
    }

    width: ListView.view ? ListView.view.width : 400
    implicitHeight: column.implicitHeight + 14 + (divider.visible ? divider.height : 0)

    RowLayout {
        id: divider
        objectName: "overflowDivider"
        visible: root.droppedAbove > 0
        x: 24
        width: root.width - 48
        height: 28
        spacing: 10
        Rectangle { Layout.fillWidth: true; height: 1; color: Theme.warning }
        Label {
            color: Theme.warning
            font.pixelSize: 12
            text: root.droppedAbove === 1
                  ? qsTr("The message above no longer fits the context: the model reads from here on")
                  : qsTr("The %1 messages above no longer fit the context: the model reads from here on")
                    .arg(root.droppedAbove)
        }
        Rectangle { Layout.fillWidth: true; height: 1; color: Theme.warning }
    }

    ColumnLayout {
        id: column
        spacing: 4
        width: Math.min(root.width - 48, 780)
        x: root.isUser ? root.width - width - 24 : 24
        y: 7 + (divider.visible ? divider.height : 0)

        Label {
            objectName: "droppedNote"
            visible: root.droppedMessages > 0
            Layout.fillWidth: true
            wrapMode: Text.Wrap
            color: Theme.warning
            font.pixelSize: 12
            text: root.droppedMessages === 1
                  ? qsTr("The oldest message did not fit the model's context and was not read for this answer.")
                  : qsTr("The %1 oldest messages did not fit the model's context and were not read for this answer.")
                    .arg(root.droppedMessages)
        }

        ThinkingSection {
            objectName: "thinkingSection"
            visible: root.hasThinking
            Layout.fillWidth: true
            reasoning: root.reasoning
            streaming: root.streaming
            thinking: root.streaming && root.content.length === 0
            thinkingMs: root.thinkingMs
            thinkingSince: root.thinkingSince
        }

        Rectangle {
            id: bubble
            objectName: "bubble"
            Layout.alignment: root.isUser ? Qt.AlignRight : Qt.AlignLeft
            // Short messages get a snug bubble; code (monospace, in its own box) and long
            // text (which the probe does not measure: laying it out twice costs) take the
            // full width.
            Layout.preferredWidth: root.editing || root.content.length >= probe.limit
                                   || root.content.indexOf("```") >= 0 ? column.width
                                   : Math.min(column.width, Math.max(body.implicitTextWidth + 28 + searchSlack, 60))
            // Search hits are drawn bold: room for them, so a short line does not wrap.
            readonly property int searchSlack: Chat.conversations.searchQuery.length > 0 ? 12 : 0
            // No empty bubble under a thinking that has not answered (yet, or at all).
            visible: (!root.failed || root.content.length > 0) && !(root.hasThinking && root.content.length === 0)
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
            Text {
                id: probe
                readonly property int limit: 400
                visible: false
                text: root.content.length < limit ? root.content : ""
                font.pixelSize: 14
            }
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
                    // As in the message box: Enter sends, Shift+Enter starts a new line, Esc cancels.
                    Keys.onPressed: (event) => {
                        if ((event.key === Qt.Key_Return || event.key === Qt.Key_Enter)
                                && !(event.modifiers & Qt.ShiftModifier)) {
                            root.saveEdit()
                            event.accepted = true
                        } else if (event.key === Qt.Key_Escape) {
                            root.editing = false
                            event.accepted = true
                        }
                    }
                }
                RowLayout {
                    Layout.alignment: Qt.AlignRight
                    Button { text: qsTr("Cancel"); flat: true; onClicked: root.editing = false }
                    PrimaryButton {
                        objectName: "saveEditButton"
                        text: qsTr("Send")
                        onClicked: root.saveEdit()
                    }
                }
            }
        }

        FailedAnswer {
            objectName: "failedAnswer"
            visible: root.failed
            Layout.fillWidth: true
            error: root.error
            neededContext: root.neededContext
            isLast: root.isLast
        }

        RowLayout {
            Layout.alignment: root.isUser ? Qt.AlignRight : Qt.AlignLeft
            spacing: 2
            visible: !root.editing && !(root.failed && root.content.length === 0)
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
