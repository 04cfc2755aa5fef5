// One conversation in the sidebar: title, the matching text while searching (the matched
// words bold in the accent colour, the rest shown exactly as written), a dot while
// an answer is being written there; rename in place (double-click or the pencil) and delete.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

ItemDelegate {
    id: root
    required property int index
    required property var conversationId
    required property string title
    required property string snippet
    required property string snippetHtml  // escaped StyledText (ConversationListModel)
    required property bool generating
    property bool renaming: false

    function startRename() { renaming = true; renameField.text = title; renameField.selectAll(); renameField.forceActiveFocus() }

    width: ListView.view ? ListView.view.width : 240
    highlighted: conversationId === Chat.currentConversationId
    onClicked: Chat.selectConversation(conversationId)
    onDoubleClicked: startRename()
    background: Rectangle {
        color: root.highlighted ? Theme.selected : root.hovered ? Qt.darker(Theme.sidebar, Theme.dark ? 0.8 : 1.03) : "transparent"
        radius: 6
    }

    contentItem: RowLayout {
        spacing: 4
        Rectangle {
            visible: root.generating
            width: 8; height: 8; radius: 4
            color: Theme.accent
        }
        ColumnLayout {
            Layout.fillWidth: true
            spacing: 1
            Label {
                visible: !root.renaming
                Layout.fillWidth: true
                text: root.title
                elide: Text.ElideRight
                color: Theme.text
            }
            TextField {
                id: renameField
                objectName: "renameField"
                visible: root.renaming
                Layout.fillWidth: true
                onAccepted: { Chat.renameConversation(root.conversationId, text); root.renaming = false }
                onActiveFocusChanged: if (!activeFocus) root.renaming = false
                Keys.onEscapePressed: root.renaming = false
            }
            Label {
                objectName: "snippetText"
                visible: root.snippet.length > 0
                Layout.fillWidth: true
                text: root.snippetHtml
                textFormat: Text.StyledText
                elide: Text.ElideRight
                color: Theme.muted
                font.pixelSize: 11
            }
        }
        ToolButton {
            objectName: "renameButton"
            visible: (root.hovered || root.highlighted) && !root.renaming
            text: "✎"
            implicitWidth: 26
            onClicked: root.startRename()
            ToolTip.visible: hovered
            ToolTip.text: qsTr("Rename")
        }
        ToolButton {
            objectName: "deleteButton"
            visible: (root.hovered || root.highlighted) && !root.renaming
            text: "×"
            implicitWidth: 26
            onClicked: Chat.deleteConversation(root.conversationId)
            ToolTip.visible: hovered
            ToolTip.text: qsTr("Delete")
        }
    }
}
