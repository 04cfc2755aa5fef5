// The HTTP layer under HubClient (internal to engine/hub): one exchange with redirects
// followed by hand, the token sent only to the endpoint's origin, the stall watchdog, and the
// mapping of curl and HTTP failures to HubError. Not a public API: include hub_client.h.
#pragma once
#include <curl/curl.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <string>

#include "engine/hub/hub_client.h"

namespace ember::hub::http {

// What one HTTP exchange returned (after redirects).
struct Response {
    long status = 0;
    std::map<std::string, std::string> headers;  // of the last response, names lower-case
    std::string body;                            // 2xx without a sink, or the start of an error body
    std::string url;                             // the last URL asked
    CURLcode code = CURLE_OK;
    std::string curl_message;
    bool stalled = false;  // aborted by the stall watchdog
    bool stopped = false;  // aborted because the control asked for it
    bool sink_refused = false;
    bool too_large = false;  // an API answer over the size it may have (not read further)
    bool too_slow = false;   // an API answer not complete within the stall timeout
    std::string header(const std::string& name) const {
        const auto it = headers.find(name);
        return it == headers.end() ? "" : it->second;
    }
};

// Body sink for 2xx answers: return false to abort the transfer.
using BodySink = std::function<bool(const char*, size_t, const Response&)>;

struct Request {
    std::string url;
    std::string range;  // "bytes=N-" or ""
    BodySink sink;      // null: collect the body into Response::body
    const TransferControl* control = nullptr;
    // No byte for this long aborts the transfer; an answer collected whole (no sink: listings,
    // searches, a few KiB) must also be complete within it, so that one dripped a byte at a
    // time is not waited on for ever.
    std::chrono::milliseconds stall_timeout{0};
};

// Follows redirects by hand; the token goes only to the endpoint's own origin.
Response fetch(const HubConfig& cfg, const Request& req);
// Throws the HubError a finished exchange stands for; returns when it is a 2xx.
void check(const HubConfig& cfg, const Response& r, const std::string& what);
// Network trouble, stalls, 429 and 5xx: worth another attempt.
bool retryable(const HubError& e);
// Waits `d`, waking early when the control asks to stop. Returns false when it did.
bool backoff_wait(std::chrono::milliseconds d, const TransferControl* control);
std::chrono::milliseconds backoff_for(const HubConfig& cfg, int failures);
// An API call with retries for transient failures.
Response fetch_checked(const HubConfig& cfg, const Request& req, const std::string& what);

// scheme://host:port of a URL (default ports filled in), or "" when it does not parse.
std::string origin_of(const std::string& url);
// A URL without its query (signed storage URLs carry credentials there): for messages and logs.
std::string printable_url(const std::string& url);
std::string escape(const std::string& s);
std::string escape_path(const std::string& path);  // each '/'-separated component escaped

// The rate over the last few seconds, for progress and ETA.
class RateMeter {
public:
    void add(uint64_t bytes);
    double bytes_per_s() const;

private:
    std::deque<std::pair<std::chrono::steady_clock::time_point, uint64_t>> samples_;
};

}  // namespace ember::hub::http
