// DownloadQueue: a thread per running pull (a pull spends its life waiting on the network,
// so threads are the simplest honest model), a FIFO of waiting ones, state under one mutex.
#include "engine/hub/download_queue.h"

#include <algorithm>

namespace ember::hub {

DownloadQueue::DownloadQueue(HubConfig config, std::filesystem::path models_dir, int max_concurrent)
    : hub_(std::make_shared<const HubClient>(std::move(config))),
      library_(std::move(models_dir)),
      max_concurrent_(std::max(1, max_concurrent)) {}

DownloadQueue::~DownloadQueue() {
    std::list<std::thread> threads;
    {
        std::lock_guard lock(mutex_);
        closing_ = true;
        for (auto& [id, job] : jobs_) job->control.pause = true;  // keep partial files for next time
        threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
}

uint64_t DownloadQueue::enqueue(const std::string& repo, const std::string& quant, const std::string& revision) {
    auto job = std::make_shared<Job>();
    job->repo = repo, job->quant = quant, job->revision = revision;
    job->progress.repo = repo, job->progress.quant = quant;
    std::lock_guard lock(mutex_);
    const uint64_t id = next_id_++;
    jobs_[id] = job;
    waiting_.push_back(id);
    pump();
    return id;
}

void DownloadQueue::pump() {
    while (!closing_ && running_ < max_concurrent_ && !waiting_.empty()) {
        const uint64_t id = waiting_.front();
        waiting_.pop_front();
        auto job = jobs_.at(id);
        job->running = true;
        job->control.pause = false;
        ++running_;
        threads_.emplace_back([this, id, job] { run(id, job); });
    }
}

void DownloadQueue::update(uint64_t id, Job& job, const PullProgress& p) {
    Listener listener;
    {
        std::lock_guard lock(mutex_);
        job.progress = p;
        listener = listener_;
    }
    changed_.notify_all();
    if (listener) listener(id, p);
}

void DownloadQueue::run(uint64_t id, std::shared_ptr<Job> job) {
    PullProgress p = progress(id);
    p.state = PullState::Listing;
    p.error.clear();
    update(id, *job, p);
    std::shared_ptr<const HubClient> hub;
    {
        std::lock_guard lock(mutex_);
        hub = hub_;
    }
    try {
        const PullPlan plan = plan_pull(*hub, job->repo, job->revision, job->quant);
        const PullState end =
            run_pull(*hub, library_, plan, job->control, [&](const PullProgress& q) { update(id, *job, q); });
        p = progress(id);
        p.state = end;
    } catch (const std::exception& e) {
        p = progress(id);
        p.state = PullState::Failed;
        p.error = e.what();
    }
    update(id, *job, p);
    {
        std::lock_guard lock(mutex_);
        job->running = false;
        --running_;
        pump();
    }
    changed_.notify_all();  // wait() looks at `running` too
}

// A state changed here, not by a running pull (which reports through update()): tell the
// listener too, so a GUI row follows (a paused pull that is cancelled, a queued one paused).
void DownloadQueue::tell(uint64_t id, const std::optional<PullProgress>& p) {
    changed_.notify_all();
    Listener listener;
    {
        std::lock_guard lock(mutex_);
        listener = listener_;
    }
    if (p && listener) listener(id, *p);
}

void DownloadQueue::pause(uint64_t id) {
    std::optional<PullProgress> told;
    {
        std::lock_guard lock(mutex_);
        const auto it = jobs_.find(id);
        if (it == jobs_.end()) return;
        it->second->control.pause = true;
        waiting_.remove(id);
        if (!it->second->running && it->second->progress.state == PullState::Queued) {
            it->second->progress.state = PullState::Paused;
            told = it->second->progress;
        }
    }
    tell(id, told);
}

void DownloadQueue::resume(uint64_t id) {
    std::optional<PullProgress> told;
    {
        std::lock_guard lock(mutex_);
        const auto it = jobs_.find(id);
        if (it == jobs_.end() || it->second->running) return;
        const PullState s = it->second->progress.state;
        if (s != PullState::Paused && s != PullState::Failed) return;
        it->second->progress.state = PullState::Queued;
        told = it->second->progress;
        waiting_.push_back(id);
        pump();
    }
    tell(id, told);
}

void DownloadQueue::cancel(uint64_t id) {
    std::optional<PullProgress> told;
    {
        std::lock_guard lock(mutex_);
        const auto it = jobs_.find(id);
        if (it == jobs_.end()) return;
        it->second->control.cancel = true;
        waiting_.remove(id);
        const PullState s = it->second->progress.state;
        if (!it->second->running && (s == PullState::Queued || s == PullState::Paused || s == PullState::Failed)) {
            it->second->progress.state = PullState::Cancelled;
            library_.discard_pull(it->second->repo, it->second->revision, it->second->quant);
            told = it->second->progress;
        }
    }
    tell(id, told);
}

PullProgress DownloadQueue::progress(uint64_t id) const {
    std::lock_guard lock(mutex_);
    const auto it = jobs_.find(id);
    if (it != jobs_.end()) return it->second->progress;
    PullProgress p;
    p.state = PullState::Failed;
    p.error = "no download with id " + std::to_string(id);
    return p;
}

std::map<uint64_t, PullProgress> DownloadQueue::all() const {
    std::lock_guard lock(mutex_);
    std::map<uint64_t, PullProgress> out;
    for (const auto& [id, job] : jobs_) out[id] = job->progress;
    return out;
}

void DownloadQueue::set_listener(Listener listener) {
    std::lock_guard lock(mutex_);
    listener_ = std::move(listener);
}

void DownloadQueue::set_config(HubConfig config) {
    auto hub = std::make_shared<const HubClient>(std::move(config));
    std::lock_guard lock(mutex_);
    hub_ = std::move(hub);
}

std::vector<uint64_t> DownloadQueue::restore_pending() {
    std::vector<std::pair<uint64_t, PullProgress>> added;
    Listener listener;
    {
        const std::vector<library::PendingPull> pending = library_.pending_pulls();
        std::lock_guard lock(mutex_);
        for (const library::PendingPull& p : pending) {
            const bool known = std::any_of(jobs_.begin(), jobs_.end(), [&](const auto& j) {
                return j.second->repo == p.repo && j.second->revision == p.revision && j.second->quant == p.quant;
            });
            if (known) continue;
            auto job = std::make_shared<Job>();
            job->repo = p.repo, job->quant = p.quant, job->revision = p.revision;
            PullProgress& q = job->progress;
            q.state = PullState::Paused;
            q.repo = p.repo, q.quant = p.quant;
            q.bytes = p.bytes_on_disk, q.total = p.total, q.parts = p.files.size();
            const uint64_t id = next_id_++;
            jobs_[id] = job;
            added.emplace_back(id, q);
        }
        listener = listener_;
    }
    std::vector<uint64_t> ids;
    for (const auto& [id, p] : added) {
        if (listener) listener(id, p);
        ids.push_back(id);
    }
    return ids;
}

PullState DownloadQueue::wait(uint64_t id, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mutex_);
    const auto settled = [&] {
        const auto it = jobs_.find(id);
        if (it == jobs_.end()) return true;
        const PullState s = it->second->progress.state;
        return !it->second->running &&
               (s == PullState::Done || s == PullState::Failed || s == PullState::Cancelled || s == PullState::Paused);
    };
    changed_.wait_for(lock, timeout, settled);
    const auto it = jobs_.find(id);
    return it == jobs_.end() ? PullState::Failed : it->second->progress.state;
}

}  // namespace ember::hub
