// A reasoning model's thinking, above its answer. One line while collapsed: "Thinking… 12 s"
// (the seconds counting) while it thinks, "Thought for 12 s" after; a click opens it to read
// the thoughts, live while they come. It closes again when the answer is done, and is there
// after a restart (the thinking is stored apart from the answer, schema v6).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

ColumnLayout {
    id: root
    required property string reasoning
    required property bool thinking      // still thinking: streaming, no answer text yet
    required property bool streaming
    required property real thinkingMs    // stored: how long it thought (0: unknown)
    required property var thinkingSince  // streaming: when it began (ms since the epoch)
    property bool expanded: false
    property real now: Date.now()
    spacing: 4

    onStreamingChanged: if (!streaming) expanded = false
    Timer {
        running: root.thinking && root.visible
        interval: 1000
        repeat: true
        triggeredOnStart: true
        onTriggered: root.now = Date.now()
    }
    function seconds() {
        const ms = root.thinking || (root.streaming && root.thinkingMs <= 0)
                   ? (root.thinkingSince > 0 ? root.now - root.thinkingSince : 0) : root.thinkingMs
        return Math.max(0, Math.round(ms / 1000))
    }

    AbstractButton {
        id: header
        objectName: "thinkingHeader"
        Layout.fillWidth: true
        implicitHeight: headerRow.implicitHeight + 8
        onClicked: root.expanded = !root.expanded
        Accessible.name: headerText.text
        contentItem: RowLayout {
            id: headerRow
            spacing: 6
            Label {
                text: root.expanded ? "▾" : "▸"
                color: Theme.muted
                font.pixelSize: 12
            }
            Label {
                id: headerText
                objectName: "thinkingLabel"
                Layout.fillWidth: true
                elide: Text.ElideRight
                color: Theme.muted
                font.pixelSize: 13
                font.italic: root.thinking
                text: root.thinking ? qsTr("Thinking… %1 s").arg(root.seconds())
                      : root.seconds() > 0 ? qsTr("Thought for %1 s").arg(root.seconds())
                      : qsTr("Thoughts")
            }
        }
        background: Rectangle {
            radius: Theme.radius / 2
            color: header.hovered ? Theme.selected : "transparent"
        }
    }

    Rectangle {
        objectName: "thinkingBody"
        visible: root.expanded
        Layout.fillWidth: true
        implicitHeight: thoughts.implicitHeight + 12
        Layout.bottomMargin: 6
        color: "transparent"
        Rectangle { width: 2; height: parent.height; color: Theme.border }
        Label {
            id: thoughts
            objectName: "thinkingText"
            x: 12; y: 6
            width: parent.width - 16
            text: root.reasoning
            wrapMode: Text.Wrap
            textFormat: Text.PlainText
            color: Theme.muted
            font.pixelSize: 13
        }
    }
}
