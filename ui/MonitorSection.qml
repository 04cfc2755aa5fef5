// A section heading of the monitor's pages.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

Label {
    property string title
    Layout.leftMargin: 16
    Layout.topMargin: 6
    text: title
    font.bold: true
    font.pixelSize: 15
    color: Theme.text
}
