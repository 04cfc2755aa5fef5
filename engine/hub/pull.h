// Pulling a model: choose the files of one quantization in a repository, download each into
// the library (resumable, verified), then register the model. The blocking core that the CLI
// runs on its main thread and DownloadQueue runs on its workers.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/fit/quant_choice.h"
#include "engine/hub/hub_client.h"
#include "engine/library/library.h"

namespace ember::hub {

// "owner/name" or "owner/name:Q4_K_M" -> {repo, quant}. Checks the repository name.
struct ModelRef {
    std::string repo;
    std::string quant;  // "" when not given
};
ModelRef parse_model_ref(const std::string& text);

struct PullPlan {
    std::string repo, revision, quant;
    std::vector<RemoteFile> files;  // one, or a split model's parts in order
    uint64_t total_bytes = 0;
};
// Lists the repository and picks the model of `quant`. Without a quant it fails with a
// message listing the quantizations on offer (the fit planner's chooser picks one later).
PullPlan plan_pull(const HubClient& hub, const std::string& repo, const std::string& revision,
                   const std::string& quant);

// The fit planner's ranking of a repository's GGUF files (engine/fit/quant_choice.h): each
// candidate's header is read with Range requests (never its weights), then planned against
// `budget`. What `ember fit OWNER/NAME` prints and what a pull without a quantization uses.
fit::QuantChoice rank_repository(const HubClient& hub, const std::string& repo, const std::string& revision,
                                 const fit::Budget& budget, const fit::ChoiceOptions& options);

// A pull without a quantization: the file the planner chooses (its one-line reason is in
// `choice.reason`). Throws ember::Error with that reason when nothing fits the budget.
struct AutoPullPlan {
    PullPlan plan;
    fit::QuantChoice choice;
};
AutoPullPlan plan_pull_auto(const HubClient& hub, const std::string& repo, const std::string& revision,
                            const fit::Budget& budget, const fit::ChoiceOptions& options);

enum class PullState { Queued, Listing, Downloading, Paused, Done, Failed, Cancelled };
std::string pull_state_name(PullState s);

struct PullProgress {
    PullState state = PullState::Queued;
    std::string repo, quant;
    uint64_t bytes = 0, total = 0;  // over all parts
    double bytes_per_s = 0;
    double eta_s = -1;           // -1: unknown
    size_t part = 0, parts = 0;  // 1-based part being downloaded
    std::string error;           // when Failed
    std::string waiting_for;     // another pull holds the file being downloaded: who (hub_client.h)
    int64_t model_id = 0;        // when Done
};

// Downloads every file of the plan into the library and registers the model. Returns Done,
// Paused or Cancelled (what the control asked); Cancelled deletes the partial files (and the
// finished parts of a split model), Paused keeps them for a resume. Throws HubError /
// ember::Error on failure (nothing registered). Until it ends Done or Cancelled the pull is
// one of the library's pending pulls (library::PendingPull): listed after a restart.
PullState run_pull(const HubClient& hub, library::Library& lib, const PullPlan& plan, TransferControl& control,
                   const std::function<void(const PullProgress&)>& on_progress, int64_t* model_id = nullptr);

}  // namespace ember::hub
