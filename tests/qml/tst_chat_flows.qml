// Clicks and types through ember-app's main window, offscreen, with the real engine and the
// real built-in model (SmolLM2-135M-Instruct): empty state -> load the built-in model,
// Enter / Shift+Enter / Esc, regenerate, edit and resend, Ctrl+N / Ctrl+F / Ctrl+L, search,
// rename, delete with undo, switching chats while an answer streams, a 1 MB paste, the
// settings page and theme, a model that fails to load, and a model that thinks (its thinking
// streamed above the answer, the thinking switch), and the speculative decoding setting.
// The app window is its own top-level window (as in ember-app); key events reach it
// through WindowKeys (see main.cpp), mouse events through TestCase as usual.
import QtQuick
import QtQuick.Controls
import QtTest
import Ember.Core
import Ember.Test
import Ember.Ui

TestCase {
    id: tc
    name: "ChatFlows"
    when: windowShown
    property var win: null

    function initTestCase() {
        win = mainComponent.createObject(null)
        verify(win)
        tryCompare(win, "visible", true)
        win.requestActivate()
        tryCompare(win, "active", true)  // key events need the active window
    }
    function cleanupTestCase() { win.destroy() }
    Component { id: mainComponent; Main { } }

    function press(key, modifiers) { WindowKeys.click(win, key, modifiers || 0) }  // keys go to win
    function shortcut(keys) {
        if (keys === StandardKey.Paste) WindowKeys.paste(win)
        else WindowKeys.sequence(win, keys)
    }

    function item(name, root) {
        var o = findChild(root || win.contentItem, name)
        if (!o) o = findChild(win.overlay, name)  // inside an open popup
        if (!o && !root) o = findChild(win, name)  // non-visual objects (popups) hang off the window
        verify(o, "no item named " + name)
        return o
    }
    // No layout pending anywhere under `item` (a click must hit where things will be).
    function polished(item) {
        if (isPolishScheduled(item)) return false
        for (var i = 0; i < item.children.length; ++i)
            if (!polished(item.children[i])) return false
        return true
    }
    // The delegate of row `row` in a ListView, and a named item inside it, once laid out.
    function inRow(list, row, name) {
        list.positionViewAtIndex(row, ListView.Contain)
        tryVerify(function() { return list.itemAtIndex(row) !== null && polished(list) }, 5000,
                  "no laid-out delegate for row " + row)
        var d = list.itemAtIndex(row)
        return name ? item(name, d) : d
    }
    function typeText(text) { WindowKeys.type(win, text) }
    function waitIdle(ms) { tryCompare(Chat, "busy", false, ms || 60000) }
    function setSampling(maxTokens, temperature) {
        var s = Chat.sampling
        s.max_tokens = maxTokens
        s.temperature = temperature === undefined ? 0.0 : temperature
        s.seed = 1
        Chat.sampling = s
    }
    // Clicks into the message box and waits until it really has the keyboard focus.
    function focusInput() {
        var input = item("messageInput")
        mouseClick(input)
        tryVerify(function() { return input.activeFocus }, 2000, "the message box did not get focus")
        return input
    }
    function sendByKeyboard(text) {
        var input = focusInput()
        input.text = text
        press(Qt.Key_Return)
    }

    function test_01_emptyStateLoadsTheBuiltinModel() {
        verify(Models.builtinModelExists, "built-in model missing: " + Models.builtinModelPath)
        compare(Models.ready, false)
        verify(item("emptyStateText").text.indexOf("No model") >= 0)
        var button = item("loadBuiltinButton")
        verify(button.visible && button.enabled)
        mouseClick(button)
        tryCompare(Models, "ready", true, 120000)
        verify(item("emptyStateText").text.indexOf("Ask") === 0)
    }

    function test_02_enterSendsAndTheAnswerStreamsWithStats() {
        setSampling(24)
        var input = focusInput()
        typeText("Hi there")
        press(Qt.Key_Return)
        compare(input.text, "")
        compare(Chat.messages.count, 2)
        waitIdle()
        var list = item("messageList")
        compare(Chat.messages.get(0).content, "Hi there")
        verify(Chat.messages.get(1).content.length > 0)
        var stats = inRow(list, 1, "statsLine")
        verify(stats.visible)
        verify(stats.text.indexOf("tok/s") > 0, stats.text)
        verify(stats.text.indexOf("TTFT") === 0, stats.text)
        compare(Chat.conversations.count, 1)
    }

    function test_03_shiftEnterIsANewLine() {
        var input = focusInput()
        input.text = ""
        typeText("line one")
        press(Qt.Key_Return, Qt.ShiftModifier)
        typeText("line two")
        compare(input.text, "line one\nline two")
        compare(Chat.messages.count, 2)  // nothing sent
        input.text = ""
    }

    function test_04_escStopsAnAnswer() {
        setSampling(-1, 0.8)
        sendByKeyboard("Write a very long story about a lighthouse keeper.")
        tryVerify(function() { return Chat.messages.count === 4 && Chat.messages.get(3).content.length > 20 }, 60000)
        verify(Chat.generating)
        compare(item("sendButton").text, "Stop")
        var t0 = Date.now()
        press(Qt.Key_Escape)
        tryCompare(Chat, "generating", false, 2000)
        console.log("UI stop latency: " + (Date.now() - t0) + " ms")
        verify(Date.now() - t0 < 500)
        verify(inRow(item("messageList"), 3, "statsLine").text.indexOf("stopped") > 0)
    }

    function test_05_regenerateAndEditAndResend() {
        setSampling(16)
        var list = item("messageList")
        var before = Chat.messages.get(3).messageId
        var regen = inRow(list, 3, "regenerateButton")
        verify(regen.visible)
        mouseClick(regen)
        waitIdle()
        compare(Chat.messages.count, 4)
        verify(Chat.messages.get(3).messageId !== before)

        var edit = inRow(list, 0, "editButton")
        mouseClick(edit)
        var area = inRow(list, 0, "editArea")
        verify(area.visible)
        area.text = "Hello again"
        mouseClick(inRow(list, 0, "saveEditButton"))
        waitIdle()
        compare(Chat.messages.count, 2)
        compare(Chat.messages.get(0).content, "Hello again")
        verify(Chat.messages.get(1).content.length > 0)
    }

    function test_06_shortcutsNewChatSearchAndFocus() {
        var first = Chat.currentConversationId
        shortcut("Ctrl+N")
        compare(Chat.currentConversationId, 0)
        compare(Chat.messages.count, 0)
        verify(item("messageInput").activeFocus)
        setSampling(8)
        sendByKeyboard("A purple giraffe")
        waitIdle()
        compare(Chat.conversations.count, 2)
        verify(Chat.currentConversationId !== first)

        shortcut("Ctrl+F")
        var search = item("searchField")
        verify(search.activeFocus)
        typeText("giraffe")
        compare(Chat.conversations.count, 1)
        compare(Chat.conversations.get(0).title, "A purple giraffe")
        // The opened chat marks the searched word where it is drawn, and only while searching.
        var list = item("messageList")
        var text = inRow(list, 0, "segmentText")
        tryCompare(text, "searchHits", 1)
        search.text = ""
        compare(Chat.conversations.count, 2)
        tryCompare(text, "searchHits", 0)

        shortcut("Ctrl+L")
        verify(item("messageInput").activeFocus)
    }

    function test_07_renameAndDeleteWithUndo() {
        var list = item("conversationList")
        var row = Chat.conversations.rowOf(Chat.currentConversationId)
        mouseClick(inRow(list, row, "renameButton"))
        var field = inRow(list, row, "renameField")
        verify(field.activeFocus)
        field.text = ""
        typeText("Giraffe facts")
        press(Qt.Key_Return)
        compare(Chat.currentTitle, "Giraffe facts")

        var id = Chat.currentConversationId
        row = Chat.conversations.rowOf(id)
        mouseClick(inRow(list, row, "deleteButton"))
        compare(Chat.conversations.count, 1)
        var bar = item("snackbar")
        tryCompare(bar, "opened", true)
        verify(item("snackbarText").text.indexOf("Giraffe facts") > 0)
        mouseClick(item("snackbarAction"))
        compare(Chat.conversations.count, 2)
        compare(Chat.currentConversationId, id)
        compare(Chat.currentTitle, "Giraffe facts")
    }

    function test_08_switchChatsWhileAnAnswerStreams() {
        var list = item("conversationList")
        var a = Chat.currentConversationId
        setSampling(-1, 0.8)
        sendByKeyboard("Tell me a long story about a fox in the snow.")
        tryVerify(function() { return Chat.messages.get(Chat.messages.count - 1).content.length > 10 }, 60000)
        var other = Chat.conversations.get(Chat.conversations.rowOf(a) === 0 ? 1 : 0).conversationId
        mouseClick(inRow(list, Chat.conversations.rowOf(other)))
        compare(Chat.currentConversationId, other)
        compare(Chat.generating, false)
        compare(Chat.busy, true)  // the other chat is still writing
        verify(inRow(list, Chat.conversations.rowOf(a)).generating)
        wait(200)  // not a wait for a condition: time for `a` to stream while it is not shown
        mouseClick(inRow(list, Chat.conversations.rowOf(a)))
        compare(Chat.generating, true)
        var live = Chat.messages.get(Chat.messages.count - 1).content.length
        tryVerify(function() { return Chat.messages.get(Chat.messages.count - 1).content.length > live }, 10000)
        mouseClick(item("sendButton"))  // Stop
        tryCompare(Chat, "busy", false, 2000)
    }

    // A 1 MB paste becomes an attachment cut to the message limit: the text field never
    // holds it, so neither the paste nor later typing stalls. Both prose and a single huge
    // line (minified JSON), the worst case for text layout.
    function test_09_aMegabytePasteDoesNotFreezeTheInput_data() {
        return [
            { tag: "prose", text: "lorem ipsum dolor sit amet, consectetur adipiscing elit.\n".repeat(18725) },
            { tag: "one line", text: "{\"k\":[1,2,3]},".repeat(75000) }
        ]
    }
    function test_09_aMegabytePasteDoesNotFreezeTheInput(data) {
        var box = item("inputBox")
        var input = focusInput()
        input.text = ""
        typeText("Summarize this:")
        Clipboard.setText(data.text)
        verify(data.text.length >= 1000000)
        var t0 = Date.now()
        shortcut(StandardKey.Paste)
        var elapsed = Date.now() - t0
        console.log(data.tag + ": 1 MB paste handled in " + elapsed + " ms")
        verify(elapsed < 500, "paste took " + elapsed + " ms")
        compare(input.text, "Summarize this:")
        compare(box.attachment.length, Chat.maxInputChars - input.length - 2)
        verify(item("attachmentChip").visible)
        var note = item("inputNote")
        verify(note.visible)
        verify(note.text.indexOf("cut") > 0, note.text)
        compare(box.composed().length, Chat.maxInputChars)
        verify(box.composed().indexOf("Summarize this:\n\n") === 0)

        t0 = Date.now()
        typeText(" please")
        var perKey = (Date.now() - t0) / 7
        console.log(data.tag + ": " + perKey.toFixed(1) + " ms per key press afterwards")
        verify(perKey < 50, perKey + " ms per key")

        waitForRendering(box)  // the chip appeared: let the layout place its button first
        mouseClick(item("removeAttachmentButton"))
        compare(box.attachment, "")
        // A small paste goes into the text itself.
        Clipboard.setText(" and keep it short")
        shortcut(StandardKey.Paste)
        compare(input.text, "Summarize this: please and keep it short")
        input.text = ""
    }

    function test_10_settingsPageAndTheme() {
        mouseClick(item("settingsButton"))
        verify(win.settingsOpen)
        var theme = item("themeBox")
        verify(theme.visible)
        theme.activated(2)  // "Dark", as a user choosing it
        compare(Settings.theme, "dark")
        verify(Theme.dark)
        compare(Qt.colorEqual(win.color, Theme.window), true)
        theme.activated(1)
        verify(!Theme.dark)
        mouseClick(item("settingsBack"))
        verify(!win.settingsOpen)
    }

    function test_11_aModelThatFailsToLoadLeavesTheAppUsable() {
        mouseClick(item("openModelButton"))
        tryCompare(item("openModelPopup"), "opened", true)
        var field = item("modelPathField")
        tryCompare(field, "activeFocus", true)
        typeText("/nonexistent/broken.gguf")
        mouseClick(item("loadPathButton"))
        tryCompare(Models, "state", ModelState.Failed, 30000)
        var banner = item("modelErrorBanner")
        verify(banner.visible)
        verify(Models.error.indexOf("broken.gguf") >= 0, Models.error)
        // The error's snackbar sits above the composer: the message box stays clickable.
        var snack = win.snackbar
        tryCompare(snack, "opened", true)
        var composer = item("inputBox")
        var snackBottom = snack.contentItem.mapToItem(null, 0, snack.contentItem.height + snack.bottomPadding).y
        verify(snackBottom <= composer.mapToItem(null, 0, 0).y,
               "the snackbar covers the message box: " + snackBottom + " > " + composer.mapToItem(null, 0, 0).y)
        focusInput()
        // Everything else still works: browse chats, search, then load a good model.
        var list = item("conversationList")
        mouseClick(inRow(list, 0))
        verify(Chat.messages.count > 0)
        shortcut("Ctrl+N")  // the empty state offers the built-in model again
        var button = item("loadBuiltinButton")
        tryCompare(button, "visible", true)
        mouseClick(button)
        tryCompare(Models, "ready", true, 120000)
        verify(!banner.visible)
        tryCompare(snack, "visible", false, 1000)  // the error it showed is stale now
    }

    // ---- Long messages, the context, failures in the transcript (issue: the chat app's polish).

    function longText(n) {
        var parts = []
        for (var i = 0; i < n; ++i) parts.push("item" + i + " is on the list,")
        return parts.join(" ")
    }
    function bubbleOf(list, row) { return inRow(list, row, "bubble") }

    function test_12_aLongMessageFillsTheColumn() {
        shortcut("Ctrl+N")
        setSampling(8)
        var text = longText(90)  // ~2,000 characters
        verify(text.length > 1900 && text.length < 2500, text.length)
        sendByKeyboard(text)
        waitIdle()
        var list = item("messageList")
        var bubble = bubbleOf(list, 0)
        var column = Math.min(list.width - 48, 780)
        // Not a 60 px column of one word per line: the bubble takes the column's width.
        verify(bubble.width >= column - 1, "bubble " + bubble.width + " of " + column)
        var body = inRow(list, 0, "messageText")
        verify(body.height < 400, "text " + body.height + " px tall")
    }

    function test_13_theContextMeterShowsUseAndTheNextAnswer() {
        var meter = item("contextText")
        verify(meter.visible)
        compare(Chat.contextLimit, 1024)  // the test's setting (Settings.contextLength)
        verify(Chat.contextUsed > 400, Chat.contextUsed)  // the ~2,000-character message and its answer
        verify(meter.text.indexOf("of 1,024 tokens") > 0, meter.text)
        verify(meter.text.indexOf("next answer up to 8") > 0, meter.text)
        verify(!Chat.contextFull)
    }

    function test_14_aMessageTooLongForTheContextIsMarkedAndRetried() {
        shortcut("Ctrl+N")
        setSampling(8)
        sendByKeyboard(longText(300))  // ~2,500 tokens: more than the 1,024 loaded
        tryCompare(Chat.messages, "count", 2, 10000)
        waitIdle()
        var list = item("messageList")
        var failed = Chat.messages.get(1)
        verify(failed.error.length > 0)
        verify(failed.neededContext > 1024, failed.neededContext)
        var card = inRow(list, 1, "failedAnswer")
        verify(card.visible)
        verify(inRow(list, 1, "failedTitle").text.indexOf("too long for the context") > 0)
        verify(inRow(list, 1, "retryButton").visible)
        // Marked for good: still there after switching away and back (read from the store).
        var id = Chat.currentConversationId
        shortcut("Ctrl+N")
        Chat.selectConversation(id)
        compare(Chat.messages.count, 2)
        verify(inRow(list, 1, "failedAnswer").visible)
        // Retry at the same context fails the same way, and says so in the same place.
        mouseClick(inRow(list, 1, "retryButton"))
        waitIdle()
        compare(Chat.messages.count, 2)
        verify(Chat.messages.get(1).error.length > 0)
        // A longer context: offered (the model was made for 8,192), applied, answered.
        var longer = inRow(list, 1, "longerContextButton")
        verify(longer.visible)
        verify(longer.text.indexOf("4,096") > 0, longer.text)
        mouseClick(longer)
        tryCompare(Models, "ready", false, 10000)
        tryCompare(Models, "ready", true, 120000)
        compare(Chat.contextLimit, 4096)
        tryVerify(function() { return Chat.messages.count === 2 && Chat.messages.get(1).error === ""
                               && Chat.messages.get(1).content.length > 0 && !Chat.busy }, 120000)
        compare(Settings.modelContext(Models.path), 4096)  // kept for this model
        // Back to the test's context for the tests after this one.
        Models.setContext(0)
        tryCompare(Models, "ready", false, 10000)
        tryCompare(Models, "ready", true, 120000)
        compare(Chat.contextLimit, 1024)
    }

    function test_15_aReopenedChatShowsItsNewestMessage() {
        var id = Chat.currentConversationId  // the long message and its answer: taller than the view
        var list = item("messageList")
        tryVerify(function() { return list.contentHeight > list.height * 1.5 }, 5000, "not scrollable")
        shortcut("Ctrl+N")
        Chat.selectConversation(id)
        tryVerify(function() { return polished(list) && list.atYEnd }, 5000, "not at the newest message")
        verify(inRow(list, 1, "bubble").visible)
    }

    function test_16_enterInTheEditBoxSends() {
        setSampling(8)
        var list = item("messageList")
        mouseClick(inRow(list, 0, "editButton"))
        var area = inRow(list, 0, "editArea")
        area.forceActiveFocus()
        tryVerify(function() { return area.activeFocus }, 2000)
        area.text = "A short question"
        press(Qt.Key_Return)
        compare(Chat.messages.get(0).content, "A short question")
        waitIdle()
        compare(Chat.messages.count, 2)
        verify(Chat.messages.get(1).content.length > 0)
    }

    // A model that thinks (SmolLM2 given a template whose generation prompt opens <think>, so
    // its real output is thinking: TestFiles.thinkingModelPath): the thinking streams into a
    // collapsed "Thinking… N s" above the answer, opens to be read live, closes when the
    // answer ends, is there when the chat is opened again, and the answer text never holds it.
    // The switch (the template reads enable_thinking) turns it off for the next answer.
    function test_17_reasoningStreamsAsThinkingAboveTheAnswer() {
        Models.load(TestFiles.thinkingModelPath)
        tryCompare(Models, "ready", true, 120000)
        compare(Models.details.reasoningFormat, "think")
        verify(item("thinkingSwitch").visible, "the template reads enable_thinking: the switch is shown")
        verify(!item("effortChoice").visible, "the template does not read reasoning_effort")
        shortcut("Ctrl+N")
        setSampling(400, 0.8)
        sendByKeyboard("Think step by step: write a long story about a dragon who learns to bake bread.")
        var list = item("messageList")
        tryVerify(function() { return Chat.messages.count === 2 && Chat.messages.get(1).reasoning.length > 0 },
                  60000, "no thinking streamed")
        var label = inRow(list, 1, "thinkingLabel")
        verify(Chat.generating)
        verify(label.text.indexOf("Thinking… ") === 0, label.text)
        compare(Chat.messages.get(1).content, "")     // the thinking is not the answer
        verify(!inRow(list, 1, "bubble").visible)       // no empty bubble under it
        mouseClick(inRow(list, 1, "thinkingHeader"))    // open it: the thoughts, live
        var thoughts = inRow(list, 1, "thinkingText")
        tryVerify(function() { return thoughts.visible && thoughts.text.length > 0 }, 5000)
        var seen = thoughts.text.length
        tryVerify(function() { return thoughts.text.length > seen }, 30000, "the open thinking did not grow")
        tryVerify(function() { return /^Thinking… [1-9]/.test(label.text) }, 30000, "the seconds do not count: " + label.text)
        press(Qt.Key_Escape)
        tryCompare(Chat, "generating", false, 5000)
        var row = Chat.messages.get(1)
        verify(row.reasoning.length > 0 && row.content === "")
        verify(row.reasoning.indexOf("<think>") < 0 && row.reasoning.indexOf("</think>") < 0, row.reasoning)
        verify(!inRow(list, 1, "thinkingText").visible, "closed once the answer ended")
        verify(/^Thought for [1-9][0-9]* s$/.test(inRow(list, 1, "thinkingLabel").text), inRow(list, 1, "thinkingLabel").text)
        var id = Chat.currentConversationId
        shortcut("Ctrl+N")
        Chat.selectConversation(id)  // as after a restart: read back from the store
        tryCompare(Chat.messages, "count", 2)
        compare(Chat.messages.get(1).reasoning, row.reasoning)
        verify(Chat.messages.get(1).thinkingMs > 0)
        verify(inRow(list, 1, "thinkingSection").visible)

        shortcut("Ctrl+N")  // a new chat, thinking off: the template writes an empty thinking
        mouseClick(item("thinkingSwitch"))
        compare(Chat.sampling.thinking, false)
        setSampling(24)
        sendByKeyboard("What is the capital of France?")
        waitIdle()
        compare(Chat.messages.count, 2)
        compare(Chat.messages.get(1).reasoning, "")
        verify(Chat.messages.get(1).content.length > 0)
        verify(!inRow(list, 1, "thinkingSection").visible)
        verify(inRow(list, 1, "bubble").visible)
    }

    // Speculative decoding is a chat setting: off in a new chat; "Prompt lookup" chosen in the
    // chat settings is kept with that chat (a new chat starts off again) and its answers stream
    // as usual; "Draft model" is greyed out, with the reason, while the library holds no draft
    // for the loaded model (this test's library is empty; tests/app/test_chat_draft offers one).
    function test_18_speculationIsAChatSettingKeptWithTheChat() {
        if (!Models.ready) {  // run alone (ChatFlows::test_18_...): the built-in model
            Models.load(Models.builtinModelPath)
            tryCompare(Models, "ready", true, 120000)
        }
        shortcut("Ctrl+N")
        setSampling(24)
        var s = Chat.sampling
        s.thinking = false  // after test_17 the model thinks: the answer itself is wanted here
        Chat.sampling = s
        sendByKeyboard("Repeat after me: the quick brown fox jumps over the lazy dog.")
        waitIdle()
        var id = Chat.currentConversationId
        compare(Chat.sampling.speculation, "off")
        mouseClick(item("chatSettingsButton"))
        var panel = item("chatSettingsPanel")
        tryCompare(panel, "opened", true)
        var choice = item("speculationChoice")
        compare(choice.currentIndex, 0)
        tryVerify(function() { return item("speculationNote").text.indexOf("no model in your library") >= 0 }, 30000,
                  item("speculationNote").text)
        verify(!item("draftSection").visible)
        choice.popup.open()
        tryCompare(choice.popup, "opened", true)
        var rows = choice.popup.contentItem
        tryVerify(function() { return rows.itemAtIndex(2) !== null }, 5000)
        verify(rows.itemAtIndex(1).enabled)
        verify(!rows.itemAtIndex(2).enabled, "draft model: greyed out")
        wait(200)  // the popup's open transition, for the picture only
        grabImage(win.contentItem.parent).save(TestFiles.screenshotDir + "/chat-speculation.png")  // throws on failure
        mouseClick(rows.itemAtIndex(1))
        tryCompare(choice.popup, "opened", false)
        compare(Chat.sampling.speculation, "lookup")
        panel.close()
        tryCompare(panel, "visible", false)  // closed to the end: clicks reach the message box again
        setSampling(24)
        sendByKeyboard("Repeat after me: the quick brown fox jumps over the lazy dog.")
        waitIdle()
        compare(Chat.messages.count, 4)
        verify(Chat.messages.get(3).content.length > 0)
        shortcut("Ctrl+N")
        compare(Chat.sampling.speculation, "off")  // a new chat starts from the defaults
        Chat.selectConversation(id)  // read back from the store
        compare(Chat.sampling.speculation, "lookup")
    }
}
