// Conversations: New chat, search (title and full text of every message), the list, and
// the way to Settings.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Rectangle {
    id: root
    signal openSettings()
    signal openAbout()
    signal openMonitor()
    signal newChat()
    signal openModels()
    function focusSearch() { search.forceActiveFocus(); search.selectAll() }
    property alias list: list
    color: Theme.sidebar

    // Search hits in the snippets are drawn in the theme's accent.
    Binding { target: Chat.conversations; property: "highlightColor"; value: Theme.accent }

    ColumnLayout {
        anchors.fill: parent
        anchors.margins: 10
        spacing: 8

        Button {
            objectName: "newChatButton"
            Layout.fillWidth: true
            text: qsTr("+  New chat")
            onClicked: root.newChat()
        }
        TextField {
            id: search
            objectName: "searchField"
            Layout.fillWidth: true
            placeholderText: qsTr("Search chats (Ctrl+F)")
            onTextChanged: Chat.conversations.filter = text
            Keys.onEscapePressed: text = ""
        }
        ListView {
            id: list
            objectName: "conversationList"
            Layout.fillWidth: true
            Layout.fillHeight: true
            clip: true
            spacing: 2
            model: Chat.conversations
            delegate: ConversationDelegate { }
            ScrollBar.vertical: ScrollBar { }
            Label {
                anchors.centerIn: parent
                visible: list.count === 0
                text: search.text.length > 0 ? qsTr("No chats match") : qsTr("No chats yet")
                color: Theme.muted
            }
        }
        Button {
            objectName: "modelsButton"
            Layout.fillWidth: true
            flat: true
            text: Hub.activeDownloads > 0 ? qsTr("Models (%1 downloading)").arg(Hub.activeDownloads) : qsTr("Models")
            onClicked: root.openModels()
        }
        Button {
            objectName: "monitorButton"
            Layout.fillWidth: true
            flat: true
            text: qsTr("Monitor")
            onClicked: root.openMonitor()
        }
        Button {
            objectName: "settingsButton"
            Layout.fillWidth: true
            flat: true
            text: qsTr("Settings")
            onClicked: root.openSettings()
        }
        Button {
            objectName: "aboutButton"
            Layout.fillWidth: true
            flat: true
            text: qsTr("About Ember")
            onClicked: root.openAbout()
        }
    }
}
