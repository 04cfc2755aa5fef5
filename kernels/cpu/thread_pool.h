// A persistent pool of worker threads for the CPU kernels (one per backend instance).
//
// Threads are created once. parallel_for wakes them by bumping a generation counter; idle
// workers poll it for a short while (a decode step issues hundreds of small parallel
// kernels, and a futex wake costs several microseconds), first with pause instructions,
// then yielding the core (so a machine with more runnable threads than cores keeps making
// progress), and then sleep on it (C++20 atomic wait = futex on Linux), so an idle pool
// costs no CPU. The calling thread takes part as thread 0 and returns when every task has
// finished, waiting for the others the same way.
#pragma once
#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace ember::cpu {

class ThreadPool {
public:
    // n_threads counts the caller; 0 means std::thread::hardware_concurrency().
    explicit ThreadPool(int n_threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Runs fn(begin, end, thread_id) over [0, n_tasks) split into size() contiguous ranges
    // of near-equal length (ranges may be empty and are then skipped; with fewer tasks than
    // threads, thread t runs task t). thread_id is in [0, size()), 0 = the caller. fn must
    // not throw and must not call parallel_for on the same pool.
    template <class F>
    void parallel_for(int64_t n_tasks, F&& fn) {
        run(n_tasks, 1, &invoke<F>, &fn, Schedule::Static);
    }

    // Like parallel_for but threads take chunks of `grain` tasks from a shared counter, so
    // uneven tasks (or a thread delayed by another process) balance out.
    template <class F>
    void parallel_for_dynamic(int64_t n_tasks, int64_t grain, F&& fn) {
        run(n_tasks, grain < 1 ? 1 : grain, &invoke<F>, &fn, Schedule::Dynamic);
    }

    // Guided self-scheduling: each thread claims max(min_grain, remaining / size()) tasks
    // at a time, so the first claims are long contiguous ranges (what a streaming kernel
    // wants: one prefetch stream per thread) and the last ones short (a thread slowed down by
    // another process holds up the rest by little).
    template <class F>
    void parallel_for_guided(int64_t n_tasks, int64_t min_grain, F&& fn) {
        run(n_tasks, min_grain < 1 ? 1 : min_grain, &invoke<F>, &fn, Schedule::Guided);
    }

    // How long an idle thread polls before it sleeps, in microseconds (default 200: the
    // first ~20 with pause, the rest yielding). 0 sleeps at once.
    void set_spin_us(int us) { spin_us_.store(us, std::memory_order_relaxed); }

private:
    using Call = void (*)(void* ctx, int64_t begin, int64_t end, int thread_id);
    enum class Schedule { Static, Dynamic, Guided };

    template <class F>
    static void invoke(void* ctx, int64_t begin, int64_t end, int thread_id) {
        (*static_cast<std::remove_reference_t<F>*>(ctx))(begin, end, thread_id);
    }

    void run(int64_t n_tasks, int64_t grain, Call call, void* ctx, Schedule schedule);
    void work_share(int thread_id);
    void worker_main(int thread_id);
    // Polls until pred() holds or the spin budget is spent; returns pred().
    template <class Pred>
    bool spin_until(Pred pred) const;

    int n_threads_;
    std::vector<std::thread> workers_;

    // The current job; written by the caller before it bumps generation_.
    Call call_ = nullptr;
    void* ctx_ = nullptr;
    int64_t n_tasks_ = 0;
    int64_t grain_ = 1;
    Schedule schedule_ = Schedule::Static;
    bool stop_ = false;

    alignas(64) std::atomic<uint64_t> generation_{0};
    alignas(64) std::atomic<int64_t> next_task_{0};  // dynamic / guided scheduling counter
    alignas(64) std::atomic<int> pending_{0};        // workers still running the job
    alignas(64) std::atomic<int> sleepers_{0};       // workers blocked in wait()
    std::atomic<bool> caller_sleeping_{false};
    std::atomic<int> spin_us_{200};
};

}  // namespace ember::cpu
