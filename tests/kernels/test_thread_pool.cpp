// ThreadPool: every task runs exactly once, ranges are contiguous and thread ids valid, for
// fewer tasks than threads, many tasks, dynamic chunks, back-to-back jobs and sleeping workers.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "kernels/cpu/thread_pool.h"

using ember::cpu::ThreadPool;

namespace {

// Runs a job of n tasks and checks every task ran exactly once with valid thread ids.
void check_cover(ThreadPool& pool, int64_t n, bool dynamic, int64_t grain = 1) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<int> bad_tid{0};
    auto fn = [&](int64_t b, int64_t e, int tid) {
        if (tid < 0 || tid >= pool.size() || b >= e) bad_tid.fetch_add(1);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    };
    if (dynamic) pool.parallel_for_dynamic(n, grain, fn);
    else pool.parallel_for(n, fn);
    QCOMPARE(bad_tid.load(), 0);
    for (int64_t i = 0; i < n; ++i) QCOMPARE(hits[static_cast<size_t>(i)].load(), 1);
}

}  // namespace

class TestThreadPool : public QObject {
    Q_OBJECT

private slots:
    void fewerTasksThanThreads() {
        ThreadPool pool(4);
        QCOMPARE(pool.size(), 4);
        for (int64_t n : {0, 1, 2, 3}) check_cover(pool, n, false);
        // With fewer tasks than threads, thread t runs task t (one task each).
        std::vector<int> owner(3, -1);
        pool.parallel_for(3, [&](int64_t b, int64_t e, int tid) {
            QCOMPARE(e - b, int64_t(1));
            owner[size_t(b)] = tid;
        });
        QCOMPARE(owner, (std::vector<int>{1, 2, 3}));  // static split: n*t/T .. n*(t+1)/T
    }

    void manyTasksStaticAndDynamic() {
        ThreadPool pool(3);
        check_cover(pool, 100003, false);
        check_cover(pool, 100003, true, 1);
        check_cover(pool, 100003, true, 977);
        check_cover(pool, 5, true, 100);
    }

    void staticRangesAreContiguousAndBalanced() {
        ThreadPool pool(3);
        std::vector<std::pair<int64_t, int64_t>> ranges(3, {-1, -1});
        pool.parallel_for(10, [&](int64_t b, int64_t e, int tid) { ranges[size_t(tid)] = {b, e}; });
        QCOMPARE(ranges[0], (std::pair<int64_t, int64_t>{0, 3}));
        QCOMPARE(ranges[1], (std::pair<int64_t, int64_t>{3, 6}));
        QCOMPARE(ranges[2], (std::pair<int64_t, int64_t>{6, 10}));
    }

    void backToBackJobsSumCorrectly() {
        ThreadPool pool(2);
        std::vector<int64_t> partial(2);
        for (int job = 0; job < 20000; ++job) {
            partial.assign(2, 0);
            pool.parallel_for(64, [&](int64_t b, int64_t e, int tid) {
                for (int64_t i = b; i < e; ++i) partial[size_t(tid)] += i + job;
            });
            QCOMPARE(partial[0] + partial[1], int64_t(64 * 63 / 2 + 64 * job));
        }
    }

    void wakesSleepingWorkers() {
        ThreadPool pool(3);
        pool.set_spin_us(0);  // workers go straight to sleep
        for (int round = 0; round < 50; ++round) {
            if (round % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
            check_cover(pool, 1000, round % 2 == 1, 7);
        }
    }

    void singleThreadRunsInline() {
        ThreadPool pool(1);
        const auto me = std::this_thread::get_id();
        bool inline_run = false;
        pool.parallel_for(10, [&](int64_t b, int64_t e, int tid) {
            inline_run = std::this_thread::get_id() == me && b == 0 && e == 10 && tid == 0;
        });
        QVERIFY(inline_run);
    }
};

QTEST_APPLESS_MAIN(TestThreadPool)
#include "test_thread_pool.moc"
