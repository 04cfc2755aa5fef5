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
                    text: Chat.currentTitle
                    elide: Text.ElideRight
                    font.pixelSize: 16
                    font.bold: true
                    color: Theme.text
                }
                ModelPicker { }
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
        Banner {
            objectName: "templateBanner"
            Layout.fillWidth: true
            isError: false
            text: Models.ready && Models.details.templateWarning ? Models.details.templateWarning : ""
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
                onMovementEnded: follow = atYEnd
                onContentHeightChanged: if (follow) Qt.callLater(positionViewAtEnd)
                onCountChanged: if (follow) Qt.callLater(positionViewAtEnd)
                Connections {
                    target: Chat
                    function onCurrentChanged() { messageList.follow = true; Qt.callLater(messageList.positionViewAtEnd) }
                }
            }
            EmptyState {
                anchors.fill: parent
                visible: messageList.count === 0
            }
        }

        Rectangle { Layout.fillWidth: true; height: 1; color: Theme.border }
        InputBox {
            id: input
            objectName: "inputBox"
            Layout.fillWidth: true
        }
    }

    ChatSettingsPanel { id: chatSettings; parent: Overlay.overlay; height: parent ? parent.height : 600 }
}
