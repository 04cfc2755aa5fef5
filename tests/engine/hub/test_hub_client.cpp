// HubClient and DownloadQueue against the fake hub (hub_server.py, a real HTTP server on
// 127.0.0.1 serving real GGUF files), with the faults real downloads meet: dropped and stalled
// connections, servers that ignore Range, wrong hashes, 404, gated repositories (401/403), a
// redirect to another host name (127.0.0.1 -> localhost, where the token must not go) and a
// self-signed TLS certificate. Each download ends verified or with a clear error, never as a
// file under its final name that does not match its hash.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/hub/download_queue.h"
#include "engine/hub/hub_client.h"
#include "engine/hub/hub_http.h"
#include "engine/hub/pull_lock.h"
#include "engine/hub/sha256.h"
#include "engine/models/synthetic.h"
#include "hub_test_server.h"

using namespace ember;
using namespace ember::hub;
namespace fs = std::filesystem;

namespace {

std::string stories() {
    const std::string p = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(p);
    return p;
}

HubConfig config_for(const test::HubServer& s, const std::string& token = "") {
    HubConfig c;
    c.endpoint = s.url();
    c.token = token;
    // Long enough that a slow, loaded machine (CI, sanitizers) never trips it by accident; the
    // stall test sets a shorter one.
    c.stall_timeout = std::chrono::milliseconds(3000);
    c.backoff_initial = std::chrono::milliseconds(10);
    c.backoff_max = std::chrono::milliseconds(50);
    c.max_attempts = 3;
    return c;
}

// Downloads a repository's file through the client into `dir`; returns the outcome.
DownloadOutcome fetch_file(const HubClient& hub, const std::string& repo, const std::string& name,
                           const test::TempDir& dir, TransferControl* control = nullptr) {
    const auto files = hub.list_files(repo);
    const auto it = std::find_if(files.begin(), files.end(), [&](const RemoteFile& f) { return f.path == name; });
    REQUIRE(it != files.end());
    TransferControl own;
    return hub.download(repo, "main", *it, dir.file(name + ".part"), dir.file(name), control ? *control : own);
}

size_t count_ranges(const test::HubServer& s, const std::string& range) {
    size_t n = 0;
    for (auto& r : s.requests_to("/_storage/"))
        if (!r["range"].is_null() && r["range"] == range) ++n;
    return n;
}

}  // namespace

TEST_CASE("search asks for GGUF repositories by downloads and reads the answer") {
    test::HubServer s;
    s.add_file("a/small-GGUF", "s-F32.gguf", stories());
    s.add_file("b/popular-GGUF", "p-F32.gguf", stories());
    s.add_file("c/not-gguf", "README.md", stories());
    s.set_meta("a/small-GGUF", {{"downloads", 5}});
    s.set_meta("b/popular-GGUF", {{"downloads", 500}});
    const HubClient hub(config_for(s));
    const auto found = hub.search("gguf");
    REQUIRE(found.size() == 2);
    CHECK(found[0].id == "b/popular-GGUF");
    CHECK(found[0].downloads == 500);
    CHECK(found[1].id == "a/small-GGUF");
    const auto q = s.requests_to("/api/models").back()["query"].get<std::string>();
    CHECK(q.find("filter=gguf") != std::string::npos);
    CHECK(q.find("sort=downloads") != std::string::npos);
}

