// A short message at the bottom of the window, optionally with one action (Undo). It hides
// itself after `timeout` ms.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Popup {
    id: root
    objectName: "snackbar"
    property string text
    property string actionText
    property int timeout: 5000
    signal action()

    function show(message, action, ms) {
        root.text = message
        root.actionText = action || ""
        root.timeout = ms || 5000
        open()
        hideTimer.restart()
    }

    x: (parent.width - width) / 2
    y: parent.height - height - 24
    width: Math.min(parent.width - 48, Math.max(row.implicitWidth + 32, 320))
    padding: 12
    closePolicy: Popup.NoAutoClose
    background: Rectangle { color: Theme.dark ? "#e8e8ea" : "#2a2b2f"; radius: 8 }

    Timer { id: hideTimer; interval: root.timeout; onTriggered: root.close() }

    RowLayout {
        id: row
        anchors.fill: parent
        Label {
            objectName: "snackbarText"
            Layout.fillWidth: true
            text: root.text
            wrapMode: Text.Wrap
            color: Theme.dark ? "#1d1d1f" : "#ffffff"
        }
        Button {
            objectName: "snackbarAction"
            visible: root.actionText.length > 0
            text: root.actionText
            flat: true
            onClicked: { root.close(); root.action() }
        }
    }
}
