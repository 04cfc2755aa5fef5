// App settings: appearance, engine (applied at the next model load), the local API server,
// remote endpoints (RemoteEndpoints.qml), defaults for new chats, logging, and where Ember keeps its files; plus the loaded model's details.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Rectangle {
    id: root
    signal closed()
    color: Theme.window

    component Section: Label { Layout.fillWidth: true; wrapMode: Text.Wrap; font.pixelSize: 15; font.bold: true
                               color: Theme.text; topPadding: 12 }
    // A key and its control side by side, or the control under the key where it does not fit
    // beside it. In a ColumnLayout every row is as wide as the widest row's minimum, and an
    // item that does not fill a row is fixed at its implicit width: one wide fixed control
    // beside a key would widen every row past the page. A control that fills its row can
    // shrink, so it stays beside the key if 160 px are left.
    component Row2: GridLayout {
        Layout.fillWidth: true
        columnSpacing: 12
        rowSpacing: 4
        readonly property Item control: children.length > 1 ? children[1] : null
        readonly property real controlWidth: !control ? 0 : control.Layout.fillWidth ? 160
                                           : control.Layout.preferredWidth >= 0 ? control.Layout.preferredWidth
                                           : control.implicitWidth
        columns: 220 + columnSpacing + controlWidth <= parent.width ? 2 : 1
    }
    component Key: Label { Layout.preferredWidth: 220; color: Theme.text; wrapMode: Text.Wrap }
    component Value: Label { Layout.fillWidth: true; color: Theme.muted; wrapMode: Text.WrapAnywhere; font.pixelSize: 12 }

    ColumnLayout {
        anchors.fill: parent
        spacing: 0
        Rectangle {
            Layout.fillWidth: true
            implicitHeight: 52
            color: Theme.window
            RowLayout {
                anchors { fill: parent; leftMargin: 12; rightMargin: 12 }
                Button { objectName: "settingsBack"; text: qsTr("← Back to chat"); flat: true; onClicked: root.closed() }
                Label { text: qsTr("Settings"); font.pixelSize: 16; font.bold: true; color: Theme.text; Layout.fillWidth: true }
                Button { text: qsTr("Reset to defaults"); flat: true; onClicked: Settings.resetToDefaults() }
            }
            Rectangle { anchors.bottom: parent.bottom; width: parent.width; height: 1; color: Theme.border }
        }

        ScrollView {
            objectName: "settingsScroll"
            Layout.fillWidth: true
            Layout.fillHeight: true
            contentWidth: availableWidth
            ColumnLayout {
                objectName: "settingsColumn"
                x: 24
                width: Math.min(root.width - 48, 760)  // the page's, not the content's (wide text would widen that)
                spacing: 8

                Section { text: qsTr("Appearance") }
                Row2 {
                    Key { text: qsTr("Theme") }
                    ComboBox {
                        objectName: "themeBox"
                        model: [qsTr("Follow the system"), qsTr("Light"), qsTr("Dark")]
                        readonly property var keys: ["system", "light", "dark"]
                        currentIndex: Math.max(0, keys.indexOf(Settings.theme))
                        onActivated: (i) => Settings.theme = keys[i]
                        Layout.preferredWidth: 220
                    }
                }

                Section { text: qsTr("Engine (applies when a model is next loaded)") }
                Row2 {
                    Key { text: qsTr("Context length per chat (tokens; a model's own setting, from the chat's context meter, comes first)") }
                    RowLayout {
                        CheckBox {
                            objectName: "contextAutoBox"
                            text: qsTr("Automatic")
                            checked: Settings.contextLength === 0
                            onToggled: Settings.contextLength = checked ? 0 : 4096
                            ToolTip.visible: hovered
                            ToolTip.text: qsTr("The longest the model was made for that fits this machine's free memory")
                        }
                        SpinBox { objectName: "contextBox"; from: 256; to: 131072; stepSize: 256; editable: true
                                  enabled: Settings.contextLength > 0
                                  value: Settings.contextLength > 0 ? Settings.contextLength : 4096
                                  onValueModified: Settings.contextLength = value }
                    }
                }
                Row2 {
                    Key { text: qsTr("KV cache type (the model reloads)") }
                    ComboBox {
                        objectName: "cacheTypeBox"
                        implicitContentWidthPolicy: ComboBox.WidestText
                        textRole: "text"
                        valueRole: "value"
                        model: [{ value: "f16", text: qsTr("F16 (exact)") },
                                { value: "q8_0", text: qsTr("Q8_0 (about half the memory per token)") }]
                        Component.onCompleted: currentIndex = indexOfValue(Settings.kvCacheType)
                        onActivated: Models.setCacheType(currentValue)
                        ToolTip.visible: hovered
                        ToolTip.text: qsTr("Q8_0 holds a longer conversation in the same memory, at a tiny cost in accuracy")
                    }
                }
                Row2 {
                    Key { text: qsTr("When a chat outgrows the context") }
                    ComboBox {
                        objectName: "contextOverflowBox"
                        implicitContentWidthPolicy: ComboBox.WidestText
                        textRole: "text"
                        valueRole: "value"
                        model: [{ value: "truncate", text: qsTr("Leave out the oldest messages") },
                                { value: "roll", text: qsTr("Leave them out, keep the rest's cache (roll)") },
                                { value: "stop", text: qsTr("Stop and say so") }]
                        Component.onCompleted: currentIndex = indexOfValue(Settings.contextOverflow)
                        onActivated: Settings.contextOverflow = currentValue
                        ToolTip.visible: hovered
                        ToolTip.text: qsTr("Roll moves the kept messages in the cache instead of reading them again: faster, but they were read with the older ones in view. Not every model allows it.")
                    }
                }
                Row2 {
                    Key { text: qsTr("Chats kept in the KV cache (and answers written at once)") }
                    SpinBox { from: 1; to: 64; editable: true; value: Settings.cachedChats
                              onValueModified: Settings.cachedChats = value }
                }
                Row2 {
                    Key { text: qsTr("Prompt cache on disk, kept across restarts (GiB; 0: off)") }
                    SpinBox { objectName: "kvDiskBox"; from: 0; to: 1024; editable: true; value: Settings.kvDiskCacheGiB
                              onValueModified: Settings.kvDiskCacheGiB = value }
                }
                Row2 {
                    Key { text: qsTr("CPU threads (0: one per core)") }
                    SpinBox { from: 0; to: 256; editable: true; value: Settings.threads
                              onValueModified: Settings.threads = value }
                }
                Row2 {
                    Key { text: qsTr("Load the last model at start") }
                    Switch { checked: Settings.loadLastModel; onToggled: Settings.loadLastModel = checked }
                }

                Section { text: qsTr("Local API server") }
                Label {
                    Layout.fillWidth: true
                    wrapMode: Text.Wrap
                    color: Theme.muted
                    font.pixelSize: 12
                    text: qsTr("An OpenAI-compatible API on this computer only (127.0.0.1), answered by the model loaded here, alongside your chats.")
                }
                Row2 {
                    Key { text: qsTr("Serve the API") }
                    Switch { objectName: "serverSwitch"; checked: Settings.serverEnabled
                             onToggled: Settings.serverEnabled = checked }
                }
                Row2 {
                    Key { text: qsTr("Port") }
                    SpinBox { objectName: "serverPortBox"; from: 1; to: 65535; editable: true
                              value: Settings.serverPort; onValueModified: Settings.serverPort = value
                              textFromValue: (v) => String(v); valueFromText: (t) => parseInt(t) }
                }
                Row2 {
                    Key { text: qsTr("API key (optional; clients send it as a Bearer token)") }
                    TextField { objectName: "serverKeyField"; Layout.preferredWidth: 260
                                text: Settings.serverApiKey; echoMode: TextInput.PasswordEchoOnEdit
                                placeholderText: qsTr("none"); onEditingFinished: Settings.serverApiKey = text }
                }
                Row2 {
                    Key { text: qsTr("Status") }
                    Label {
                        objectName: "serverStatus"
                        Layout.fillWidth: true
                        wrapMode: Text.Wrap
                        textFormat: Text.PlainText
                        color: ApiServer.error.length > 0 ? Theme.error : Theme.muted
                        text: ApiServer.busy ? qsTr("Starting…")
                            : ApiServer.running ? qsTr("Serving at %1/v1").arg(ApiServer.url)
                            : ApiServer.error.length > 0 ? ApiServer.error
                            : qsTr("Off")
                    }
                }

                Section { text: qsTr("Remote endpoints") }
                RemoteEndpoints { objectName: "remoteEndpoints"; Layout.fillWidth: true }

                Section { text: qsTr("New chats") }
                Row2 {
                    Key { text: qsTr("Default system prompt") }
                    FramedTextArea {
                        objectName: "defaultSystemPromptField"
                        Layout.fillWidth: true
                        Layout.preferredHeight: 80
                        text: Settings.defaultSystemPrompt
                        onEditingFinished: Settings.defaultSystemPrompt = text
                    }
                }
                SettingSlider {
                    label: qsTr("Default temperature")
                    from: 0; to: 2; step: 0.05
                    value: Settings.defaultSampling.temperature
                    onMoved: (v) => { var s = Settings.defaultSampling; s.temperature = v; Settings.defaultSampling = s }
                }
                Row2 {
                    Key { text: qsTr("Default max answer tokens") }
                    SpinBox { from: -1; to: 32768; stepSize: 64; editable: true
                              value: Settings.defaultSampling.max_tokens
                              onValueModified: { var s = Settings.defaultSampling; s.max_tokens = value; Settings.defaultSampling = s } }
                }

                Section { text: qsTr("Logging") }
                Row2 {
                    Key { text: qsTr("Level") }
                    ComboBox {
                        objectName: "logLevelBox"
                        model: ["trace", "debug", "info", "warn", "error"]
                        currentIndex: Math.max(0, model.indexOf(Settings.logLevel))
                        onActivated: (i) => Settings.logLevel = model[i]
                    }
                }
                Row2 { Key { text: qsTr("Log file") } Value { text: App.logFile || qsTr("(console only)") } }

                Section { text: qsTr("Storage") }
                Row2 { Key { text: qsTr("Conversations") } Value { text: App.databasePath } }
                Row2 { Key { text: qsTr("Settings file") } Value { text: Settings.settingsFile } }
                Row2 { Key { text: qsTr("Model folders") } Value { text: ModelList.folders.join("\n") } }

                Section { text: qsTr("Loaded model") }
                Label { visible: !Models.ready; text: qsTr("None"); color: Theme.muted }
                Repeater {
                    model: Models.ready && Models.details.remote ? [
                        [qsTr("Name"), Models.details.name],
                        [qsTr("Runs on"), qsTr("the server of endpoint “%1”").arg(Models.details.endpoint)],
                        [qsTr("URL"), Models.details.url],
                        [qsTr("Context"), Models.details.context > 0 ? Models.details.context + qsTr(" tokens (as the server says)")
                                                                     : qsTr("not said by the server")]
                    ] : Models.ready ? [
                        [qsTr("Name"), Models.details.name + " (" + Models.details.metadataName + ")"],
                        [qsTr("File"), Models.details.path],
                        [qsTr("Architecture"), Models.details.architecture + ", " + Models.details.params + " parameters"],
                        [qsTr("Weights"), Models.details.fileType + ", " + Models.details.fileSize],
                        [qsTr("Runs on"), Models.details.runsOn],
                        [qsTr("Runs on, in detail"), Models.details.backend],
                        [qsTr("Context"), Models.details.context + qsTr(" tokens × ") + Models.details.cachedChats
                                          + qsTr(" chats, KV cache ") + Models.details.kvSize
                                          + " (" + Models.details.kvType + ", " + Models.details.kvPerToken
                                          + qsTr(" per token)")
                                          + " (" + Models.details.contextReason + ")"],
                        [qsTr("Chat template"), Models.details.chatTemplate],
                        [qsTr("Loaded in"), Math.round(Models.details.loadMs) + " ms"]
                    ] : []
                    delegate: Row2 {
                        required property var modelData
                        Key { text: modelData[0] }
                        Value { text: modelData[1] }
                    }
                }
                Item { implicitHeight: 24 }
            }
        }
    }
}