TEST_CASE("list_files gives sizes and LFS SHA-256s; fetch_range reads a GGUF header without the weights") {
    test::HubServer s;
    s.add_file("t/m", "m-F32.gguf", stories());
    const HubClient hub(config_for(s));
    const auto files = hub.list_files("t/m", "main");
    REQUIRE(files.size() == 1);
    CHECK(files[0].path == "m-F32.gguf");
    CHECK(files[0].size == fs::file_size(stories()));
    CHECK(files[0].sha256 == sha256_file(stories()));  // the server's hashlib against ours

    const std::string whole = test::read_file(stories());
    CHECK(hub.fetch_range("t/m", "main", "m-F32.gguf", 0, 4) == "GGUF");
    CHECK(hub.fetch_range("t/m", "main", "m-F32.gguf", 1000, 64) == whole.substr(1000, 64));
    CHECK(hub.fetch_range("t/m", "main", "m-F32.gguf", whole.size() - 10, 64) == whole.substr(whole.size() - 10));
    CHECK(s.requests_to("/_storage/").back()["range"] ==
          "bytes=" + std::to_string(whole.size() - 10) + "-" + std::to_string(whole.size() + 53));
    s.set_fault("t/m", {{"ignore_range", true}});  // a server that sends the whole file: still right
    CHECK(hub.fetch_range("t/m", "main", "m-F32.gguf", 1000, 64) == whole.substr(1000, 64));

    s.add_file("t/paged", "a-Q8_0.gguf", stories());
    s.add_file("t/paged", "b-F32.gguf", stories());
    s.add_file("t/paged", "c.txt", stories());
    s.set_fault("t/paged", {{"page_size", 1}});
    const auto paged = hub.list_files("t/paged");
    REQUIRE(paged.size() == 3);  // three pages, one entry each
    CHECK(paged[2].path == "c.txt");
    CHECK(s.requests_to("/api/models/t/paged/tree/main").size() == 3);

    CHECK_THROWS_WITH_AS(hub.list_files("t/none"), doctest::Contains("not found (HTTP 404)"), HubError);
    CHECK_THROWS_WITH_AS(hub.list_files("t/m", "v2"), doctest::Contains("Revision Not Found"), HubError);
}

TEST_CASE("a download follows the redirect, checks the hash and lands under its final name") {
    test::HubServer s;
    s.add_file("t/m", "m-F32.gguf", stories());
    const HubClient hub(config_for(s));
    test::TempDir dir;
    CHECK(fetch_file(hub, "t/m", "m-F32.gguf", dir) == DownloadOutcome::Done);
    CHECK(test::read_file(dir.file("m-F32.gguf")) == test::read_file(stories()));
    CHECK_FALSE(fs::exists(dir.file("m-F32.gguf.part")));
    CHECK(s.requests_to("/t/m/resolve/main/m-F32.gguf").size() == 1);
    CHECK(s.requests_to("/_storage/t/m/m-F32.gguf").size() == 1);
}

