#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ember::cpu {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
}

}  // namespace

template <class Pred>
bool ThreadPool::spin_until(Pred pred) const {
    const int budget_us = spin_us_.load(std::memory_order_relaxed);
    if (budget_us <= 0) return pred();
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto pause_until = start + std::chrono::microseconds(std::min(budget_us, 20));
    const auto end = start + std::chrono::microseconds(budget_us);
    for (;;) {
        for (int i = 0; i < 64; ++i) {
            if (pred()) return true;
            cpu_relax();
        }
        const auto now = clock::now();
        if (now >= end) return pred();
        if (now >= pause_until) std::this_thread::yield();
    }
}

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n_threads_ = n_threads;
    workers_.reserve(static_cast<size_t>(n_threads - 1));
    for (int t = 1; t < n_threads; ++t) workers_.emplace_back([this, t] { worker_main(t); });
}

ThreadPool::~ThreadPool() {
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_seq_cst);
    generation_.notify_all();
    for (auto& w : workers_) w.join();
}

void ThreadPool::work_share(int thread_id) {
    if (schedule_ == Schedule::Dynamic) {
        for (;;) {
            const int64_t begin = next_task_.fetch_add(grain_, std::memory_order_relaxed);
            if (begin >= n_tasks_) break;
            call_(ctx_, begin, std::min(n_tasks_, begin + grain_), thread_id);
        }
        return;
    }
    if (schedule_ == Schedule::Guided) {
        int64_t begin = next_task_.load(std::memory_order_relaxed);
        while (begin < n_tasks_) {
            const int64_t take = std::max(grain_, (n_tasks_ - begin) / n_threads_);
            const int64_t end = std::min(n_tasks_, begin + take);
            if (next_task_.compare_exchange_weak(begin, end, std::memory_order_relaxed)) {
                call_(ctx_, begin, end, thread_id);
                begin = next_task_.load(std::memory_order_relaxed);
            }
        }
        return;
    }
    const int64_t begin = n_tasks_ * thread_id / n_threads_;
    const int64_t end = n_tasks_ * (thread_id + 1) / n_threads_;
    if (begin < end) call_(ctx_, begin, end, thread_id);
}

void ThreadPool::worker_main(int thread_id) {
    uint64_t seen = 0;
    for (;;) {
        uint64_t gen = seen;
        spin_until([&] { return (gen = generation_.load(std::memory_order_acquire)) != seen; });
        if (gen == seen) {
            // Announce the sleep before re-checking, so run() either sees the sleeper and
            // notifies, or this thread sees the new generation (both sides are seq_cst).
            sleepers_.fetch_add(1, std::memory_order_seq_cst);
            while ((gen = generation_.load(std::memory_order_seq_cst)) == seen) generation_.wait(seen);
            sleepers_.fetch_sub(1, std::memory_order_relaxed);
        }
        seen = gen;
        if (stop_) return;
        work_share(thread_id);
        if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 && caller_sleeping_.load(std::memory_order_seq_cst)) {
            pending_.notify_one();
        }
    }
}

void ThreadPool::run(int64_t n_tasks, int64_t grain, Call call, void* ctx, Schedule schedule) {
    if (n_tasks <= 0) return;
    if (n_threads_ == 1 || (n_tasks == 1 && schedule == Schedule::Static)) {
        call(ctx, 0, n_tasks, 0);
        return;
    }
    call_ = call;
    ctx_ = ctx;
    n_tasks_ = n_tasks;
    grain_ = grain;
    schedule_ = schedule;
    next_task_.store(0, std::memory_order_relaxed);
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);  // publishes the job
    if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();

    work_share(0);

    int left = 0;
    spin_until([&] { return (left = pending_.load(std::memory_order_acquire)) == 0; });
    if (left != 0) {
        caller_sleeping_.store(true, std::memory_order_seq_cst);
        while ((left = pending_.load(std::memory_order_seq_cst)) != 0) pending_.wait(left);
        caller_sleeping_.store(false, std::memory_order_relaxed);
    }
}

}  // namespace ember::cpu
