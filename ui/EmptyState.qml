// What the chat area shows when there is nothing to show: no model yet (with a button for
// the built-in default), a model loading, or a fresh conversation.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Item {
    id: root
    readonly property bool loading: Models.state === ModelState.Loading

    ColumnLayout {
        anchors.centerIn: parent
        width: Math.min(parent.width - 48, 520)
        spacing: 12

        Label {
            Layout.alignment: Qt.AlignHCenter
            text: "Ember"
            font.pixelSize: 32
            font.bold: true
            color: Theme.accent
        }
        Label {
            objectName: "emptyStateText"
            Layout.fillWidth: true
            horizontalAlignment: Text.AlignHCenter
            wrapMode: Text.Wrap
            color: Theme.text
            font.pixelSize: 16
            text: root.loading ? qsTr("Loading %1… %2%").arg(Models.path.split("/").pop()).arg(Math.round(Models.progress * 100))
                : Models.ready ? qsTr("Ask %1 anything. It runs on this computer; nothing leaves it.").arg(Models.name)
                : qsTr("No model is loaded.")
        }
        BusyIndicator { Layout.alignment: Qt.AlignHCenter; visible: root.loading; running: visible }
        PrimaryButton {
            objectName: "loadBuiltinButton"
            Layout.alignment: Qt.AlignHCenter
            visible: !Models.ready && !root.loading
            enabled: Models.builtinModelExists
            text: qsTr("Load the built-in model (SmolLM2-135M-Instruct)")
            onClicked: Models.loadBuiltin()
        }
        Label {
            Layout.fillWidth: true
            visible: !Models.ready && !root.loading
            horizontalAlignment: Text.AlignHCenter
            wrapMode: Text.Wrap
            color: Theme.muted
            font.pixelSize: 12
            text: Models.builtinModelExists
                  ? qsTr("Or pick any GGUF model from the menu above.")
                  : qsTr("The built-in model was not found at %1 (scripts/fetch-test-models.sh fetches it). "
                         + "Pick a GGUF model from the menu above.").arg(Models.builtinModelPath)
        }
        Label {
            Layout.fillWidth: true
            visible: Models.ready
            horizontalAlignment: Text.AlignHCenter
            wrapMode: Text.Wrap
            color: Theme.muted
            font.pixelSize: 12
            text: qsTr("Ctrl+N new chat · Ctrl+F search · Ctrl+L type · Esc stop")
        }
    }
}