// Issue #34: a pull of a file another pull holds waits for it, and says so in its progress
// (the app shows it in Downloads); once the other lets go, the file is downloaded and kept.
TEST_CASE("a pull waiting for another pull of the file reports whom it waits for") {
    test::HubServer s;
    s.add_file("t/m", "m-F32.gguf", stories());
    const HubClient hub(config_for(s));
    test::TempDir dir;
    const auto files = hub.list_files("t/m");
    REQUIRE(files.size() == 1);
    const std::string part = dir.file("m-F32.gguf.part");
    std::optional<ember::hub::PullLock> other(ember::hub::PullLock::try_take(part));
    REQUIRE(other->owns());
    std::mutex m;
    std::vector<TransferProgress> seen;
    TransferControl control;
    DownloadOutcome outcome = DownloadOutcome::Cancelled;
    std::thread pull([&] {
        outcome = hub.download("t/m", "main", files[0], part, dir.file("m-F32.gguf"), control,
                               [&](const TransferProgress& p) {
                                   std::lock_guard lock(m);
                                   seen.push_back(p);
                               });
    });
    const auto waited = [&] {
        std::lock_guard lock(m);
        return !seen.empty() && seen.front().waiting_for.find("another process") != std::string::npos;
    };
    for (int i = 0; i < 500 && !waited(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(waited());
    CHECK(s.requests_to("/t/m/resolve/main/m-F32.gguf").empty());  // nothing fetched while it waits
    other.reset();                                                 // the other pull ends
    pull.join();
    CHECK(outcome == DownloadOutcome::Done);
    CHECK(test::read_file(dir.file("m-F32.gguf")) == test::read_file(stories()));
    std::lock_guard lock(m);
    CHECK(seen.back().waiting_for.empty());  // downloading, no longer waiting
}

TEST_CASE("a connection dropped mid-file resumes with Range at the partial size") {
    test::HubServer s;
    s.add_file("t/m", "m-F32.gguf", stories());
    s.set_fault("t/m", {{"drop_after", 300000}, {"times", 2}});
    const HubClient hub(config_for(s));
    test::TempDir dir;
    CHECK(fetch_file(hub, "t/m", "m-F32.gguf", dir) == DownloadOutcome::Done);
    CHECK(test::read_file(dir.file("m-F32.gguf")) == test::read_file(stories()));
    CHECK(count_ranges(s, "bytes=300000-") == 1);  // second transfer: dropped again 300000 bytes later
    CHECK(count_ranges(s, "bytes=600000-") == 1);
}

TEST_CASE("a stalled transfer is aborted by the watchdog and resumed") {
    test::HubServer s;
    s.add_file("t/m", "m-F32.gguf", stories());
    s.set_fault("t/m", {{"stall_after", 200000}});
    HubConfig cfg = config_for(s);
    cfg.stall_timeout = std::chrono::milliseconds(1000);  // the injected stall lasts 60 s
    const HubClient hub(cfg);
    test::TempDir dir;
    CHECK(fetch_file(hub, "t/m", "m-F32.gguf", dir) == DownloadOutcome::Done);
    CHECK(test::read_file(dir.file("m-F32.gguf")) == test::read_file(stories()));
    CHECK(count_ranges(s, "bytes=200000-") == 1);
}

TEST_CASE("a server that ignores Range gets the whole file again, not appended to the partial one") {
    test::HubServer s;
    s.add_file("t/m", "m-F32.gguf", stories());
    s.set_fault("t/m", {{"drop_after", 300000}, {"ignore_range", true}});
    const HubClient hub(config_for(s));
    test::TempDir dir;
    CHECK(fetch_file(hub, "t/m", "m-F32.gguf", dir) == DownloadOutcome::Done);
    CHECK(count_ranges(s, "bytes=300000-") == 1);  // it asked, got a 200, and started over
    CHECK(test::read_file(dir.file("m-F32.gguf")) == test::read_file(stories()));
}

TEST_CASE("wrong bytes never reach the final name: the hash check removes them and says so") {
    test::HubServer s;
    s.add_file("t/m", "m-F32.gguf", stories());
    s.set_fault("t/m", {{"corrupt", true}});
    const HubClient hub(config_for(s));
    test::TempDir dir;
    try {
        fetch_file(hub, "t/m", "m-F32.gguf", dir);
        FAIL("a corrupt download was accepted");
    } catch (const HubError& e) {
        CHECK(e.kind() == HubErrorKind::HashMismatch);
        CHECK(std::string(e.what()).find("do not match the published SHA-256") != std::string::npos);
    }
    CHECK_FALSE(fs::exists(dir.file("m-F32.gguf")));
    CHECK_FALSE(fs::exists(dir.file("m-F32.gguf.part")));
}

TEST_CASE("a gated repository: 401 without a token, 403 with a wrong one, files with the right one") {
    test::HubServer s;
    s.add_file("t/gated", "m-F32.gguf", stories());
    s.set_fault("t/gated", {{"token", "hf_right"}});
    try {
        HubClient(config_for(s)).list_files("t/gated");
        FAIL("no error without a token");
    } catch (const HubError& e) {
        CHECK(e.kind() == HubErrorKind::Unauthorized);
        CHECK(std::string(e.what()).find("needs an access token: set HF_TOKEN") != std::string::npos);
    }
    try {
        HubClient(config_for(s, "hf_wrong")).list_files("t/gated");
        FAIL("no error with a wrong token");
    } catch (const HubError& e) {
        CHECK(e.kind() == HubErrorKind::Forbidden);
        CHECK(std::string(e.what()).find("hf_wrong") == std::string::npos);  // never in messages
    }
    const HubClient hub(config_for(s, "hf_right"));
    test::TempDir dir;
    CHECK(fetch_file(hub, "t/gated", "m-F32.gguf", dir) == DownloadOutcome::Done);
    CHECK(s.requests_to("/_storage/").back()["auth"] == "Bearer hf_right");  // same host: sent
}

TEST_CASE("a redirect to another host name does not carry the token") {
    test::HubServer s;
    s.add_file("t/gated", "m-F32.gguf", stories());
    s.set_fault("t/gated", {{"token", "hf_right"}, {"redirect_host", "localhost"}});
    const HubClient hub(config_for(s, "hf_right"));
    test::TempDir dir;
    CHECK(fetch_file(hub, "t/gated", "m-F32.gguf", dir) == DownloadOutcome::Done);
    const auto resolve = s.requests_to("/t/gated/resolve/");
    REQUIRE(resolve.size() == 1);
    CHECK(resolve[0]["auth"] == "Bearer hf_right");
    CHECK(resolve[0]["host"] == "127.0.0.1:" + std::to_string(s.port()));
    const auto storage = s.requests_to("/_storage/");
    REQUIRE(storage.size() == 1);
    CHECK(storage[0]["host"] == "localhost:" + std::to_string(s.port()));
    CHECK(storage[0]["auth"].is_null());
    CHECK(test::read_file(dir.file("m-F32.gguf")) == test::read_file(stories()));
}

TEST_CASE("404 and 5xx end with a clear error; a file without an LFS hash is not downloaded") {
    test::HubServer s;
    s.add_file("t/m", "m-F32.gguf", stories());
    s.add_file("t/m", "notes.txt", stories());
    const HubClient hub(config_for(s));
    test::TempDir dir;
    TransferControl control;
    const RemoteFile missing{"gone.gguf", 10, std::string(64, 'a')};
    CHECK_THROWS_WITH_AS(hub.download("t/m", "main", missing, dir.file("g.part"), dir.file("g"), control),
                         doctest::Contains("not found (HTTP 404)"), HubError);
    CHECK_THROWS_WITH_AS(fetch_file(hub, "t/m", "notes.txt", dir), doctest::Contains("publishes no SHA-256"), HubError);
    s.set_fault("t/m", {{"status", 503}});
    CHECK_THROWS_WITH_AS(fetch_file(hub, "t/m", "m-F32.gguf", dir), doctest::Contains("HTTP 503"), HubError);
    CHECK(s.requests_to("/t/m/resolve/main/m-F32.gguf").size() == 3);  // retried max_attempts times
    CHECK_FALSE(fs::exists(dir.file("m-F32.gguf")));
}

TEST_CASE("a self-signed TLS certificate is refused: verification is always on") {
    test::HubServer s(/*tls=*/true);
    s.add_file("t/m", "m-F32.gguf", stories());
    const HubClient hub(config_for(s));
    try {
        hub.list_files("t/m");
        FAIL("a self-signed certificate was accepted");
    } catch (const HubError& e) {
        CHECK(e.kind() == HubErrorKind::Tls);
        CHECK(std::string(e.what()).find("could not be verified") != std::string::npos);
    }
}

TEST_CASE("the queue: pause keeps the partial file, resume continues it, cancel deletes it") {
    test::HubServer s;
    s.add_file("t/m", "m-F32.gguf", stories());
    s.add_file("t/other", "o-F32.gguf", stories());
    s.set_fault("t/m", {{"stall_after", 250000}});
    s.set_fault("t/other", {{"stall_after", 100000}});
    HubConfig cfg = config_for(s);
    cfg.stall_timeout = std::chrono::milliseconds(60000);  // the stall is where we pause, not a fault
    test::TempDir models;
    DownloadQueue queue(cfg, models.path(), /*max_concurrent=*/1);
    const uint64_t a = queue.enqueue("t/m", "F32");
    const uint64_t b = queue.enqueue("t/other", "F32");
    const std::string part = models.path() + "/t/m/main/m-F32.gguf.part";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    auto wait_until = [&](auto cond) {
        while (!cond()) {
            REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "condition not reached in 20 s");
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    };
    wait_until([&] { return queue.progress(a).bytes == 250000; });
    CHECK(queue.progress(a).state == PullState::Downloading);
    CHECK(queue.progress(b).state == PullState::Queued);  // the concurrency limit
    CHECK(queue.progress(a).total == fs::file_size(stories()));
    queue.pause(a);
    CHECK(queue.wait(a, std::chrono::seconds(10)) == PullState::Paused);
    CHECK(fs::file_size(part) == 250000);
    wait_until([&] { return queue.progress(b).bytes == 100000; });  // the freed slot went to b
    queue.cancel(b);
    CHECK(queue.wait(b, std::chrono::seconds(10)) == PullState::Cancelled);
    CHECK_FALSE(fs::exists(models.path() + "/t/other/main/o-F32.gguf.part"));
    queue.resume(a);
    CHECK(queue.wait(a, std::chrono::seconds(20)) == PullState::Done);
    CHECK(count_ranges(s, "bytes=250000-") == 1);
    CHECK(queue.progress(a).model_id > 0);
    library::Library lib(models.path());
    const auto m = lib.find("t/m:F32");
    REQUIRE(m);
    CHECK(m->sha256 == sha256_file(stories()));
    CHECK(m->architecture == "llama");
}

TEST_CASE("a split GGUF downloads as one model") {
    test::HubServer s;
    test::TempDir src;
    const SyntheticShape tiny = synthetic_shape("tiny");
    write_synthetic_model(src.file("a.gguf"), tiny, "Q8_0", 1);
    write_synthetic_model(src.file("b.gguf"), tiny, "Q8_0", 2);
    s.add_file("t/split", "x-Q8_0-00001-of-00002.gguf", src.file("a.gguf"));
    s.add_file("t/split", "x-Q8_0-00002-of-00002.gguf", src.file("b.gguf"));
    s.add_file("t/split", "x-F32.gguf", stories());
    const HubClient hub(config_for(s));
    test::TempDir models;
    library::Library lib(models.path());
    const PullPlan plan = plan_pull(hub, "t/split", "main", "q8_0");
    REQUIRE(plan.files.size() == 2);
    TransferControl control;
    int64_t id = 0;
    CHECK(run_pull(hub, lib, plan, control, {}, &id) == PullState::Done);
    const auto m = lib.find(std::to_string(id));
    REQUIRE(m);
    CHECK(m->name == "t/split:Q8_0");
    REQUIRE(m->parts.size() == 2);
    CHECK(m->parts[1].sha256 == sha256_file(src.file("b.gguf")));
    CHECK(m->size == fs::file_size(src.file("a.gguf")) + fs::file_size(src.file("b.gguf")));
    CHECK(m->path == models.path() + "/t/split/main/x-Q8_0-00001-of-00002.gguf");

    // Pulled again after part 2 was damaged behind the library's back (same size): only that
    // part is fetched again, and the model ends verified.
    std::string bytes = test::read_file(m->parts[1].path);
    bytes[bytes.size() / 2] ^= 1;
    test::write_file(m->parts[1].path, bytes);
    TransferControl again;
    CHECK(run_pull(hub, lib, plan, again, {}, &id) == PullState::Done);
    CHECK(sha256_file(m->parts[1].path) == sha256_file(src.file("b.gguf")));
    CHECK(s.requests_to("/_storage/t/split/x-Q8_0-00001-of-00002.gguf").size() == 1);
    CHECK(s.requests_to("/_storage/t/split/x-Q8_0-00002-of-00002.gguf").size() == 2);
    CHECK_THROWS_WITH(plan_pull(hub, "t/split", "main", ""),
                      doctest::Contains("no quantization given for t/split; available: F32"));
}

// A restart: a pull stopped mid-file (its process ended, or it was paused) is one of the
// library's pending pulls; a new queue over the same folder lists it as paused with the bytes
// on disk, resumes it from the partial file's size (Range) to a verified model, or cancels it
// and deletes every byte of it (the finished first part of the split model too).
TEST_CASE("a new queue lists the pulls an earlier one left unfinished: resume or cancel") {
    test::HubServer s;
    test::TempDir src;
    const SyntheticShape tiny = synthetic_shape("tiny");
    const auto parts = write_synthetic_split_model(src.file("x-Q8_0"), tiny, "Q8_0", 2, 1);
    s.add_file("t/split", "x-Q8_0-00001-of-00002.gguf", parts[0]);
    s.add_file("t/split", "x-Q8_0-00002-of-00002.gguf", parts[1]);
    // Part 2's first two transfers stop after 20000 bytes: where each "first process" quits.
    s.set_fault("t/split", {{"stall_after", 20000}, {"times", 2}, {"only", "00002-of-00002"}});
    const HubConfig cfg = config_for(s);
    const uint64_t first = fs::file_size(parts[0]), total = first + fs::file_size(parts[1]);
    // The first process: stops in part 2, as a quit does (the transfer is paused, not ended).
    auto interrupted = [&](const std::string& dir) {
        library::Library lib(dir);
        const HubClient hub(cfg);
        TransferControl control;
        const PullPlan plan = plan_pull(hub, "t/split", "main", "Q8_0");
        const PullState end = run_pull(hub, lib, plan, control, [&](const PullProgress& p) {
            if (p.part == 2 && p.bytes >= first + 20000) control.pause = true;
        });
        REQUIRE(end == PullState::Paused);
        CHECK(fs::file_size(dir + "/t/split/main/x-Q8_0-00002-of-00002.gguf.part") == 20000);
    };
    test::TempDir models, other;
    interrupted(models.path());
    interrupted(other.path());
    {
        DownloadQueue queue(cfg, models.path());
        std::vector<std::pair<uint64_t, PullProgress>> told;
        queue.set_listener([&](uint64_t id, const PullProgress& p) { told.emplace_back(id, p); });
        const auto ids = queue.restore_pending();
        REQUIRE(ids.size() == 1);
        REQUIRE(told.size() == 1);
        const PullProgress p = queue.progress(ids[0]);
        CHECK(p.state == PullState::Paused);
        CHECK(p.repo == "t/split");
        CHECK(p.quant == "Q8_0");
        CHECK(p.bytes == first + 20000);
        CHECK(p.total == total);
        CHECK(p.parts == 2);
        CHECK(queue.restore_pending().empty());  // listed once
        queue.resume(ids[0]);
        CHECK(queue.wait(ids[0], std::chrono::seconds(20)) == PullState::Done);
        CHECK(count_ranges(s, "bytes=20000-") == 1);
    }
    library::Library lib(models.path());
    const auto m = lib.find("t/split:Q8_0");
    REQUIRE(m);
    CHECK(m->parts.size() == 2);
    CHECK(sha256_file(m->parts[1].path) == sha256_file(parts[1]));
    CHECK(lib.pending_pulls().empty());
    CHECK(lib.partial_downloads().empty());

    DownloadQueue queue(cfg, other.path());
    std::vector<PullState> states;  // what a GUI row would show
    queue.set_listener([&](uint64_t, const PullProgress& p) { states.push_back(p.state); });
    const auto ids = queue.restore_pending();
    REQUIRE(ids.size() == 1);
    queue.cancel(ids[0]);
    CHECK(queue.progress(ids[0]).state == PullState::Cancelled);
    CHECK(states == std::vector<PullState>{PullState::Paused, PullState::Cancelled});
    CHECK_FALSE(fs::exists(other.path() + "/t/split/main/x-Q8_0-00001-of-00002.gguf"));
    CHECK_FALSE(fs::exists(other.path() + "/t/split/main/x-Q8_0-00002-of-00002.gguf.part"));
    CHECK(library::Library(other.path()).pending_pulls().empty());
}

// Issue #34: two samples microseconds apart once showed a speed of "6235604.9 TiB/s".
TEST_CASE("a transfer rate over a moment is unknown (0), then the bytes over the seconds") {
    hub::http::RateMeter m;
    m.add(0);
    m.add(1 << 20);
    CHECK(m.bytes_per_s() == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    m.add(2 << 20);
    CHECK(m.bytes_per_s() > 0);
    CHECK(m.bytes_per_s() < double(2 << 20) / 0.3);
}
