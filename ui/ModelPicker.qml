// Which model answers: a menu of the models found on disk and of the remote endpoints'
// models (marked as remote), a path field for any other GGUF file, load progress with Cancel. Loading runs on the engine thread; the window
// stays responsive throughout.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

RowLayout {
    id: root
    spacing: 6
    readonly property bool loading: Models.state === ModelState.Loading

    // Local files first, then the remote endpoints' models (Settings › Remote endpoints),
    // each marked with its endpoint and, where the server says it, its context length.
    property var rows: []
    function rebuild() {
        var out = []
        for (var i = 0; i < ModelList.count; ++i) {
            var m = ModelList.get(i)
            out.push({ label: m.name + "  ·  " + m.size + (m.builtin ? qsTr("  ·  built-in") : ""),
                       path: m.path, remote: false })
        }
        for (var j = 0; j < Remote.models.length; ++j) {
            var r = Remote.models[j]
            out.push({ label: r.label + qsTr("  ·  remote"), endpoint: r.endpoint, id: r.id, remote: true })
        }
        rows = out
    }
    Component.onCompleted: rebuild()
    Connections { target: ModelList; function onModelReset() { root.rebuild() } }
    Connections { target: Remote; function onModelsChanged() { root.rebuild() } }

    ComboBox {
        id: combo
        objectName: "modelPicker"
        Layout.preferredWidth: 260
        Layout.minimumWidth: 100
        Layout.fillWidth: true  // takes what the header gives it: less in a narrow window
        model: root.rows
        textRole: "label"
        enabled: !root.loading
        displayText: root.loading ? qsTr("Loading %1…").arg(Models.path.split("/").pop())
                   : Models.ready ? Models.name
                   : qsTr("No model loaded")
        onActivated: (i) => {
            const row = root.rows[i]
            if (row.remote) Remote.useModel(row.endpoint, row.id)
            else Models.load(row.path)
        }
        onPressedChanged: if (pressed) { ModelList.rescan(); Remote.refreshModels() }
        // Fusion's closed box shows its text in a TextField, which clips a long name; a Label
        // elides it (the full name is in the menu and in Settings › Loaded model).
        contentItem: Label {
            objectName: "modelPickerText"
            topPadding: 4  // Fusion's own text field's, so the name sits where it did
            bottomPadding: 4
            leftPadding: 4 - combo.padding
            rightPadding: 4 - combo.padding
            text: combo.displayText
            font: combo.font
            color: combo.palette.buttonText
            verticalAlignment: Text.AlignVCenter
            elide: Text.ElideRight
        }
        delegate: ItemDelegate {
            required property var modelData
            required property int index
            width: combo.popup.width
            text: modelData.label
            font.italic: modelData.remote
            highlighted: combo.highlightedIndex === index
            ToolTip.visible: hovered && modelData.remote
            ToolTip.text: qsTr("Answered by the server of endpoint “%1”").arg(modelData.endpoint || "")
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
