// A client of the Hugging Face model hub (or a mirror: HF_ENDPOINT), on libcurl.
//
// Every call blocks the calling thread and is safe to make from several threads at once (each
// call has its own curl handle); a GUI runs them through DownloadQueue (download_queue.h),
// which never blocks its caller. TLS certificates are always verified. The access token is
// sent only to the endpoint's own scheme, host and port: redirects are followed here, one
// by one, and a redirect to any other host (the storage CDN) goes without it. The token is
// never logged and never part of an error message.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/hub/hub_json.h"
#include "engine/hub/hub_names.h"
#include "kernels/common/error.h"

namespace ember::hub {

struct HubConfig {
    std::string endpoint = "https://huggingface.co";  // no trailing '/'
    std::string token;                                // "" = anonymous
    // A transfer that receives no byte for this long is aborted and retried.
    std::chrono::milliseconds stall_timeout{30000};
    std::chrono::milliseconds connect_timeout{15000};
    // Attempts per file that make no progress before the download fails (an attempt that
    // received bytes resets the count). Waits between them double from backoff_initial.
    int max_attempts = 5;
    std::chrono::milliseconds backoff_initial{1000};
    std::chrono::milliseconds backoff_max{30000};
    std::string user_agent = "ember/0.1";

    // HF_ENDPOINT (mirrors) and HF_TOKEN from the environment, over the defaults. The app
    // then puts the token from its settings on top, if it has one.
    static HubConfig from_env();
};

// Why a hub call failed, for callers that react differently (ask for a token, retry later).
enum class HubErrorKind {
    Network,
    Tls,
    NotFound,
    Unauthorized,
    Forbidden,
    Http,
    Stalled,
    HashMismatch,
    Protocol,
    Disk
};

class HubError : public Error {
public:
    HubError(HubErrorKind kind, const std::string& msg, long http_status = 0)
        : Error(msg), kind_(kind), http_status_(http_status) {}
    HubErrorKind kind() const { return kind_; }
    long http_status() const { return http_status_; }

private:
    HubErrorKind kind_;
    long http_status_;
};

// Set from any thread while a download runs; the transfer stops within one curl progress
// tick. Pause keeps the partial file for a later resume; cancel tells the caller to drop it.
struct TransferControl {
    std::atomic<bool> pause{false};
    std::atomic<bool> cancel{false};
    bool stopped() const { return pause.load() || cancel.load(); }
};

struct TransferProgress {
    uint64_t bytes = 0;      // of this file on disk, verified or not
    uint64_t total = 0;      // the file's size
    double bytes_per_s = 0;  // recent rate (a few seconds' window)
    double eta_s = -1;       // -1 while the rate is unknown
    int attempt = 1;
    // Set while another pull (another process, or the app's queue) holds this file: who, as
    // "another process (pid N)"; the pull waits for it (pull_lock.h).
    std::string waiting_for;
};
using ProgressFn = std::function<void(const TransferProgress&)>;

enum class DownloadOutcome { Done, Paused, Cancelled };

class HubClient {
public:
    explicit HubClient(HubConfig config = HubConfig::from_env());
    const HubConfig& config() const { return config_; }

    // GGUF repositories matching `query`, most downloaded first.
    std::vector<ModelSummary> search(const std::string& query, int limit = 20) const;
    // Every file of the repository at `revision`, with sizes and LFS SHA-256s.
    std::vector<RemoteFile> list_files(const std::string& repo, const std::string& revision = "main") const;
    // `length` bytes of a remote file from `offset` (fewer at its end): a GGUF header without
    // the weights. Works against servers that ignore Range too (reads and drops the prefix).
    std::string fetch_range(const std::string& repo, const std::string& revision, const std::string& file,
                            uint64_t offset, uint64_t length) const;

    // Downloads `file` into `part_path`, resuming from what is already there, then checks its
    // size and SHA-256, fsyncs and renames it to `final_path` (then fsyncs the folder). On a
    // hash mismatch the partial file is deleted and HubError(HashMismatch) thrown; on pause or
    // cancel the partial file stays and the outcome says which. Progress is reported on the
    // calling thread.
    DownloadOutcome download(const std::string& repo, const std::string& revision, const RemoteFile& file,
                             const std::string& part_path, const std::string& final_path, TransferControl& control,
                             const ProgressFn& progress = {}) const;

    std::string resolve_url(const std::string& repo, const std::string& revision, const std::string& file) const;

private:
    HubConfig config_;
};

}  // namespace ember::hub
