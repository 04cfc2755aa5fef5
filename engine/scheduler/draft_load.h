// Loading a draft model beside its target (draft_model.h), as every front door does it: `ember
// run|chat|serve --draft` and the app's chat setting "Draft model". One copy of the rule: the
// draft takes the target's load options (device choice, threads, KV type, sequences) and its
// context (it follows every token the target holds), with no chat template or progress of its
// own.
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include "engine/runtime/model.h"
#include "engine/scheduler/draft_model.h"

namespace ember {

struct LoadedDraft {
    std::unique_ptr<Model> model;
    std::unique_ptr<DraftModel> proposer;  // uses `model`: destroy it first (member order does)
    DraftModel* get() const { return proposer.get(); }
};

// Loads the GGUF at `path` as a draft for `target` (loaded from `target_options`). Throws
// ember::Error when the file does not load or its vocabulary is not the target's (the message
// names what differs).
LoadedDraft load_draft_model(const std::string& path, const LoadOptions& target_options, const Model& target,
                             int32_t max_draft = kDefaultDraftMax);

}  // namespace ember
