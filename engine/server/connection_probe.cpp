#include "engine/server/connection_probe.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>

namespace ember::server {
namespace {

// The numeric host and port of one end of a socket, formatted as httplib formats them.
bool end_of(int fd, bool peer, std::string& host, int& port) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    auto* sa = reinterpret_cast<sockaddr*>(&addr);
    if ((peer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len)) != 0) return false;
    if (addr.ss_family != AF_INET && addr.ss_family != AF_INET6) return false;
    char h[NI_MAXHOST], p[NI_MAXSERV];
    if (getnameinfo(sa, len, h, sizeof h, p, sizeof p, NI_NUMERICHOST | NI_NUMERICSERV) != 0) return false;
    host = h;
    port = std::atoi(p);
    return true;
}

bool is_connection(int fd, const std::string& local_addr, int local_port, const std::string& remote_addr,
                   int remote_port) {
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
    std::string host;
    int port = -1;
    return end_of(fd, false, host, port) && port == local_port && host == local_addr && end_of(fd, true, host, port) &&
           port == remote_port && host == remote_addr;
}

}  // namespace

ConnectionProbe::ConnectionProbe(const std::string& local_addr, int local_port, const std::string& remote_addr,
                                 int remote_port) {
    if (local_port < 0 || remote_port < 0) return;
    DIR* dir = opendir("/proc/self/fd");
    if (!dir) return;
    while (const dirent* e = readdir(dir)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
        if (is_connection(static_cast<int>(fd), local_addr, local_port, remote_addr, remote_port)) {
            fd_ = static_cast<int>(fd);
            break;
        }
    }
    closedir(dir);
}

bool ConnectionProbe::connected() const {
    if (fd_ < 0) return true;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return true;  // nothing to read: the client is waiting
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return false;
    // Readable while it waits for the answer: either more bytes (a pipelined request) or the
    // end of the stream (the client closed its side), which a peek tells apart.
    char c;
    return recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
}

}  // namespace ember::server
