// A labelled slider showing its value; emits moved(value) only on user changes, so a
// binding from the stored setting never writes back.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

ColumnLayout {
    id: root
    property string label
    property real from: 0
    property real to: 1
    property real step: 0.01
    property real value: 0
    signal moved(real value)
    spacing: 0
    Layout.fillWidth: true

    RowLayout {
        Label { text: root.label; Layout.fillWidth: true; color: Theme.text }
        Label { text: slider.value.toFixed(2); color: Theme.muted }
    }
    Slider {
        id: slider
        Layout.fillWidth: true
        from: root.from; to: root.to; stepSize: root.step
        value: root.value
        onMoved: root.moved(value)
    }
}
