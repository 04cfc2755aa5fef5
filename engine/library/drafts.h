// Draft models for speculative decoding (engine/scheduler/draft_model.h) that the library can
// offer for a model: present, with the same vocabulary token for token
// (engine/tokenizer/vocab_match.h), and smaller (fewer parameters, or the same in a smaller
// file: a 4-bit copy drafting for an 8-bit original). `ember ls --drafts-for
// MODEL` prints them; the app's "draft model" choice lists them through this function.
#pragma once
#include <string>
#include <vector>

#include "engine/library/library.h"

namespace ember::library {

// The library's models that can draft for the GGUF at `target_path`, smallest first. Files
// that cannot be read are left out (the library lists them as not present). Throws
// ember::Error when the target itself cannot be read.
std::vector<LibraryModel> compatible_drafts(const Library& lib, const std::string& target_path);

}  // namespace ember::library
