// One pull: repository and quantization, state, a progress bar with bytes, rate and time
// left, and Pause / Resume / Cancel.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Rectangle {
    id: root
    objectName: "download_" + model.id
    readonly property bool running: model.state === "queued" || model.state === "listing" || model.state === "downloading"
    radius: 8
    color: Theme.base
    border.color: Theme.border
    implicitHeight: col.implicitHeight + 16

    function stateText(s) {
        return s === "queued" ? qsTr("Queued") : s === "listing" ? qsTr("Listing files")
             : s === "downloading" ? qsTr("Downloading") : s === "paused" ? qsTr("Paused")
             : s === "done" ? qsTr("Verified ✓") : s === "failed" ? qsTr("Failed") : qsTr("Cancelled")
    }

    ColumnLayout {
        id: col
        anchors { fill: parent; margins: 8 }
        spacing: 4
        RowLayout {
            Layout.fillWidth: true
            Label { text: model.repo + (model.quant ? " : " + model.quant : ""); font.bold: true; color: Theme.text; Layout.fillWidth: true; elide: Text.ElideMiddle }
            Label {
                objectName: "downloadState"
                text: root.stateText(model.state)
                color: model.state === "failed" ? Theme.error : model.state === "done" ? "#2b8a3e" : Theme.muted
            }
            // One button for Pause and Resume: a pull paused or resumed from another tab (Discover)
            // changes its text, never its visibility (a Qt 6.4 RowLayout does not place a child
            // made visible while its page is hidden).
            Button {
                readonly property bool paused: model.state === "paused"
                objectName: paused ? "resumeButton" : "pauseButton"
                text: paused ? qsTr("Resume") : qsTr("Pause")
                visible: root.running || paused
                onClicked: paused ? Hub.resume(model.id) : Hub.pause(model.id)
            }
            Button { objectName: "cancelButton"; text: qsTr("Cancel"); visible: root.running || model.state === "paused"; onClicked: Hub.cancel(model.id) }
        }
        ProgressBar {
            objectName: "downloadProgress"
            Layout.fillWidth: true
            visible: model.state !== "cancelled" && model.state !== "failed"
            from: 0; to: 1
            value: model.progress
            indeterminate: model.state === "queued" || model.state === "listing" || !!model.waiting
        }
        Label {
            objectName: "downloadDetail"
            Layout.fillWidth: true
            text: model.state === "failed" ? model.error
                : model.state === "cancelled" ? qsTr("Stopped; the partial download was deleted.")
                : model.waiting ? model.waiting
                : [model.bytesText, model.partText, model.rateText, model.etaText].filter(function (s) { return s && s.length > 0 }).join("  ·  ")
            color: model.state === "failed" ? Theme.error : Theme.muted
            wrapMode: Text.Wrap
        }
    }
}
