// HubClient's HTTP layer on libcurl's easy interface, one handle per request. Redirects are
// followed by hand (CURLOPT_FOLLOWLOCATION off) so that the token's fate on each hop is
// decided here, by comparing origins, and not by a libcurl version's rules.
#include "engine/hub/hub_http.h"

#include <curl/curl.h>

#include <algorithm>
#include <thread>

#include "engine/core/log.h"
#include "engine/net/curl_common.h"

namespace ember::hub::http {

namespace {
constexpr int kMaxRedirects = 10;
constexpr size_t kMaxApiBody = 64u << 20;  // a file listing of a huge repository stays far below this
constexpr size_t kMaxErrorBody = 4096;     // enough for the server's {"error": "..."} message
}  // namespace

using net::lower_ascii;

// scheme://host:port of a URL (default ports filled in), or "" when it does not parse.
std::string origin_of(const std::string& url) {
    CURLU* u = curl_url();
    std::string out;
    if (curl_url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK) {
        char *scheme = nullptr, *host = nullptr, *port = nullptr;
        if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK)
            out = lower_ascii(scheme) + "://" + lower_ascii(host) + ":" + port;
        curl_free(scheme), curl_free(host), curl_free(port);
    }
    curl_url_cleanup(u);
    return out;
}

// A URL without its query (signed storage URLs carry credentials there): for messages and logs.
std::string printable_url(const std::string& url) { return url.substr(0, url.find('?')); }

std::string escape(const std::string& s) {
    char* e = curl_easy_escape(nullptr, s.c_str(), static_cast<int>(s.size()));
    std::string out = e ? e : "";
    curl_free(e);
    return out;
}

std::string escape_path(const std::string& path) {
    std::string out;
    size_t start = 0;
    for (;;) {
        const size_t slash = path.find('/', start);
        out += escape(path.substr(start, slash - start));
        if (slash == std::string::npos) break;
        out += '/';
        start = slash + 1;
    }
    return out;
}

namespace {
struct Exchange {
    CURL* easy = nullptr;
    Response* r = nullptr;
    const Request* req = nullptr;
    curl_off_t last_now = -1;
    std::chrono::steady_clock::time_point last_change = std::chrono::steady_clock::now();
};
}  // namespace

static size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto* x = static_cast<Exchange*>(user);
    net::add_header_line(std::string_view(data, size * n), x->r->headers);  // a redirect, a 100: cleared
    return size * n;
}

static size_t on_body(char* data, size_t size, size_t n, void* user) {
    auto* x = static_cast<Exchange*>(user);
    const size_t bytes = size * n;
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    x->r->status = status;
    if (status >= 300 && status < 400) return bytes;  // a redirect's body: nobody reads it
    if (status < 200 || status >= 300) {
        if (x->r->body.size() < kMaxErrorBody) x->r->body.append(data, std::min(bytes, kMaxErrorBody));
        return bytes;
    }
    if (x->req->sink) {
        if (x->req->sink(data, bytes, *x->r)) return bytes;
        x->r->sink_refused = true;
        return 0;  // CURLE_WRITE_ERROR ends the transfer
    }
    if (x->r->body.size() + bytes > kMaxApiBody) {
        x->r->too_large = true;
        return 0;
    }
    x->r->body.append(data, bytes);
    return bytes;
}

static int on_progress(void* user, curl_off_t, curl_off_t now, curl_off_t, curl_off_t) {
    auto* x = static_cast<Exchange*>(user);
    if (x->req->control && x->req->control->stopped()) {
        x->r->stopped = true;
        return 1;
    }
    const auto t = std::chrono::steady_clock::now();
    if (now != x->last_now) {
        x->last_now = now;
        x->last_change = t;
    } else if (x->req->stall_timeout.count() > 0 && t - x->last_change > x->req->stall_timeout) {
        x->r->stalled = true;
        return 1;
    }
    return 0;
}

// One request to one URL, no redirects followed.
static void perform_once(const HubConfig& cfg, const Request& req, const std::string& url, bool send_token,
                         Response& r) {
    net::curl_init_once();
    CURL* easy = curl_easy_init();
    if (!easy) throw HubError(HubErrorKind::Network, "cannot start an HTTP transfer (libcurl)");
    Exchange x{easy, &r, &req};
    char errbuf[CURL_ERROR_SIZE] = {};
    curl_slist* headers = nullptr;
    std::string auth;
    if (send_token && !cfg.token.empty()) {
        auth = "Authorization: Bearer " + cfg.token;
        headers = curl_slist_append(headers, auth.c_str());
    }
    r.headers.clear();
    r.status = 0;
    r.url = url;
    curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 1L);  // the defaults, stated: never turned off
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(cfg.connect_timeout.count()));
    curl_easy_setopt(easy, CURLOPT_USERAGENT, cfg.user_agent.c_str());
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");  // JSON may come compressed
    if (headers) curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    if (!req.range.empty()) curl_easy_setopt(easy, CURLOPT_RANGE, req.range.c_str() + 6);  // after "bytes="
    if (!req.sink && req.stall_timeout.count() > 0)
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(req.stall_timeout.count()));
    net::set_callbacks(easy, on_header, on_body, on_progress, &x);
    r.code = curl_easy_perform(easy);
    r.too_slow = r.code == CURLE_OPERATION_TIMEDOUT && !req.sink && !r.stalled;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &r.status);
    r.curl_message = errbuf[0] ? errbuf : curl_easy_strerror(r.code);
    char* next = nullptr;
    if (r.status >= 300 && r.status < 400 && curl_easy_getinfo(easy, CURLINFO_REDIRECT_URL, &next) == CURLE_OK && next)
        r.headers["location"] = next;  // absolute, resolved against the request URL
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
}

