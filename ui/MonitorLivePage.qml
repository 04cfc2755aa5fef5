// The monitor's "Live" page: where the model runs (badge and reason), decode speed and
// inter-token latency over the last minutes (QtCharts), memory by component against each
// device's total, TTFT and inter-token percentiles, GPU power and temperature (or why they
// are not shown), and the process's RSS and CPU. Every number comes from the Monitor
// controller; this file only lays them out. The charts take their colours from Theme (not a
// QtCharts theme, which would also reset the series' colours when it changes).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import QtCharts
import Ember.Core

ScrollView {
    id: root
    objectName: "monitorLivePage"
    contentWidth: availableWidth
    clip: true

    property alias decodeSeries: decodeSeries
    property alias latencySeries: latencySeries
    readonly property var partColours: [Theme.accent, "#f59f00", "#4c6ef5", "#12b886"]

    function refreshCharts() {
        Monitor.fillSeries(decodeSeries, latencySeries)
        speedAxisY.max = Monitor.chartMaxTokS
        latencyAxisY.max = Monitor.chartMaxLatencyMs
    }
    Connections { target: Monitor; function onUpdated() { root.refreshCharts() } }

    ColumnLayout {
        width: root.availableWidth
        spacing: 14

        // ---- where the model runs ----------------------------------------------------
        RowLayout {
            Layout.fillWidth: true
            Layout.margins: 16
            Layout.bottomMargin: 0
            spacing: 10
            Rectangle {
                radius: height / 2
                color: Monitor.deviceBadge === "GPU" ? "#2b8a3e" : Monitor.deviceBadge === "CPU" ? "#1971c2"
                       : Monitor.deviceBadge === "No model" ? Theme.muted : "#e67700"
                implicitWidth: badgeText.implicitWidth + 24
                implicitHeight: badgeText.implicitHeight + 10
                Label {
                    id: badgeText
                    objectName: "deviceBadgeText"
                    anchors.centerIn: parent
                    text: Monitor.deviceBadge
                    color: "#ffffff"
                    font.bold: true
                }
            }
            Label {
                objectName: "deviceReasonText"
                Layout.fillWidth: true
                text: Monitor.deviceReason
                color: Theme.muted
                wrapMode: Text.Wrap
                HoverHandler { id: reasonHover }
                ToolTip.visible: reasonHover.hovered && Monitor.deviceDetail.length > 0
                ToolTip.text: Monitor.deviceDetail
            }
            ToolButton {
                id: detailButton
                objectName: "deviceDetailButton"
                visible: Monitor.deviceDetail.length > 0
                checkable: true
                text: qsTr("Details")
                font.pixelSize: 12
            }
            Label {
                objectName: "decodeNowText"
                text: Monitor.decodeTokS > 0 ? qsTr("%1 tok/s now").arg(Monitor.decodeTokS.toFixed(1)) : qsTr("idle")
                color: Theme.text
                font.pixelSize: 18
                font.bold: true
            }
        }

        Label {
            objectName: "deviceDetailText"
            visible: detailButton.checked && Monitor.deviceDetail.length > 0
            Layout.fillWidth: true
            Layout.leftMargin: 16
            Layout.rightMargin: 16
            text: Monitor.deviceDetail
            color: Theme.muted
            font.pixelSize: 11
            wrapMode: Text.WrapAtWordBoundaryOrAnywhere
            textFormat: Text.PlainText
        }

        // ---- charts ------------------------------------------------------------------
        RowLayout {
            Layout.fillWidth: true
            Layout.leftMargin: 8
            Layout.rightMargin: 8
            spacing: 0
            ChartView {
                objectName: "decodeChart"
                Layout.fillWidth: true
                Layout.preferredHeight: 230
                title: qsTr("Decode speed (tok/s), last %1 min").arg(Monitor.historySeconds / 60)
                legend.visible: false
                antialiasing: true
                titleColor: Theme.text
                backgroundColor: Theme.window
                plotAreaColor: Theme.window
                backgroundRoundness: 0
                ValueAxis {
                    id: speedAxisX; min: -Monitor.historySeconds; max: 0; titleText: qsTr("seconds ago"); labelFormat: "%d"
                    labelsColor: Theme.muted; gridLineColor: Theme.border; color: Theme.border; titleBrush: Theme.muted
                }
                ValueAxis {
                    id: speedAxisY; min: 0; max: 10; labelFormat: "%.0f"
                    labelsColor: Theme.muted; gridLineColor: Theme.border; color: Theme.border
                }
                LineSeries { id: decodeSeries; objectName: "decodeSeries"; axisX: speedAxisX; axisY: speedAxisY; color: Theme.accent; width: 2 }
            }
            ChartView {
                objectName: "latencyChart"
                Layout.fillWidth: true
                Layout.preferredHeight: 230
                title: qsTr("Inter-token latency (ms), last %1 min").arg(Monitor.historySeconds / 60)
                legend.visible: false
                antialiasing: true
                titleColor: Theme.text
                backgroundColor: Theme.window
                plotAreaColor: Theme.window
                backgroundRoundness: 0
                ValueAxis {
                    id: latencyAxisX; min: -Monitor.historySeconds; max: 0; titleText: qsTr("seconds ago"); labelFormat: "%d"
                    labelsColor: Theme.muted; gridLineColor: Theme.border; color: Theme.border; titleBrush: Theme.muted
                }
                ValueAxis {
                    id: latencyAxisY; min: 0; max: 10; labelFormat: "%.0f"
                    labelsColor: Theme.muted; gridLineColor: Theme.border; color: Theme.border
                }
                LineSeries { id: latencySeries; objectName: "latencySeries"; axisX: latencyAxisX; axisY: latencyAxisY; color: "#4c6ef5"; width: 2 }
            }
        }

        // ---- memory by component -----------------------------------------------------
        MonitorSection { title: qsTr("Memory") }
        Repeater {
            model: Monitor.memoryDevices
            delegate: MonitorMemoryBar {
                required property var modelData
                Layout.fillWidth: true
                Layout.leftMargin: 16
                Layout.rightMargin: 16
                device: modelData
                colours: root.partColours
            }
        }
        Label {
            Layout.leftMargin: 16
            visible: Monitor.memoryDevices.length === 0
            text: qsTr("No model is loaded: nothing is held.")
            color: Theme.muted
        }

        // ---- percentiles and GPU sensors (side by side, or one above the other when narrow)
        GridLayout {
            Layout.fillWidth: true
            Layout.leftMargin: 16
            Layout.rightMargin: 16
            columns: root.availableWidth >= 760 ? 2 : 1
            columnSpacing: 32
            rowSpacing: 14
            ColumnLayout {
                Layout.alignment: Qt.AlignTop
                MonitorSection { title: qsTr("Latency, last 2 minutes"); Layout.leftMargin: 0 }
                ColumnLayout {
                    objectName: "percentileTable"
                    spacing: 4
                    RowLayout {
                        spacing: 0
                        Item { Layout.preferredWidth: 200 }
                        Repeater {
                            model: [qsTr("p50"), qsTr("p95"), qsTr("p99"), qsTr("samples")]
                            Label {
                                required property string modelData
                                Layout.preferredWidth: 70
                                horizontalAlignment: Text.AlignRight
                                text: modelData
                                color: Theme.muted
                                font.bold: true
                            }
                        }
                    }
                    Repeater {
                        model: Monitor.latencyRows
                        delegate: RowLayout {
                            id: latencyRow
                            required property var modelData
                            required property int index
                            spacing: 0
                            Label { Layout.preferredWidth: 200; text: latencyRow.modelData.name; color: Theme.text }
                            Repeater {
                                model: [latencyRow.modelData.p50Text, latencyRow.modelData.p95Text,
                                        latencyRow.modelData.p99Text, String(latencyRow.modelData.count)]
                                Label {
                                    required property string modelData
                                    required property int index
                                    objectName: "percentile_" + latencyRow.index + "_" + index
                                    Layout.preferredWidth: 70
                                    horizontalAlignment: Text.AlignRight
                                    text: modelData
                                    color: Theme.text
                                    font.family: Theme.monoFont
                                }
                            }
                        }
                    }
                }
            }
            ColumnLayout {
                Layout.alignment: Qt.AlignTop
                Layout.fillWidth: true
                MonitorSection {
                    title: Monitor.gpuName.length > 0 ? qsTr("GPU sensors — %1").arg(Monitor.gpuName) : qsTr("GPU sensors")
                    Layout.leftMargin: 0
                }
                Label {
                    objectName: "gpuSensorsReason"
                    visible: !Monitor.gpuSensorsAvailable
                    Layout.fillWidth: true
                    text: qsTr("Not shown: %1").arg(Monitor.gpuSensorsReason)
                    color: Theme.muted
                    wrapMode: Text.Wrap
                    HoverHandler { id: sensorsHover }
                    ToolTip.visible: sensorsHover.hovered && Monitor.gpuSensorsDetail.length > 0
                    ToolTip.text: Monitor.gpuSensorsDetail
                }
                Label {
                    objectName: "gpuSensorsDetail"
                    visible: detailButton.checked && !Monitor.gpuSensorsAvailable && Monitor.gpuSensorsDetail.length > 0
                    Layout.fillWidth: true
                    text: Monitor.gpuSensorsDetail
                    color: Theme.muted
                    font.pixelSize: 11
                    wrapMode: Text.WrapAtWordBoundaryOrAnywhere
                    textFormat: Text.PlainText
                }
                ColumnLayout {
                    objectName: "gpuSensorGrid"
                    visible: Monitor.gpuSensorsAvailable
                    spacing: 4
                    Repeater {
                        model: Monitor.gpuSensors
                        delegate: RowLayout {
                            id: sensorRow
                            required property var modelData
                            required property int index
                            Label { Layout.preferredWidth: 110; text: sensorRow.modelData.name; color: Theme.muted }
                            Label {
                                objectName: "gpuSensor_" + sensorRow.index
                                Layout.fillWidth: true
                                text: sensorRow.modelData.text
                                color: sensorRow.modelData.ok ? Theme.text : Theme.muted
                                wrapMode: Text.Wrap
                            }
                        }
                    }
                }
            }
        }

        // ---- the process and totals --------------------------------------------------
        MonitorSection { title: qsTr("Process") }
        Label {
            objectName: "processText"
            Layout.leftMargin: 16
            text: Monitor.processText
            color: Theme.text
        }
        Label {
            objectName: "totalsText"
            Layout.leftMargin: 16
            Layout.bottomMargin: Monitor.speculationText ? 0 : 16
            text: Monitor.totalsText
            color: Theme.muted
        }
        Label {  // prompt lookup or a draft model: how much of the guessing paid
            objectName: "speculationText"
            visible: Monitor.speculationText !== ""
            Layout.leftMargin: 16
            Layout.bottomMargin: 16
            text: Monitor.speculationText
            color: Theme.muted
        }
    }
}
