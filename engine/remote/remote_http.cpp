// The remote engine client's HTTP exchange on libcurl (remote_http.h). Redirects are not
// followed: a POST redirected is re-sent by no two clients alike, and the key must not go to
// another host; the error names the new address instead.
#include "engine/remote/remote_http.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <thread>

#include "engine/core/log.h"
#include "engine/net/curl_common.h"
#include "engine/remote/remote_wire.h"

namespace ember::remote {

namespace {

constexpr size_t kMaxErrorBody = 4096;  // enough for a server's {"error": {"message": ...}}
using Clock = std::chrono::steady_clock;

struct Exchange {
    CURL* easy = nullptr;
    const RemoteConfig* cfg = nullptr;
    const HttpCall* call = nullptr;
    HttpResult* r = nullptr;
    Clock::time_point last_byte = Clock::now();
};

bool cancelled(const Exchange& x) { return x.call->cancel && x.call->cancel->load(std::memory_order_relaxed); }

size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto* x = static_cast<Exchange*>(user);
    x->last_byte = Clock::now();
    net::add_header_line(std::string_view(data, size * n), x->r->headers, 100, 1024);  // bounded: hostile servers
    return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
    auto* x = static_cast<Exchange*>(user);
    const size_t bytes = size * n;
    x->last_byte = Clock::now();
    if (cancelled(*x)) return x->r->cancelled = true, 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->r->status);
    if (x->r->status < 200 || x->r->status >= 300) {  // keep the start of an error body, then stop
        x->r->body.append(data, std::min(bytes, kMaxErrorBody - std::min(kMaxErrorBody, x->r->body.size())));
        return x->r->body.size() >= kMaxErrorBody ? 0 : bytes;
    }
    x->r->started = true;
    if (x->call->sink) {
        if (x->call->sink(std::string_view(data, bytes), *x->r)) return bytes;
        return x->r->sink_stopped = true, 0;
    }
    if (x->r->body.size() + bytes > x->cfg->max_body_bytes) return x->r->too_large = true, 0;
    x->r->body.append(data, bytes);
    return bytes;
}

// Called about once a second while idle, more often while bytes flow: cancel and read timeout.
int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* x = static_cast<Exchange*>(user);
    if (cancelled(*x)) return x->r->cancelled = true, 1;
    if (Clock::now() - x->last_byte > x->cfg->read_timeout) return x->r->timed_out = true, 1;
    return 0;
}

void set_options(CURL* easy, const RemoteConfig& cfg, const HttpCall& call, Exchange& x, curl_slist* headers) {
    curl_easy_setopt(easy, CURLOPT_URL, call.url.c_str());
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 1L);  // the defaults, stated: never turned off
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 2L);
    if (!cfg.ca_file.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, cfg.ca_file.c_str());
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(cfg.connect_timeout.count()));
    curl_easy_setopt(easy, CURLOPT_USERAGENT, cfg.user_agent.c_str());
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    if (!call.post_body.empty()) {
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, call.post_body.c_str());
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(call.post_body.size()));
    }
    net::set_callbacks(easy, on_header, on_body, on_progress, &x);
}

std::string said(const HttpResult& r) {
    const std::string s = server_message(r.body);
    return s.empty() ? "" : ": " + s;
}

RemoteError http_error(const RemoteConfig& cfg, const HttpResult& r, const std::string& where) {
    const std::string status = "HTTP " + std::to_string(r.status);
    const long s = r.status;
    if (s == 401)
        return {RemoteErrorKind::Unauthorized,
                where + " refused the request (" + status + "): " +
                    (cfg.api_key.empty() ? "it needs an API key (--api-key, or EMBER_API_KEY)"
                                         : "the API key was not accepted") +
                    said(r),
                s};
    if (s == 403) return {RemoteErrorKind::Forbidden, where + ": access denied (" + status + ")" + said(r), s};
    if (s == 404)
        return {RemoteErrorKind::NotFound,
                where + ": not found (" + status + "; the model name or the base URL is wrong)" + said(r), s};
    if (s == 429) {
        const auto wait = retry_after(r);
        return {RemoteErrorKind::RateLimited,
                where + ": too many requests (" + status + ")" +
                    (wait ? "; the server asks to wait " + std::to_string(wait->count() / 1000) + " s" : "") + said(r),
                s};
    }
    if (s >= 300 && s < 400)
        return {RemoteErrorKind::Http,
                where + " redirects (" + status + ") to " + printable_url(r.header("location")) +
                    "; give that address instead",
                s};
    if (s >= 500) return {RemoteErrorKind::Server, where + ": the server failed (" + status + ")" + said(r), s};
    return {RemoteErrorKind::Http, where + ": the server answered " + status + said(r), s};
}

}  // namespace

