// `ember pull`, `ember ls`, `ember rm`, `ember fit REPO` as a user runs them, against the fake
// hub: a pull without a quantization takes the fit planner's choice; a pull killed with SIGKILL mid-file resumes from
// its partial file when run again (the server sees Range at the partial size); Ctrl-C stops
// cleanly and keeps the partial file.
#include <doctest/doctest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "engine/hub/sha256.h"
#include "engine/models/synthetic.h"
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

TEST_CASE("ember pull without a quantization: the fit planner picks the file and says why") {
    test::HubServer s;
    test::TempDir models, src;
    // Real models of one shape at two quantizations (headers read by Range, weights not).
    const SyntheticShape tiny = synthetic_shape("tiny");
    write_synthetic_model(src.file("q8.gguf"), tiny, "Q8_0", 1);
    write_synthetic_model(src.file("q4.gguf"), tiny, "Q4_K_M", 1);
    s.add_file("t/m", "m-Q8_0.gguf", src.file("q8.gguf"));
    s.add_file("t/m", "m-Q4_K_M.gguf", src.file("q4.gguf"));
    point_at(s, models);

    // `ember fit REPO`: the ranking of the remote files, without downloading them.
    const auto fit_gpu = test::run_process({EMBER_CLI, "fit", "t/m", "--vram", "8GiB", "--ram", "16GiB"});
    INFO(fit_gpu.out, fit_gpu.err);
    REQUIRE(fit_gpu.exit_code == 0);
    CHECK(fit_gpu.out.find("Q8_0: fits your 8.0 GiB GPU") != std::string::npos);
    CHECK(fit_gpu.out.find("use: m-Q8_0.gguf") != std::string::npos);
    CHECK(s.requests_to("/_storage/t/m/m-Q8_0.gguf").size() <= 3);  // header reads only

    // A GPU with room for everything: the best quality. No GPU: the smallest >= Q4_K_M.
    const auto gpu = test::run_process({EMBER_CLI, "pull", "t/m", "--vram", "8GiB", "--ram", "16GiB"});
    INFO(gpu.out, gpu.err);
    REQUIRE(gpu.exit_code == 0);
    CHECK(gpu.out.find("Q8_0: fits your 8.0 GiB GPU") != std::string::npos);
    CHECK(gpu.out.find("ready: t/m:Q8_0") != std::string::npos);
    const auto cpu = test::run_process({EMBER_CLI, "pull", "t/m", "--vram", "0", "--ram", "16GiB"});
    INFO(cpu.out, cpu.err);
    REQUIRE(cpu.exit_code == 0);
    CHECK(cpu.out.find("ready: t/m:Q4_K_M") != std::string::npos);
    CHECK(hub::sha256_file(models.path() + "/t/m/main/m-Q4_K_M.gguf") == hub::sha256_file(src.file("q4.gguf")));

    // Nothing fits: a clear error, nothing downloaded.
    test::TempDir none;
    setenv("EMBER_MODELS_DIR", none.path().c_str(), 1);
    const auto tiny_budget = test::run_process({EMBER_CLI, "pull", "t/m", "--vram", "0", "--ram", "1KiB"});
    CHECK(tiny_budget.exit_code == 1);
    CHECK(tiny_budget.err.find("t/m: ") != std::string::npos);
    for (const auto& e : fs::recursive_directory_iterator(none.path()))  // the index only, no model bytes
        CHECK_MESSAGE(e.path().filename().string().find(".gguf") == std::string::npos, e.path());

    const auto bad = test::run_process({EMBER_CLI, "pull", "t/../etc"});
    CHECK(bad.exit_code == 1);
    CHECK(bad.err.find("must be OWNER/NAME") != std::string::npos);
}

