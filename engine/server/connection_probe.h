// Whether the client of an unstreamed request is still connected.
//
// httplib 0.11 (Debian 12) tells a route handler nothing about its connection: a streamed
// answer notices a client that went away when a write fails, but an unstreamed one writes only
// at the end, so its request would run to max_tokens for nobody. The connection's socket is the
// process's one whose local and peer addresses are the request's (a TCP connection is named by
// that pair), found once through /proc/self/fd and then polled without blocking.
#pragma once
#include <string>

namespace ember::server {

class ConnectionProbe {
public:
    // Finds the socket of the connection local_addr:local_port <-> remote_addr:remote_port
    // (numeric addresses, as httplib::Request gives them). Not found: connected() stays true.
    ConnectionProbe(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port);

    bool found() const { return fd_ >= 0; }
    // False once the peer has closed the connection (an orderly close or a reset); never blocks.
    bool connected() const;

private:
    int fd_ = -1;
};

}  // namespace ember::server
