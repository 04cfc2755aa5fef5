// The CLI's remote engine (engine/remote): `ember ls --remote URL`, `ember run --remote URL
// --model NAME -p TEXT`, `ember chat --remote URL --model NAME`. The same sampling options as
// the local commands: OpenAI's own fields travel (temperature, top-p, seed, penalties, stop,
// max tokens), and --top-k, --min-p, --repeat-penalty only when given (llama.cpp's and vLLM's). The API key comes from
// --api-key or, kept out of shell history, from EMBER_API_KEY; it is never printed.
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>

#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "engine/remote/remote_engine.h"
#include "kernels/common/error.h"

namespace ember::cli {

namespace {

std::set<std::string> remote_value_options() {
    return {"--remote", "--model", "--api-key", "--ca-file", "--connect-timeout", "--read-timeout"};
}

remote::RemoteConfig remote_config(const Args& args) {
    remote::RemoteConfig c;
    c.base_url = args.get_or("--remote", "");
    c.model = args.get_or("--model", "");
    if (const auto key = args.get("--api-key")) c.api_key = *key;
    else if (const char* env = std::getenv("EMBER_API_KEY")) c.api_key = env;
    c.ca_file = args.get_or("--ca-file", "");
    c.connect_timeout = std::chrono::seconds(args.get_int("--connect-timeout", 10, 1, 3600));
    c.read_timeout = std::chrono::seconds(args.get_int("--read-timeout", 120, 1, 86400));
    // llama.cpp's and vLLM's sampling fields travel only when given (OpenAI rejects them).
    c.sent.top_k = args.get("--top-k").has_value();
    c.sent.min_p = args.get("--min-p").has_value();
    c.sent.repeat_penalty = args.get("--repeat-penalty").has_value();
    return c;
}

std::string remote_help() {
    return "  remote:   --remote URL (an OpenAI-compatible server, e.g. http://gpu-box:8000/v1)  --model NAME\n"
           "            --api-key K (or EMBER_API_KEY)  --ca-file PEM  --connect-timeout S  --read-timeout S\n";
}

// Runs one request to its end, writing answer text and reasoning as they come.
struct Answer {
    std::string text, reasoning;
    std::vector<ChatToolCall> tool_calls;
    RequestStats stats;
    std::string error;  // Failed: why
};

Answer run_request(remote::RemoteEngine& engine, EngineRequest req, bool show_reasoning) {
    Answer a;
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    bool reasoning_line = false;  // stderr holds an unfinished line of reasoning
    engine.submit(std::move(req), [&](EngineEvent&& e) {
        std::lock_guard lock(m);
        if (e.kind == EngineEvent::Kind::Text) {
            a.text += e.text, a.reasoning += e.reasoning;
            if (show_reasoning && !e.reasoning.empty()) std::fputs(e.reasoning.c_str(), stderr), reasoning_line = true;
            if (reasoning_line && !e.text.empty()) std::fputs("\n", stderr), reasoning_line = false;
            std::fwrite(e.text.data(), 1, e.text.size(), stdout);
            std::fflush(stdout);
            for (auto& c : e.tool_calls) a.tool_calls.push_back(std::move(c));
        } else if (e.kind == EngineEvent::Kind::Finished || e.kind == EngineEvent::Kind::Failed) {
            if (reasoning_line) std::fputs("\n", stderr);
            a.stats = e.stats, a.error = e.error;
            done = true;
            cv.notify_one();
        }
    });
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return done; });
    for (const ChatToolCall& c : a.tool_calls)
        std::fprintf(stderr, "[tool call %s: %s(%s)]\n", c.id.c_str(), c.name.c_str(), c.arguments.c_str());
    return a;
}

void print_stats(const RequestStats& st) {
    const double tok_s =
        st.decode_ms > 0 && st.generated_tokens > 1 ? (st.generated_tokens - 1) / st.decode_ms * 1e3 : 0;
    std::fprintf(stderr, "[%d prompt tokens, %d generated; TTFT %.0f ms; %.2f tok/s; stop: %s]\n", st.prompt_tokens,
                 st.generated_tokens, st.ttft_ms, tok_s, std::string(stop_reason_name(st.stop_reason)).c_str());
}

