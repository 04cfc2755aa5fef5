// plan_pull / run_pull: the steps of one `ember pull`, shared with the app's download queue.
#include "engine/hub/pull.h"

#include <filesystem>

#include "engine/hub/sha256.h"
#include "kernels/common/format.h"

namespace ember::hub {

ModelRef parse_model_ref(const std::string& text) {
    ModelRef r;
    const size_t colon = text.find(':');
    r.repo = text.substr(0, colon);
    if (colon != std::string::npos) {
        r.quant = text.substr(colon + 1);
        if (r.quant.empty()) throw Error("'" + text + "': nothing after ':' (expected e.g. " + r.repo + ":Q4_K_M)");
    }
    check_repo_id(r.repo);
    return r;
}

PullPlan plan_pull(const HubClient& hub, const std::string& repo, const std::string& revision,
                   const std::string& quant) {
    const std::vector<RemoteFile> files = hub.list_files(repo, revision);
    if (quant.empty()) {
        const auto choices = gguf_choices(files);
        if (choices.empty()) throw Error("repository '" + repo + "' has no complete GGUF model");
        throw Error("no quantization given for " + repo + "; available: " + describe_choices(choices) +
                    ". Name one, e.g. ember pull " + repo + ":" +
                    (choices.front().quant.empty() ? choices.front().files.front().path : choices.front().quant));
    }
    const ModelChoice c = choose_quant(files, repo, quant);
    PullPlan p{repo, revision, c.quant, c.files, c.total_bytes()};
    return p;
}

fit::QuantChoice rank_repository(const HubClient& hub, const std::string& repo, const std::string& revision,
                                 const fit::Budget& budget, const fit::ChoiceOptions& options) {
    std::vector<fit::ListedFile> listed;
    for (const RemoteFile& f : hub.list_files(repo, revision))
        if (f.path.ends_with(".gguf")) listed.push_back({f.path, f.size});
    if (listed.empty()) throw Error("repository '" + repo + "' has no GGUF file");
    const fit::PrefixReader read_prefix = [&](const std::string& path, uint64_t n) {
        const std::string bytes = hub.fetch_range(repo, revision, path, 0, n);
        return std::vector<uint8_t>(bytes.begin(), bytes.end());
    };
    return fit::choose_from_listing(listed, read_prefix, budget, options);
}

AutoPullPlan plan_pull_auto(const HubClient& hub, const std::string& repo, const std::string& revision,
                            const fit::Budget& budget, const fit::ChoiceOptions& options) {
    fit::QuantChoice choice = rank_repository(hub, repo, revision, budget, options);
    if (!choice.chosen) throw Error(repo + ": " + choice.reason);
    // The download takes the chosen file by its path, as `REPO:FILE.gguf` does: a name without a
    // quantization label is as good as one with it.
    return {plan_pull(hub, repo, revision, choice.ranked[*choice.chosen].path), std::move(choice)};
}

std::string pull_state_name(PullState s) {
    switch (s) {
        case PullState::Queued:
            return "queued";
        case PullState::Listing:
            return "listing";
        case PullState::Downloading:
            return "downloading";
        case PullState::Paused:
            return "paused";
        case PullState::Done:
            return "done";
        case PullState::Failed:
            return "failed";
        case PullState::Cancelled:
            return "cancelled";
    }
    return "?";
}

namespace {

// Refuses a pull whose files cannot fit on the library's disk, before a byte is written (an
// advertised size of 1 PiB was accepted and downloaded towards). What is there already (a
// finished part of the right size, a partial file) is not needed again.
void check_free_space(const library::Library& lib, const PullPlan& plan) {
    uint64_t needed = 0;
    for (const RemoteFile& f : plan.files) {
        std::error_code ec;
        const auto final_size = std::filesystem::file_size(lib.file_path(plan.repo, plan.revision, f.path), ec);
        if (!ec && final_size == f.size) continue;
        const auto partial = std::filesystem::file_size(lib.part_path(plan.repo, plan.revision, f.path), ec);
        needed += f.size - (!ec && partial <= f.size ? partial : 0);
    }
    std::error_code ec;
    std::filesystem::path dir = lib.dir();
    while (!std::filesystem::exists(dir, ec) && dir.has_parent_path() && dir != dir.parent_path())
        dir = dir.parent_path();
    const std::filesystem::space_info space = std::filesystem::space(dir, ec);
    if (ec) return;  // unknown: the writes will say
    if (needed > space.available)
        throw HubError(HubErrorKind::Disk, "not enough free space for " + plan.repo + ":" + plan.quant + ": it needs " +
                                               format_bytes(needed) + ", " + lib.dir().string() + " has " +
                                               format_bytes(space.available) + " free");
}

}  // namespace

PullState run_pull(const HubClient& hub, library::Library& lib, const PullPlan& plan, TransferControl& control,
                   const std::function<void(const PullProgress&)>& on_progress, int64_t* model_id) {
    check_free_space(lib, plan);
    PullProgress p;
    p.state = PullState::Downloading;
    p.repo = plan.repo, p.quant = plan.quant, p.total = plan.total_bytes, p.parts = plan.files.size();
    std::vector<library::ModelPart> parts;
    uint64_t done_before = 0;  // bytes of the parts already finished
    // Recorded first: a pull this process does not finish is listed (and resumable) later.
    library::PendingPull pending{plan.repo, plan.revision, plan.quant, {}, plan.total_bytes, 0, 0};
    for (const RemoteFile& f : plan.files) pending.files.push_back({f.path, "", f.size, f.sha256});
    lib.begin_pull(pending);
    for (size_t i = 0; i < plan.files.size(); ++i) {
        const RemoteFile& f = plan.files[i];
        const std::string final_path = lib.file_path(plan.repo, plan.revision, f.path).string();
        const std::string part_path = lib.part_path(plan.repo, plan.revision, f.path).string();
        p.part = i + 1;
        auto report = [&](const TransferProgress& t) {
            p.bytes = done_before + t.bytes;
            p.bytes_per_s = t.bytes_per_s;
            p.waiting_for = t.waiting_for;
            p.eta_s = t.bytes_per_s > 0 ? static_cast<double>(p.total - p.bytes) / t.bytes_per_s : -1;
            if (on_progress) on_progress(p);
        };
        std::error_code ec;
        // A finished part from an earlier, interrupted pull of a split model (or a model pulled
        // again) stays when its bytes still hash right; anything else there is replaced.
        bool have = std::filesystem::file_size(final_path, ec) == f.size && !ec;
        if (have && sha256_file(final_path) != f.sha256) {
            std::filesystem::remove(final_path, ec);
            have = false;
        }
        DownloadOutcome out = DownloadOutcome::Done;
        if (!have) out = hub.download(plan.repo, plan.revision, f, part_path, final_path, control, report);
        if (out == DownloadOutcome::Cancelled) {
            lib.discard_pull(plan.repo, plan.revision, plan.quant);  // every part's bytes so far
            return PullState::Cancelled;
        }
        if (out == DownloadOutcome::Paused) return PullState::Paused;
        done_before += f.size;
        parts.push_back({f.path, final_path, f.size, f.sha256});
    }
    const library::LibraryModel m = lib.add_download(plan.repo, plan.revision, plan.quant, parts);
    lib.end_pull(plan.repo, plan.revision, plan.quant);
    if (model_id) *model_id = m.id;
    p.state = PullState::Done;
    p.bytes = p.total;
    p.model_id = m.id;
    if (on_progress) on_progress(p);
    return PullState::Done;
}

}  // namespace ember::hub
