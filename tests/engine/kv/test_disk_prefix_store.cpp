// The prefix cache's disk tier on a real folder: the block file format and its checks, damaged
// files (deleted, a miss), the byte budget (least recently used first, across restarts), the
// seed every process shares, and writes that fail.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "engine/core/log.h"
#include "engine/kv/disk_prefix_store.h"
#include "kernels/common/error.h"
#include "test_util.h"

using namespace ember;
using namespace ember::test;
namespace fs = std::filesystem;

namespace {
constexpr uint32_t kTokens = 4;
constexpr uint64_t kPayload = 1000;
constexpr uint64_t kFileBytes = 48 + 4 * kTokens + kPayload;

std::vector<int32_t> tokens_from(int32_t first) {
    std::vector<int32_t> t(kTokens);
    std::iota(t.begin(), t.end(), first);
    return t;
}
std::vector<uint8_t> payload(uint8_t tag) {
    std::vector<uint8_t> p(kPayload);
    for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(tag + i * 7);
    return p;
}
DiskPrefixStore open(const TempDir& dir, uint64_t budget = 1 << 20) {
    return DiskPrefixStore(dir.path(), 0x1234, kTokens, kPayload, budget);
}
// The engine's log lines while it lives (every level).
struct LogCapture {
    std::mutex mutex;
    std::vector<std::string> lines;
    LogCapture() {
        set_log_level(LogLevel::Debug);
        set_log_sink([this](LogLevel, std::string_view m) {
            std::lock_guard lock(mutex);
            lines.emplace_back(m);
        });
    }
    ~LogCapture() {
        set_log_sink({});
        set_log_level(LogLevel::Info);
    }
    // The lines holding every one of `words`.
    size_t count(std::initializer_list<std::string_view> words) {
        std::lock_guard lock(mutex);
        size_t n = 0;
        for (const std::string& l : lines) {
            bool all = true;
            for (std::string_view w : words) all = all && l.find(w) != std::string::npos;
            n += all;
        }
        return n;
    }
};
fs::path identity_folder(const TempDir& dir) { return fs::path(dir.path()) / "0000000000001234"; }
// The folders a damaged cache was set aside as.
std::vector<fs::path> set_aside(const TempDir& dir) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir.path()))
        if (e.path().filename().string().starts_with("0000000000001234.damaged-")) out.push_back(e.path());
    return out;
}
// A working store: a block goes in and comes back.
void check_works(DiskPrefixStore& s) {
    s.put(1, 0, tokens_from(0), payload(1));
    s.flush();
    const auto e = s.get(1, 0, tokens_from(0));
    REQUIRE(e.has_value());
    CHECK(e->bytes == payload(1));
}
fs::path block_path(const DiskPrefixStore& s, uint64_t hash) {
    char name[32];
    std::snprintf(name, sizeof name, "%016llx.kvb", static_cast<unsigned long long>(hash));
    return s.folder() / name;
}
}  // namespace

TEST_CASE("block files: every field is checked") {
    const std::vector<int32_t> t = tokens_from(10);
    const std::vector<uint8_t> p = payload(1);
    const std::vector<uint8_t> file = encode_block_file(5, 6, t, p);
    REQUIRE_EQ(file.size(), kFileBytes);
    std::string why;
    const auto ok = parse_block_file(file, kTokens, kPayload, &why);
    REQUIRE(ok.has_value());
    CHECK_EQ(ok->hash, 5u);
    CHECK_EQ(ok->parent, 6u);
    CHECK(ok->tokens == t);
    CHECK(std::vector<uint8_t>(ok->payload.begin(), ok->payload.end()) == p);

    const auto fails = [&](std::vector<uint8_t> bytes, uint32_t tokens, uint64_t payload_bytes, const char* want) {
        CHECK_FALSE(parse_block_file(bytes, tokens, payload_bytes, &why).has_value());
        CHECK_EQ(why, want);
    };
    fails(file, kTokens + 1, kPayload, "another block size");
    fails(file, kTokens, kPayload + 1, "another payload size");
    fails(std::vector<uint8_t>(file.begin(), file.begin() + 20), kTokens, kPayload, "shorter than the header");
    fails(std::vector<uint8_t>(file.begin(), file.end() - 1), kTokens, kPayload, "truncated or too long");
    std::vector<uint8_t> longer = file;
    longer.push_back(0);
    fails(longer, kTokens, kPayload, "truncated or too long");
    for (const size_t at : {size_t(50), size_t(64), file.size() - 1}) {  // a token, the payload's first and last byte
        std::vector<uint8_t> flipped = file;
        flipped[at] ^= 0x10;
        fails(flipped, kTokens, kPayload, "checksum mismatch");
    }
    std::vector<uint8_t> magic = file;
    magic[0] = 'X';
    fails(magic, kTokens, kPayload, "not a KV block file");
    std::vector<uint8_t> version = file;
    version[8] = 2;
    fails(version, kTokens, kPayload, "another version");
}

