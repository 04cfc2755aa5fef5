// The message box. Enter sends, Shift+Enter starts a new line, the button turns into Stop
// while an answer is written. A big paste (more than a few thousand characters) does not go
// into the text field at all: it becomes an attachment chip sent along with the message,
// cut to the message limit with a note. Text layout is per paragraph and redone on every
// key press, so a 1 MB paste (or one 100k-character line of minified JSON) in the field
// itself would make every later key press take a third of a second.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Rectangle {
    id: root
    property alias text: area.text
    property string attachment
    property string note
    readonly property int inlinePasteLimit: 4000
    function forceInputFocus() { area.forceActiveFocus() }

    // What Send sends: the typed text, then the pasted attachment.
    function composed() {
        if (attachment.length === 0) return area.text
        return area.text.trim().length > 0 ? area.text + "\n\n" + attachment : attachment
    }
    function submit() {
        if (Chat.send(composed())) { area.clear(); attachment = "" }
    }
    function showNote(message) { root.note = message; noteTimer.restart() }
    function count(n) { return n.toLocaleString(Qt.locale(), "f", 0) }

    function pasteLimited() {
        var n = Clipboard.length()
        var selected = area.selectionEnd - area.selectionStart
        if (n <= inlinePasteLimit && area.length - selected + n + attachment.length <= Chat.maxInputChars) {
            area.paste()
            return
        }
        var room = Math.max(0, Chat.maxInputChars - area.length - 2)
        attachment = Clipboard.text().substring(0, room)
        if (n > room)
            showNote(qsTr("The pasted text (%1 characters) was cut to fit the %2-character message limit.")
                     .arg(count(n)).arg(count(Chat.maxInputChars)))
    }

    color: Theme.window
    implicitHeight: layout.implicitHeight + 20

    ColumnLayout {
        id: layout
        anchors { left: parent.left; right: parent.right; bottom: parent.bottom; margins: 10 }
        spacing: 4

        Label {
            objectName: "inputNote"
            visible: root.note.length > 0
            text: root.note
            color: Theme.warning
            font.pixelSize: 12
            Layout.fillWidth: true
            wrapMode: Text.Wrap
            Timer { id: noteTimer; interval: 6000; onTriggered: root.note = "" }
        }

        Rectangle {
            objectName: "attachmentChip"
            visible: root.attachment.length > 0
            Layout.fillWidth: true
            implicitHeight: chipRow.implicitHeight + 10
            radius: 6
            color: Theme.assistantBubble
            border.color: Theme.border
            RowLayout {
                id: chipRow
                anchors { fill: parent; leftMargin: 10; rightMargin: 4 }
                Label {
                    text: qsTr("Pasted text · %1 characters").arg(root.count(root.attachment.length))
                    color: Theme.text
                    font.bold: true
                    font.pixelSize: 12
                }
                Label {
                    Layout.fillWidth: true
                    text: root.attachment.substring(0, 200).replace(/\s+/g, " ")
                    elide: Text.ElideRight
                    color: Theme.muted
                    font.pixelSize: 12
                }
                ToolButton {
                    objectName: "removeAttachmentButton"
                    text: qsTr("Remove")
                    font.pixelSize: 12
                    onClicked: { root.attachment = ""; area.forceActiveFocus() }
                }
            }
        }

        RowLayout {
            spacing: 8
            Layout.fillWidth: true
            Rectangle {
                Layout.fillWidth: true
                Layout.preferredHeight: Math.min(Math.max(area.implicitHeight, 44), 200)
                radius: Theme.radius
                color: Theme.base
                border.color: area.activeFocus ? Theme.accent : Theme.border
                ScrollView {
                    id: scroll
                    anchors.fill: parent
                    anchors.margins: 2
                    TextArea {
                        id: area
                        objectName: "messageInput"
                        wrapMode: TextEdit.Wrap
                        color: Theme.text
                        font.pixelSize: 14
                        background: null
                        placeholderText: Models.ready ? qsTr("Message Ember (Enter to send, Shift+Enter for a new line)")
                                                      : qsTr("Load a model to start chatting")
                        placeholderTextColor: Theme.muted
                        Keys.onPressed: (event) => {
                            if ((event.key === Qt.Key_Return || event.key === Qt.Key_Enter)
                                    && !(event.modifiers & Qt.ShiftModifier)) {
                                root.submit()
                                event.accepted = true
                            } else if (event.matches(StandardKey.Paste)) {
                                root.pasteLimited()
                                event.accepted = true
                            }
                        }
                        // Backstop for text arriving any other way (drag and drop, IME).
                        onTextChanged: {
                            if (length > Chat.maxInputChars) {
                                remove(Chat.maxInputChars, length)
                                root.showNote(qsTr("Messages are limited to %1 characters.")
                                              .arg(Chat.maxInputChars.toLocaleString(Qt.locale(), "f", 0)))
                            }
                        }
                    }
                }
            }
            PrimaryButton {
                id: sendButton
                objectName: "sendButton"
                Layout.preferredHeight: 44
                Layout.preferredWidth: 84
                text: Chat.generating ? qsTr("Stop") : qsTr("Send")
                enabled: Chat.generating || (Models.ready && (area.length > 0 || root.attachment.length > 0))
                onClicked: Chat.generating ? Chat.stop() : root.submit()
                ToolTip.visible: hovered
                ToolTip.text: Chat.generating ? qsTr("Stop the answer (Esc)") : qsTr("Send (Enter)")
            }
        }
        Label {
            Layout.fillWidth: true
            visible: area.length + root.attachment.length > Chat.maxInputChars * 0.8
            horizontalAlignment: Text.AlignRight
            text: qsTr("%1 / %2 characters").arg(root.count(area.length + root.attachment.length))
                                             .arg(root.count(Chat.maxInputChars))
            color: Theme.muted
            font.pixelSize: 11
        }
    }
}
