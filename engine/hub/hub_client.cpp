// HubClient's API calls (search, file list, byte ranges); downloads are in hub_download.cpp.
#include "engine/hub/hub_client.h"

#include <algorithm>
#include <cstdlib>

#include "engine/hub/hub_http.h"

namespace ember::hub {

using namespace http;

namespace {

constexpr int kMaxTreePages = 1000;

// The URL of `Link: <URL>; rel="next"`, or "".
std::string next_page_url(const std::string& link) {
    const size_t rel = link.find("rel=\"next\"");
    if (rel == std::string::npos) return "";
    const size_t open = link.rfind('<', rel), close = link.rfind('>', rel);
    if (open == std::string::npos || close == std::string::npos || close < open) return "";
    return link.substr(open + 1, close - open - 1);
}

}  // namespace

HubConfig HubConfig::from_env() {
    HubConfig c;
    if (const char* e = std::getenv("HF_ENDPOINT"); e && *e) c.endpoint = e;
    while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
    if (const char* t = std::getenv("HF_TOKEN"); t && *t) c.token = t;
    return c;
}

HubClient::HubClient(HubConfig config) : config_(std::move(config)) {
    while (!config_.endpoint.empty() && config_.endpoint.back() == '/') config_.endpoint.pop_back();
    if (origin_of(config_.endpoint).empty())
        throw Error("hub endpoint '" + config_.endpoint + "' is not an http(s) URL (check HF_ENDPOINT)");
}

std::vector<ModelSummary> HubClient::search(const std::string& query, int limit) const {
    Request req;
    req.url = config_.endpoint + "/api/models?search=" + escape(query) + "&filter=gguf&sort=downloads&direction=-1" +
              "&limit=" + std::to_string(std::clamp(limit, 1, 1000));
    req.stall_timeout = config_.stall_timeout;
    return parse_search_response(fetch_checked(config_, req, "search for '" + query + "'").body);
}

std::vector<RemoteFile> HubClient::list_files(const std::string& repo, const std::string& revision) const {
    check_repo_id(repo);
    check_revision(revision);
    Request req;
    req.url = config_.endpoint + "/api/models/" + repo + "/tree/" + escape(revision) + "?recursive=1";
    req.stall_timeout = config_.stall_timeout;
    std::vector<RemoteFile> out;
    // Large repositories come in pages, each naming the next in a `Link: <URL>; rel="next"` header.
    for (int page = 0; page < kMaxTreePages && !req.url.empty(); ++page) {
        const Response r = fetch_checked(config_, req, "list the files of " + repo + "@" + revision);
        for (RemoteFile& f : parse_tree_response(r.body)) out.push_back(std::move(f));
        req.url = next_page_url(r.header("link"));
        if (!req.url.empty() && origin_of(req.url) != origin_of(config_.endpoint))
            throw HubError(HubErrorKind::Protocol, "list the files of " + repo + ": the next page is on another host");
    }
    return out;
}

std::string HubClient::resolve_url(const std::string& repo, const std::string& revision,
                                   const std::string& file) const {
    check_repo_id(repo);
    check_revision(revision);
    check_remote_path(file);
    return config_.endpoint + "/" + repo + "/resolve/" + escape(revision) + "/" + escape_path(file);
}

std::string HubClient::fetch_range(const std::string& repo, const std::string& revision, const std::string& file,
                                   uint64_t offset, uint64_t length) const {
    if (length == 0) return {};
    std::string out;
    bool started = false;
    uint64_t skip = 0;  // bytes of a 200 answer before `offset` (a server that ignores Range)
    Request req;
    req.url = resolve_url(repo, revision, file);
    req.range = "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1);
    req.stall_timeout = config_.stall_timeout;
    req.sink = [&](const char* p, size_t n, const Response& r) {
        if (!started) skip = r.status == 200 ? offset : 0, started = true;
        const size_t drop = static_cast<size_t>(std::min<uint64_t>(skip, n));
        skip -= drop;
        out.append(p + drop, std::min<uint64_t>(n - drop, length - out.size()));
        return out.size() < length;  // stop as soon as we have what was asked
    };
    const std::string what = "read bytes of " + repo + "/" + file;
    for (int attempt = 1;; ++attempt) {
        out.clear(), started = false;
        const Response r = fetch(config_, req);
        if (r.status == 416) return {};  // offset at or past the end: no bytes
        try {
            check(config_, r, what);
            return out;
        } catch (const HubError& e) {
            if (!retryable(e) || attempt >= config_.max_attempts) throw;
            backoff_wait(backoff_for(config_, attempt), nullptr);
        }
    }
}

}  // namespace ember::hub
