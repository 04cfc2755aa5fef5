// A queue of model pulls for a GUI: enqueue() returns at once; at most `max_concurrent`
// pulls run, each on its own worker thread; progress is read by polling progress() from any
// thread, or pushed to a listener (called on a worker thread: a Qt client re-posts it to its
// own thread with a queued call). pause() keeps the partial files and frees the slot;
// resume() queues the pull again, to continue where it stopped; cancel() stops it and deletes
// its partial files. Nothing here blocks the caller except the destructor, which stops every
// transfer (keeping partial files for the next start) and joins the workers; restore_pending()
// lists those unfinished pulls again (paused, with their bytes on disk) in the next process.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/hub/pull.h"

namespace ember::hub {

class DownloadQueue {
public:
    using Listener = std::function<void(uint64_t id, const PullProgress&)>;

    DownloadQueue(HubConfig config, std::filesystem::path models_dir, int max_concurrent = 2);
    ~DownloadQueue();
    DownloadQueue(const DownloadQueue&) = delete;
    DownloadQueue& operator=(const DownloadQueue&) = delete;

    // Queues "owner/name" + quantization (+ revision); returns the pull's id.
    uint64_t enqueue(const std::string& repo, const std::string& quant, const std::string& revision = "main");
    void pause(uint64_t id);
    void resume(uint64_t id);
    void cancel(uint64_t id);

    // A snapshot; an unknown id reads as Failed with an error saying so.
    PullProgress progress(uint64_t id) const;
    std::map<uint64_t, PullProgress> all() const;
    void set_listener(Listener listener);
    // Adds the library's pending pulls (left unfinished by an earlier process, or by the CLI)
    // that are not in the queue yet, as Paused jobs with the bytes already on disk: resume()
    // continues them, cancel() deletes their files. Tells the listener; returns their ids.
    std::vector<uint64_t> restore_pending();
    // The hub settings for pulls started from now on (the app's token changed).
    void set_config(HubConfig config);
    // Blocks until the pull is Done, Failed, Cancelled or Paused, or `timeout` passes;
    // returns its state then. For tests and the CLI, never for a GUI thread.
    PullState wait(uint64_t id, std::chrono::milliseconds timeout) const;

private:
    struct Job {
        std::string repo, quant, revision;
        PullProgress progress;
        TransferControl control;
        bool running = false;
    };
    void pump();  // starts queued jobs while slots are free (mutex held)
    void run(uint64_t id, std::shared_ptr<Job> job);
    void update(uint64_t id, Job& job, const PullProgress& p);
    void tell(uint64_t id, const std::optional<PullProgress>& p);

    std::shared_ptr<const HubClient> hub_;  // replaced by set_config; each pull keeps its own
    library::Library library_;
    int max_concurrent_;
    mutable std::mutex mutex_;
    mutable std::condition_variable changed_;
    std::map<uint64_t, std::shared_ptr<Job>> jobs_;
    std::list<uint64_t> waiting_;
    std::list<std::thread> threads_;
    int running_ = 0;
    uint64_t next_id_ = 1;
    bool closing_ = false;
    Listener listener_;
};

}  // namespace ember::hub
