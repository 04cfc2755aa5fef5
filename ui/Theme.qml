// Colours and sizes for every view. "system" follows the desktop palette (dark when the
// system window colour is dark; Qt 6.4 has no colour-scheme hint), or the user forces
// light or dark in Settings.
pragma Singleton
import QtQuick
import Ember.Core

QtObject {
    readonly property SystemPalette system: SystemPalette { colorGroup: SystemPalette.Active }
    readonly property bool dark: Settings.theme === "dark"
                                 || (Settings.theme === "system" && system.window.hslLightness < 0.5)

    readonly property color window: dark ? "#1f2023" : "#ffffff"
    readonly property color sidebar: dark ? "#17181a" : "#f4f4f6"
    readonly property color base: dark ? "#2a2b2f" : "#ffffff"
    readonly property color text: dark ? "#e8e8ea" : "#1d1d1f"
    readonly property color muted: dark ? "#9a9ba1" : "#6b6c72"
    readonly property color border: dark ? "#35363b" : "#dedee3"
    readonly property color accent: dark ? "#ff8a3d" : "#d9480f"     // ember orange
    readonly property color accentText: "#ffffff"
    readonly property color userBubble: dark ? "#3a2a20" : "#fff0e6"
    readonly property color assistantBubble: dark ? "#26272b" : "#f6f6f8"
    readonly property color codeBackground: dark ? "#141517" : "#f0f0f3"
    readonly property color selected: dark ? "#2e2f34" : "#e6e6eb"
    readonly property color error: dark ? "#ff6b6b" : "#c92a2a"
    readonly property color errorBackground: dark ? "#3b1f22" : "#fff0f0"
    readonly property color warning: dark ? "#ffd43b" : "#8a5a00"
    readonly property color warningBackground: dark ? "#3a3320" : "#fff8e1"

    readonly property int radius: 10
    readonly property int spacing: 8
    readonly property string monoFont: "DejaVu Sans Mono"
}