void need_model(const remote::RemoteConfig& c) {
    if (c.model.empty())
        throw Error("--remote needs --model NAME (`ember ls --remote " + remote::printable_url(c.base_url) +
                    "` lists the server's models)");
}

}  // namespace

bool wants_remote(int argc, char** argv) {
    for (int i = 0; i < argc; ++i)
        if (!std::strcmp(argv[i], "--remote") || !std::strncmp(argv[i], "--remote=", 9)) return true;
    return false;
}

int cmd_ls_remote(int argc, char** argv) {
    Args args(argc, argv, 0, remote_value_options(), {});
    if (!args.positional().empty()) throw Error("usage: ember ls --remote URL [--api-key K] [--ca-file PEM]");
    const remote::RemoteEngine engine(remote_config(args));
    const auto models = engine.list_models();
    if (models.empty()) std::printf("no models at %s\n", remote::printable_url(engine.config().base_url).c_str());
    else std::printf("%-48s %-10s %s\n", "NAME", "CTX", "OWNED BY");
    for (const auto& m : models)
        std::printf("%-48s %-10s %s\n", m.id.c_str(),
                    m.context_length > 0 ? std::to_string(m.context_length).c_str() : "-", m.owned_by.c_str());
    return 0;
}

int cmd_run_remote(int argc, char** argv) {
    Args args(argc, argv, 0, merge(merge(remote_value_options(), sampling_value_options()), {"-p", "--prompt"}),
              {"--quiet"});
    if (!args.positional().empty())
        throw Error("usage: ember run --remote URL --model NAME -p TEXT [options]\n" + remote_help() + options_help());
    const std::string prompt = args.get_or("-p", args.get_or("--prompt", ""));
    if (prompt.empty()) throw Error("ember run needs a prompt (-p TEXT)");
    const remote::RemoteConfig cfg = remote_config(args);
    need_model(cfg);
    const GenerateOptions gen = generate_options(args, 128);
    EngineRequest req;
    req.prompt = prompt;
    req.sampling = gen.sampling, req.max_tokens = gen.max_tokens, req.stop = gen.stop;
    remote::RemoteEngine engine(cfg);
    std::fputs(prompt.c_str(), stdout);
    const Answer a = run_request(engine, std::move(req), true);
    std::fputs("\n", stdout);
    if (!a.error.empty()) throw Error(a.error);
    if (!args.flag("--quiet")) print_stats(a.stats);
    return 0;
}

int cmd_chat_remote(int argc, char** argv) {
    Args args(argc, argv, 0, merge(merge(remote_value_options(), sampling_value_options()), {"--system"}),
              {"--verbose"});
    if (!args.positional().empty())
        throw Error("usage: ember chat --remote URL --model NAME [--system TEXT] [options]\n" + remote_help() +
                    options_help());
    const remote::RemoteConfig cfg = remote_config(args);
    need_model(cfg);
    const GenerateOptions gen = generate_options(args, -1);
    remote::RemoteEngine engine(cfg);
    const bool interactive = isatty(STDIN_FILENO);
    if (interactive) std::fprintf(stderr, "Type a message and press Enter (Ctrl-D to quit).\n");
    std::vector<ChatMessage> conv;
    if (auto sys = args.get("--system")) conv.push_back({"system", *sys});
    int failed_turns = 0;
    for (std::string line;;) {
        if (interactive) std::fputs("> ", stdout), std::fflush(stdout);
        if (!std::getline(std::cin, line)) break;
        if (line.empty()) continue;
        EngineRequest req;
        req.messages = conv;
        req.messages.push_back({"user", line});
        req.sampling = gen.sampling, req.max_tokens = gen.max_tokens, req.stop = gen.stop;
        const Answer a = run_request(engine, req, true);
        std::fputs("\n", stdout);
        std::fflush(stdout);
        if (!a.error.empty()) {  // the turn is left out of the conversation; the session goes on
            ++failed_turns;
            std::fprintf(stderr, "ember chat: error: %s\n", a.error.c_str());
            continue;
        }
        conv = std::move(req.messages);
        conv.push_back({"assistant", a.text, a.reasoning, a.tool_calls});
        if (args.flag("--verbose") || interactive) print_stats(a.stats);
    }
    return failed_turns > 0 ? 1 : 0;
}

}  // namespace ember::cli
