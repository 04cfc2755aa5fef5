// One downloadable model of a repository (a file, or all parts of a split one): its
// quantization and size, the fit badge with a plain sentence on how it runs here, and
// Download (Resume for a paused pull), or Load when the library has it already (the same
// file or the same bytes) or the same bytes are elsewhere on this computer (the built-in
// model's folder).
// The labels wrap and the reason wraps, so the button stays on screen at any width.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Rectangle {
    id: root
    objectName: "file_" + model.quant
    readonly property bool inLibrary: model.libraryId > 0
    readonly property string localPath: inLibrary ? model.localPath : model.copyPath
    readonly property bool onDisk: localPath.length > 0  // in the library or another folder of models
    readonly property bool loaded: onDisk && Models.ready && Models.path === localPath
    radius: 8
    color: model.best ? Qt.rgba(Theme.accent.r, Theme.accent.g, Theme.accent.b, 0.08) : Theme.base
    border.color: model.best ? Theme.accent : Theme.border
    implicitHeight: row.implicitHeight + 16

    function badgeColour(b) {
        return b === "gpu" ? "#2b8a3e" : (b === "split" || b === "experts-in-ram") ? "#e67700" : b === "cpu" ? "#1971c2"
             : b === "too-large" ? Theme.error : Theme.muted
    }

    RowLayout {
        id: row
        anchors { fill: parent; margins: 8 }
        spacing: 10
        ColumnLayout {
            Layout.fillWidth: true
            spacing: 3
            Flow {
                Layout.fillWidth: true
                spacing: 8
                Label { objectName: "quant"; text: model.quant; font.bold: true; color: Theme.text }
                Label { text: model.sizeText + (model.parts > 1 ? qsTr(" in %1 parts").arg(model.parts) : ""); color: Theme.muted }
                Rectangle {
                    radius: 9
                    color: root.badgeColour(model.badge)
                    width: badge.implicitWidth + 14
                    height: badge.implicitHeight + 4
                    Label { id: badge; objectName: "badge"; anchors.centerIn: parent; text: model.badgeText; color: "white"; font.pixelSize: 12 }
                }
                Label { visible: model.best; objectName: "bestLabel"; text: qsTr("★ Best for this machine"); color: Theme.accent; font.bold: true }
                Label {
                    objectName: "inLibraryLabel"
                    visible: root.onDisk
                    text: (root.inLibrary ? qsTr("✓ In your library") : qsTr("✓ On this computer"))
                          + (root.loaded ? qsTr(", loaded") : "")
                    color: "#2b8a3e"
                }
            }
            Label {
                objectName: "reason"
                Layout.fillWidth: true
                text: model.reason
                visible: text.length > 0
                color: Theme.muted
                wrapMode: Text.Wrap
            }
        }
        Button {
            objectName: "downloadButton"
            text: root.loaded ? qsTr("Loaded") : root.onDisk ? qsTr("Load")
                : model.pull === "paused" ? qsTr("Resume")
                : model.pull.length > 0 ? qsTr("Downloading…") : qsTr("Download")
            enabled: root.onDisk ? !root.loaded
                   : model.pull === "paused" || (model.pull.length === 0 && model.badge !== "too-large")
            onClicked: root.inLibrary ? Library.load(model.libraryId)
                     : root.onDisk ? Models.load(root.localPath) : Hub.download(Hub.repo, model.quant)
        }
    }
}
