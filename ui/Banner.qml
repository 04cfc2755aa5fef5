// A message across the top of the chat: an error (model failed to load, damaged database)
// or a warning (chat template fallback). Dismissable; it comes back when its text changes.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Rectangle {
    id: root
    property string text
    property bool isError: true
    property bool dismissed: false
    property string details  // the technical wording, on hover
    onTextChanged: dismissed = false
    visible: text.length > 0 && !dismissed
    color: isError ? Theme.errorBackground : Theme.warningBackground
    implicitHeight: visible ? row.implicitHeight + 16 : 0

    RowLayout {
        id: row
        anchors { left: parent.left; right: parent.right; verticalCenter: parent.verticalCenter; leftMargin: 16; rightMargin: 8 }
        Label {
            objectName: "bannerText"
            Layout.fillWidth: true
            text: root.text
            wrapMode: Text.Wrap
            color: root.isError ? Theme.error : Theme.warning
            HoverHandler { id: hover }
            ToolTip.visible: hover.hovered && root.details.length > 0
            ToolTip.text: root.details
        }
        ToolButton { text: "×"; onClicked: root.dismissed = true }
    }
}
