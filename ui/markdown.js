// Splits a message into prose and fenced code blocks, so code gets its own box with a copy
// button while prose is rendered by Qt's Markdown support. A fence left open (an answer
// still streaming) runs to the end of the text.
.pragma library

function segments(text) {
    var out = [];
    var lines = text.split("\n");
    var buf = [];
    var inCode = false;
    var lang = "";
    function flush(kind) {
        if (buf.length > 0 || kind === "code")
            out.push({ kind: kind, text: buf.join("\n"), lang: lang });
        buf = [];
    }
    for (var i = 0; i < lines.length; ++i) {
        var m = /^\s*```\s*([^`\s]*)/.exec(lines[i]);
        if (m) {
            if (inCode) { flush("code"); lang = ""; inCode = false; }
            else { flush("text"); lang = m[1]; inCode = true; }
            continue;
        }
        buf.push(lines[i]);
    }
    if (inCode) flush("code");
    else if (buf.length > 0 && buf.join("").trim() !== "") flush("text");
    return out;
}
