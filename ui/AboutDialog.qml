// About Ember: the version and build (commit, compiler, CUDA architectures), the compute
// backends this machine offers and why CUDA is missing when it is, and the licence notices
// of every library Ember ships or links (C++ side: app/desktop/about_info.h).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Popup {
    id: root
    objectName: "aboutDialog"
    modal: true
    focus: true
    anchors.centerIn: Overlay.overlay
    width: Math.min(parent.width - 80, 760)
    height: Math.min(parent.height - 80, 640)
    padding: 20
    background: Rectangle { color: Theme.window; radius: Theme.radius; border.color: Theme.border }

    property int noticeIndex: 0
    readonly property var notice: About.notices[noticeIndex] || ({})

    onOpened: if (About.backends.length === 0) About.probeBackends()

    component Key: Label { color: Theme.muted; Layout.preferredWidth: 150; font.pixelSize: 12 }
    component Value: Label {
        color: Theme.text; Layout.fillWidth: true; wrapMode: Text.WrapAtWordBoundaryOrAnywhere; font.pixelSize: 12
    }

    ColumnLayout {
        anchors.fill: parent
        spacing: Theme.spacing
        RowLayout {
            Image { source: "qrc:/icons/ember.png"; sourceSize: Qt.size(48, 48); Layout.preferredWidth: 48; Layout.preferredHeight: 48 }
            ColumnLayout {
                Label { objectName: "aboutTitle"; text: "Ember " + About.version; font.pixelSize: 20; font.bold: true; color: Theme.text }
                Label { text: qsTr("Language models on your own computer"); color: Theme.muted }
            }
            Item { Layout.fillWidth: true }
            Button { objectName: "aboutClose"; text: qsTr("Close"); onClicked: root.close() }
        }

        GridLayout {
            columns: 2
            columnSpacing: 12
            rowSpacing: 2
            Layout.fillWidth: true
            Key { text: qsTr("Build") }
            Value { objectName: "aboutBuild"; text: About.versionLine }
            Key { text: qsTr("CUDA architectures") }
            Value {
                objectName: "aboutCudaArchs"
                text: About.cudaArchitectures.length > 0 ? About.cudaArchitectures + " (" + About.cudaCompiler + ")"
                                                         : qsTr("none: built without the CUDA backend")
            }
            Key { text: qsTr("Backends") }
            Value {
                objectName: "aboutBackends"
                text: About.probing ? qsTr("Looking…")
                      : About.backends.map(b => b.id + ": " + b.name + (b.detail ? " (" + b.detail + ")" : "")).join("\n")
            }
            Key { text: qsTr("Why no GPU"); visible: About.cudaStatus.length > 0 }
            Value { objectName: "aboutNoGpuReason"; text: About.noGpuReason; visible: About.cudaStatus.length > 0 }
            Key { text: qsTr("Details"); visible: About.cudaStatus.length > 0 }
            Value {
                objectName: "aboutCudaStatus"
                text: About.cudaStatus
                visible: About.cudaStatus.length > 0
                color: Theme.muted
                textFormat: Text.PlainText
            }
            Key { text: qsTr("Loaded model runs on"); visible: Models.ready }
            Value { objectName: "aboutRunsOn"; text: Models.details.runsOn || ""; visible: Models.ready }
            Key { text: qsTr("Details"); visible: Models.ready }
            Value {
                text: Models.details.backend || ""
                visible: Models.ready
                color: Theme.muted
                textFormat: Text.PlainText
            }
        }

        Label { text: qsTr("Licences of the software Ember uses"); font.bold: true; color: Theme.text; topPadding: 6 }
        RowLayout {
            Layout.fillWidth: true
            Layout.fillHeight: true
            spacing: 12
            ListView {
                id: noticeList
                objectName: "aboutNotices"
                Layout.preferredWidth: 220
                Layout.fillHeight: true
                clip: true
                model: About.notices
                currentIndex: root.noticeIndex
                delegate: ItemDelegate {
                    id: noticeDelegate
                    width: ListView.view.width
                    highlighted: index === root.noticeIndex
                    readonly property color ink: highlighted ? Theme.accentText : Theme.text
                    contentItem: ColumnLayout {
                        spacing: 0
                        Label { text: modelData.name; color: noticeDelegate.ink; elide: Text.ElideRight; Layout.fillWidth: true }
                        Label {
                            text: modelData.license; color: noticeDelegate.highlighted ? Theme.accentText : Theme.muted
                            font.pixelSize: 11; elide: Text.ElideRight; Layout.fillWidth: true
                        }
                    }
                    onClicked: root.noticeIndex = index
                }
            }
            ColumnLayout {
                Layout.fillWidth: true
                Layout.fillHeight: true
                Label { text: root.notice.shipped || ""; color: Theme.muted; font.pixelSize: 12; wrapMode: Text.Wrap; Layout.fillWidth: true }
                ScrollView {
                    Layout.fillWidth: true
                    Layout.fillHeight: true
                    contentWidth: availableWidth  // wrap to the view, no horizontal scrolling
                    TextArea {
                        objectName: "aboutNoticeText"
                        readOnly: true
                        text: root.notice.text || ""
                        font.family: Theme.monoFont
                        font.pixelSize: 10  // the licence texts are wrapped at 72-80 columns
                        wrapMode: TextEdit.Wrap
                        color: Theme.text
                        background: Rectangle { color: Theme.codeBackground; radius: 6 }
                    }
                }
            }
        }
    }
}
