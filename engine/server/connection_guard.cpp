// The connection guard (connection_guard.h): a stream with a read deadline and head limits, a
// pool that grows to one thread per connection, and the per-address slots.
#include "engine/server/connection_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace ember::server {

using Clock = std::chrono::steady_clock;

namespace {

// Blocking waits are cut into slices this long, so that a server that stops is noticed.
constexpr int kSliceMs = 100;
// How long a write may wait for the client to take data (httplib's own default).
constexpr int kWriteTimeoutMs = 5000;
// After an error answered before the request was read whole, the rest the client sends is read
// and dropped for at most this long (and this much), so that it sees the answer rather than a
// reset of a connection closed with unread data.
constexpr auto kLinger = std::chrono::milliseconds(500);
constexpr size_t kLingerBytes = size_t(256) << 10;
// A connection's read buffer (httplib reads a request head a byte at a time: one recv fills it).
constexpr size_t kBufferBytes = 16384;

thread_local RequestFault tl_fault = RequestFault::None;

std::string numeric_address(const sockaddr_storage& a, int& port) {
    char host[INET6_ADDRSTRLEN] = "";
    port = 0;
    if (a.ss_family == AF_INET) {
        const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
        inet_ntop(AF_INET, &v4.sin_addr, host, sizeof host);
        port = ntohs(v4.sin_port);
    } else if (a.ss_family == AF_INET6) {
        const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
        inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof host);
        port = ntohs(v6.sin6_port);
    }
    return host;
}

int poll_one(int fd, short events, int timeout_ms) {
    pollfd p{fd, events, 0};
    int r;
    do r = ::poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r > 0 && (p.revents & (POLLERR | POLLNVAL))) return -1;
    return r;
}

// A whole response written straight to the socket, for the answers given when httplib never
// got to parse a request (a deadline passed, a head too large, no slot for the address).
void write_raw(int fd, int status, const char* reason, const std::string& message, const char* code) {
    const std::string body = R"({"error":{"message":")" + message +
                             R"(","type":"invalid_request_error","param":null,"code":")" + code + "\"}}";
    std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                    "\r\nContent-Type: application/json\r\nConnection: close\r\n";
    if (status == 503) r += "Retry-After: 1\r\n";
    r += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    ::send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// Closes without a reset that would destroy the answer just written: stop sending, then read
// and drop what the client still sends for a moment.
void close_lingering(int fd) {
    ::shutdown(fd, SHUT_WR);
    const auto until = Clock::now() + kLinger;
    std::vector<char> sink(kBufferBytes);  // on the heap: see GuardedStream::buf_
    size_t dropped = 0;
    while (dropped < kLingerBytes && Clock::now() < until) {
        if (poll_one(fd, POLLIN, kSliceMs) <= 0) continue;
        const ssize_t n = ::recv(fd, sink.data(), sink.size(), 0);
        if (n <= 0) break;
        dropped += static_cast<size_t>(n);
    }
    ::close(fd);
}

