// Quantize one library model: the types that make a useful file from it (Library.quantizeOffer:
// never the same or a larger type, nothing but smaller files from an already quantized one),
// each with its expected size and quality in plain words, the recommended one chosen.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

ThemedDialog {
    id: root
    objectName: "quantizeDialog"
    readonly property var offer: Library.quantizeOffer
    readonly property var targets: offer.targets || []
    property string chosen: ""
    title: qsTr("Make a smaller copy of %1").arg(offer.name || "")
    width: Math.min(560, (Overlay.overlay ? Overlay.overlay.width : 600) - 32)
    height: Math.min(implicitHeight, (Overlay.overlay ? Overlay.overlay.height : 600) - 32)
    padding: 16

    function openFor(id) {
        chosen = ""
        Library.offerQuantize(id)
        open()
    }
    onOfferChanged: {
        if (!offer.ready) return
        chosen = offer.recommended || ""
        Qt.callLater(showChosen)
    }
    onOpened: showChosen()
    // The recommended type may be below the fold: scroll it into view (again once the list
    // has its final height).
    function showChosen() {
        for (let i = 0; i < targets.length; ++i)
            if (targets[i].type === chosen) list.positionViewAtIndex(i, ListView.Contain)
    }

    contentItem: ColumnLayout {
        spacing: 10
        Label {
            objectName: "quantizeNote"
            Layout.fillWidth: true
            text: root.offer.ready ? (root.offer.note || "") : qsTr("Reading the model…")
            color: root.offer.requantize || root.targets.length === 0 ? Theme.warning : Theme.muted
            wrapMode: Text.Wrap
        }
        ListView {
            id: list
            objectName: "quantizeTargets"
            Layout.fillWidth: true
            Layout.fillHeight: true
            Layout.preferredHeight: contentHeight
            Layout.minimumHeight: Math.min(contentHeight, 120)
            clip: true
            spacing: 4
            model: root.targets
            onHeightChanged: root.showChosen()
            ScrollBar.vertical: ScrollBar { }
            delegate: ItemDelegate {
                id: target
                objectName: "target_" + modelData.type
                width: list.width
                readonly property bool isChosen: root.chosen === modelData.type
                onClicked: root.chosen = modelData.type
                background: Rectangle {
                    radius: 8
                    color: target.isChosen ? Qt.rgba(Theme.accent.r, Theme.accent.g, Theme.accent.b, 0.10)
                         : target.hovered ? Theme.selected : "transparent"
                    border.color: target.isChosen ? Theme.accent : Theme.border
                }
                contentItem: RowLayout {
                    spacing: 10
                    RadioButton {
                        // A list delegate in a popup does not inherit the dialog's palette (Qt 6.4).
                        palette.base: root.palette.base
                        palette.text: root.palette.text
                        palette.window: root.palette.window
                        palette.button: root.palette.button
                        palette.mid: root.palette.mid
                        checked: target.isChosen
                        onClicked: root.chosen = modelData.type
                        focusPolicy: Qt.NoFocus
                    }
                    ColumnLayout {
                        Layout.fillWidth: true
                        spacing: 2
                        Flow {
                            Layout.fillWidth: true
                            spacing: 8
                            Label { text: modelData.type; font.bold: true; color: Theme.text }
                            Label { objectName: "targetSize"; text: qsTr("about %1").arg(modelData.sizeText); color: Theme.text }
                            Label { text: modelData.saving; color: Theme.muted }
                            Label {
                                visible: modelData.type === root.offer.recommended
                                text: qsTr("Recommended")
                                color: Theme.accent
                                font.bold: true
                            }
                        }
                        Label {
                            objectName: "targetQuality"
                            Layout.fillWidth: true
                            text: modelData.quality
                            color: Theme.muted
                            wrapMode: Text.Wrap
                        }
                    }
                }
            }
        }
    }

    footer: DialogButtonBox {
        background: Item { }
        Button {
            objectName: "quantizeCancel"
            palette.button: root.palette.button
            palette.buttonText: root.palette.buttonText
            text: qsTr("Cancel")
            DialogButtonBox.buttonRole: DialogButtonBox.RejectRole
        }
        PrimaryButton {
            objectName: "quantizeStart"
            text: root.chosen.length > 0 ? qsTr("Make %1").arg(root.chosen) : qsTr("Quantize")
            enabled: root.chosen.length > 0 && !Library.quantizing
            DialogButtonBox.buttonRole: DialogButtonBox.AcceptRole
        }
    }
    onAccepted: Library.quantize(offer.id, chosen)
}