// A quantization that exists only split (as a 70B Q8_0 does on the hub): the planner chooses
// the split model as a whole, the pull downloads every part, the library registers one model
// of all parts, and the engine opens it (`ember info` on the library's first part).
TEST_CASE("ember pull chooses and downloads a split model as one") {
    test::HubServer s;
    test::TempDir models, src;
    const SyntheticShape tiny = synthetic_shape("tiny");
    const auto parts = write_synthetic_split_model(src.file("split"), tiny, "Q8_0", 2, 1);
    write_synthetic_model(src.file("q4.gguf"), tiny, "Q4_K_M", 1);
    s.add_file("t/s", "Q8_0/m-Q8_0-00001-of-00002.gguf", parts[0]);
    s.add_file("t/s", "Q8_0/m-Q8_0-00002-of-00002.gguf", parts[1]);
    s.add_file("t/s", "m-Q4_K_M.gguf", src.file("q4.gguf"));
    point_at(s, models);

    const auto pull = test::run_process({EMBER_CLI, "pull", "t/s", "--vram", "8GiB", "--ram", "16GiB"});
    INFO(pull.out, pull.err);
    REQUIRE(pull.exit_code == 0);
    CHECK(pull.out.find("Q8_0: fits your 8.0 GiB GPU") != std::string::npos);
    CHECK(pull.out.find("ready: t/s:Q8_0") != std::string::npos);
    for (int i = 0; i < 2; ++i) {
        const std::string got = models.path() + "/t/s/main/Q8_0/m-Q8_0-0000" + std::to_string(i + 1) + "-of-00002.gguf";
        CHECK(hub::sha256_file(got) == hub::sha256_file(parts[i]));
    }
    CHECK(s.requests_to("/_storage/t/s/m-Q4_K_M.gguf").size() <= 3);  // ranked by its header only

    const auto ls = test::run_process({EMBER_CLI, "ls"});
    INFO(ls.out, ls.err);
    CHECK(ls.out.find("t/s:Q8_0") != std::string::npos);
    const auto info =
        test::run_process({EMBER_CLI, "info", models.path() + "/t/s/main/Q8_0/m-Q8_0-00001-of-00002.gguf"});
    INFO(info.out, info.err);
    CHECK(info.exit_code == 0);
    CHECK(info.out.find("llama") != std::string::npos);
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

// Issue #34: two pulls of one file at once, against a hub that ignores Range (so a second
// download would start from byte 0, truncating the first's partial file under it). The second
// waits for the first (a lock beside the .part), then finds the verified file and leaves it.
TEST_CASE("two ember pull of one file at once: one downloads, the other waits, the file is written once") {
    test::HubServer s;
    test::TempDir models;
    s.add_file("t/m", "m-F32.gguf", stories());
    s.set_fault("t/m", {{"ignore_range", true}, {"slow", 0.1}});  // ~2 s for the file
    point_at(s, models);
    const std::string final_path = models.path() + "/t/m/main/m-F32.gguf";
    const auto pull = [] { return test::run_process({EMBER_CLI, "pull", "t/m:F32"}); };
    auto first = std::async(std::launch::async, pull);
    std::error_code ec;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (fs::file_size(final_path + ".part", ec) == 0 || ec) {  // the first is downloading
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    auto second = std::async(std::launch::async, pull);
    const auto a = first.get(), b = second.get();
    INFO(a.err, b.err);
    REQUIRE(a.exit_code == 0);
    REQUIRE(b.exit_code == 0);
    CHECK(a.out.find("ready: t/m:F32") != std::string::npos);
    CHECK(b.out.find("ready: t/m:F32") != std::string::npos);
    CHECK(b.err.find("is being pulled by another process (pid ") != std::string::npos);
    CHECK(s.requests_to("/_storage/t/m/m-F32.gguf").size() == 1);  // one download, no second write
    CHECK(hub::sha256_file(final_path) == hub::sha256_file(stories()));
    CHECK_FALSE(fs::exists(final_path + ".part"));
    const auto ls = test::run_process({EMBER_CLI, "ls"});
    CHECK(ls.out.find("t/m:F32") == ls.out.rfind("t/m:F32"));  // listed once
}

// Issue #34: a GGUF whose name carries no quantization label is pulled by the planner's choice
// (by its file), and by name as OWNER/NAME:FILE.gguf.
TEST_CASE("a file that names no quantization is pulled by its name") {
    test::HubServer s;
    test::TempDir models;
    s.add_file("t/plain", "model.gguf", stories());
    point_at(s, models);
    const auto chosen = test::run_process({EMBER_CLI, "pull", "t/plain", "--vram", "8GiB", "--ram", "16GiB"});
    INFO(chosen.out, chosen.err);
    REQUIRE(chosen.exit_code == 0);
    CHECK(chosen.out.find("ready: t/plain:model.gguf") != std::string::npos);
    CHECK(hub::sha256_file(models.path() + "/t/plain/main/model.gguf") == hub::sha256_file(stories()));

    test::TempDir other;
    setenv("EMBER_MODELS_DIR", other.path().c_str(), 1);
    const auto named = test::run_process({EMBER_CLI, "pull", "t/plain:model.gguf"});
    INFO(named.err);
    REQUIRE(named.exit_code == 0);
    CHECK(named.out.find("ready: t/plain:model.gguf") != std::string::npos);
    const auto missing = test::run_process({EMBER_CLI, "pull", "t/plain:other.gguf"});
    CHECK(missing.exit_code == 1);
    CHECK(missing.err.find("has no model file other.gguf; available: ") != std::string::npos);
}

// Issue #34, the smaller items: a dripped listing is timed out, an oversized one named as such,
// a size the disk cannot hold refused before a byte is written, a first answer longer than the
// file not called a resume.
TEST_CASE("hostile listings and sizes: timed out, refused, and said plainly") {
    test::HubServer s;
    test::TempDir models;
    point_at(s, models);
    s.add_file("t/drip", "m-F32.gguf", stories());
    s.set_fault("t/drip", {{"drip_listing", 0.5}});  // a few hundred bytes: minutes if waited on
    const auto drip =
        test::run_process({EMBER_CLI, "pull", "t/drip:F32", "--stall-timeout-ms", "1000", "--retries", "1"}, 20000);
    INFO(drip.err);
    CHECK_FALSE(drip.timed_out);
    CHECK(drip.exit_code == 1);
    CHECK(drip.err.find("was not complete within 1000 ms") != std::string::npos);

    s.add_file("t/huge", "m-F32.gguf", stories());
    s.set_fault("t/huge", {{"huge_listing", true}});
    const auto huge = test::run_process({EMBER_CLI, "pull", "t/huge:F32", "--retries", "1"});
    INFO(huge.err);
    CHECK(huge.exit_code == 1);
    CHECK(huge.err.find("is larger than 64 MiB; not read further") != std::string::npos);
    CHECK(huge.err.find("Failure writing output") == std::string::npos);

    s.add_file("t/pib", "m-F32.gguf", stories());
    s.set_fault("t/pib", {{"tree_size", {{"m-F32.gguf", uint64_t(1) << 50}}}});
    const auto pib = test::run_process({EMBER_CLI, "pull", "t/pib:F32"});
    INFO(pib.err);
    CHECK(pib.exit_code == 1);
    CHECK(pib.err.find("not enough free space for t/pib:F32: it needs 1024.0 TiB") != std::string::npos);
    CHECK(s.requests_to("/_storage/t/pib/").empty());
    CHECK_FALSE(fs::exists(models.path() + "/t/pib/main/m-F32.gguf.part"));

    s.add_file("t/short", "m-F32.gguf", stories());
    s.set_fault("t/short", {{"tree_size", {{"m-F32.gguf", 1000}}}});  // the file is longer than listed
    const auto longer = test::run_process({EMBER_CLI, "pull", "t/short:F32", "--retries", "1"});
    INFO(longer.err);
    CHECK(longer.exit_code == 1);
    CHECK(longer.err.find("the server sent more than the file's 1000 bytes (HTTP 200)") != std::string::npos);
    CHECK(longer.err.find("answer to a resume") == std::string::npos);
}
