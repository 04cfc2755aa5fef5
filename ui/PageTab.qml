// A tab of a page's TabBar (the Models page, the monitor) that shows which one is open in
// either theme (Fusion's tabs differ by a shade only): the page's colour, bold text and an
// accent line under the open tab.
import QtQuick
import QtQuick.Controls

TabButton {
    id: tab
    topPadding: 9
    bottomPadding: 9
    contentItem: Label {
        text: tab.text
        horizontalAlignment: Text.AlignHCenter
        elide: Text.ElideRight
        color: tab.checked ? Theme.text : Theme.muted
        font.bold: tab.checked
    }
    background: Rectangle {
        color: tab.checked ? Theme.window : tab.hovered ? Theme.selected : Theme.sidebar
        Rectangle {
            visible: tab.checked
            anchors.bottom: parent.bottom
            width: parent.width
            height: 2
            color: Theme.accent
        }
    }
}
