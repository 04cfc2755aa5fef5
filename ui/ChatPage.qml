// The conversation on screen: header (title, model picker, this chat's settings), banners,
// the messages (following the newest text while an answer streams, unless the user has
// scrolled up), and the input box.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Item {
    id: root
    function focusInput() { input.forceInputFocus() }
    property alias input: input
    property alias messageList: messageList
    // The height of the composer (the line above the switches down to the window's bottom):
    // the snackbar sits above it, never over the message box.
    readonly property real composerHeight: height - composerTop.y

    ColumnLayout {
        anchors.fill: parent
        spacing: 0

        Rectangle {
            Layout.fillWidth: true
            implicitHeight: 52
            color: Theme.window
            RowLayout {
                anchors { fill: parent; leftMargin: 20; rightMargin: 12 }
                Label {
                    objectName: "chatTitle"
                    Layout.fillWidth: true
                    Layout.minimumWidth: 60
                    text: Chat.currentTitle
                    elide: Text.ElideRight
                    font.pixelSize: 16
                    font.bold: true
                    color: Theme.text
                }
                // Narrow windows: the picker gives way before the title and the buttons do.
                ModelPicker {
                    Layout.fillWidth: false  // else inherited from its menu: the title keeps the rest
                    Layout.preferredWidth: Math.min(implicitWidth, Math.max(150, root.width * 0.45))
                }
                Button {
                    objectName: "chatSettingsButton"
                    text: qsTr("Chat settings")
                    flat: true
                    onClicked: chatSettings.open()
                }
            }
            Rectangle { anchors.bottom: parent.bottom; width: parent.width; height: 1; color: Theme.border }
        }

        Banner { objectName: "storageBanner"; Layout.fillWidth: true; text: App.storageNotice }
        // Live: the disk is refusing writes right now (full, read-only, locked); gone once saved.
        Banner { objectName: "storageStatusBanner"; Layout.fillWidth: true; text: Storage.problem }
        Banner { objectName: "modelErrorBanner"; Layout.fillWidth: true; text: Models.error }
        // Shown once per model file: dismissing it is remembered.
        Banner {
            objectName: "templateBanner"
            Layout.fillWidth: true
            isError: false
            text: Models.ready && Models.details.templateNotice && !Settings.templateNoticeDismissed(Models.path)
                  ? Models.details.templateNotice : ""
            details: Models.ready ? Models.details.templateWarning || "" : ""
            onDismissedChanged: if (dismissed && Models.ready) Settings.dismissTemplateNotice(Models.path)
        }

        Item {
            Layout.fillWidth: true
            Layout.fillHeight: true

            ListView {
                id: messageList
                objectName: "messageList"
                anchors.fill: parent
                model: Chat.messages
                visible: count > 0
                clip: true
                spacing: 2
                topMargin: 12
                bottomMargin: 12
                boundsBehavior: Flickable.StopAtBounds
                delegate: MessageDelegate { }
                ScrollBar.vertical: ScrollBar { }

                // Follow the end while it grows, unless the user scrolled away from it.
                property bool follow: true
                // positionViewAtEnd() stops short of the bottom margin (Qt 6.4): the rest by hand.
                function toEnd() {
                    positionViewAtEnd()
                    contentY = Math.max(originY - topMargin, originY + contentHeight - height + bottomMargin)
                }
                onMovementEnded: follow = atYEnd
                onContentHeightChanged: if (follow) Qt.callLater(toEnd)
                onCountChanged: if (follow) Qt.callLater(toEnd)
                // A chat opened (or reopened after a start) shows its newest message: the list
                // is positioned once its delegates have heights, and again as they settle
                // (Markdown and code blocks lay out after the first pass).
                Connections {
                    target: Chat
                    function onCurrentChanged() { messageList.follow = true; Qt.callLater(messageList.toEnd) }
                }
                Connections {
                    target: Chat.messages
                    function onModelReset() { messageList.follow = true; Qt.callLater(messageList.toEnd) }
                }
            }
            EmptyState {
                anchors.fill: parent
                visible: messageList.count === 0
            }
        }

        Rectangle { id: composerTop; Layout.fillWidth: true; height: 1; color: Theme.border }
        ReasoningControls { objectName: "reasoningControls"; Layout.fillWidth: true }
        ContextMeter { objectName: "contextMeter"; Layout.fillWidth: true }
        InputBox {
            id: input
            objectName: "inputBox"
            Layout.fillWidth: true
        }
    }

    ChatSettingsPanel { id: chatSettings; parent: Overlay.overlay; height: parent ? parent.height : 600 }
}
