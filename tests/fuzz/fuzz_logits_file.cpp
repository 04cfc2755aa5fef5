// libFuzzer target for the saved-logits reader (`ember perplexity --kl-divergence FILE` reads
// files from anywhere, also llama-perplexity's): any input must load and score or throw
// ember::Error. The reader takes a path, so each input goes through a temporary file.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/quant/logits_file.h"
#include "kernels/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string path = "/tmp/ember-fuzz-logits-" + std::to_string(::getpid());
    if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
        std::fwrite(data, 1, size, f);
        std::fclose(f);
    }
    try {
        ember::LogitsFileReader r(path);
        if (r.n_vocab() <= 4096) {  // score one chunk (a small vocabulary keeps runs fast)
            std::vector<uint16_t> records;
            r.read_chunk(records);
            std::vector<float> logits(static_cast<size_t>(r.n_vocab()), 0.5f);
            ember::KlSums sums;
            const size_t rec = static_cast<size_t>(ember::logits_record_u16(r.n_vocab()));
            for (size_t i = 0; i * rec < records.size(); ++i)
                ember::score_against_base(logits, r.tokens()[0], records.data() + i * rec, sums);
        }
    } catch (const ember::Error&) {}
    return 0;
}
