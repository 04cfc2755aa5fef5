// What every libcurl client in the engine does alike (the model hub, engine/hub; remote
// engines, engine/remote): the one global init, response header lines into a map, the
// callbacks of a transfer, which failures are TLS verification, and the doubling backoff.
// Each client keeps its own policy (redirects, tokens, retries, error words).
#pragma once
#include <curl/curl.h>

#include <chrono>
#include <map>
#include <string>
#include <string_view>

namespace ember::net {

// curl_global_init, once per process, before the first handle.
void curl_init_once();
std::string lower_ascii(std::string s);
// One raw header line of a response into `headers` (names lower-case, values from the first
// non-space; at most `max_headers` names, `max_value` bytes each). A status line ("HTTP/...")
// clears the map: a new response (after a redirect or a 100 Continue) begins.
void add_header_line(std::string_view raw, std::map<std::string, std::string>& headers, size_t max_headers = 256,
                     size_t max_value = 8192);
// The header, body and progress callbacks of one transfer, all given `user`; progress on.
void set_callbacks(CURL* easy, curl_write_callback on_header, curl_write_callback on_body,
                   curl_xferinfo_callback on_progress, void* user);
// A failure to verify (or to set up) the server's TLS certificate.
bool is_tls_error(CURLcode c);
// initial, doubled per failure after the first, at most `max`.
std::chrono::milliseconds doubling_backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max,
                                           int failures);

}  // namespace ember::net
