// Settings › Remote endpoints (issue #41): servers with OpenAI's API (vLLM, TGI, SGLang,
// llama-server, Ollama, another Ember) whose models the model picker offers beside the local
// ones. Each endpoint: a name, a URL, prices per 1M input and output tokens (the cost view),
// an optional CA file, which optional fields its server gets; the API key goes to the system
// keyring, never to the settings file. "Test connection" lists the server's models or says
// what went wrong.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

ColumnLayout {
    id: root
    spacing: 8
    property string editing: ""    // the endpoint in the form ("": a new one)
    property bool formOpen: Remote.endpoints.length === 0

    function edit(name) {
        const e = name.length > 0 ? Remote.endpoint(name) : ({ name: "", baseUrl: "", caFile: "", inputPer1M: 0,
                                                                outputPer1M: 0, reasoningEffort: "", sendExtras: false })
        editing = name
        nameField.text = e.name
        urlField.text = e.baseUrl
        keyField.text = ""
        inPrice.text = String(e.inputPer1M)
        outPrice.text = String(e.outputPer1M)
        caField.text = e.caFile
        effortBox.currentIndex = Math.max(0, effortBox.values.indexOf(e.reasoningEffort))
        extrasBox.checked = e.sendExtras
        formOpen = true
    }
    function save() {
        const ok = Remote.saveEndpoint({ name: nameField.text, baseUrl: urlField.text, caFile: caField.text,
                                         inputPer1M: Number(inPrice.text), outputPer1M: Number(outPrice.text),
                                         reasoningEffort: effortBox.values[effortBox.currentIndex],
                                         sendExtras: extrasBox.checked },
                                       editing, keyField.text, false)
        if (!ok) return
        keyField.text = ""
        formOpen = false
        Remote.testConnection(nameField.text.trim())
    }

    Label {
        Layout.fillWidth: true
        wrapMode: Text.Wrap
        color: Theme.muted
        font.pixelSize: 12
        text: qsTr("Models bigger than this computer, on a server with OpenAI's API: vLLM, TGI, SGLang, llama-server, Ollama or another Ember. Their models appear in the model picker, marked as remote; chats, history, search, the monitor and the cost view work as with a local model. API keys are kept in the system keyring.")
    }

    Repeater {
        model: Remote.endpoints
        delegate: Rectangle {
            id: card
            required property var modelData
            readonly property bool tested: Remote.testedEndpoint === modelData.name
            objectName: "remoteEndpoint_" + modelData.name
            Layout.fillWidth: true
            implicitHeight: cardColumn.implicitHeight + 20
            radius: 6
            color: "transparent"
            border.color: Theme.border
            ColumnLayout {
                id: cardColumn
                anchors { left: parent.left; right: parent.right; top: parent.top; margins: 10 }
                spacing: 4
                RowLayout {
                    Layout.fillWidth: true
                    spacing: 8
                    Label { Layout.fillWidth: true; text: card.modelData.name; font.bold: true; color: Theme.text
                            elide: Text.ElideRight }
                    Button { objectName: "remoteTestButton"; text: qsTr("Test connection"); flat: true
                             enabled: !(Remote.testing && card.tested)
                             onClicked: Remote.testConnection(card.modelData.name) }
                    Button { objectName: "remoteEditButton"; text: qsTr("Edit"); flat: true
                             onClicked: root.edit(card.modelData.name) }
                    Button { objectName: "remoteRemoveButton"; text: qsTr("Remove"); flat: true
                             onClicked: Remote.removeEndpoint(card.modelData.name) }
                }
                Label { Layout.fillWidth: true; text: card.modelData.baseUrl; color: Theme.muted; font.pixelSize: 12
                        elide: Text.ElideMiddle }
                Label {
                    Layout.fillWidth: true
                    color: Theme.muted
                    font.pixelSize: 12
                    elide: Text.ElideRight
                    text: qsTr("%1 %2 per 1M input tokens, %1 %3 per 1M output").arg(Settings.currency)
                              .arg(card.modelData.inputPer1M).arg(card.modelData.outputPer1M)
                          + (card.modelData.reasoningEffort ? qsTr(" · reasoning effort %1").arg(card.modelData.reasoningEffort) : "")
                          + (card.modelData.sendExtras ? qsTr(" · sends top k, min p, repeat penalty") : "")
                }
                Label {
                    objectName: "remoteTestResult"
                    visible: card.tested
                    Layout.fillWidth: true
                    wrapMode: Text.Wrap
                    textFormat: Text.PlainText
                    color: Remote.testing || Remote.testOk ? Theme.text : Theme.error
                    text: Remote.testMessage
                }
                Repeater {
                    model: card.tested && Remote.testOk ? Remote.models.filter(m => m.endpoint === card.modelData.name) : []
                    delegate: RowLayout {
                        required property var modelData
                        Layout.fillWidth: true
                        Label { Layout.fillWidth: true; text: "• " + modelData.id + (modelData.context > 0
                                    ? qsTr("  (context %1 tokens)").arg(modelData.context) : "")
                                color: Theme.text; font.pixelSize: 12; elide: Text.ElideRight }
                        Button { text: qsTr("Use"); flat: true; onClicked: Remote.useModel(modelData.endpoint, modelData.id) }
                    }
                }
            }
        }
    }

    Button {
        objectName: "remoteAddButton"
        visible: !root.formOpen
        text: qsTr("Add an endpoint…")
        onClicked: root.edit("")
    }

    // The form's keys wrap at 180 px and its long check box text wraps: a fixed-width item
    // wider than the page would widen every row of Settings (see SettingsPage's Row2).
    component FormKey: Label { Layout.maximumWidth: 180; wrapMode: Text.Wrap; color: Theme.text }
    GridLayout {
        visible: root.formOpen
        Layout.fillWidth: true
        columns: 2
        columnSpacing: 12
        rowSpacing: 6
        FormKey { text: qsTr("Name") }
        TextField { id: nameField; objectName: "remoteNameField"; Layout.fillWidth: true; placeholderText: qsTr("gpu-box") }
        FormKey { text: qsTr("URL") }
        TextField { id: urlField; objectName: "remoteUrlField"; Layout.fillWidth: true
                    placeholderText: "http://gpu-box:8000/v1" }
        FormKey { text: qsTr("API key") }
        TextField { id: keyField; objectName: "remoteKeyField"; Layout.fillWidth: true; echoMode: TextInput.Password
                    placeholderText: root.editing.length > 0 ? qsTr("unchanged (kept in the system keyring)")
                                                             : qsTr("none (kept in the system keyring)") }
        FormKey { text: qsTr("Price per 1M input tokens (%1)").arg(Settings.currency) }
        TextField { id: inPrice; objectName: "remoteInputPriceField"; Layout.preferredWidth: 120
                    validator: DoubleValidator { bottom: 0 } }
        FormKey { text: qsTr("Price per 1M output tokens (%1)").arg(Settings.currency) }
        TextField { id: outPrice; objectName: "remoteOutputPriceField"; Layout.preferredWidth: 120
                    validator: DoubleValidator { bottom: 0 } }
        FormKey { text: qsTr("CA file (a private CA's PEM; optional)") }
        TextField { id: caField; objectName: "remoteCaField"; Layout.fillWidth: true
                    placeholderText: qsTr("the system's certificates") }
        FormKey { text: qsTr("Reasoning effort") }
        ComboBox {
            id: effortBox
            objectName: "remoteEffortBox"
            readonly property var values: ["", "low", "medium", "high"]
            model: [qsTr("Not sent (the server's default)"), qsTr("Low"), qsTr("Medium"), qsTr("High")]
            implicitContentWidthPolicy: ComboBox.WidestText
        }
        Item { implicitWidth: 1 }
        CheckBox {
            id: extrasBox
            objectName: "remoteExtrasBox"
            Layout.fillWidth: true
            text: qsTr("Send top k, min p and repeat penalty (llama-server, vLLM, SGLang, Ember; OpenAI refuses them)")
            contentItem: Label {
                leftPadding: extrasBox.indicator.width + extrasBox.spacing
                text: extrasBox.text
                wrapMode: Text.Wrap
                verticalAlignment: Text.AlignVCenter
                color: Theme.text
            }
        }
        Item { implicitWidth: 1 }
        RowLayout {
            Button { objectName: "remoteSaveButton"; text: qsTr("Save and test"); onClicked: root.save() }
            Button { text: qsTr("Cancel"); flat: true; visible: Remote.endpoints.length > 0
                     onClicked: root.formOpen = false }
        }
    }
    Label {
        objectName: "remoteError"
        visible: Remote.error.length > 0
        Layout.fillWidth: true
        wrapMode: Text.Wrap
        textFormat: Text.PlainText
        color: Theme.error
        text: Remote.error
    }
}
