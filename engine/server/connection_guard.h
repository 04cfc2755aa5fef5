// What keeps slow or hostile clients from taking the server's threads or memory (issue #34).
//
// Debian's cpp-httplib (0.11.4, a compiled library: its CPPHTTPLIB_* limits are fixed when it
// is built) reads a request head with no overall deadline (its read timeout is per recv, so a
// byte every 2 s never trips it), keeps every header line however many come, and serves
// connections from a fixed pool: 32 connections trickling their headers held all 32 threads and
// /health waited behind them for good; 300 MB of header lines were read, answered and kept.
//
// httplib::Server lets a subclass take over a connection (process_and_close_socket, virtual)
// and still run httplib's request handling on a Stream of its own (process_request), so:
//   - GuardedServer reads every request through a stream with a deadline for its head and body
//     (408 after it) and limits on the head's bytes and lines (431 beyond);
//   - ConnectionPool gives every connection a thread at once, up to max_connections (the usual
//     number kept ready, more made when needed and ended when idle): an answer never waits
//     behind connections that are slow to send their request;
//   - one client address has at most max_per_client connections served at once; more wait for
//     a slot until their deadline, then get 503 (as do those beyond 4x the cap at once).
#pragma once
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace ember::server {

struct GuardOptions {
    // From a connection's start (or, kept alive, from the first byte of its next request, which
    // must come within httplib's keep-alive timeout) to the last byte of the request's body.
    // Generous for any real client on a LAN; a slowloris is cut after it (408).
    std::chrono::milliseconds read_deadline{10000};
    size_t max_header_bytes = size_t(64) << 10;  // the request line and headers together
    size_t max_header_lines = 128;               // header lines (the request line not counted)
    size_t max_connections = 512;                // served at once, one thread each
    size_t max_per_client = 64;                  // served at once from one client address
    size_t ready_threads = 32;                   // threads kept waiting for connections
    // Told the status of each answer the guard writes itself, with no request parsed (408 in
    // the request line, 431, 503 for an address over its cap): for /metrics.
    std::function<void(int status)> on_guard_answer;
};

// Why the request being read on this thread could not be read.
enum class RequestFault { None, Timeout, HeadTooLarge };

// A thread per task, up to `max`; `ready` threads wait for work, more are made when every
// thread is busy and end after a second without work.
class ConnectionPool : public httplib::TaskQueue {
public:
    ConnectionPool(size_t ready, size_t max);
    ~ConnectionPool() override;
    void enqueue(std::function<void()> fn) override;
    void shutdown() override;

private:
    void spawn_locked();
    void work(bool extra);

    const size_t ready_, max_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> jobs_;
    std::unordered_map<std::thread::id, std::thread> threads_;
    std::vector<std::thread::id> ended_;  // extra threads that returned: joined by the next spawn
    size_t idle_ = 0;
    bool shutdown_ = false;
};

// Counts the connections being served per client address; acquire() waits for a slot. A
// waiting connection holds a thread too, so at most kWaitingPerSlot times the cap may wait:
// one address can then hold (1 + kWaitingPerSlot) x max_per_client threads, not all of them.
class ClientSlots {
public:
    static constexpr size_t kWaitingPerSlot = 4;
    explicit ClientSlots(size_t per_client) : per_client_(per_client) {}
    // False when no slot came before `deadline`, `stopping()` became true, or too many wait.
    bool acquire(const std::string& address, std::chrono::steady_clock::time_point deadline,
                 const std::function<bool()>& stopping);
    void release(const std::string& address);

private:
    struct Count {
        size_t served = 0, waiting = 0;
    };
    void forget_if_unused(const std::string& address);  // mutex_ held

    const size_t per_client_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::map<std::string, Count> clients_;
};

class GuardedServer : public httplib::Server {
public:
    explicit GuardedServer(GuardOptions options);
    const GuardOptions& guard() const { return options_; }

    // The fault of the request this thread is reading (None when it was read, or on a thread
    // that serves no connection). The error handler asks it to say 408 or 431, not 400.
    static RequestFault current_fault();
    // A fault's HTTP status (408, 431), its message and its error code ("request_timeout").
    static int fault_status(RequestFault f) { return f == RequestFault::Timeout ? 408 : 431; }
    std::string fault_message(RequestFault f) const;
    static const char* fault_code(RequestFault f);

private:
    bool process_and_close_socket(socket_t sock) override;
    bool serve(class GuardedStream& stream);
    bool stopping() const { return svr_sock_ == INVALID_SOCKET; }

    GuardOptions options_;
    ClientSlots slots_;
};

}  // namespace ember::server
