// Discover: the curated catalog (or Hugging Face search results) on the left, the chosen
// repository's downloadable models on the right, each with its fit badge and one-line reason.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Item {
    id: root
    property alias files: fileList
    property bool searchMode: query.text.trim().length > 0

    RowLayout {
        anchors.fill: parent
        anchors.margins: 14
        spacing: 14

        ColumnLayout {
            Layout.preferredWidth: 380
            Layout.minimumWidth: 380
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
                    onClicked: Hub.openRepo(model.repo)
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
        Rectangle { Layout.fillHeight: true; width: 1; color: Theme.border }
        ColumnLayout {
            Layout.fillWidth: true
            Layout.preferredWidth: 500  // not the wrapped reasons' one-line width
            Layout.fillHeight: true
            Label {
                objectName: "repoTitle"
                text: Hub.repo.length > 0 ? Hub.repo : qsTr("Pick a model to see its files")
                font.pixelSize: 17
                font.bold: Hub.repo.length > 0
                color: Hub.repo.length > 0 ? Theme.text : Theme.muted
            }
            Label {
                objectName: "fitSummary"
                Layout.fillWidth: true
                visible: text.length > 0
                text: Hub.listing ? qsTr("Listing files…")
                    : Hub.filesError.length > 0 ? Hub.filesError
                    : Hub.checkingFit ? qsTr("Reading each file's header to check how it fits this machine…")
                    : Hub.fitSummary.length > 0 ? qsTr("Recommended: %1").arg(Hub.fitSummary) : ""
                color: Hub.filesError.length > 0 ? Theme.error : Theme.muted
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
