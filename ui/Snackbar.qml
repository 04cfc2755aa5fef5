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
    property real lift: 24  // from the window's bottom: the window sets it above the composer
    // The part of the window it centres in (the window sets the page beside the sidebar).
    property real areaX: 0
    property real areaWidth: parent ? parent.width : 0
    property string topic  // what it is about ("load"): closed when that is settled
    signal action()

    function show(message, action, ms, about) {
        root.text = message
        root.actionText = action || ""
        root.timeout = ms || 5000
        root.topic = about || ""
        open()
        hideTimer.restart()
    }

    x: areaX + (areaWidth - width) / 2
    y: parent.height - height - lift
    width: Math.min(areaWidth - 48, Math.max(row.implicitWidth + 32, 320))
    padding: 12
    closePolicy: Popup.NoAutoClose
    background: Rectangle { color: Theme.dark ? "#e8e8ea" : "#2a2b2f"; radius: 8 }

    function settle(about) { if (opened && topic === about) close() }

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
            // The snackbar's colours are the other theme's: so is the action's accent.
            contentItem: Label {
                text: parent.text
                font.bold: true
                color: Theme.dark ? "#d9480f" : "#ff8a3d"
                horizontalAlignment: Text.AlignHCenter
                verticalAlignment: Text.AlignVCenter
            }
            onClicked: { root.close(); root.action() }
        }
    }
}
