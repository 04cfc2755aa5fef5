// `ember ls|run|chat --remote` as a user runs them, against a real `ember serve` process with
// an API key (stories260K): the key from EMBER_API_KEY, the answers those of the local `ember
// run`, a wrong key a clear error, and the key in no output even at trace log level.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "remote_answer.h"
#include "test_data.h"

using namespace ember;
using namespace ember::test;

namespace {

constexpr const char* kKey = "sk-cli-3b0e55a1-secret";

// `ember serve` on a free port; its URL read from the first line it prints.
struct EmberServe {
    TempDir dir;
    std::unique_ptr<ChildProcess> proc;
    std::string url;
    explicit EmberServe(const std::string& model) {
        EMBER_REQUIRE_FILE(model);
        proc = std::make_unique<ChildProcess>(
            std::vector<std::string>{EMBER_CLI, "serve", model, "--port", "0", "--api-key", kKey}, dir.path() + "/log");
        const std::string tag = "ember serve: http://";
        for (int i = 0; i < 600 && url.empty(); ++i) {
            const std::string log = proc->log();
            if (const size_t at = log.find(tag); at != std::string::npos) {
                url = log.substr(at + 13, log.find_first_of(" \n", at + 13) - (at + 13));
                break;
            }
            REQUIRE_MESSAGE(proc->running(), "ember serve ended:\n", log);
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        REQUIRE_MESSAGE(!url.empty(), "ember serve printed no URL:\n", proc->log());
    }
};

ProcessResult run_ember(const std::vector<std::string>& args) {
    std::vector<std::string> argv{EMBER_CLI};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, 120000);
}

}  // namespace

TEST_CASE("cliTalksToARemoteEmberWithTheKeyFromTheEnvironment") {
    const std::string model = testdata(kStories);
    EmberServe serve(model);
    setenv("EMBER_API_KEY", kKey, 1);
    setenv("EMBER_LOG_LEVEL", "trace", 1);

    const ProcessResult ls = run_ember({"ls", "--remote", serve.url});
    CHECK_MESSAGE(ls.ok(), ls.err);
    CHECK(ls.out.find("stories260K") != std::string::npos);

    // The same greedy completion as the local `ember run` on the same file.
    const std::vector<std::string> gen{"-p", "Once upon a time", "-n", "24", "--temp", "0"};
    std::vector<std::string> remote_run{"run", "--remote", serve.url, "--model", "stories260K"};
    remote_run.insert(remote_run.end(), gen.begin(), gen.end());
    const ProcessResult remote = run_ember(remote_run);
    std::vector<std::string> local_run{"run", model};
    local_run.insert(local_run.end(), gen.begin(), gen.end());
    const ProcessResult local = run_ember(local_run);
    REQUIRE_MESSAGE(remote.ok(), remote.err);
    REQUIRE_MESSAGE(local.ok(), local.err);
    CHECK(remote.out == local.out);
    CHECK(remote.err.find("24 generated") != std::string::npos);

    // Chat: one turn per line of standard input.
    const ProcessResult chat =
        run_process({"/bin/sh", "-c",
                     std::string("printf 'Tell me a story\\nAnd another\\n' | '") + EMBER_CLI + "' chat --remote " +
                         serve.url + " --model stories260K -n 12 --temp 0 --verbose"},
                    120000);
    CHECK_MESSAGE(chat.ok(), chat.err);
    CHECK(chat.err.find("12 generated") != std::string::npos);

    for (const ProcessResult* r : {&ls, &remote, &chat}) {
        CHECK(r->out.find(kKey) == std::string::npos);
        CHECK(r->err.find(kKey) == std::string::npos);
    }
    unsetenv("EMBER_API_KEY");
    unsetenv("EMBER_LOG_LEVEL");
}

TEST_CASE("cliSaysClearlyWhenTheKeyIsWrongOrTheModelUnknown") {
    EmberServe serve(testdata(kStories));
    unsetenv("EMBER_API_KEY");
    const ProcessResult none = run_ember({"ls", "--remote", serve.url});
    CHECK(none.exit_code == 1);
    CHECK(none.err.find("it needs an API key (--api-key, or EMBER_API_KEY)") != std::string::npos);

    const ProcessResult wrong =
        run_ember({"run", "--remote", serve.url, "--model", "stories260K", "--api-key", "sk-wrong-99", "-p", "Hi"});
    CHECK(wrong.exit_code == 1);
    CHECK(wrong.err.find("the API key was not accepted") != std::string::npos);
    CHECK(wrong.err.find("sk-wrong-99") == std::string::npos);

    const ProcessResult unknown =
        run_ember({"run", "--remote", serve.url, "--model", "llama-70b", "--api-key", kKey, "-p", "Hi"});
    CHECK(unknown.exit_code == 1);
    CHECK(unknown.err.find("not found (HTTP 404") != std::string::npos);

    const ProcessResult no_model = run_ember({"run", "--remote", serve.url, "-p", "Hi"});
    CHECK(no_model.exit_code == 1);
    CHECK(no_model.err.find("--remote needs --model NAME") != std::string::npos);
}

TEST_CASE("serverKilledMidAnswerLeavesThePartialAnswerAndAClearError") {
    EmberServe serve(test_model(kSmolLM2));
    remote::RemoteConfig cfg;
    cfg.base_url = serve.url;
    cfg.api_key = kKey;
    cfg.model = "SmolLM2-135M-Instruct.Q4_1";
    remote::RemoteEngine engine(cfg);
    EngineRequest r = chat_request("Write a long story about a lighthouse.", 1000);
    r.ignore_eog = true;  // only the kill can end it early
    std::mutex m;
    std::condition_variable cv;
    int texts = 0;
    RemoteCall call(engine, r, [&](uint64_t, const EngineEvent&) {
        std::lock_guard lock(m);
        ++texts;
        cv.notify_all();
    });
    {
        std::unique_lock lock(m);
        REQUIRE(cv.wait_for(lock, std::chrono::seconds(120), [&] { return texts >= 3; }));
    }
    serve.proc->stop(SIGKILL);
    const RemoteAnswer a = call.wait();
    REQUIRE(a.failed());
    CHECK(a.text_events >= 3);
    CHECK(!a.text.empty());  // what came before the kill stands
    CHECK(a.error.find("the answer so far is kept: it is incomplete") != std::string::npos);
    CHECK(a.error.find(kKey) == std::string::npos);
}
