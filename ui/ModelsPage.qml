// The model manager: Discover (curated catalog, Hugging Face search, a repository's files
// with their fit badges), Downloads (the queue) and Library (load, delete, quantize, import
// by file dialog or by dropping a .gguf anywhere on the page). All of it reads the "Hub" and
// "Library" singletons (app/models); nothing here waits on the network or the disk.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Rectangle {
    id: root
    objectName: "modelsPage"
    color: Theme.window
    signal closed()
    property alias tab: tabs.currentIndex
    property alias discover: discover
    property alias library: library

    ColumnLayout {
        anchors.fill: parent
        spacing: 0

        // The title and the way back; the fit budget lives with the files it judges (Discover).
        RowLayout {
            Layout.fillWidth: true
            Layout.margins: 14
            Label {
                Layout.fillWidth: true
                text: qsTr("Models")
                font.pixelSize: 22
                font.bold: true
                color: Theme.text
                elide: Text.ElideRight
            }
            Button { objectName: "backToChat"; text: qsTr("Back to chat"); flat: true; onClicked: root.closed() }
        }
        TabBar {
            id: tabs
            objectName: "modelsTabs"
            Layout.fillWidth: true
            Layout.leftMargin: 14
            Layout.rightMargin: 14
            background: Rectangle { color: Theme.sidebar }
            PageTab { text: qsTr("Discover") }
            PageTab {
                objectName: "downloadsTab"
                text: Hub.activeDownloads > 0 ? qsTr("Downloads (%1)").arg(Hub.activeDownloads) : qsTr("Downloads")
            }
            PageTab { text: Library.models.count > 0 ? qsTr("Library (%1)").arg(Library.models.count) : qsTr("Library") }
        }
        Rectangle { Layout.fillWidth: true; height: 1; color: Theme.border }
        StackLayout {
            Layout.fillWidth: true
            Layout.fillHeight: true
            currentIndex: tabs.currentIndex
            ModelsDiscover { id: discover }
            DownloadsView { }
            LibraryView { id: library }
        }
    }

    // A .gguf dropped anywhere on the page is imported into the library.
    DropArea {
        id: drop
        objectName: "modelsDropArea"
        anchors.fill: parent
        keys: ["text/uri-list"]
        onDropped: function (d) {
            for (const url of d.urls) Library.importFile(url.toString())
            tabs.currentIndex = 2
        }
        Rectangle {
            anchors.fill: parent
            visible: drop.containsDrag
            color: Qt.rgba(Theme.accent.r, Theme.accent.g, Theme.accent.b, 0.12)
            border.color: Theme.accent
            border.width: 2
            Label { anchors.centerIn: parent; text: qsTr("Drop a GGUF file to add it to your library"); color: Theme.accent; font.pixelSize: 18 }
        }
    }

}
