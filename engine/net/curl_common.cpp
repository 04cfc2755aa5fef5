// Shared libcurl plumbing (curl_common.h).
#include "engine/net/curl_common.h"

#include <algorithm>
#include <cctype>
#include <mutex>

namespace ember::net {

void curl_init_once() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string lower_ascii(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

void add_header_line(std::string_view raw, std::map<std::string, std::string>& headers, size_t max_headers,
                     size_t max_value) {
    while (!raw.empty() && (raw.back() == '\r' || raw.back() == '\n')) raw.remove_suffix(1);
    if (raw.substr(0, 5) == "HTTP/") headers.clear();
    const size_t colon = raw.find(':');
    if (colon == std::string_view::npos || headers.size() >= max_headers) return;
    size_t v = colon + 1;
    while (v < raw.size() && raw[v] == ' ') ++v;
    headers[lower_ascii(std::string(raw.substr(0, colon)))] = std::string(raw.substr(v, max_value));
}

void set_callbacks(CURL* easy, curl_write_callback on_header, curl_write_callback on_body,
                   curl_xferinfo_callback on_progress, void* user) {
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, user);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, user);
    curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(easy, CURLOPT_XFERINFODATA, user);
}

bool is_tls_error(CURLcode c) {
    return c == CURLE_PEER_FAILED_VERIFICATION || c == CURLE_SSL_CONNECT_ERROR || c == CURLE_SSL_CACERT_BADFILE ||
           c == CURLE_SSL_CERTPROBLEM || c == CURLE_SSL_ISSUER_ERROR || c == CURLE_SSL_PINNEDPUBKEYNOTMATCH;
}

std::chrono::milliseconds doubling_backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max,
                                           int failures) {
    auto d = initial;
    for (int i = 1; i < failures && d < max; ++i) d *= 2;
    return std::min(d, max);
}

}  // namespace ember::net
