// This conversation's system prompt and sampling settings (stored with the conversation;
// new chats start from the defaults on the Settings page).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Drawer {
    id: root
    objectName: "chatSettingsPanel"
    edge: Qt.RightEdge
    width: Math.min(380, parent ? parent.width * 0.8 : 380)
    property var values: ({})

    function set(key, value) {
        var s = Chat.sampling
        s[key] = value
        Chat.sampling = s
    }
    onOpened: { values = Chat.sampling; systemPrompt.text = Chat.systemPrompt }
    Connections { target: Chat; function onSettingsChanged() { root.values = Chat.sampling } }

    background: Rectangle { color: Theme.window; border.color: Theme.border }

    ScrollView {
        anchors.fill: parent
        anchors.margins: 16
        contentWidth: availableWidth
        ColumnLayout {
            width: parent.width
            spacing: 10
            Label { text: qsTr("This chat"); font.pixelSize: 18; font.bold: true; color: Theme.text }
            Label { text: qsTr("System prompt"); color: Theme.muted }
            FramedTextArea {
                id: systemPrompt
                objectName: "systemPromptField"
                Layout.fillWidth: true
                Layout.preferredHeight: 110
                placeholderText: qsTr("Instructions the model follows in this chat")
                onEditingFinished: Chat.systemPrompt = text
            }
            SettingSlider { label: qsTr("Temperature"); from: 0; to: 2; step: 0.05; value: root.values.temperature ?? 0.7
                            onMoved: (v) => root.set("temperature", v) }
            SettingSlider { label: qsTr("Top-p"); from: 0; to: 1; step: 0.01; value: root.values.top_p ?? 0.95
                            onMoved: (v) => root.set("top_p", v) }
            SettingSlider { label: qsTr("Min-p"); from: 0; to: 0.5; step: 0.01; value: root.values.min_p ?? 0.05
                            onMoved: (v) => root.set("min_p", v) }
            SettingSlider { label: qsTr("Repeat penalty"); from: 1; to: 1.5; step: 0.01; value: root.values.repeat_penalty ?? 1.1
                            onMoved: (v) => root.set("repeat_penalty", v) }
            RowLayout {
                Label { text: qsTr("Top-k"); Layout.fillWidth: true; color: Theme.text }
                SpinBox { from: 0; to: 1000; value: root.values.top_k ?? 40; editable: true
                          onValueModified: root.set("top_k", value) }
            }
            RowLayout {
                Label { text: qsTr("Max answer tokens (-1: no limit)"); Layout.fillWidth: true; color: Theme.text }
                SpinBox { objectName: "maxTokensField"; from: -1; to: 32768; stepSize: 64; editable: true
                          value: root.values.max_tokens ?? 1024; onValueModified: root.set("max_tokens", value) }
            }
            RowLayout {
                Label { text: qsTr("Seed (-1: random)"); Layout.fillWidth: true; color: Theme.text }
                SpinBox { from: -1; to: 2147483647; editable: true; value: root.values.seed ?? -1
                          onValueModified: root.set("seed", value) }
            }
            Label { text: qsTr("When this chat outgrows the context"); color: Theme.muted }
            ComboBox {
                objectName: "chatOverflowChoice"
                Layout.fillWidth: true
                model: [qsTr("As in Settings"), qsTr("Leave out the oldest messages"),
                        qsTr("Leave them out, keep the rest's cache (roll)"), qsTr("Stop and say so")]
                readonly property var policies: ["", "truncate", "roll", "stop"]
                currentIndex: Math.max(0, policies.indexOf(root.values.context_overflow ?? ""))
                onActivated: (i) => root.set("context_overflow", policies[i])
            }
            Label { text: qsTr("Speculative decoding"); color: Theme.muted }
            ComboBox {
                id: speculationChoice
                objectName: "speculationChoice"
                Layout.fillWidth: true
                model: [qsTr("Off"), qsTr("Prompt lookup"), qsTr("Draft model")]
                readonly property var modes: ["off", "lookup", "draft"]
                // A draft model needs one in the library for the loaded model; else the choice says why not.
                readonly property string draftReason: Chat.draftModelReason
                currentIndex: Math.max(0, modes.indexOf(root.values.speculation ?? "off"))
                delegate: ItemDelegate {
                    required property int index
                    required property var modelData
                    width: speculationChoice.width
                    text: modelData
                    enabled: index !== 2 || speculationChoice.draftReason === ""
                    opacity: enabled ? 1 : 0.45
                    highlighted: speculationChoice.highlightedIndex === index
                }
                onActivated: (i) => root.set("speculation", modes[i])
            }
            // The loaded model's draft (saved for the model: every chat set to "Draft model"
            // uses it): choosing one reloads the model with the draft beside it.
            ColumnLayout {
                objectName: "draftSection"
                Layout.fillWidth: true
                spacing: 6
                visible: speculationChoice.currentIndex === 2 && speculationChoice.draftReason === ""
                Label { text: qsTr("Draft model for %1").arg(Models.name); color: Theme.muted
                        Layout.fillWidth: true; elide: Text.ElideRight }
                ComboBox {
                    id: draftChoice
                    objectName: "draftChoice"
                    Layout.fillWidth: true
                    readonly property var entries: [{ name: qsTr("None"), path: "", size: "" }].concat(Models.drafts)
                    model: entries.map(e => e.size !== "" ? e.name + "  ·  " + e.size : e.name)
                    currentIndex: Math.max(0, entries.findIndex(e => e.path === Models.draftPath))
                    enabled: Models.ready
                    onActivated: (i) => Models.setDraft(entries[i].path)
                }
                Label {
                    objectName: "draftStatus"
                    Layout.fillWidth: true
                    wrapMode: Text.WordWrap
                    font.pixelSize: 12
                    color: Models.draftError !== "" ? Theme.error : Theme.muted
                    visible: text !== ""
                    text: Models.draftError !== "" ? Models.draftError
                          : Models.draftName !== "" ? qsTr("%1 drafts for this model (%2).").arg(Models.draftName).arg(Models.draftFit)
                          : Models.draftPath === "" ? qsTr("Choose one to load it beside the model.") : ""
                }
            }
            Label {
                objectName: "speculationNote"
                Layout.fillWidth: true
                wrapMode: Text.WordWrap
                color: Theme.muted
                font.pixelSize: 12
                text: speculationChoice.draftReason !== ""
                      ? qsTr("Prompt lookup guesses from text already in the chat: the same answers, sooner when the answer repeats it. Draft model: %1.").arg(speculationChoice.draftReason)
                      : qsTr("Prompt lookup guesses from text already in the chat; a draft model guesses with a small model. The answers come from the same distribution, sooner.")
            }
        }
    }
}
