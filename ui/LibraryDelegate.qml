// One library model: name, quantization, size, architecture, parameters, context, where it
// came from; Load (into the chat), Quantize… (a smaller copy: the dialog offers what makes
// sense for this file), Delete (asks first). The buttons have their own line, so a long
// name or detail elides or wraps instead of pushing them off a narrow page.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Rectangle {
    id: root
    objectName: "library_" + model.id
    readonly property bool loaded: Models.path === model.path && Models.ready
    signal quantizeRequested(var id)
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
            // One label whose text changes, never shown or hidden: a Qt 6.4 RowLayout does not
            // place a child made visible while its page is hidden (the model loaded meanwhile),
            // and drew "loaded" over the name.
            Label {
                objectName: "libraryState"
                text: !model.present ? qsTr("missing on disk") : root.loaded ? qsTr("loaded") : ""
                color: model.present ? Theme.accent : Theme.error
            }
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
        RowLayout {
            Layout.fillWidth: true
            PrimaryButton { objectName: "loadButton"; text: qsTr("Load"); enabled: model.present && !root.loaded; onClicked: Library.load(model.id) }
            Button {
                objectName: "quantizeButton"
                text: qsTr("Quantize…")
                enabled: model.present && !Library.quantizing
                onClicked: root.quantizeRequested(model.id)
            }
            Item { implicitWidth: 16 }  // apart from Delete, which asks first anyway
            Button { objectName: "deleteButton"; text: qsTr("Delete"); onClicked: confirm.open() }
            Item { Layout.fillWidth: true }  // the buttons stay together on a wide page
        }
    }

    ThemedDialog {
        id: confirm
        objectName: "deleteDialog"
        title: qsTr("Delete %1?").arg(model.name)
        width: Math.min(implicitWidth, Overlay.overlay ? Overlay.overlay.width - 40 : implicitWidth)
        standardButtons: Dialog.Yes | Dialog.No
        Label {
            width: parent.width
            wrapMode: Text.Wrap
            color: Theme.text
            text: model.source === "imported" ? qsTr("The file stays where it is; only the library entry goes.")
                                              : qsTr("The downloaded file is deleted from disk.")
        }
        onAccepted: Library.remove(model.id)
    }
}
