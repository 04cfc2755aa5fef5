// The context meter under the conversation: how much of the model's context this chat
// used in its last answer, what the next answer may write, and a warning once the oldest
// messages will be left out. Clicking it opens this model's context setting: the length the
// planner chose and why, or the user's own (applied by reloading the model).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Rectangle {
    id: root
    function count(n) { return n.toLocaleString(Qt.locale(), "f", 0) }
    readonly property real fraction: Chat.contextLimit > 0 ? Math.min(1, Chat.contextUsed / Chat.contextLimit) : 0

    visible: Models.ready
    color: Theme.window
    implicitHeight: visible ? row.implicitHeight + 8 : 0

    RowLayout {
        id: row
        anchors { left: parent.left; right: parent.right; verticalCenter: parent.verticalCenter; leftMargin: 12; rightMargin: 12 }
        spacing: 8
        Rectangle {
            objectName: "contextBar"
            Layout.preferredWidth: 80
            Layout.preferredHeight: 6
            radius: 3
            color: Theme.border
            Rectangle {
                width: parent.width * root.fraction
                height: parent.height
                radius: 3
                color: Chat.contextFull ? Theme.warning : Theme.accent
            }
        }
        Label {
            objectName: "contextText"
            Layout.fillWidth: true
            elide: Text.ElideRight
            font.pixelSize: 12
            color: Chat.contextFull ? Theme.warning : Theme.muted
            text: qsTr("Context: %1 of %2 tokens · next answer up to %3").arg(root.count(Chat.contextUsed))
                      .arg(root.count(Chat.contextLimit)).arg(root.count(Chat.nextAnswerTokens))
                  + (Chat.contextFull ? qsTr(" · full: the oldest messages will be left out") : "")
        }
        ToolButton {
            objectName: "contextSettingsButton"
            text: qsTr("Change…")
            font.pixelSize: 12
            visible: !Models.details.remote  // a remote model's context is its server's
            onClicked: popup.open()
        }
    }

    Popup {
        id: popup
        objectName: "contextPopup"
        x: root.width - width - 12
        y: -height - 4
        width: Math.min(420, root.width - 24)
        padding: 14
        background: Rectangle { color: Theme.base; border.color: Theme.border; radius: Theme.radius }
        onOpened: box.value = Chat.contextLimit
        ColumnLayout {
            width: parent.width
            spacing: 8
            Label {
                text: qsTr("Context length for %1").arg(Models.name)
                font.bold: true
                color: Theme.text
                Layout.fillWidth: true
                elide: Text.ElideRight
            }
            Label {
                objectName: "contextReason"
                Layout.fillWidth: true
                wrapMode: Text.Wrap
                color: Theme.muted
                font.pixelSize: 12
                text: qsTr("Now %1 tokens: %2. The model was made for up to %3; this machine has room for %4.")
                      .arg(root.count(Chat.contextLimit)).arg(Models.details.contextReason || "")
                      .arg(root.count(Models.details.trainedContext || 0))
                      .arg(root.count(Models.details.contextFitsUpTo || 0))
            }
            RowLayout {
                SpinBox {
                    id: box
                    objectName: "contextBox"
                    from: 256
                    to: Math.max(256, Models.details.trainedContext || 4096)
                    stepSize: 1024
                    editable: true
                    Layout.fillWidth: true
                }
                Label { text: qsTr("tokens"); color: Theme.muted }
            }
            Label {
                Layout.fillWidth: true
                wrapMode: Text.Wrap
                font.pixelSize: 12
                visible: (Models.details.contextFitsUpTo || 0) > 0 && box.value > Models.details.contextFitsUpTo
                color: Theme.warning
                text: qsTr("Longer than this machine has room for: loading may fail or slow everything down.")
            }
            RowLayout {
                Layout.alignment: Qt.AlignRight
                // Back to what every model gets: the planner's choice, or the global setting.
                Button {
                    objectName: "contextAutoButton"
                    text: Settings.contextLength > 0 ? qsTr("Use the default (%1)").arg(root.count(Settings.contextLength))
                                                     : qsTr("Automatic")
                    flat: true
                    enabled: Models.details.contextOwn === true && !Chat.busy
                    onClicked: { popup.close(); Models.setContext(0) }
                }
                PrimaryButton {
                    objectName: "contextApplyButton"
                    text: qsTr("Apply (reloads the model)")
                    enabled: box.value !== Chat.contextLimit && !Chat.busy
                    onClicked: { popup.close(); Models.setContext(box.value) }
                }
            }
        }
    }
}
