// Which model answers: a menu of the models found on disk, a path field for any other
// GGUF file, load progress with Cancel. Loading runs on the engine thread; the window
// stays responsive throughout.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

RowLayout {
    id: root
    spacing: 6
    readonly property bool loading: Models.state === ModelState.Loading

    ComboBox {
        id: combo
        objectName: "modelPicker"
        Layout.preferredWidth: 260
        Layout.minimumWidth: 100
        Layout.fillWidth: true  // takes what the header gives it: less in a narrow window
        model: ModelList
        textRole: "name"
        enabled: !root.loading
        displayText: root.loading ? qsTr("Loading %1…").arg(Models.path.split("/").pop())
                   : Models.ready ? Models.name
                   : qsTr("No model loaded")
        onActivated: (i) => Models.load(ModelList.get(i).path)
        onPressedChanged: if (pressed) ModelList.rescan()
        delegate: ItemDelegate {
            required property string name
            required property string size
            required property bool builtin
            required property int index
            width: combo.width
            text: name + "  ·  " + size + (builtin ? qsTr("  ·  built-in") : "")
            highlighted: combo.highlightedIndex === index
        }
    }
    ProgressBar {
        objectName: "loadProgress"
        visible: root.loading
        Layout.preferredWidth: 100
        value: Models.progress
    }
    Button {
        objectName: "cancelLoadButton"
        visible: root.loading
        text: qsTr("Cancel")
        flat: true
        onClicked: Models.cancelLoad()
    }
    Button {
        objectName: "openModelButton"
        text: qsTr("Open…")
        flat: true
        enabled: !root.loading
        onClicked: openPopup.open()
    }

    Popup {
        id: openPopup
        objectName: "openModelPopup"
        y: root.height + 4
        x: root.width - width
        width: 460
        padding: 12
        focus: true
        onOpened: pathField.forceActiveFocus()
        ColumnLayout {
            anchors.fill: parent
            Label { text: qsTr("Load a GGUF model file"); font.bold: true }
            Label {
                Layout.fillWidth: true
                wrapMode: Text.Wrap
                color: Theme.muted
                font.pixelSize: 12
                text: qsTr("Models in these folders appear in the menu: %1").arg(ModelList.folders.join(", "))
            }
            RowLayout {
                TextField {
                    id: pathField
                    objectName: "modelPathField"
                    Layout.fillWidth: true
                    placeholderText: "/path/to/model.gguf"
                    onAccepted: loadButton.clicked()
                }
                Button {
                    id: loadButton
                    objectName: "loadPathButton"
                    text: qsTr("Load")
                    enabled: pathField.text.trim().length > 0
                    onClicked: { Models.load(pathField.text.trim()); openPopup.close() }
                }
            }
        }
    }
}