TEST_CASE("blocks survive a restart; a damaged file is deleted and missed") {
    TempDir dir;
    uint64_t seed = 0;
    {
        DiskPrefixStore s = open(dir);
        seed = s.seed();
        s.put(1, 0, tokens_from(0), payload(1));
        s.put(2, 1, tokens_from(4), payload(2));
        s.put(2, 1, tokens_from(4), payload(9));                          // stored already: not written again
        s.put(3, 2, tokens_from(8), std::vector<uint8_t>(kPayload - 1));  // not a block of this store
        CHECK(s.contains(1));
        s.flush();
        CHECK_EQ(s.size(), 2u);
        CHECK_EQ(s.bytes(), 2 * kFileBytes);
        CHECK_FALSE(s.contains(3));
    }
    DiskPrefixStore s = open(dir);
    CHECK_EQ(s.seed(), seed);
    REQUIRE_EQ(s.size(), 2u);
    const auto e = s.get(2, 1, tokens_from(4));
    REQUIRE(e.has_value());
    CHECK(e->bytes == payload(2));
    CHECK(e->tokens == tokens_from(4));
    CHECK_EQ(e->parent, 1u);
    CHECK_FALSE(s.get(2, 7, tokens_from(4)).has_value());  // another prefix: a miss, the file stays
    CHECK_FALSE(s.get(2, 1, tokens_from(5)).has_value());
    CHECK(s.get(2, 1, tokens_from(4)).has_value());

    std::string bytes = read_file(block_path(s, 1));
    bytes[100] ^= 1;
    write_file(block_path(s, 1), bytes);
    CHECK_FALSE(s.get(1, 0, tokens_from(0)).has_value());
    CHECK_FALSE(fs::exists(block_path(s, 1)));
    CHECK_EQ(s.size(), 1u);
    CHECK_EQ(s.bytes(), kFileBytes);

    fs::remove(block_path(s, 2));  // removed by another process: a miss, forgotten
    CHECK_FALSE(s.get(2, 1, tokens_from(4)).has_value());
    CHECK_EQ(s.size(), 0u);
}

// A recurrent-state snapshot is one "block" of its own store, and can be larger than the
// write queue's cap (kMaxQueuedBytes): an empty queue takes it; a second one waits its turn.
TEST_CASE("a block larger than the write queue's cap is stored when the queue is empty") {
    TempDir dir;
    const uint64_t big = DiskPrefixStore::kMaxQueuedBytes + 4096;
    DiskPrefixStore s(dir.path(), 0x1234, kTokens, big, 4 * big);
    std::vector<uint8_t> bytes(big);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 13 + 5);
    s.put(1, 0, tokens_from(0), bytes);
    s.flush();
    REQUIRE_EQ(s.size(), 1u);
    const auto e = s.get(1, 0, tokens_from(0));
    REQUIRE(e.has_value());
    CHECK(e->bytes == bytes);
}

TEST_CASE("the budget drops the block used longest ago, and use survives a restart") {
    TempDir dir;
    {
        DiskPrefixStore s = open(dir, 3 * kFileBytes);
        for (uint64_t h = 1; h <= 3; ++h) {
            s.put(h, 0, tokens_from(0), payload(static_cast<uint8_t>(h)));
            s.flush();
        }
        REQUIRE(s.get(1, 0, tokens_from(0)).has_value());  // 1 used last now: 2 is the oldest
        s.put(4, 0, tokens_from(0), payload(4));
        s.flush();
        CHECK_EQ(s.size(), 3u);
        CHECK_FALSE(s.contains(2));
        CHECK_FALSE(fs::exists(block_path(s, 2)));
        // A block larger than the whole budget is never queued.
        DiskPrefixStore tiny = DiskPrefixStore(dir.file("tiny"), 1, kTokens, kPayload, kFileBytes - 1);
        tiny.put(1, 0, tokens_from(0), payload(1));
        tiny.flush();
        CHECK_EQ(tiny.size(), 0u);
    }
    // Order on reopening comes from the files' times (set here: the test runs within a second).
    const DiskPrefixStore& probe = open(dir);
    const auto age = [&](uint64_t h, int seconds_ago) {
        fs::last_write_time(block_path(probe, h), fs::file_time_type::clock::now() - std::chrono::seconds(seconds_ago));
    };
    age(3, 30);
    age(1, 20);
    age(4, 10);
    DiskPrefixStore s = open(dir, 2 * kFileBytes);  // a smaller budget: the oldest goes at once
    CHECK_EQ(s.size(), 2u);
    CHECK_FALSE(s.contains(3));
    CHECK(s.contains(1));
    CHECK(s.contains(4));
}

TEST_CASE("writes that fail: blocks are not kept, nothing throws; a folder that cannot be made throws") {
    TempDir dir;
    DiskPrefixStore s = open(dir);
    fs::remove_all(s.folder());  // as if deleted underneath: every write fails (root included)
    s.put(1, 0, tokens_from(0), payload(1));
    s.flush();
    CHECK_EQ(s.size(), 0u);
    CHECK_FALSE(s.contains(1));
    CHECK_FALSE(s.get(1, 0, tokens_from(0)).has_value());

    write_file(dir.file("blocked"), "x");  // a file where the folder should be
    CHECK_THROWS_AS(DiskPrefixStore(dir.file("blocked"), 1, kTokens, kPayload, 1 << 20), Error);
}

