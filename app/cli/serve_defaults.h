// Where `ember serve` listens unless told otherwise, and where `ember ps` looks for it.
#pragma once

namespace ember::cli {

inline constexpr const char* kServeHost = "127.0.0.1";  // loopback: not on the network unless asked
inline constexpr int kServePort = 8080;                 // llama-server's default too

}  // namespace ember::cli