static bool is_redirect(long s) { return s == 301 || s == 302 || s == 303 || s == 307 || s == 308; }

// Follows redirects by hand; the token goes only to the endpoint's own origin.
Response fetch(const HubConfig& cfg, const Request& req) {
    const std::string home = origin_of(cfg.endpoint);
    std::string url = req.url;
    Response r;
    for (int hop = 0; hop <= kMaxRedirects; ++hop) {
        const bool same_origin = !home.empty() && origin_of(url) == home;
        perform_once(cfg, req, url, same_origin, r);
        if (r.code != CURLE_OK || !is_redirect(r.status)) return r;
        const std::string next = r.header("location");
        if (next.empty()) return r;
        if (log_enabled(LogLevel::Debug))
            log_debug("hub: " + printable_url(url) + " redirects to " + printable_url(next));
        url = next;
        r.body.clear();
    }
    throw HubError(HubErrorKind::Protocol, "too many redirects from " + printable_url(req.url));
}

// The server's own words, when its error body is {"error": "..."} or short text.
static std::string server_says(const Response& r) {
    std::string s = r.body.substr(0, 300);
    for (char& c : s)
        if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    return s.empty() ? "" : " (server: " + s + ")";
}

// Throws the HubError a finished exchange stands for; returns when it is a 2xx.
void check(const HubConfig& cfg, const Response& r, const std::string& what) {
    if (r.stalled)
        throw HubError(HubErrorKind::Stalled, what + ": no data for " + std::to_string(cfg.stall_timeout.count()) +
                                                  " ms from " + printable_url(r.url));
    if (r.too_slow)
        throw HubError(HubErrorKind::Stalled, what + ": the answer from " + printable_url(r.url) +
                                                  " was not complete within " +
                                                  std::to_string(cfg.stall_timeout.count()) + " ms");
    if (r.too_large)
        throw HubError(HubErrorKind::Protocol, what + ": the answer from " + printable_url(r.url) + " is larger than " +
                                                   std::to_string(kMaxApiBody >> 20) + " MiB; not read further");
    if (r.code != CURLE_OK && !r.sink_refused) {
        if (net::is_tls_error(r.code))
            throw HubError(HubErrorKind::Tls, what + ": the TLS certificate of " + printable_url(r.url) +
                                                  " could not be verified (" + r.curl_message +
                                                  "); Ember always verifies certificates");
        throw HubError(HubErrorKind::Network, what + ": " + r.curl_message);
    }
    if (r.status >= 200 && r.status < 300) return;
    const std::string tail = " (HTTP " + std::to_string(r.status) + ")" + server_says(r);
    switch (r.status) {
        case 401:
            throw HubError(HubErrorKind::Unauthorized,
                           what + ": " +
                               (cfg.token.empty() ? "this repository needs an access token: set HF_TOKEN or add one "
                                                    "on the Models page"
                                                  : "the access token was not accepted") +
                               tail,
                           r.status);
        case 403:
            throw HubError(HubErrorKind::Forbidden,
                           what +
                               ": access denied; a gated repository needs its terms accepted on the hub's web "
                               "page by the token's owner" +
                               tail,
                           r.status);
        case 404:
            throw HubError(HubErrorKind::NotFound, what + ": not found" + tail, r.status);
        default:
            throw HubError(HubErrorKind::Http, what + ": the server answered" + tail, r.status);
    }
}

bool retryable(const HubError& e) {
    switch (e.kind()) {
        case HubErrorKind::Network:
        case HubErrorKind::Stalled:
            return true;
        case HubErrorKind::Http:
            return e.http_status() == 429 || e.http_status() >= 500;
        default:
            return false;
    }
}

// Waits `d`, waking early when the control asks to stop. Returns false when it did.
bool backoff_wait(std::chrono::milliseconds d, const TransferControl* control) {
    const auto until = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < until) {
        if (control && control->stopped()) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

std::chrono::milliseconds backoff_for(const HubConfig& cfg, int failures) {
    return net::doubling_backoff(cfg.backoff_initial, cfg.backoff_max, failures);
}

// An API call with retries for transient failures.
Response fetch_checked(const HubConfig& cfg, const Request& req, const std::string& what) {
    for (int attempt = 1;; ++attempt) {
        const Response r = fetch(cfg, req);
        try {
            check(cfg, r, what);
            return r;
        } catch (const HubError& e) {
            if (!retryable(e) || attempt >= cfg.max_attempts) throw;
            log_warn(std::string("hub: ") + e.what() + "; retrying");
            backoff_wait(backoff_for(cfg, attempt), nullptr);
        }
    }
}

void RateMeter::add(uint64_t bytes) {
    const auto t = std::chrono::steady_clock::now();
    samples_.push_back({t, bytes});
    while (samples_.size() > 2 && t - samples_.front().first > std::chrono::seconds(3)) samples_.pop_front();
}

double RateMeter::bytes_per_s() const {
    if (samples_.size() < 2) return 0;
    const double s = std::chrono::duration<double>(samples_.back().first - samples_.front().first).count();
    // Over less than a quarter of a second (the first bytes, a buffer's worth arriving at once)
    // a rate means nothing: a few KiB in microseconds once showed as millions of TiB/s.
    if (s < 0.25) return 0;
    return static_cast<double>(samples_.back().second - samples_.front().second) / s;
}

}  // namespace ember::hub::http
