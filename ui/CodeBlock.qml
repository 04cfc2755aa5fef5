// A fenced code block: monospace, selectable, with its language and a copy button.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Rectangle {
    id: root
    property string code
    property string lang
    color: Theme.codeBackground
    radius: 6
    border.color: Theme.border
    implicitHeight: column.implicitHeight + 12

    ColumnLayout {
        id: column
        anchors { left: parent.left; right: parent.right; top: parent.top; margins: 6 }
        spacing: 2
        RowLayout {
            Layout.fillWidth: true
            Label { text: root.lang || "code"; color: Theme.muted; font.pixelSize: 11 }
            Item { Layout.fillWidth: true }
            ToolButton {
                objectName: "copyCodeButton"
                text: copied.running ? qsTr("Copied") : qsTr("Copy")
                font.pixelSize: 11
                implicitHeight: 22
                onClicked: { Clipboard.setText(root.code); copied.restart() }
                Timer { id: copied; interval: 1500 }
            }
        }
        TextEdit {
            Layout.fillWidth: true
            text: root.code
            textFormat: TextEdit.PlainText
            font.family: Theme.monoFont
            font.pixelSize: 13
            color: Theme.text
            readOnly: true
            selectByMouse: true
            wrapMode: TextEdit.WrapAnywhere
        }
    }
}
