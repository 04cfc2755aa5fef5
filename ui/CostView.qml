// The cost view (issue #13): what a million input and output tokens cost on this machine
// (measured energy x electricity price, plus amortized hardware), next to editable API list
// prices, token totals per conversation and per day, and cumulative tokens and cost over time.
// Self-contained: it needs only its `controller` (a CostController) and no app singleton, so the
// monitor window can hold it as a tab and tests can show it alone. Colours are properties for
// the host to bind to its theme (the chart's too: its background, axes, grid and legend follow
// them); its inputs take the host window's palette. Narrower than about 900 px, the side-by-side
// frames stack, so nothing is cut off at the monitor window's minimum width. ChartView needs a
// QApplication.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import QtCharts

Item {
    id: root
    property var controller
    property color textColor: "#1d1d1f"
    property color mutedColor: "#6b6c72"
    property color borderColor: "#dedee3"
    property color accentColor: "#d9480f"
    property color warningColor: "#8a5a00"
    property color baseColor: "#ffffff"
    property color errorColor: "#c92a2a"
    property color apiSeriesColor: "#1971c2"
    // Two frames side by side from this width of the content on; one above the other below it.
    readonly property bool wide: column.width >= 860
    // The plot's series (a chart's series are not reachable by objectName), for tests and hosts.
    readonly property alias tokenSeries: tokenSeries
    readonly property alias localCostSeries: localSeries
    readonly property alias apiCostSeries: apiSeries

    implicitWidth: 980
    implicitHeight: 1200

    // A price in the user's currency with sensible digits; "—" for "not measured yet" (< 0).
    function money(v) {
        if (v === undefined || v < 0)
            return "—"
        const digits = v >= 100 ? 0 : v >= 1 ? 2 : 3
        return (v >= 1 ? v.toFixed(digits) : v.toPrecision(digits)) + " " + controller.settings.currency
    }
    function joules(v) { return v < 0 ? "—" : v.toPrecision(3) + " J" }
    function count(n) { return Number(n).toLocaleString(Qt.locale("en_US"), "f", 0) }

    Rectangle { anchors.fill: parent; color: root.baseColor }

    Flickable {
        objectName: "costFlickable"
        anchors.fill: parent
        contentHeight: column.implicitHeight + 32
        clip: true
        ScrollBar.vertical: ScrollBar {}

        ColumnLayout {
            id: column
            x: 16; y: 16
            width: root.width - 32
            spacing: 14

            Label {
                text: "Cost per 1M tokens"
                font.pixelSize: 20; font.bold: true; color: root.textColor
            }

            // ---- local cost next to (or above) the API prices -------------------------------
            GridLayout {
                Layout.fillWidth: true
                columns: root.wide ? 2 : 1
                columnSpacing: 16
                rowSpacing: 14

                Frame {
                    Layout.preferredWidth: root.wide ? 400 : -1
                    Layout.fillWidth: !root.wide
                    Layout.alignment: Qt.AlignTop
                    ColumnLayout {
                        anchors.fill: parent
                        spacing: 6
                        RowLayout {
                            Layout.fillWidth: true
                            Label { text: "This machine"; font.bold: true; color: root.textColor }
                            Label {
                                objectName: "estimateBadge"
                                visible: controller.estimated
                                text: "estimate"
                                color: root.warningColor
                                font.italic: true
                            }
                            Item { Layout.fillWidth: true }
                            ToolButton {
                                id: energyDetails
                                objectName: "energyDetailsButton"
                                visible: controller.energySourceDetail !== ""
                                checkable: true
                                text: qsTr("Details")
                                font.pixelSize: 11
                            }
                        }
                        GridLayout {
                            columns: 3
                            columnSpacing: 14
                            Label { text: ""; }
                            Label { text: "input"; color: root.mutedColor }
                            Label { text: "output"; color: root.mutedColor }
                            Label { text: "per 1M tokens"; color: root.mutedColor }
                            Label {
                                objectName: "localInput"
                                text: root.money(controller.localInputPer1M)
                                font.bold: true; color: root.accentColor
                            }
                            Label {
                                objectName: "localOutput"
                                text: root.money(controller.localOutputPer1M)
                                font.bold: true; color: root.accentColor
                            }
                            Label { text: "of which hardware"; color: root.mutedColor }
                            Label { text: root.money(controller.hardwareInputPer1M); color: root.textColor }
                            Label { text: root.money(controller.hardwareOutputPer1M); color: root.textColor }
                            Label { text: "energy per token"; color: root.mutedColor }
                            Label {
                                objectName: "inputJoules"
                                text: root.joules(controller.inputJoulesPerToken); color: root.textColor
                            }
                            Label {
                                objectName: "outputJoules"
                                text: root.joules(controller.outputJoulesPerToken); color: root.textColor
                            }
                        }
                        Label {
                            objectName: "measuredOver"
                            Layout.fillWidth: true
                            wrapMode: Text.Wrap
                            color: root.mutedColor
                            text: controller.measuredAnswers === 1 ? qsTr("From the 1 answer of this session.")
                                  : controller.measuredAnswers > 1
                                  ? qsTr("From the %1 answers of this session.").arg(controller.measuredAnswers)
                                  : qsTr("Not measured yet: generate an answer.")
                        }
                        Label {
                            objectName: "energySource"
                            Layout.fillWidth: true
                            wrapMode: Text.Wrap
                            font.pixelSize: 11
                            color: controller.estimated ? root.warningColor : root.mutedColor
                            text: controller.energySource
                        }
                        Label {
                            objectName: "energySourceDetail"
                            visible: energyDetails.checked && controller.energySourceDetail !== ""
                            Layout.fillWidth: true
                            wrapMode: Text.WrapAtWordBoundaryOrAnywhere
                            textFormat: Text.PlainText
                            font.pixelSize: 11
                            color: root.mutedColor
                            text: controller.energySourceDetail
                        }
                    }
                }

                Frame {
                    Layout.fillWidth: true
                    Layout.alignment: Qt.AlignTop
                    ColumnLayout {
                        anchors.fill: parent
                        spacing: 4
                        RowLayout {
                            Layout.fillWidth: true
                            Label {
                                Layout.fillWidth: true
                                text: "API list prices (editable)"
                                font.bold: true
                                color: root.textColor
                                elide: Text.ElideRight
                            }
                            Button {
                                objectName: "resetApiPrices"
                                text: "Reset"
                                onClicked: controller.resetApiPrices()
                            }
                        }
                        Repeater {
                            model: controller.apiPrices
                            delegate: RowLayout {
                                required property var modelData
                                required property int index
                                Layout.fillWidth: true
                                spacing: 6
                                RadioButton {
                                    checked: controller.selectedApi === index
                                    onClicked: controller.selectedApi = index
                                    ToolTip.visible: hovered
                                    ToolTip.text: "Plot this API's cost"
                                }
                                Label {
                                    objectName: "apiName" + index
                                    text: modelData.vendor + " " + modelData.model
                                    color: root.textColor
                                    Layout.fillWidth: true
                                    Layout.minimumWidth: 80
                                    Layout.preferredWidth: 170
                                    elide: Text.ElideRight
                                }
                                TextField {
                                    objectName: "apiInput" + index
                                    text: modelData.input_per_1m.toFixed(2)
                                    Layout.preferredWidth: 64
                                    validator: DoubleValidator { bottom: 0 }
                                    onEditingFinished: controller.setApiPrice(index, Number(text), modelData.output_per_1m)
                                }
                                TextField {
                                    objectName: "apiOutput" + index
                                    text: modelData.output_per_1m.toFixed(2)
                                    Layout.preferredWidth: 64
                                    validator: DoubleValidator { bottom: 0 }
                                    onEditingFinished: controller.setApiPrice(index, modelData.input_per_1m, Number(text))
                                }
                                Label {
                                    text: modelData.as_of
                                    color: root.mutedColor
                                    font.pixelSize: 11
                                    Layout.preferredWidth: 80  // the same for every row: the fields line up
                                    elide: Text.ElideRight
                                    ToolTip.visible: sourceArea.containsMouse
                                    ToolTip.text: modelData.source
                                    MouseArea { id: sourceArea; anchors.fill: parent; hoverEnabled: true }
                                }
                            }
                        }
                        Label {
                            objectName: "apiPricesFootnote"
                            Layout.fillWidth: true
                            wrapMode: Text.Wrap
                            text: "in " + controller.settings.currency + " per 1M input / output tokens; defaults looked up "
                                  + controller.apiPricesRetrieved + " (hover a date for its source)"
                            color: root.mutedColor
                            font.pixelSize: 11
                        }
                        Label {
                            visible: controller.error !== ""
                            text: controller.error
                            color: root.errorColor
                            wrapMode: Text.Wrap
                            Layout.fillWidth: true
                        }
                    }
                }
            }

            // ---- remote endpoints: their tokens at their prices (issue #41) --------------------
            Frame {
                objectName: "remoteSpendFrame"
                visible: controller.remoteSpend.length > 0
                Layout.fillWidth: true
                ColumnLayout {
                    anchors.fill: parent
                    spacing: 4
                    Label {
                        Layout.fillWidth: true
                        text: "Remote endpoints this session: " + root.money(controller.remoteCost)
                        font.bold: true
                        color: root.textColor
                        elide: Text.ElideRight
                    }
                    Repeater {
                        model: controller.remoteSpend
                        delegate: Label {
                            required property var modelData
                            required property int index
                            objectName: "remoteSpend" + index
                            Layout.fillWidth: true
                            wrapMode: Text.Wrap
                            color: root.textColor
                            text: modelData.endpoint + ": " + root.count(modelData.input) + " input + "
                                  + root.count(modelData.output) + " output tokens in " + modelData.answers
                                  + " answers at " + modelData.inputPer1M + " / " + modelData.outputPer1M
                                  + " per 1M = " + root.money(modelData.cost)
                        }
                    }
                    Label {
                        Layout.fillWidth: true
                        wrapMode: Text.Wrap
                        color: root.mutedColor
                        font.pixelSize: 11
                        text: "Tokens as each server's usage counted them, at the prices set for its endpoint (Settings › Remote endpoints). They drew no energy on this machine, so the local cost above leaves them out."
                    }
                }
            }

            // ---- settings ---------------------------------------------------------------------
            Frame {
                Layout.fillWidth: true
                GridLayout {
                    columns: column.width >= 700 ? 6 : 4
                    columnSpacing: 10
                    rowSpacing: 4
                    Label { text: "Electricity per kWh"; color: root.textColor }
                    TextField {
                        objectName: "electricityPrice"
                        text: controller.settings.electricityPrice
                        validator: DoubleValidator { bottom: 0 }
                        onEditingFinished: controller.settings.electricityPrice = Number(text)
                        Layout.preferredWidth: 70
                    }
                    Label { text: "Currency"; color: root.textColor }
                    TextField {
                        text: controller.settings.currency
                        onEditingFinished: controller.settings.currency = text
                        Layout.preferredWidth: 60
                    }
                    Label { text: "CPU watts (no meter)"; color: root.textColor }
                    TextField {
                        objectName: "cpuWatts"
                        text: controller.settings.cpuWatts
                        validator: DoubleValidator { bottom: 0 }
                        onEditingFinished: controller.settings.cpuWatts = Number(text)
                        Layout.preferredWidth: 60
                    }
                    Label { text: "Hardware price"; color: root.textColor }
                    TextField {
                        objectName: "hardwarePrice"
                        text: controller.settings.hardwarePrice
                        validator: DoubleValidator { bottom: 0 }
                        onEditingFinished: controller.settings.hardwarePrice = Number(text)
                        Layout.preferredWidth: 70
                    }
                    Label { text: "over years"; color: root.textColor }
                    TextField {
                        text: controller.settings.hardwareYears
                        validator: DoubleValidator { bottom: 0.1 }
                        onEditingFinished: controller.settings.hardwareYears = Number(text)
                        Layout.preferredWidth: 60
                    }
                    Label { text: "hours a day"; color: root.textColor }
                    TextField {
                        text: controller.settings.hoursPerDay
                        validator: DoubleValidator { bottom: 0.1; top: 24 }
                        onEditingFinished: controller.settings.hoursPerDay = Number(text)
                        Layout.preferredWidth: 60
                    }
                }
            }

            // ---- cumulative tokens and cost -------------------------------------------------
            ChartView {
                id: chart
                objectName: "costChart"
                Layout.fillWidth: true
                Layout.preferredHeight: 320
                antialiasing: true
                legend.alignment: Qt.AlignBottom
                legend.labelColor: root.textColor
                title: "Cumulative tokens and cost"
                titleColor: root.textColor
                backgroundColor: root.baseColor
                plotAreaColor: root.baseColor
                backgroundRoundness: 0

                DateTimeAxis {
                    id: timeAxis; format: "MM-dd hh:mm"; tickCount: 5
                    labelsColor: root.mutedColor; gridLineColor: root.borderColor; color: root.borderColor
                }
                ValueAxis {
                    id: tokenAxis; min: 0; max: 10; titleText: "tokens"; labelFormat: "%d"
                    labelsColor: root.mutedColor; gridLineColor: root.borderColor; color: root.borderColor
                    titleBrush: root.mutedColor
                }
                ValueAxis {
                    id: costAxis; min: 0; max: 0.001; titleText: controller.settings.currency; labelFormat: "%.2g"
                    labelsColor: root.mutedColor; gridLineColor: root.borderColor; color: root.borderColor
                    titleBrush: root.mutedColor
                }

                LineSeries {
                    id: tokenSeries
                    objectName: "tokensSeries"
                    name: "tokens"
                    axisX: timeAxis
                    axisY: tokenAxis
                    color: root.mutedColor
                    style: Qt.DashLine  // cost grows with tokens: dashed, so neither hides the other
                }
                LineSeries {
                    id: localSeries
                    objectName: "localCostSeries"
                    name: "this machine" + (controller.estimated ? " (estimate)" : "")
                    axisX: timeAxis
                    axisYRight: costAxis
                    color: root.accentColor
                    width: 2
                }
                LineSeries {
                    id: apiSeries
                    objectName: "apiCostSeries"
                    name: {
                        const p = controller.apiPrices[controller.selectedApi]
                        return p ? p.vendor + " " + p.model : "API"
                    }
                    axisX: timeAxis
                    axisYRight: costAxis
                    color: root.apiSeriesColor
                    width: 2
                }

                function rebuild() {
                    const pts = controller.cumulative
                    tokenSeries.clear(); localSeries.clear(); apiSeries.clear()
                    if (pts.length === 0)
                        return
                    let maxTokens = 1, maxCost = 0
                    for (const p of pts) {
                        tokenSeries.append(p.t, p.tokens)
                        localSeries.append(p.t, p.localCost)
                        apiSeries.append(p.t, p.apiCost)
                        maxTokens = Math.max(maxTokens, p.tokens)
                        maxCost = Math.max(maxCost, p.localCost, p.apiCost)
                    }
                    // One point has no width: give the time axis a minute either side.
                    timeAxis.min = new Date(pts[0].t - 60000)
                    timeAxis.max = new Date(pts[pts.length - 1].t + 60000)
                    tokenAxis.max = maxTokens * 1.1
                    costAxis.max = maxCost > 0 ? maxCost * 1.1 : 0.001
                }
                Connections {
                    target: root.controller
                    function onTotalsChanged() { chart.rebuild() }
                }
                Component.onCompleted: rebuild()
            }

            // ---- totals ---------------------------------------------------------------------
            GridLayout {
                Layout.fillWidth: true
                columns: root.wide ? 2 : 1
                columnSpacing: 16
                rowSpacing: 14
                Repeater {
                    model: [
                        { title: "Per conversation", rows: controller.conversations, key: "title" },
                        { title: "Per day (local time)", rows: controller.days, key: "day" }
                    ]
                    delegate: Frame {
                        id: table
                        required property var modelData
                        Layout.fillWidth: true
                        Layout.alignment: Qt.AlignTop
                        ColumnLayout {
                            anchors.fill: parent
                            spacing: 2
                            Label { text: table.modelData.title; font.bold: true; color: root.textColor }
                            RowLayout {
                                Label { text: ""; Layout.preferredWidth: 170 }
                                Label { text: "input"; color: root.mutedColor; Layout.preferredWidth: 60 }
                                Label { text: "cached"; color: root.mutedColor; Layout.preferredWidth: 60 }
                                Label { text: "output"; color: root.mutedColor; Layout.preferredWidth: 60 }
                                Label { text: "answers"; color: root.mutedColor }
                            }
                            Repeater {
                                model: table.modelData.rows
                                delegate: RowLayout {
                                    required property var modelData
                                    Label {
                                        text: modelData[table.modelData.key] || "(untitled)"
                                        color: root.textColor
                                        elide: Text.ElideRight
                                        Layout.preferredWidth: 170
                                    }
                                    Label { text: root.count(modelData.input); color: root.textColor; Layout.preferredWidth: 60 }
                                    Label { text: root.count(modelData.reused); color: root.mutedColor; Layout.preferredWidth: 60 }
                                    Label { text: root.count(modelData.output); color: root.textColor; Layout.preferredWidth: 60 }
                                    Label { text: modelData.answers; color: root.mutedColor }
                                }
                            }
                            Label {
                                visible: table.modelData.rows.length === 0
                                text: "No answers yet."
                                color: root.mutedColor
                            }
                        }
                    }
                }
            }
        }
    }
}
