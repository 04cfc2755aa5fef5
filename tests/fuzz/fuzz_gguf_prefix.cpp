// libFuzzer target for the prefix parse of a GGUF header (GgufFile::parse_prefix, what the
// fit planner reads from the first bytes of a remote file) and the planner on what it parses.
// The input is the prefix; the file it claims to begin is longer by 4 KiB times its last byte
// (so the seeds of fuzz_gguf serve here too). Any input must give a header, ask for more than
// it holds (never more than the file), or throw ember::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "engine/fit/planner.h"
#include "engine/gguf/gguf.h"
#include "kernels/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const uint64_t file_size = size + (size ? uint64_t{data[size - 1]} << 12 : 0);
    try {
        const ember::GgufPrefix p = ember::GgufFile::parse_prefix(data, size, file_size, "fuzz");
        if (!p.file) {
            if (p.need_bytes <= size || p.need_bytes > file_size) std::abort();
            return 0;
        }
        for (const auto& t : p.file->tensors())
            if (t.data) std::abort();  // a header parse hands out no data pointers
        const ember::fit::FitModel m = ember::fit::fit_model(*p.file);
        const ember::fit::FitPlan plan =
            ember::fit::plan(m, {}, ember::fit::Budget{uint64_t{8} << 30, uint64_t{16} << 30});
        if (plan.reason.empty()) std::abort();
    } catch (const ember::Error&) {}
    return 0;
}
