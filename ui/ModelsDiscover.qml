// Discover: the curated catalog (or Hugging Face search results) and the chosen repository's
// downloadable models, each with its fit badge and a plain sentence on how it runs here.
// Wide pages show both side by side; narrow ones (the window's minimum, 720 px, leaves the
// page ~450) show one at a time, with a way back from the files to the list.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Item {
    id: root
    property alias files: fileList
    property bool searchMode: query.text.trim().length > 0
    readonly property bool narrow: width < 760
    // Narrow: the files of the opened repository until "All models" sets this to it.
    property string dismissedRepo: ""
    readonly property bool filesShown: !narrow || (Hub.repo.length > 0 && Hub.repo !== dismissedRepo)
    readonly property bool reposShown: !narrow || !filesShown

    RowLayout {
        anchors.fill: parent
        anchors.margins: 14
        spacing: 14

        ColumnLayout {
            objectName: "repoColumn"
            visible: root.reposShown
            Layout.fillWidth: root.narrow
            Layout.preferredWidth: root.narrow ? -1 : Math.min(380, root.width * 0.4)
            Layout.fillHeight: true
            TextField {
                id: query
                objectName: "hubSearchField"
                Layout.fillWidth: true
                placeholderText: qsTr("Search Hugging Face for GGUF models")
                onAccepted: if (text.trim().length > 0) Hub.search(text)
                Keys.onEscapePressed: text = ""
            }
            Label {
                Layout.fillWidth: true
                text: Hub.searching ? qsTr("Searching…")
                    : root.searchMode && Hub.searchError.length > 0 ? Hub.searchError
                    : root.searchMode ? qsTr("%1 repositories, most downloaded first").arg(Hub.searchResults.count)
                    : qsTr("Popular chat models")
                color: root.searchMode && Hub.searchError.length > 0 ? Theme.error : Theme.muted
                wrapMode: Text.Wrap
            }
            ListView {
                id: repoList
                objectName: root.searchMode ? "searchList" : "catalogList"
                Layout.fillWidth: true
                Layout.fillHeight: true
                clip: true
                spacing: 4
                model: root.searchMode ? Hub.searchResults : Hub.catalog
                ScrollBar.vertical: ScrollBar { }
                delegate: ModelsRepoDelegate {
                    width: repoList.width
                    selected: Hub.repo === model.repo
                    onClicked: { root.dismissedRepo = ""; Hub.openRepo(model.repo) }
                }
            }
            // The access token for gated repositories: kept by the app (0600), used instead of
            // HF_TOKEN when set; only its hint is ever shown.
            RowLayout {
                Layout.fillWidth: true
                TextField {
                    id: tokenField
                    objectName: "hubTokenField"
                    Layout.fillWidth: true
                    Layout.minimumWidth: 80
                    echoMode: TextInput.Password
                    placeholderText: Hub.tokenSource === "settings" ? qsTr("Access token saved (%1)").arg(Hub.tokenHint)
                                                                    : qsTr("Hugging Face access token (gated models)")
                    onAccepted: if (Hub.setToken(text)) text = ""
                }
                Button {
                    objectName: "hubTokenSave"
                    text: qsTr("Save")
                    enabled: tokenField.text.trim().length > 0
                    onClicked: if (Hub.setToken(tokenField.text)) tokenField.text = ""
                }
                Button {
                    objectName: "hubTokenRemove"
                    text: qsTr("Remove")
                    visible: Hub.tokenSource === "settings"
                    onClicked: Hub.setToken("")
                }
            }
            Label {
                objectName: "hubTokenStatus"
                Layout.fillWidth: true
                text: Hub.tokenSource === "settings" ? qsTr("Gated repositories use the token saved here (%1).").arg(Hub.tokenHint)
                    : Hub.tokenSource === "HF_TOKEN" ? qsTr("Gated repositories use HF_TOKEN (%1); a token saved here takes its place.").arg(Hub.tokenHint)
                    : qsTr("No access token: gated repositories will refuse downloads.")
                color: Theme.muted
                wrapMode: Text.Wrap
                font.pixelSize: 12
            }
        }
        Rectangle { visible: !root.narrow; Layout.fillHeight: true; width: 1; color: Theme.border }
        ColumnLayout {
            objectName: "fileColumn"
            visible: root.filesShown
            Layout.fillWidth: true
            Layout.fillHeight: true
            RowLayout {
                Layout.fillWidth: true
                Button {
                    objectName: "allModelsButton"
                    visible: root.narrow
                    text: qsTr("‹ All models")
                    flat: true
                    onClicked: root.dismissedRepo = Hub.repo
                }
                Label {
                    objectName: "repoTitle"
                    Layout.fillWidth: true
                    text: Hub.repo.length > 0 ? Hub.repo : qsTr("Pick a model to see its files")
                    font.pixelSize: 17
                    font.bold: Hub.repo.length > 0
                    color: Hub.repo.length > 0 ? Theme.text : Theme.muted
                    elide: Text.ElideMiddle
                }
            }
            // The budget the badges are judged against: empty fields measure this machine.
            Flow {
                Layout.fillWidth: true
                spacing: 6
                Label { text: qsTr("Judge fits for"); color: Theme.muted; height: vramField.height; verticalAlignment: Text.AlignVCenter }
                Label { text: qsTr("VRAM"); color: Theme.muted; height: vramField.height; verticalAlignment: Text.AlignVCenter }
                TextField {
                    id: vramField
                    objectName: "vramBudgetField"
                    width: 96
                    placeholderText: qsTr("measured")
                    text: Hub.vramBudget
                    onEditingFinished: Hub.vramBudget = text
                }
                Label { text: qsTr("RAM"); color: Theme.muted; height: vramField.height; verticalAlignment: Text.AlignVCenter }
                TextField {
                    objectName: "ramBudgetField"
                    width: 96
                    placeholderText: qsTr("measured")
                    text: Hub.ramBudget
                    onEditingFinished: Hub.ramBudget = text
                }
            }
            Label {
                objectName: "budgetLabel"
                Layout.fillWidth: true
                visible: text.length > 0
                text: Hub.budgetText.length > 0 ? qsTr("Judged for: %1").arg(Hub.budgetText) : ""
                color: Theme.muted
                font.pixelSize: 12
                wrapMode: Text.Wrap
            }
            Label {
                objectName: "fitSummary"
                Layout.fillWidth: true
                visible: text.length > 0
                text: Hub.listing ? qsTr("Listing files…")
                    : Hub.filesError.length > 0 ? Hub.filesError
                    : Hub.checkingFit ? qsTr("Reading each file's header to check how it fits this machine…")
                    : Hub.fitSummary.length > 0 ? qsTr("Recommended: %1").arg(Hub.fitSummary) : ""
                color: Hub.filesError.length > 0 ? Theme.error : Theme.text
                wrapMode: Text.Wrap
            }
            ListView {
                id: fileList
                objectName: "fileList"
                Layout.fillWidth: true
                Layout.fillHeight: true
                clip: true
                spacing: 6
                model: Hub.files
                ScrollBar.vertical: ScrollBar { }
                delegate: ModelsFileDelegate { width: fileList.width }
            }
        }
    }
}