HttpResult perform(const RemoteConfig& cfg, const HttpCall& call) {
    net::curl_init_once();
    HttpResult r;
    CURL* easy = curl_easy_init();
    if (!easy) throw RemoteError(RemoteErrorKind::Network, "cannot start an HTTP transfer (libcurl)");
    Exchange x{easy, &cfg, &call, &r};
    char errbuf[CURL_ERROR_SIZE] = {};
    curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json, text/event-stream");
    if (!call.post_body.empty()) headers = curl_slist_append(headers, "Content-Type: application/json");
    if (!cfg.api_key.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + cfg.api_key).c_str());
    set_options(easy, cfg, call, x, headers);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
    r.code = curl_easy_perform(easy);
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &r.status);
    r.curl_message = errbuf[0] ? errbuf : curl_easy_strerror(r.code);
    char* location = nullptr;
    if (r.status >= 300 && r.status < 400 && curl_easy_getinfo(easy, CURLINFO_REDIRECT_URL, &location) == CURLE_OK &&
        location)
        r.headers["location"] = location;
    curl_slist_free_all(headers);  // holds the key: freed with the handle, never logged
    curl_easy_cleanup(easy);
    return r;
}

std::optional<RemoteError> error_of(const RemoteConfig& cfg, const HttpResult& r, const std::string& url) {
    const std::string where = printable_url(url);
    if (r.timed_out)
        return RemoteError(RemoteErrorKind::Timeout,
                           where + ": no data from the server for " + std::to_string(cfg.read_timeout.count()) + " ms");
    if (r.too_large)
        return RemoteError(RemoteErrorKind::Protocol, where + ": the answer is larger than " +
                                                          std::to_string(cfg.max_body_bytes >> 20) +
                                                          " MiB; not read further");
    if (r.status >= 300 || (r.status > 0 && r.status < 200)) return http_error(cfg, r, where);
    if (r.code != CURLE_OK && !r.sink_stopped && !r.cancelled) {
        if (net::is_tls_error(r.code))
            return RemoteError(RemoteErrorKind::Tls, where + ": the server's TLS certificate could not be verified (" +
                                                         r.curl_message + "); give its CA certificate with --ca-file");
        if (r.code == CURLE_OPERATION_TIMEDOUT)
            return RemoteError(RemoteErrorKind::Timeout, where + ": " + r.curl_message);
        return RemoteError(RemoteErrorKind::Network, where + ": " + r.curl_message);
    }
    return std::nullopt;
}

bool retryable(const RemoteError& e) {
    switch (e.kind()) {
        case RemoteErrorKind::Network:
        case RemoteErrorKind::RateLimited:
            return true;
        case RemoteErrorKind::Server:
            return e.http_status() == 502 || e.http_status() == 503 || e.http_status() == 504;
        default:
            return false;
    }
}

std::optional<std::chrono::milliseconds> retry_after(const HttpResult& r) {
    const std::string v = r.header("retry-after");
    if (v.empty()) return std::nullopt;
    if (std::all_of(v.begin(), v.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        if (v.size() > 9) return std::chrono::milliseconds(std::chrono::hours(24 * 365));
        return std::chrono::seconds(std::stol(v));
    }
    const time_t when = curl_getdate(v.c_str(), nullptr);
    if (when < 0) return std::nullopt;
    return std::chrono::seconds(std::max<time_t>(0, when - std::time(nullptr)));
}

namespace {

// Waits `d`, waking early on cancel. False when cancelled.
bool wait_for(std::chrono::milliseconds d, const std::atomic<bool>* cancel) {
    const auto until = Clock::now() + d;
    while (Clock::now() < until) {
        if (cancel && cancel->load()) return false;
        std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(20), until - Clock::now()));
    }
    return true;
}

std::chrono::milliseconds backoff(const RemoteConfig& cfg, int failures) {
    return net::doubling_backoff(cfg.backoff_initial, cfg.backoff_max, failures);
}

}  // namespace

HttpResult perform_with_retries(const RemoteConfig& cfg, const HttpCall& call) {
    for (int attempt = 1;; ++attempt) {
        HttpResult r = perform(cfg, call);
        if (r.started || r.cancelled) return r;
        auto e = error_of(cfg, r, call.url);
        if (!e) return r;
        if (!retryable(*e) || attempt >= cfg.max_attempts) {
            if (attempt > 1)
                throw RemoteError(e->kind(),
                                  std::string(e->what()) + " (after " + std::to_string(attempt) + " attempts)",
                                  e->http_status());
            throw *e;
        }
        std::chrono::milliseconds wait = backoff(cfg, attempt);
        if (const auto asked = retry_after(r)) {
            if (*asked > cfg.max_retry_after) throw *e;  // its message says how long the server asks
            wait = std::max(wait, *asked);
        }
        log_warn(std::string("remote: ") + e->what() + "; trying again in " + std::to_string(wait.count()) + " ms");
        if (!wait_for(wait, call.cancel)) {
            r.cancelled = true;
            return r;
        }
    }
}

}  // namespace ember::remote
