// An answer that failed, in its place in the transcript: what went wrong in plain words, and
// what can be done. Retry (the last answer only); for a message too long for the context, a
// longer context when the model and this machine allow one (the model reloads with it, then
// answers), else what does help (shorter text, through the message's Edit).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

Rectangle {
    id: root
    property string error
    property int neededContext: 0
    property bool isLast: false
    // The context to offer (0: none would hold the message here).
    readonly property int longer: neededContext > 0 ? Chat.longerContextFor(neededContext) : 0
    function count(n) { return n.toLocaleString(Qt.locale(), "f", 0) }

    radius: Theme.radius
    color: Theme.errorBackground
    border.color: Theme.error
    implicitHeight: layout.implicitHeight + 20

    ColumnLayout {
        id: layout
        x: 14; y: 10
        width: root.width - 28
        spacing: 6
        Label {
            objectName: "failedTitle"
            text: root.neededContext > 0 ? qsTr("Not answered: the message is too long for the context")
                                         : qsTr("Not answered")
            font.bold: true
            color: Theme.error
            Layout.fillWidth: true
            wrapMode: Text.Wrap
        }
        Label {
            objectName: "failedText"
            Layout.fillWidth: true
            wrapMode: Text.Wrap
            color: Theme.text
            font.pixelSize: 13
            text: root.neededContext > 0
                  ? (root.longer > 0
                     ? qsTr("It needs %1 tokens of context with room for the answer; the model is loaded with %2. "
                            + "It can be reloaded with %3 tokens, which fits this machine.")
                       .arg(root.count(root.neededContext)).arg(root.count(Chat.contextLimit)).arg(root.count(root.longer))
                     : qsTr("It needs %1 tokens of context with room for the answer; the model reads at most %2 "
                            + "here. Shorten the message (Edit) or split it over several messages.")
                       .arg(root.count(root.neededContext)).arg(root.count(Math.max(Chat.contextLimit, Models.details.contextFitsUpTo || 0))))
                  : root.error
        }
        Label {
            Layout.fillWidth: true
            wrapMode: Text.Wrap
            color: Theme.muted
            font.pixelSize: 11
            visible: root.isLast
            text: qsTr("Until it is answered, this message is left out of what the model reads in later turns.")
        }
        RowLayout {
            visible: root.isLast && !Chat.generating && Models.ready
            spacing: 8
            PrimaryButton {
                objectName: "longerContextButton"
                visible: root.longer > 0
                text: qsTr("Use %1 tokens and retry").arg(root.count(root.longer))
                onClicked: Chat.retryWithContext(root.longer)
            }
            Button {
                objectName: "retryButton"
                text: qsTr("Retry")
                onClicked: Chat.regenerate()
            }
        }
    }
}
