// The message box. Enter sends, Shift+Enter starts a new line, the button turns into Stop
// while an answer is written. Pastes are measured before they are inserted: a 1 MB paste
// is cut to the message limit (with a note) instead of being laid out in full first.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Rectangle {
    id: root
    property alias text: area.text
    property string note
    function forceInputFocus() { area.forceActiveFocus() }

    function submit() {
        if (Chat.send(area.text)) area.clear()
    }
    function showNote(message) { root.note = message; noteTimer.restart() }

    // Inserts clipboard text, cut to what still fits under the limit.
    function pasteLimited() {
        var selected = area.selectionEnd - area.selectionStart
        var room = Chat.maxInputChars - (area.length - selected)
        var n = Clipboard.length()
        if (n <= room) { area.paste(); return }
        if (selected > 0) area.remove(area.selectionStart, area.selectionEnd)
        area.insert(area.cursorPosition, Clipboard.text().substring(0, Math.max(0, room)))
        showNote(qsTr("The pasted text (%1 characters) was cut to fit the %2-character limit.")
                 .arg(n.toLocaleString(Qt.locale(), "f", 0))
                 .arg(Chat.maxInputChars.toLocaleString(Qt.locale(), "f", 0)))
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
                enabled: Chat.generating || (Models.ready && area.text.trim().length > 0)
                onClicked: Chat.generating ? Chat.stop() : root.submit()
                ToolTip.visible: hovered
                ToolTip.text: Chat.generating ? qsTr("Stop the answer (Esc)") : qsTr("Send (Enter)")
            }
        }
        Label {
            Layout.fillWidth: true
            visible: area.length > Chat.maxInputChars * 0.8
            horizontalAlignment: Text.AlignRight
            text: qsTr("%1 / %2 characters").arg(area.length).arg(Chat.maxInputChars)
            color: Theme.muted
            font.pixelSize: 11
        }
    }
}