// glibc keeps the stacks of ended threads for reuse, with every page a deep call once touched
// still resident (a connection's frames hold its 16 KiB read buffer and httplib's parsing):
// an extra thread gives those pages back before it ends, so that a burst of connections does
// not leave its memory behind.
void release_stack_below_here() {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
    void* low = nullptr;
    size_t size = 0;
    pthread_attr_getstack(&attr, &low, &size);
    pthread_attr_destroy(&attr);
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    char here = 0;
    const uintptr_t start = (reinterpret_cast<uintptr_t>(low) + page - 1) & ~(page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(&here) - (64 << 10)) & ~(page - 1);  // this frame's margin
    if (end > start) madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The stream one connection's requests are read and answered through.

class GuardedStream : public httplib::Stream {
public:
    GuardedStream(int fd, const GuardOptions& o, std::function<bool()> stopping)
        : fd_(fd), options_(o), stopping_(std::move(stopping)) {}

    // A new request starts: its head and body must be in by `deadline`.
    void begin_request(Clock::time_point deadline) {
        deadline_ = deadline;
        in_head_ = true;
        head_bytes_ = head_lines_ = line_bytes_ = 0;
        request_bytes_ = written_ = 0;
        tl_fault = fault_ = RequestFault::None;
    }
    // Between requests of a kept-alive connection: whether a next one begins within `timeout`.
    bool next_request_within(std::chrono::seconds timeout) {
        if (pos_ < len_) return true;  // pipelined: already here
        for (auto until = Clock::now() + timeout; Clock::now() < until;) {
            if (stopping_()) return false;
            const int r = poll_one(fd_, POLLIN, kSliceMs);
            if (r < 0) return false;
            if (r > 0) return true;
        }
        return false;
    }
    RequestFault fault() const { return fault_; }
    // A byte of the request came (read, or waiting to be read when the deadline passed).
    bool started() const { return request_bytes_ > 0 || is_readable(); }
    bool answered() const { return written_ > 0; }  // a byte of an answer went

    bool is_readable() const override { return pos_ < len_ || poll_one(fd_, POLLIN, 0) > 0; }
    bool is_writable() const override { return poll_one(fd_, POLLOUT, kWriteTimeoutMs) > 0; }

    ssize_t read(char* ptr, size_t size) override {
        if (pos_ == len_ && !fill()) return -1;
        size_t n = std::min(size, len_ - pos_);
        if (in_head_ && !scan_head(n)) return -1;
        std::memcpy(ptr, buf_.get() + pos_, n);
        pos_ += n;
        request_bytes_ += n;
        return static_cast<ssize_t>(n);
    }

    ssize_t write(const char* ptr, size_t size) override {
        if (!is_writable()) return -1;
        ssize_t n;
        do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n > 0) written_ += static_cast<size_t>(n);
        return n;
    }

    void get_remote_ip_and_port(std::string& ip, int& port) const override {
        sockaddr_storage a{};
        socklen_t len = sizeof a;
        ip = ::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0 ? numeric_address(a, port) : "";
    }
    void get_local_ip_and_port(std::string& ip, int& port) const override {
        sockaddr_storage a{};
        socklen_t len = sizeof a;
        ip = ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0 ? numeric_address(a, port) : "";
    }
    socket_t socket() const override { return fd_; }

private:
    // Waits (until the deadline) for more bytes; false at the deadline, at the end of the
    // connection, or when the server stops.
    bool fill() {
        for (;;) {
            if (stopping_()) return false;
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
            if (left.count() <= 0) return fail(RequestFault::Timeout);
            const int r = poll_one(fd_, POLLIN, static_cast<int>(std::min<int64_t>(left.count(), kSliceMs)));
            if (r < 0) return false;
            if (r == 0) continue;
            const ssize_t n = ::recv(fd_, buf_.get(), kBufferBytes, 0);
            if (n > 0) {
                pos_ = 0, len_ = static_cast<size_t>(n);
                return true;
            }
            if (n == 0 || (errno != EINTR && errno != EAGAIN)) return false;
        }
    }

    // Counts the next `n` bytes of the head (shortening n where the head ends inside them, so
    // that what follows is the body's); false when the head goes over a limit.
    bool scan_head(size_t& n) {
        for (size_t i = 0; i < n; ++i) {
            const char c = buf_[pos_ + i];
            if (++head_bytes_ > options_.max_header_bytes) return fail(RequestFault::HeadTooLarge);
            if (c == '\r') continue;
            if (c != '\n') {
                ++line_bytes_;
                continue;
            }
            if (line_bytes_ == 0 && head_lines_ > 0) {  // the blank line: the head is over
                in_head_ = false;
                n = i + 1;
                return true;
            }
            line_bytes_ = 0;
            if (++head_lines_ > options_.max_header_lines + 1) return fail(RequestFault::HeadTooLarge);
        }
        return true;
    }

    bool fail(RequestFault f) {
        tl_fault = fault_ = f;
        return false;
    }

    int fd_;
    const GuardOptions& options_;
    std::function<bool()> stopping_;
    // On the heap, not the stack: a pool thread's stack pages stay resident once touched, and
    // the threads a burst of connections makes would each keep 16 KiB of them.
    std::unique_ptr<char[]> buf_ = std::make_unique_for_overwrite<char[]>(kBufferBytes);
    size_t pos_ = 0, len_ = 0;
    Clock::time_point deadline_;
    bool in_head_ = true;
    size_t head_bytes_ = 0, head_lines_ = 0, line_bytes_ = 0;
    size_t request_bytes_ = 0, written_ = 0;
    RequestFault fault_ = RequestFault::None;
};