// Issue #34, item 4: a damaged cache never stops or hangs the server; it is set aside.
TEST_CASE("a FIFO where the seed should be is refused without blocking; the folder is set aside") {
    TempDir dir;
    LogCapture log;
    fs::create_directories(identity_folder(dir));
    const std::string fifo = (identity_folder(dir) / "seed").string();
    REQUIRE(mkfifo(fifo.c_str(), 0644) == 0);
    auto opened = std::async(std::launch::async, [&] {
        return std::make_unique<DiskPrefixStore>(dir.path(), 0x1234, kTokens, kPayload, 1 << 20);
    });
    if (opened.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
        FAIL_CHECK("opening the store blocked on the FIFO");
        ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));  // lets the blocked open() return
    }
    std::unique_ptr<DiskPrefixStore> s = opened.get();
    const auto aside = set_aside(dir);
    REQUIRE_EQ(aside.size(), 1u);
    CHECK(fs::is_fifo(aside.front() / "seed"));  // kept as it was, for a look
    CHECK(fs::is_regular_file(identity_folder(dir) / "seed"));
    CHECK_EQ(log.count({"is not a regular file", "set aside as", ".damaged-"}), 1u);
    check_works(*s);
}

TEST_CASE("a seed that is a folder, or a file where the cache folder should be: set aside, a fresh cache") {
    SUBCASE("seed folder") {
        TempDir dir;
        LogCapture log;
        fs::create_directories(identity_folder(dir) / "seed");
        DiskPrefixStore s = open(dir);
        CHECK_EQ(set_aside(dir).size(), 1u);
        CHECK_EQ(log.count({"seed is not a regular file", "set aside as"}), 1u);
        check_works(s);
    }
    SUBCASE("folder is a file") {
        TempDir dir;
        LogCapture log;
        write_file(identity_folder(dir).string(), "not a folder");
        DiskPrefixStore s = open(dir);
        const auto aside = set_aside(dir);
        REQUIRE_EQ(aside.size(), 1u);
        CHECK(read_file(aside.front().string()) == "not a folder");
        CHECK_EQ(log.count({"is not a folder", "set aside as"}), 1u);
        check_works(s);
    }
}

TEST_CASE("one bad block costs only itself, and every deletion is logged") {
    TempDir dir;
    LogCapture log;
    {
        DiskPrefixStore s = open(dir);
        for (uint64_t h = 1; h <= 5; ++h) s.put(h, h - 1, tokens_from(static_cast<int32_t>(h)), payload(uint8_t(h)));
        s.flush();
        REQUIRE_EQ(s.size(), 5u);
        // As found: one block made sparse at 4 GiB; the next start deleted all of them, silently.
        fs::resize_file(block_path(s, 3), uint64_t(4) << 30);
    }
    DiskPrefixStore s = open(dir, 5 * kFileBytes);
    CHECK_EQ(s.size(), 4u);
    CHECK_FALSE(fs::exists(block_path(s, 3)));
    CHECK_EQ(log.count({"0000000000000003.kvb: 4294967296 bytes, a block has", "deleted"}), 1u);
    for (uint64_t h : {1, 2, 4, 5}) CHECK(s.get(h, h - 1, tokens_from(static_cast<int32_t>(h))).has_value());

    // A FIFO in a block's place: ignored at once (not waited on), the others stay.
    fs::remove(block_path(s, 4));
    REQUIRE(mkfifo(block_path(s, 4).c_str(), 0644) == 0);
    CHECK_FALSE(s.get(4, 3, tokens_from(4)).has_value());
    CHECK_EQ(log.count({"0000000000000004.kvb: not a regular file; ignored"}), 1u);
    CHECK_EQ(s.size(), 3u);

    // Over the budget: the block used longest ago goes, and the log says so.
    s.put(6, 5, tokens_from(6), payload(6));
    s.put(7, 6, tokens_from(7), payload(7));
    s.put(8, 7, tokens_from(8), payload(8));
    s.flush();
    CHECK(log.count({"used longest ago deleted, to stay within"}) >= 1u);
}

TEST_CASE("a block's name taken by a folder: the write fails with its real reason, not 'disk full'") {
    TempDir dir;
    LogCapture log;
    DiskPrefixStore s = open(dir);
    fs::create_directories(block_path(s, 7));
    s.put(7, 0, tokens_from(0), payload(7));
    s.flush();
    CHECK_FALSE(s.contains(7));
    CHECK_EQ(log.count({"cannot write a block", "cannot rename it to 0000000000000007.kvb: Is a directory"}), 1u);
    CHECK_EQ(log.count({"disk full"}), 0u);
    check_works(s);
}
