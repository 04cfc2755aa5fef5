// Library: the verified models on this machine (downloaded or imported), with Load, Delete
// and Quantize (QuantizeDialog), the quantizer's progress, and Import (a file dialog;
// dropping a .gguf on the page does the same).
import QtQuick
import QtQuick.Controls
import QtQuick.Dialogs
import QtQuick.Layouts
import Ember.Core

Item {
    id: root
    property alias list: list
    property alias quantizeDialog: quantizeDialog

    QuantizeDialog { id: quantizeDialog }

    FileDialog {
        id: importDialog
        title: qsTr("Import a GGUF model")
        nameFilters: [qsTr("GGUF models (*.gguf)")]
        onAccepted: Library.importFile(selectedFile.toString())
    }

    ColumnLayout {
        anchors.fill: parent
        anchors.margins: 14
        RowLayout {
            Layout.fillWidth: true
            Label {
                Layout.fillWidth: true
                text: qsTr("In %1 (imported files stay where they are)").arg(Library.folder)
                color: Theme.muted
                elide: Text.ElideMiddle
            }
            Button { objectName: "importButton"; text: qsTr("Import a model…"); onClicked: importDialog.open() }
        }
        Label {
            objectName: "libraryError"
            Layout.fillWidth: true
            visible: Library.error.length > 0
            text: Library.error
            color: Theme.error
            wrapMode: Text.Wrap
        }
        Rectangle {
            Layout.fillWidth: true
            visible: Library.quantizing || Library.quantizeProgress > 0
            implicitHeight: qcol.implicitHeight + 16
            radius: 8
            color: Theme.base
            border.color: Theme.accent
            ColumnLayout {
                id: qcol
                anchors { fill: parent; margins: 8 }
                RowLayout {
                    Label {
                        objectName: "quantizeText"
                        Layout.fillWidth: true
                        text: Library.quantizeText + (Library.quantizing ? "" : qsTr(": done"))
                        color: Theme.text
                        elide: Text.ElideRight
                    }
                    Label { text: Math.round(Library.quantizeProgress * 100) + " %"; color: Theme.muted }
                    Button { text: qsTr("Cancel"); visible: Library.quantizing; onClicked: Library.cancelQuantize() }
                }
                ProgressBar { objectName: "quantizeProgress"; Layout.fillWidth: true; from: 0; to: 1; value: Library.quantizeProgress }
            }
        }
        ListView {
            id: list
            objectName: "libraryList"
            Layout.fillWidth: true
            Layout.fillHeight: true
            clip: true
            spacing: 6
            model: Library.models
            ScrollBar.vertical: ScrollBar { }
            delegate: LibraryDelegate {
                width: list.width
                onQuantizeRequested: (id) => quantizeDialog.openFor(id)
            }
            Label {
                anchors.centerIn: parent
                visible: list.count === 0
                width: list.width - 20
                horizontalAlignment: Text.AlignHCenter
                wrapMode: Text.Wrap
                text: qsTr("No models yet: download one in Discover, or import a .gguf file")
                color: Theme.muted
            }
        }
    }
}
