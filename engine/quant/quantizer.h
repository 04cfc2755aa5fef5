// The local quantizer behind `ember quantize IN OUT TYPE` and the app's model page: reads a
// GGUF model (F32/F16/BF16, or a quantized one), converts each weight matrix to the type the
// scheme chooses for it (engine/quant/quant_plan.h) with the reference quantizers of
// kernels/cpu/quant.h, and writes a GGUF that Ember and llama.cpp load.
//
// - Metadata is copied in order; general.file_type is set to the scheme's and
//   general.quantization_version to 2 (the block layouts of kernels/cpu/quant.h).
// - The source's tensor alignment is kept.
// - Rows are quantized on n_threads threads; progress is reported after every slice of rows
//   and the cancel flag is polled as often.
// - The output is written to OUT.tmp and renamed to OUT only when complete: a cancelled or
//   failed run leaves no OUT (and removes OUT.tmp).
// Runs on the calling thread (the app calls it from a worker thread, never the GUI thread).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/common/dtype.h"

namespace ember {

class GgufFile;

struct QuantizeProgress {
    uint64_t done_elements = 0, total_elements = 0;  // over every tensor converted
    int tensor_index = 0, n_tensors = 0;             // the tensor being worked on
    std::string tensor;                              // its name
    double fraction() const { return total_elements ? double(done_elements) / double(total_elements) : 1.0; }
};

struct QuantizeOptions {
    std::string input, output;
    std::string type;   // a scheme name: quant_scheme_names()
    int n_threads = 0;  // 0: one per core
    // Quantizing already-quantized data to a lower type loses quality twice; refused unless set
    // (Q8_0 sources are accepted with a warning: their error is far below any target's).
    bool allow_requantize = false;
    // Called on the calling thread, at most every few milliseconds of work and once at the end.
    std::function<void(const QuantizeProgress&)> on_progress;
    std::function<void(const std::string&)> on_warning;  // once per warning
    const std::atomic<bool>* cancel = nullptr;
};

struct QuantizedTensor {
    std::string name;
    DType from, to;
    bool fallback;  // the scheme's type did not fit the row length
};

struct QuantizeResult {
    bool cancelled = false;  // then nothing was written
    uint64_t input_bytes = 0, output_bytes = 0;
    std::vector<QuantizedTensor> tensors;  // every tensor, in file order
    int n_fallback() const;
};

// Throws ember::Error (naming the file, tensor or option) on bad input or I/O failure; the
// output path is then left untouched.
QuantizeResult quantize_model(const QuantizeOptions& opts);

// The size quantize_model would write for `in` and the scheme `type`, to the byte, from the
// same layout (nothing is converted). Throws ember::Error for an unknown type.
uint64_t quantized_file_size(const GgufFile& in, const std::string& type);

}  // namespace ember
