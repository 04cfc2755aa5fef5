// A Dialog in the app's theme. Fusion draws a popup's title and button bars, buttons and
// radio indicators from a palette that does not follow the window's (Qt 6.4), so a dark
// theme got white bars and buttons: the theme's colours are set here.
import QtQuick
import QtQuick.Controls
import Ember.Core

Dialog {
    id: root
    modal: true
    anchors.centerIn: Overlay.overlay
    padding: 16
    palette {
        window: Theme.window
        windowText: Theme.text
        base: Theme.base
        text: Theme.text
        button: Theme.dark ? "#33343a" : "#f0f0f3"
        buttonText: Theme.text
        mid: Theme.border
        highlight: Theme.accent
        highlightedText: Theme.accentText
    }
    background: Rectangle { color: Theme.window; border.color: Theme.border; radius: 8 }
    header: Label {
        text: root.title
        elide: Text.ElideRight
        font.bold: true
        color: Theme.text
        padding: 16
        bottomPadding: 0
    }
}
