// ThreadPool: every task runs exactly once, ranges are contiguous and thread ids valid, for
// fewer tasks than threads, many tasks, dynamic and guided chunks, back-to-back jobs and
// sleeping workers.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/cpu/thread_pool.h"

using ember::cpu::ThreadPool;

namespace {

// Runs a job of n tasks and checks every task ran exactly once with valid thread ids.
enum class Mode { Static, Dynamic, Guided };

void check_cover(ThreadPool& pool, int64_t n, Mode mode, int64_t grain = 1) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<int> bad_tid{0};
    auto fn = [&](int64_t b, int64_t e, int tid) {
        if (tid < 0 || tid >= pool.size() || b >= e) bad_tid.fetch_add(1);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    };
    if (mode == Mode::Dynamic) pool.parallel_for_dynamic(n, grain, fn);
    else if (mode == Mode::Guided) pool.parallel_for_guided(n, grain, fn);
    else pool.parallel_for(n, fn);
    REQUIRE(bad_tid.load() == 0);
    for (int64_t i = 0; i < n; ++i) {
        CAPTURE(i);
        REQUIRE(hits[static_cast<size_t>(i)].load() == 1);
    }
}

}  // namespace

TEST_CASE("fewer tasks than threads") {
    ThreadPool pool(4);
    REQUIRE(pool.size() == 4);
    for (int64_t n : {0, 1, 2, 3}) check_cover(pool, n, Mode::Static);
    // With fewer tasks than threads, thread t runs task t (one task each).
    std::vector<int> owner(3, -1);
    pool.parallel_for(3, [&](int64_t b, int64_t e, int tid) {
        // CHECK, not REQUIRE, on a worker thread: a throw there would end the program.
        CHECK(e - b == int64_t(1));
        owner[size_t(b)] = tid;
    });
    REQUIRE(owner == (std::vector<int>{1, 2, 3}));  // static split: n*t/T .. n*(t+1)/T
}

TEST_CASE("many tasks, static, dynamic and guided") {
    ThreadPool pool(3);
    check_cover(pool, 100003, Mode::Static);
    check_cover(pool, 100003, Mode::Dynamic, 1);
    check_cover(pool, 100003, Mode::Dynamic, 977);
    check_cover(pool, 5, Mode::Dynamic, 100);
    check_cover(pool, 100003, Mode::Guided, 1);
    check_cover(pool, 100003, Mode::Guided, 977);
    check_cover(pool, 5, Mode::Guided, 100);
    check_cover(pool, 1, Mode::Guided, 1);
}

TEST_CASE("guided claims shrink") {
    // One thread: claims of remaining / 1 -> a single range. Three threads: the first claim
    // is a third of the tasks, claims never grow and never go below the minimum (except
    // the last one, cut at the end).
    ThreadPool one(1);
    int calls = 0;
    one.parallel_for_guided(1000, 8, [&](int64_t b, int64_t e, int) {
        calls++;
        CHECK(b == int64_t(0));
        CHECK(e == int64_t(1000));
    });
    REQUIRE(calls == 1);
    ThreadPool pool(3);
    std::mutex mu;
    std::vector<std::pair<int64_t, int64_t>> claims;
    pool.parallel_for_guided(9000, 50, [&](int64_t b, int64_t e, int) {
        std::lock_guard lock(mu);
        claims.emplace_back(b, e);
    });
    std::sort(claims.begin(), claims.end());
    REQUIRE(claims.front() == (std::pair<int64_t, int64_t>{0, 3000}));
    REQUIRE(claims.back().second == int64_t(9000));
    for (size_t i = 0; i < claims.size(); ++i) {
        const int64_t len = claims[i].second - claims[i].first;
        if (i + 1 < claims.size()) REQUIRE(len >= 50);
        if (i > 0) REQUIRE(len <= claims[i - 1].second - claims[i - 1].first);
    }
}

TEST_CASE("static ranges are contiguous and balanced") {
    ThreadPool pool(3);
    std::vector<std::pair<int64_t, int64_t>> ranges(3, {-1, -1});
    pool.parallel_for(10, [&](int64_t b, int64_t e, int tid) { ranges[size_t(tid)] = {b, e}; });
    REQUIRE(ranges[0] == (std::pair<int64_t, int64_t>{0, 3}));
    REQUIRE(ranges[1] == (std::pair<int64_t, int64_t>{3, 6}));
    REQUIRE(ranges[2] == (std::pair<int64_t, int64_t>{6, 10}));
}

TEST_CASE("back-to-back jobs sum correctly") {
    ThreadPool pool(2);
    std::vector<int64_t> partial(2);
    for (int job = 0; job < 20000; ++job) {
        partial.assign(2, 0);
        pool.parallel_for(64, [&](int64_t b, int64_t e, int tid) {
            for (int64_t i = b; i < e; ++i) partial[size_t(tid)] += i + job;
        });
        REQUIRE(partial[0] + partial[1] == int64_t(64 * 63 / 2 + 64 * job));
    }
}

TEST_CASE("wakes sleeping workers") {
    ThreadPool pool(3);
    pool.set_spin_us(0);  // workers go straight to sleep
    for (int round = 0; round < 50; ++round) {
        if (round % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        check_cover(pool, 1000, static_cast<Mode>(round % 3), 7);
    }
}

TEST_CASE("a single thread runs inline") {
    ThreadPool pool(1);
    const auto me = std::this_thread::get_id();
    bool inline_run = false;
    pool.parallel_for(10, [&](int64_t b, int64_t e, int tid) {
        inline_run = std::this_thread::get_id() == me && b == 0 && e == 10 && tid == 0;
    });
    REQUIRE(inline_run);
}
