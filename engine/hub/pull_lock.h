// One pull per file, across processes: the app's download queue and any number of `ember pull`
// commands may ask for the same file at once. Without a lock a second pull that restarted from
// byte 0 truncated the `.part` under the first, which had verified and renamed it already: the
// library then listed a file whose bytes no longer matched its SHA-256 (issue #34).
//
// The lock is an exclusive flock(2) on `FILE.part.lock`, beside the partial file. The kernel
// drops it when its holder exits, however it exits, so a killed pull never leaves a stale lock.
// The lock file itself stays (deleting it would let a waiter and a newcomer each lock a
// different file); it holds the pid of its last holder, for the waiter's message.
#pragma once
#include <functional>
#include <string>

namespace ember::hub {

class PullLock {
public:
    // The lock of the partial file `part_path`, if no one holds it; else one that owns nothing.
    static PullLock try_take(const std::string& part_path);
    // Waits for the lock (looking every 100 ms) until it is taken or `stop()` says to give up
    // (then owns() is false). `on_wait` is called once, with the holder's pid ("" if unknown),
    // when another process (or thread) holds it.
    static PullLock take(const std::string& part_path, const std::function<bool()>& stop,
                         const std::function<void(const std::string& holder)>& on_wait);

    PullLock() = default;
    PullLock(PullLock&& o) noexcept;
    PullLock& operator=(PullLock&& o) noexcept;
    ~PullLock();  // releases it

    bool owns() const { return fd_ >= 0; }

private:
    explicit PullLock(int fd) : fd_(fd) {}
    int fd_ = -1;
};

}  // namespace ember::hub
