// The main window: sidebar | chat (or settings). Window-wide shortcuts and the snackbar
// for undo and short notices live here.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Ember.Core

ApplicationWindow {
    id: window
    objectName: "mainWindow"
    width: 1180
    height: 760
    minimumWidth: 720
    minimumHeight: 480
    visible: true
    title: (Chat.currentTitle ? Chat.currentTitle + " — " : "") + "Ember"
    color: Theme.window

    property bool settingsOpen: false
    property bool modelsOpen: false  // the model manager page (ModelsPage.qml)
    property alias modelsPage: modelsPage
    property alias sidebar: sidebar
    property alias chatPage: chatPage
    property alias snackbar: snackbar
    property alias monitorWindow: monitorWindow

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

    function newChat() {
        settingsOpen = false
        modelsOpen = false
        Chat.newConversation()
        chatPage.focusInput()
    }

    RowLayout {
        anchors.fill: parent
        spacing: 0
        Sidebar {
            id: sidebar
            Layout.preferredWidth: window.width < 960 ? 210 : 270  // the chat keeps room at 720 px
            Layout.fillHeight: true
            onOpenSettings: window.settingsOpen = true
            onNewChat: window.newChat()
            onOpenAbout: aboutDialog.open()
            onOpenModels: { window.settingsOpen = false; window.modelsOpen = true }
            onOpenMonitor: monitorWindow.open()
        }
        Rectangle { Layout.fillHeight: true; width: 1; color: Theme.border }
        StackLayout {
            id: pages
            Layout.fillWidth: true
            Layout.fillHeight: true
            currentIndex: window.settingsOpen ? 1 : window.modelsOpen ? 2 : 0
            ChatPage { id: chatPage }
            SettingsPage { id: settingsPage; objectName: "settingsPage"; onClosed: window.settingsOpen = false }
            ModelsPage { id: modelsPage; onClosed: window.modelsOpen = false }
        }
    }

    Snackbar {
        id: snackbar
        lift: (window.settingsOpen || window.modelsOpen ? 0 : chatPage.composerHeight) + 24
        areaX: pages.x
        areaWidth: pages.width
        onAction: Chat.undoDelete()
    }
    AboutDialog { id: aboutDialog }

    // The live monitor, in its own window; whether it was open is restored at start.
    MonitorWindow { id: monitorWindow }
    onClosing: monitorWindow.hide()  // leaves Settings.monitorOpen as it was, for the next start

    Connections {
        target: Chat
        function onConversationDeleted(id, title) {
            snackbar.show(qsTr("Deleted “%1”").arg(title), qsTr("Undo"), 8000)
        }
        function onErrorOccurred(message) { snackbar.show(message) }
        function onNotice(message) { snackbar.show(message, "", 8000) }
        function onCurrentChanged() { window.settingsOpen = false; window.modelsOpen = false }
    }
    Connections {
        target: Models
        function onLoadFailed(error) { snackbar.show(error, "", 8000, "load") }
    }

    Connections {
        target: Hub
        function onErrorOccurred(message) { snackbar.show(message, "", 8000) }
    }
    Connections {
        target: Library
        function onErrorOccurred(message) { snackbar.show(message, "", 8000) }
        function onImported(name) { snackbar.show(qsTr("Added %1 to the library").arg(name), "", 5000) }
        function onQuantized(name) { snackbar.show(qsTr("Quantized: %1 is in the library").arg(name), "", 5000) }
    }
    Connections {
        target: Models
        function onLoaded(name) {
            window.modelsOpen = false  // loaded from the library: chat with it
            snackbar.settle("load")    // an earlier load's error is stale now
        }
    }

    Shortcut { sequence: "Ctrl+N"; context: Qt.ApplicationShortcut; onActivated: window.newChat() }
    Shortcut {
        sequence: "Ctrl+F"
        context: Qt.ApplicationShortcut
        onActivated: { window.settingsOpen = false; sidebar.focusSearch() }
    }
    Shortcut {
        sequence: "Ctrl+L"
        context: Qt.ApplicationShortcut
        onActivated: { window.settingsOpen = false; chatPage.focusInput() }
    }
    Shortcut { sequence: "Esc"; context: Qt.ApplicationShortcut; enabled: Chat.generating; onActivated: Chat.stop() }
    Shortcut { sequence: "Ctrl+,"; context: Qt.ApplicationShortcut; onActivated: window.settingsOpen = true }
    Shortcut { sequence: "F1"; context: Qt.ApplicationShortcut; onActivated: aboutDialog.open() }
    Shortcut { sequence: "Ctrl+M"; context: Qt.ApplicationShortcut; onActivated: monitorWindow.open() }

    Component.onCompleted: chatPage.focusInput()
}
