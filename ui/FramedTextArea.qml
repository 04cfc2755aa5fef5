// A multi-line text field with a visible frame (Fusion's TextArea has none).
import QtQuick
import QtQuick.Controls
import Ember.Core

TextArea {
    id: root
    wrapMode: TextEdit.Wrap
    color: Theme.text
    placeholderTextColor: Theme.muted
    background: Rectangle {
        color: Theme.base
        radius: 6
        border.color: root.activeFocus ? Theme.accent : Theme.border
    }
}