// ---------------------------------------------------------------------------------------------

ConnectionPool::ConnectionPool(size_t ready, size_t max)
    : ready_(std::max<size_t>(1, ready)), max_(std::max(ready_, max)) {
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < ready_; ++i) {
        std::thread t([this] { work(false); });
        threads_.emplace(t.get_id(), std::move(t));
    }
}

ConnectionPool::~ConnectionPool() { shutdown(); }

void ConnectionPool::enqueue(std::function<void()> fn) {
    {
        std::lock_guard lock(mutex_);
        jobs_.push_back(std::move(fn));
        if (jobs_.size() > idle_ && threads_.size() - ended_.size() < max_) spawn_locked();
    }
    cv_.notify_one();
}

void ConnectionPool::spawn_locked() {
    for (const std::thread::id& id : ended_) {  // they have returned: join is immediate
        threads_[id].join();
        threads_.erase(id);
    }
    ended_.clear();
    std::thread t([this] { work(true); });
    threads_.emplace(t.get_id(), std::move(t));
}

void ConnectionPool::work(bool extra) {
    std::unique_lock lock(mutex_);
    for (;;) {
        ++idle_;
        const auto ready = [&] { return !jobs_.empty() || shutdown_; };
        if (extra) cv_.wait_for(lock, std::chrono::seconds(1), ready);
        else cv_.wait(lock, ready);
        --idle_;
        if (jobs_.empty()) {
            if (shutdown_ || extra) break;
            continue;
        }
        auto fn = std::move(jobs_.front());
        jobs_.pop_front();
        lock.unlock();
        fn();
        lock.lock();
    }
    if (!extra || shutdown_) return;
    ended_.push_back(std::this_thread::get_id());
    const bool last_extra = threads_.size() - ended_.size() <= ready_;
    lock.unlock();
    release_stack_below_here();
    // The burst is over: what its connections freed goes back to the system (every arena).
    if (last_extra) malloc_trim(0);
}

void ConnectionPool::shutdown() {
    std::unordered_map<std::thread::id, std::thread> threads;
    {
        std::lock_guard lock(mutex_);
        if (shutdown_ && threads_.empty()) return;
        shutdown_ = true;
    }
    cv_.notify_all();
    // Jobs still queued run first (the workers leave only when none is left); no thread is
    // made after shutdown_, so the set is final once every worker has returned.
    for (;;) {
        {
            std::lock_guard lock(mutex_);
            if (threads_.empty()) break;
            threads = std::move(threads_);
            threads_.clear();
            ended_.clear();
        }
        for (auto& [id, t] : threads) t.join();
        threads.clear();
    }
}

// ---------------------------------------------------------------------------------------------

bool ClientSlots::acquire(const std::string& address, Clock::time_point deadline,
                          const std::function<bool()>& stopping) {
    std::unique_lock lock(mutex_);
    Count& c = clients_[address];
    if (c.served < per_client_) {
        ++c.served;
        return true;
    }
    if (c.waiting >= kWaitingPerSlot * per_client_) return false;
    ++c.waiting;
    bool got = false;
    for (;;) {
        cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(kSliceMs)));
        if (stopping() || Clock::now() >= deadline) break;  // a slot freed just now comes too late
        if (c.served < per_client_) {
            got = true;
            break;
        }
    }
    --c.waiting;
    if (got) ++c.served;
    else forget_if_unused(address);
    return got;
}

