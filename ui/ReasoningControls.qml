// The reasoning switches of the loaded model, for this chat: "Think" (templates that read
// `enable_thinking`: Qwen3, Gemma 4) and the reasoning effort (templates that read
// `reasoning_effort`: gpt-oss). Each is shown only where the model's chat template reads it;
// the values are stored with the chat's settings and given to the template on every answer.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

RowLayout {
    id: root
    readonly property bool hasSwitch: Models.ready && !!Models.details.readsEnableThinking
    readonly property bool hasEffort: Models.ready && !!Models.details.readsReasoningEffort
    visible: hasSwitch || hasEffort
    spacing: 12

    function set(key, value) {
        var s = Chat.sampling
        s[key] = value
        Chat.sampling = s
    }

    Item { implicitWidth: 8 }
    Switch {
        objectName: "thinkingSwitch"
        visible: root.hasSwitch
        text: qsTr("Think before answering")
        checked: Chat.sampling.thinking !== false
        onToggled: root.set("thinking", checked)
    }
    Label {
        visible: root.hasEffort
        text: qsTr("Reasoning effort")
        color: Theme.text
    }
    ComboBox {
        objectName: "effortChoice"
        visible: root.hasEffort
        model: [qsTr("Low"), qsTr("Medium"), qsTr("High")]
        readonly property var values: ["low", "medium", "high"]
        currentIndex: Math.max(0, values.indexOf(Chat.sampling.reasoning_effort || "medium"))
        onActivated: (i) => root.set("reasoning_effort", values[i])
    }
    Item { Layout.fillWidth: true }
}
