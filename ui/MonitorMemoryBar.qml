// One device's memory in the monitor: a bar of what Ember holds there, split by component
// (weights, mapped weights, KV cache, scratch) and drawn against the device's total, with a
// legend of the exact sizes. `device` is one entry of Monitor.memoryDevices.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

ColumnLayout {
    id: root
    property var device
    property var colours: []
    spacing: 4

    Label {
        objectName: "memoryDeviceTitle"
        text: qsTr("%1 · %2 · %3").arg(root.device.device).arg(root.device.layersText).arg(root.device.summary)
        color: Theme.text
    }
    Rectangle {
        id: bar
        objectName: "memoryBar"
        Layout.fillWidth: true
        implicitHeight: 22
        radius: 4
        color: Theme.selected  // the rest of the device: free, or used by others
        border.color: Theme.border
        clip: true
        Row {
            anchors.fill: parent
            anchors.margins: 1
            Repeater {
                model: root.device.parts
                Rectangle {
                    required property var modelData
                    required property int index
                    width: Math.max(0, (bar.width - 2) * modelData.fraction)
                    height: parent.height
                    color: root.colours[index % root.colours.length]
                }
            }
        }
    }
    Flow {
        Layout.fillWidth: true
        spacing: 16
        Repeater {
            model: root.device.parts
            Row {
                required property var modelData
                required property int index
                spacing: 6
                Rectangle { width: 10; height: 10; y: 3; radius: 2; color: root.colours[index % root.colours.length] }
                Label {
                    objectName: "memoryPart"
                    text: modelData.name + " " + modelData.text
                    color: Theme.muted
                }
            }
        }
    }
}
