// A small HTTP server on 127.0.0.1 (real sockets) whose answers a test scripts byte by byte:
// rate limits, malformed or endless event streams, huge bodies, a server that dies mid-answer.
// One thread, one connection at a time: each request is read whole (headers, Content-Length
// body), handed to the test's handler with its number (0, 1, ...), and the connection closed.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace ember::test {

// Writes all of `bytes`; false when the client has gone.
inline bool send_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n <= 0) return false;
        bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
}

// An SSE answer's head, then the test writes the events.
inline std::string sse_head() {
    return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
}
// One chat chunk with `content` (JSON-escaped by the caller where needed).
inline std::string sse_chunk(const std::string& content) {
    return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + content + "\"}}]}\n\n";
}
inline std::string json_answer(int status, const std::string& reason, const std::string& body,
                               const std::string& extra_headers = "") {
    return "HTTP/1.1 " + std::to_string(status) + " " + reason +
           "\r\nContent-Type: application/json\r\nConnection: close\r\n" + extra_headers +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

class ScriptedServer {
public:
    // handler(fd, request text, request number): writes the answer; the connection closes after.
    using Handler = std::function<void(int fd, const std::string& request, int n)>;

    explicit ScriptedServer(Handler handler) : handler_(std::move(handler)) {
        listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
            ::listen(listen_fd_, 16) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
            throw std::runtime_error("ScriptedServer: cannot listen on 127.0.0.1");
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~ScriptedServer() {
        stop_ = true;
        thread_.join();
        ::close(listen_fd_);
    }
    int port() const { return port_; }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
    int requests() const { return n_; }
    std::vector<std::string> seen() const {
        std::lock_guard lock(mutex_);
        return seen_;
    }

private:
    void serve() {
        while (!stop_) {
            pollfd p{listen_fd_, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            const int fd = ::accept(listen_fd_, nullptr, nullptr);
            if (fd < 0) continue;
            const std::string req = read_request(fd);
            {
                std::lock_guard lock(mutex_);
                seen_.push_back(req);
            }
            handler_(fd, req, n_++);
            ::shutdown(fd, SHUT_RDWR);
            ::close(fd);
        }
    }
    static std::string read_request(int fd) {
        std::string r;
        char buf[4096];
        size_t want = std::string::npos;
        while (r.size() < want) {
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0) break;
            r.append(buf, static_cast<size_t>(n));
            const size_t end = r.find("\r\n\r\n");
            if (end == std::string::npos || want != std::string::npos) continue;
            const size_t cl = r.find("Content-Length: ");
            want = end + 4 + (cl < end ? std::stoul(r.substr(cl + 16)) : 0);
        }
        return r;
    }

    Handler handler_;
    int listen_fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> n_{0};
    mutable std::mutex mutex_;
    std::vector<std::string> seen_;
    std::thread thread_;
};

}  // namespace ember::test
