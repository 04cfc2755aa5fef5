// Where `ember serve` listens unless told otherwise, and where `ember ps` looks for it.
#pragma once

namespace ember::cli {

inline constexpr const char* kServeHost = "127.0.0.1";  // loopback: not on the network unless asked
inline constexpr int kServePort = 8080;                 // llama-server's default too
// The prefix cache's host-RAM tier: at most this much of evicted KV blocks (taken as needed,
// not up front; llama-server's --cache-ram is 8 GiB).
inline constexpr const char* kServeCacheRam = "4GiB";

}  // namespace ember::cli
