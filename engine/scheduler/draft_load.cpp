#include "engine/scheduler/draft_load.h"

namespace ember {

LoadedDraft load_draft_model(const std::string& path, const LoadOptions& target_options, const Model& target,
                             int32_t max_draft) {
    LoadOptions o = target_options;
    o.path = path;
    o.n_ctx = target.n_ctx();
    o.chat_template.reset();
    o.on_progress = nullptr;
    LoadedDraft d;
    d.model = Model::load(o);
    d.proposer = std::make_unique<DraftModel>(*d.model, target, max_draft);
    return d;
}

}  // namespace ember
