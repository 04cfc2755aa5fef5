// `ember pull`, `ember ls`, `ember rm` as a user runs them, against the fake hub: a pull
// without a quantization lists what exists; a pull killed with SIGKILL mid-file resumes from
// its partial file when run again (the server sees Range at the partial size); Ctrl-C stops
// cleanly and keeps the partial file.
#include <doctest/doctest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "engine/hub/sha256.h"
#include "hub_test_server.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

std::string stories() {
    const std::string p = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(p);
    return p;
}

// The environment a user would have: HF_ENDPOINT at the fake hub, the library in `models`.
void point_at(const test::HubServer& s, const test::TempDir& models) {
    setenv("HF_ENDPOINT", s.url().c_str(), 1);
    setenv("EMBER_MODELS_DIR", models.path().c_str(), 1);
    unsetenv("HF_TOKEN");
}

pid_t spawn_ember(const std::vector<std::string>& args) {
    std::vector<std::string> all = {EMBER_CLI};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, EMBER_CLI, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE(rc == 0);
    return pid;
}

// Waits (up to 20 s, then fails) until `path` holds exactly `size` bytes.
void wait_for_size(const std::string& path, uintmax_t size) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::error_code ec;
    while (fs::file_size(path, ec) != size || ec) {
        REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, path, " never reached ", size, " bytes");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

size_t count_ranges(const test::HubServer& s, const std::string& range) {
    size_t n = 0;
    for (auto& r : s.requests_to("/_storage/"))
        if (!r["range"].is_null() && r["range"] == range) ++n;
    return n;
}

}  // namespace

TEST_CASE("ember pull without a quantization fails and lists the ones available") {
    test::HubServer s;
    test::TempDir models;
    s.add_file("t/m", "m-Q8_0.gguf", stories());
    s.add_file("t/m", "m-F32.gguf", stories());
    point_at(s, models);
    const auto r = test::run_process({EMBER_CLI, "pull", "t/m"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("no quantization given for t/m; available: F32 (1.1 MiB), Q8_0 (1.1 MiB)") != std::string::npos);
    const auto bad = test::run_process({EMBER_CLI, "pull", "t/../etc"});
    CHECK(bad.exit_code == 1);
    CHECK(bad.err.find("must be OWNER/NAME") != std::string::npos);
}

TEST_CASE("ember pull killed with SIGKILL mid-file resumes from its partial file; ls and rm see the model") {
    test::HubServer s;
    test::TempDir models;
    s.add_file("t/m", "m-F32.gguf", stories());
    s.set_fault("t/m", {{"stall_after", 400000}});  // the first transfer hangs after 400000 bytes
    point_at(s, models);
    const std::string part = models.path() + "/t/m/main/m-F32.gguf.part";
    const pid_t pid = spawn_ember({"pull", "t/m:F32"});
    wait_for_size(part, 400000);
    kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status));
    CHECK(fs::file_size(part) == 400000);

    const auto ls_partial = test::run_process({EMBER_CLI, "ls"});
    CHECK(ls_partial.out.find("no models in") != std::string::npos);  // a partial file is not a model
    CHECK(ls_partial.out.find("partial: " + part) != std::string::npos);

    const auto again = test::run_process({EMBER_CLI, "pull", "t/m:F32"});
    INFO(again.err);
    REQUIRE(again.exit_code == 0);
    CHECK(again.out.find("ready: t/m:F32") != std::string::npos);
    CHECK(count_ranges(s, "bytes=400000-") == 1);
    const std::string final_path = models.path() + "/t/m/main/m-F32.gguf";
    CHECK(hub::sha256_file(final_path) == hub::sha256_file(stories()));
    CHECK_FALSE(fs::exists(part));

    const auto ls = test::run_process({EMBER_CLI, "ls"});
    CHECK(ls.out.find("t/m:F32") != std::string::npos);
    CHECK(ls.out.find("llama") != std::string::npos);
    const auto rm = test::run_process({EMBER_CLI, "rm", "t/m:F32"});
    CHECK(rm.exit_code == 0);
    CHECK_FALSE(fs::exists(final_path));
    CHECK(test::run_process({EMBER_CLI, "ls"}).out.find("no models in") != std::string::npos);
    const auto rm_again = test::run_process({EMBER_CLI, "rm", "t/m:F32"});
    CHECK(rm_again.exit_code == 1);
    CHECK(rm_again.err.find("no model 't/m:F32'") != std::string::npos);
}

TEST_CASE("Ctrl-C stops ember pull cleanly and keeps the partial file for the next run") {
    test::HubServer s;
    test::TempDir models;
    s.add_file("t/m", "m-F32.gguf", stories());
    s.set_fault("t/m", {{"stall_after", 300000}});
    point_at(s, models);
    const std::string part = models.path() + "/t/m/main/m-F32.gguf.part";
    const pid_t pid = spawn_ember({"pull", "t/m:F32", "--stall-timeout-ms", "60000"});
    wait_for_size(part, 300000);
    kill(pid, SIGINT);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 130);
    CHECK(fs::file_size(part) == 300000);
    const auto rm = test::run_process({EMBER_CLI, "rm", "t/m"});  // rm of a pull that never finished
    CHECK(rm.exit_code == 0);
    CHECK(rm.out.find("removed 1 partial download of t/m") != std::string::npos);
    CHECK_FALSE(fs::exists(part));
}
