// One library model: name, quantization, size, architecture, parameters, context, where it
// came from; Load (into the chat), Quantize (to a chosen type), Delete (asks first).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Rectangle {
    id: root
    objectName: "library_" + model.id
    readonly property bool loaded: Models.path === model.path && Models.ready
    radius: 8
    color: Theme.base
    border.color: root.loaded ? Theme.accent : Theme.border
    implicitHeight: col.implicitHeight + 16

    ColumnLayout {
        id: col
        anchors { fill: parent; margins: 8 }
        spacing: 4
        RowLayout {
            Layout.fillWidth: true
            Label { objectName: "libraryName"; text: model.name; font.bold: true; color: Theme.text; Layout.fillWidth: true; elide: Text.ElideMiddle }
            Label { visible: !model.present; text: qsTr("missing on disk"); color: Theme.error }
            Label { visible: root.loaded; text: qsTr("loaded"); color: Theme.accent }
            PrimaryButton { objectName: "loadButton"; text: qsTr("Load"); enabled: model.present && !root.loaded; onClicked: Library.load(model.id) }
            ComboBox { id: qtype; objectName: "quantType"; model: Library.quantTypes; implicitWidth: 110 }
            Button {
                objectName: "quantizeButton"
                text: qsTr("Quantize")
                enabled: model.present && !Library.quantizing
                onClicked: Library.quantize(model.id, qtype.currentText)
            }
            Button { objectName: "deleteButton"; text: qsTr("Delete"); onClicked: confirm.open() }
        }
        Label {
            objectName: "libraryDetail"
            Layout.fillWidth: true
            text: [model.quant, model.sizeText, model.architecture, model.paramsText,
                   model.context > 0 ? qsTr("%1-token context").arg(model.context) : "", model.source]
                  .filter(function (s) { return s && s.length > 0 }).join("  ·  ")
            color: Theme.muted
            wrapMode: Text.Wrap
        }
    }

    Dialog {
        id: confirm
        title: qsTr("Delete %1?").arg(model.name)
        anchors.centerIn: Overlay.overlay
        modal: true
        standardButtons: Dialog.Yes | Dialog.No
        Label {
            text: model.source === "imported" ? qsTr("The file stays where it is; only the library entry goes.")
                                              : qsTr("The downloaded file is deleted from disk.")
        }
        onAccepted: Library.remove(model.id)
    }
}
