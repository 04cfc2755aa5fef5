// Automatic quantization choice: given the files of one model repository (Q2_K ... Q8_0,
// F16, each with its tensor table), a device budget and a target context, pick the file to
// use and say why in one line ("Q6_K: fits your 24.0 GiB GPU with an 8192-token context
// (21.3 GiB); Q8_0 would need 26.1 GiB").
//
// The order of preference, each step tried only when the one before finds nothing:
//   1. the highest-quality file of at least `min_quant` (Q4_K_M) that fits entirely on the
//      GPU, with the safety margin, at the target context;
//   2. the same at shorter contexts, halving down to `min_ctx` (4096): a shorter context is
//      preferred over a worse quantization;
//   3. partial offload: the file of at least `min_quant` with the most layers on the GPU;
//   4. the CPU: the smallest file of at least `min_quant` that fits the RAM (the CPU is
//      bandwidth-bound: fewer bytes, faster tokens);
//   5. files below `min_quant`, by quality, in the same placements.
// A split model (-00001-of-00003.gguf ...) is one candidate like any single file: its path is
// the first part's, its size the sum of its parts, its tensor table all parts' joined (the
// engine opens the parts as one model; pulls download every part).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/fit/planner.h"

namespace ember::fit {

// A quantization's rank (higher is better; F16/BF16/F32 share the top). Unknown names rank
// below every known one.
int quant_quality(const std::string& quant);

struct Candidate {
    std::string path;               // a split model's first part
    uint64_t size = 0;              // all parts
    std::optional<FitModel> model;  // absent: not plannable, see `skipped`
    std::string skipped;            // why not (a missing split part, the parse error, ...)
};

struct ChoiceOptions {
    FitOptions fit{8192, 1, 512, DType::F16};  // n_ctx: the target context
    int64_t min_ctx = 4096;
    std::string min_quant = "Q4_K_M";
    double margin = 0.05;  // of each budget kept free (fragmentation, the estimates' error)
};

struct RankedFile {
    std::string path;
    std::string quant;
    uint64_t size = 0;
    std::optional<FitPlan> plan;  // the best placement at the target context (with the margin)
    std::string note;             // the plan's reason, or why the file was skipped
};

struct QuantChoice {
    std::optional<size_t> chosen;    // index into `ranked`
    std::optional<FitPlan> plan;     // the chosen file's plan (its context may be shorter)
    std::vector<RankedFile> ranked;  // best quality first
    std::string reason;              // one line
};

QuantChoice choose_quant(const std::vector<Candidate>& candidates, const Budget& budget, const ChoiceOptions& options);

// ---- candidates from a listing (a local folder, or a remote repository via engine/hub) ----
struct ListedFile {
    std::string path;
    uint64_t size = 0;
};
// Returns the first n_bytes (fewer only at the end of the file) of a listed file; throws
// ember::Error when it cannot.
using PrefixReader = std::function<std::vector<uint8_t>(const std::string& path, uint64_t n_bytes)>;
// Reads each .gguf file's header through `read_prefix`: 1 MiB first, then as much as the
// header says it needs (a tokenizer can take megabytes), up to kMaxHeaderBytes. The parts of
// a split model make one candidate (the first part's path); a part missing from the listing
// leaves it unplannable, with the reason.
constexpr uint64_t kMaxHeaderBytes = uint64_t{256} << 20;
std::vector<Candidate> read_candidates(const std::vector<ListedFile>& files, const PrefixReader& read_prefix);
// The header of one file through `read_prefix` (as read_candidates does). Throws ember::Error.
GgufFile read_header(const ListedFile& file, const PrefixReader& read_prefix);

// read_candidates + choose_quant: what `ember fit DIR` and the hub's `ember fit REPO` call.
QuantChoice choose_from_listing(const std::vector<ListedFile>& files, const PrefixReader& read_prefix,
                                const Budget& budget, const ChoiceOptions& options);

}  // namespace ember::fit
