// The one obvious action in a view (Send, Load the built-in model): filled with the accent
// colour, since Fusion's "highlighted" buttons look like every other button.
import QtQuick
import QtQuick.Controls
import Ember.Core

Button {
    id: root
    contentItem: Label {
        text: root.text
        font: root.font
        color: root.enabled ? Theme.accentText : Qt.rgba(1, 1, 1, 0.7)
        horizontalAlignment: Text.AlignHCenter
        verticalAlignment: Text.AlignVCenter
        elide: Text.ElideRight
    }
    background: Rectangle {
        implicitWidth: 80
        implicitHeight: 36
        radius: 8
        color: !root.enabled ? Qt.rgba(Theme.accent.r, Theme.accent.g, Theme.accent.b, 0.4)
             : root.down ? Qt.darker(Theme.accent, 1.2)
             : root.hovered ? Qt.lighter(Theme.accent, 1.1) : Theme.accent
    }
}
