// The names a hub hands out, checked before they touch a URL or the disk, and the GGUF file
// names people publish: quantization labels ("Q4_K_M"; split parts are engine/gguf/gguf_split.h).
// Pure functions of their input (no I/O), so the fuzzer and the unit tests call them directly.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::hub {

// "owner/name" or "name": letters, digits, '-', '_', '.'; no "..", no leading '.'.
// Throws ember::Error naming the repository and what is wrong.
void check_repo_id(std::string_view repo);
// A branch, tag or commit: letters, digits, '-', '_', '.'; no "..".
void check_revision(std::string_view revision);
// A path inside a repository, as the server lists it: relative, '/'-separated, no empty,
// "." or ".." component, no NUL, no backslash, no control characters. Every remote name is
// checked with this before it becomes a local path, so a hostile listing cannot write outside
// the library.
void check_remote_path(std::string_view path);

// The quantization label in a GGUF file name, upper-cased ("Q4_K_M", "Q8_0", "F16", "IQ4_XS"),
// or "" when the name carries none.
std::string quant_of(std::string_view file_name);

// One downloadable model in a repository: a single GGUF, or all parts of a split one, in order.
struct RemoteFile {
    std::string path;    // inside the repository
    uint64_t size = 0;   // bytes
    std::string sha256;  // the LFS object id (64 hex digits); "" when the file is not in LFS
};
struct ModelChoice {
    std::string quant;              // "Q4_K_M"
    std::vector<RemoteFile> files;  // one, or parts 1..N of a split model
    uint64_t total_bytes() const;
};
// Every complete GGUF model in a listing (split models with a missing part are left out;
// projector files "mmproj-*" are not models of their own), ordered by quantization label.
std::vector<ModelChoice> gguf_choices(const std::vector<RemoteFile>& files);
// The model with this quantization (case-insensitive), or, for a selector ending in ".gguf", the
// model whose (first) file has that path or name: the way to name a file whose name carries no
// quantization (its ModelChoice::quant is then the selector). Throws ember::Error listing the
// quantizations the repository has when there is none, or naming the files when several match.
ModelChoice choose_quant(const std::vector<RemoteFile>& files, std::string_view repo, std::string_view quant);
// "Q4_K_M (1.2 GiB), Q8_0 (2.1 GiB)": for messages that ask the user to pick one.
std::string describe_choices(const std::vector<ModelChoice>& choices);

// HTTP `Content-Range: bytes FIRST-LAST/TOTAL` (TOTAL may be '*' = unknown -> 0).
struct ContentRange {
    uint64_t first = 0, last = 0, total = 0;
};
std::optional<ContentRange> parse_content_range(std::string_view value);

}  // namespace ember::hub
