// One repository in Discover: a catalog entry (name, parameters, licence, description) or a
// search result (repository, downloads, likes).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

ItemDelegate {
    id: root
    property bool selected: false
    readonly property bool isCatalog: model.name !== undefined
    objectName: "repo_" + model.repo
    background: Rectangle { radius: 8; color: root.selected ? Theme.selected : root.hovered ? Theme.sidebar : "transparent" }
    contentItem: ColumnLayout {
        spacing: 2
        RowLayout {
            Layout.fillWidth: true
            Label {
                Layout.fillWidth: true
                text: root.isCatalog ? model.name : model.repo
                font.bold: true
                color: Theme.text
                elide: Text.ElideRight
            }
            Label {
                text: root.isCatalog ? model.sizeText + " · " + model.licence
                                     : qsTr("%1 downloads").arg(Number(model.downloads).toLocaleString(Qt.locale(), 'f', 0))
                color: Theme.muted
            }
        }
        Label {
            Layout.fillWidth: true
            visible: root.isCatalog
            text: root.isCatalog ? model.description : ""
            color: Theme.muted
            wrapMode: Text.Wrap
            maximumLineCount: 2
            elide: Text.ElideRight
        }
        Label {
            visible: root.isCatalog
            text: root.isCatalog ? model.repo : ""
            color: Theme.muted
            font.pixelSize: 11
        }
    }
}
