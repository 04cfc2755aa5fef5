// Downloads: every pull of this session with its progress; finished ones can be cleared.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Item {
    ColumnLayout {
        anchors.fill: parent
        anchors.margins: 14
        RowLayout {
            Layout.fillWidth: true
            Label {
                Layout.fillWidth: true
                text: qsTr("Downloads are checked against the SHA-256 the hub publishes before they are listed; a paused or interrupted download resumes where it stopped.")
                color: Theme.muted
                wrapMode: Text.Wrap
            }
            Button { text: qsTr("Clear finished"); enabled: Hub.downloads.count > Hub.activeDownloads; onClicked: Hub.clearFinished() }
        }
        ListView {
            id: list
            objectName: "downloadList"
            Layout.fillWidth: true
            Layout.fillHeight: true
            clip: true
            spacing: 6
            model: Hub.downloads
            ScrollBar.vertical: ScrollBar { }
            delegate: DownloadDelegate { width: list.width }
            Label {
                anchors.centerIn: parent
                visible: list.count === 0
                text: qsTr("No downloads yet: pick a model in Discover")
                color: Theme.muted
            }
        }
    }
}
