// The HTTP layer of the remote engine client, on libcurl's easy interface (one handle per
// exchange, so calls from several threads never share one): an exchange with its bounds
// (connect and read timeouts, body limits, cancel), the errors a finished exchange stands for,
// and the retry rule (connection errors, 429/502/503/504 with Retry-After, never once an
// answer has started). TLS is always verified; proxies come from the environment
// (http_proxy, https_proxy, no_proxy: libcurl reads them). The API key travels only in the
// Authorization header and is never part of a message or a log line.
#pragma once
#include <curl/curl.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "engine/remote/remote_config.h"
#include "kernels/common/error.h"

namespace ember::remote {

// Why a remote call failed, for callers that react differently (ask for a key, wait, give up).
enum class RemoteErrorKind {
    Network,
    Timeout,
    Tls,
    Unauthorized,
    Forbidden,
    NotFound,
    RateLimited,
    Server,
    Http,
    Protocol
};

class RemoteError : public Error {
public:
    RemoteError(RemoteErrorKind kind, const std::string& message, long http_status = 0)
        : Error(message), kind_(kind), http_status_(http_status) {}
    RemoteErrorKind kind() const { return kind_; }
    long http_status() const { return http_status_; }

private:
    RemoteErrorKind kind_;
    long http_status_;
};

// What one exchange returned.
struct HttpResult {
    long status = 0;
    std::map<std::string, std::string> headers;  // names lower-case
    std::string body;  // a 2xx without a sink (up to max_body_bytes), or the start of an error body
    CURLcode code = CURLE_OK;
    std::string curl_message;
    bool started = false;    // a 2xx answer began arriving: the request ran (never retried then)
    bool cancelled = false;  // the caller's cancel flag ended it
    bool timed_out = false;  // no byte for read_timeout
    bool too_large = false;  // a whole answer over max_body_bytes (not read further)
    bool sink_stopped = false;
    std::string header(const std::string& name) const {
        const auto it = headers.find(name);
        return it == headers.end() ? "" : it->second;
    }
};

// Receives a 2xx answer's bytes as they come; false ends the exchange.
using BodySink = std::function<bool(std::string_view bytes, const HttpResult& so_far)>;

struct HttpCall {
    std::string url;
    std::string post_body;  // "" = GET
    BodySink sink;          // null: the body is collected into HttpResult::body
    const std::atomic<bool>* cancel = nullptr;
};

HttpResult perform(const RemoteConfig& cfg, const HttpCall& call);
// The RemoteError a finished exchange stands for, or nullopt for a 2xx that completed.
std::optional<RemoteError> error_of(const RemoteConfig& cfg, const HttpResult& r, const std::string& url);
bool retryable(const RemoteError& e);
// Retry-After in seconds or as an HTTP date; nullopt when absent or unreadable.
std::optional<std::chrono::milliseconds> retry_after(const HttpResult& r);
// The exchange, again after connection errors and 429/502/503/504 until it starts, succeeds or
// max_attempts are spent; throws the RemoteError of the last attempt (a cancel: none thrown,
// the result says so).
HttpResult perform_with_retries(const RemoteConfig& cfg, const HttpCall& call);

}  // namespace ember::remote
