// The monitor's own window, opened from the main window: a tab bar over pages (the "Live"
// page now; a new page is one TabButton and one item in the StackLayout). It remembers
// through Settings whether it was open (and opens itself at start if it was), where it was and which tab was shown, and it makes
// the Monitor controller poll only while it is on screen. A Window does not take the main
// window's palette, so it sets its own from Theme: the tab bar and the inputs follow the theme.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import QtQuick.Window
import Ember.Core

Window {
    id: root
    objectName: "monitorWindow"
    title: qsTr("Ember — Monitor")
    width: 960
    height: 720
    minimumWidth: 640
    minimumHeight: 480
    color: Theme.window

    property alias livePage: livePage
    property alias tabs: tabs
    property bool restored: false  // until then, changes are the restore itself, not the user's

    // As Main.qml's: what Fusion draws the tab bar, buttons and inputs with.
    palette {
        window: Theme.window
        windowText: Theme.text
        base: Theme.base
        alternateBase: Theme.sidebar
        text: Theme.text
        button: Theme.dark ? "#33343a" : "#f0f0f3"
        buttonText: Theme.text
        brightText: Theme.text
        highlight: Theme.accent
        highlightedText: Theme.accentText
        placeholderText: Theme.muted
        mid: Theme.border
        dark: Theme.dark ? "#111214" : "#a0a0a6"
        light: Theme.dark ? "#3a3b40" : "#ffffff"
        midlight: Theme.dark ? "#303136" : "#e9e9ee"
        shadow: "#000000"
        toolTipBase: Theme.base
        toolTipText: Theme.text
    }

    // Shows the window and remembers that it is open (restored at the next start).
    function open() {
        Settings.monitorOpen = true
        show()
        raise()
        requestActivate()
    }

    Binding {
        target: Monitor
        property: "active"
        value: root.visible && root.visibility !== Window.Minimized
    }

    onClosing: Settings.monitorOpen = false
    Component.onDestruction: Monitor.active = false  // the app is quitting: no window, no polls

    // Geometry is saved once it settles, not on every pixel of a drag.
    Timer { id: saveGeometry; interval: 400; onTriggered: Settings.monitorGeometry = Qt.rect(root.x, root.y, root.width, root.height) }
    onXChanged: if (visible) saveGeometry.restart()
    onYChanged: if (visible) saveGeometry.restart()
    onWidthChanged: if (visible) saveGeometry.restart()
    onHeightChanged: if (visible) saveGeometry.restart()

    Timer { id: reopen; interval: 0; onTriggered: root.open() }
    Component.onCompleted: {
        var g = Settings.monitorGeometry
        if (g.width > 0 && g.height > 0) {
            x = g.x; y = g.y; width = g.width; height = g.height
        }
        tabs.currentIndex = Math.min(Settings.monitorTab, tabs.count - 1)
        restored = true
        // Later, from the event loop: a Window applies its own `visible` when it completes,
        // and the main window its own after that.
        if (Settings.monitorOpen) reopen.start()
    }

    ColumnLayout {
        anchors.fill: parent
        spacing: 0
        TabBar {
            id: tabs
            objectName: "monitorTabs"
            Layout.fillWidth: true
            onCurrentIndexChanged: if (root.restored) Settings.monitorTab = currentIndex
            background: Rectangle {
                color: Theme.sidebar
                Rectangle { anchors.bottom: parent.bottom; width: parent.width; height: 1; color: Theme.border }
            }
            PageTab { text: qsTr("Live") }
            PageTab { text: qsTr("Cost") }
        }
        StackLayout {
            Layout.fillWidth: true
            Layout.fillHeight: true
            currentIndex: tabs.currentIndex
            MonitorLivePage { id: livePage }
            CostView {
                objectName: "costView"
                controller: Cost
                textColor: Theme.text
                mutedColor: Theme.muted
                borderColor: Theme.border
                accentColor: Theme.accent
                warningColor: Theme.warning
                errorColor: Theme.error
                baseColor: Theme.window
                apiSeriesColor: Theme.dark ? "#74a0ff" : "#1971c2"
            }
        }
    }
}
