// The Hugging Face model API's JSON answers, turned into plain structs. Untrusted input:
// anything malformed or of the wrong type is an ember::Error naming the endpoint, never a
// crash (fuzzed by tests/fuzz/fuzz_hub.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/hub/hub_names.h"

namespace ember::hub {

struct ModelSummary {
    std::string id;  // "owner/name"
    uint64_t downloads = 0;
    uint64_t likes = 0;
    std::vector<std::string> tags;
};

// GET /api/models?search=..: an array of {id, downloads, likes, tags}. Entries without a
// usable id are skipped; other fields are optional.
std::vector<ModelSummary> parse_search_response(std::string_view json);

// GET /api/models/{repo}/tree/{revision}?recursive=1: an array of {type, path, size,
// lfs: {oid, size}}. Directories are skipped; every file path is checked with
// check_remote_path() (a hostile listing is an error, not a file outside the library).
std::vector<RemoteFile> parse_tree_response(std::string_view json);

}  // namespace ember::hub
