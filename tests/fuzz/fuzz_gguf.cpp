// libFuzzer target for the GGUF parser: any input must parse or throw ember::Error.
// Build with the `fuzz` preset; run with scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include "kernels/common/error.h"
#include "engine/gguf/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const ember::GgufFile f = ember::GgufFile::parse(data, size, "fuzz");
        // Touch everything the parser hands out, so bad pointers show up under ASan.
        volatile uint8_t sink = 0;
        for (const auto& t : f.tensors())
            if (t.n_bytes) sink = sink ^ t.data[0] ^ t.data[t.n_bytes - 1];
        for (const auto& [key, value] : f.metadata()) (void)value.to_display(4);
    } catch (const ember::Error&) {}
    return 0;
}