void ClientSlots::release(const std::string& address) {
    {
        std::lock_guard lock(mutex_);
        --clients_[address].served;
        forget_if_unused(address);
    }
    cv_.notify_all();
}

void ClientSlots::forget_if_unused(const std::string& address) {
    const auto it = clients_.find(address);
    if (it != clients_.end() && it->second.served == 0 && it->second.waiting == 0) clients_.erase(it);
}

// ---------------------------------------------------------------------------------------------

GuardedServer::GuardedServer(GuardOptions options)
    : options_(options), slots_(std::max<size_t>(1, options.max_per_client)) {
    new_task_queue = [this] { return new ConnectionPool(options_.ready_threads, options_.max_connections); };
}

RequestFault GuardedServer::current_fault() { return tl_fault; }

std::string GuardedServer::fault_message(RequestFault f) const {
    if (f == RequestFault::Timeout)
        return "the request was not received within " + std::to_string(options_.read_deadline.count()) + " ms";
    return "the request's head is larger than this server accepts (" + std::to_string(options_.max_header_bytes) +
           " bytes, " + std::to_string(options_.max_header_lines) + " header lines)";
}

const char* GuardedServer::fault_code(RequestFault f) {
    return f == RequestFault::Timeout ? "request_timeout" : "headers_too_large";
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
    GuardedStream stream(sock, options_, [this] { return stopping(); });
    std::string address;
    int port = 0;
    stream.get_remote_ip_and_port(address, port);
    const auto deadline = Clock::now() + options_.read_deadline;
    bool ok = false, linger = false;
    if (slots_.acquire(address, deadline, [this] { return stopping(); })) {
        stream.begin_request(deadline);
        ok = serve(stream);
        slots_.release(address);
        linger = stream.fault() != RequestFault::None;
    } else if (!stopping()) {
        write_raw(sock, 503, "Service Unavailable",
                  "too many connections from this address at once (" + std::to_string(options_.max_per_client) +
                      "); try again",
                  "too_many_connections");
        if (options_.on_guard_answer) options_.on_guard_answer(503);
        linger = true;
    }
    tl_fault = RequestFault::None;
    if (linger) {
        close_lingering(sock);
    } else {
        ::shutdown(sock, SHUT_RDWR);
        ::close(sock);
    }
    return ok;
}

// httplib's own loop (process_server_socket_core), over the guarded stream: up to
// keep_alive_max_count requests, each begun within keep_alive_timeout of the last answer.
bool GuardedServer::serve(GuardedStream& stream) {
    bool ok = false;
    for (size_t left = keep_alive_max_count_; left > 0 && !stopping(); --left) {
        if (left != keep_alive_max_count_) {
            if (!stream.next_request_within(std::chrono::seconds(keep_alive_timeout_sec_))) break;
            stream.begin_request(Clock::now() + options_.read_deadline);
        }
        bool closed = false;
        ok = process_request(stream, left == 1, closed, nullptr);
        const RequestFault fault = stream.fault();
        // A fault in the request line ends process_request with no answer at all: give one.
        if (fault != RequestFault::None && stream.started() && !stream.answered()) {
            write_raw(stream.socket(), fault_status(fault),
                      fault == RequestFault::Timeout ? "Request Timeout" : "Request Header Fields Too Large",
                      fault_message(fault), fault_code(fault));
            if (options_.on_guard_answer) options_.on_guard_answer(fault_status(fault));
        }
        if (!ok || closed || fault != RequestFault::None) break;
    }
    return ok;
}

}  // namespace ember::server
