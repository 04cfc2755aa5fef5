#include "engine/quant/quantizer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/quant/quant_plan.h"
#include "kernels/common/error.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/thread_pool.h"

namespace ember {

namespace {

// Thrown from inside the writer's producer to unwind it (the writer then removes OUT.tmp).
struct Cancelled {};

bool is_quantized(DType t) { return dtype_info(static_cast<uint32_t>(t))->block_elems > 1; }

// Precision rank of a type, to tell a requantization that loses bits from one that does not.
int bits_rank(DType t) {
    switch (t) {
        case DType::F32:
            return 100;
        case DType::F16:
        case DType::BF16:
            return 50;
        case DType::Q8_0:
            return 20;
        case DType::Q6_K:
            return 16;
        default:
            return 10;
    }
}

struct Job {
    const GgufTensor* src;
    TensorChoice choice;
};

// Converts one tensor, rows in waves so that progress and cancel are seen often.
class TensorConverter {
public:
    TensorConverter(cpu::ThreadPool& pool, const QuantizeOptions& opts, QuantizeProgress& progress)
        : pool_(pool), opts_(opts), progress_(progress), scratch_(static_cast<size_t>(pool.size())) {}

    void convert(const GgufTensor& t, DType to, uint8_t* dst) {
        const int64_t cols = static_cast<int64_t>(t.dims[0]);
        const int64_t rows = static_cast<int64_t>(t.n_elements) / cols;
        const auto from_info = *dtype_info(static_cast<uint32_t>(t.type));
        const auto to_info = *dtype_info(static_cast<uint32_t>(to));
        const size_t src_row = row_bytes(from_info, static_cast<uint64_t>(cols));
        const size_t dst_row = row_bytes(to_info, static_cast<uint64_t>(cols));
        // ~4M elements a wave: a few milliseconds of work, so cancel is prompt.
        const int64_t wave = std::max<int64_t>(1, (int64_t{1} << 22) / cols);
        for (int64_t r0 = 0; r0 < rows; r0 += wave) {
            if (opts_.cancel && opts_.cancel->load()) throw Cancelled{};
            const int64_t r1 = std::min(rows, r0 + wave);
            pool_.parallel_for_dynamic(r1 - r0, 1, [&](int64_t b, int64_t e, int tid) {
                std::vector<float>& f = scratch_[static_cast<size_t>(tid)];
                f.resize(static_cast<size_t>(cols));
                for (int64_t r = r0 + b; r < r0 + e; ++r) {
                    cpu::dequantize_row(t.type, t.data + static_cast<size_t>(r) * src_row, f.data(), cols);
                    cpu::quantize_row(to, f.data(), dst + static_cast<size_t>(r) * dst_row, cols);
                }
            });
            progress_.done_elements += static_cast<uint64_t>((r1 - r0) * cols);
            if (opts_.on_progress) opts_.on_progress(progress_);
        }
    }

private:
    cpu::ThreadPool& pool_;
    const QuantizeOptions& opts_;
    QuantizeProgress& progress_;
    std::vector<std::vector<float>> scratch_;
};

// Every check that can fail before a byte is written: types we can read and write, and the
// requantization policy.
void check_job(const GgufFile& in, const Job& j, const QuantizeOptions& opts) {
    const GgufTensor& t = *j.src;
    const std::string where = in.path() + ": tensor '" + t.name + "'";
    if (!j.choice.quantize) return;
    if (!cpu::can_dequantize(t.type))
        throw Error(where + " has type " + std::string(dtype_name(t.type)) + ", which the quantizer cannot read");
    if (!cpu::can_quantize(j.choice.type))
        throw Error(where + ": the quantizer cannot write type " + std::string(dtype_name(j.choice.type)));
    const bool lossy_again =
        is_quantized(t.type) && is_quantized(j.choice.type) && bits_rank(t.type) <= bits_rank(j.choice.type);
    if (lossy_again && t.type != DType::Q8_0 && !opts.allow_requantize)
        throw Error(where + " is already " + std::string(dtype_name(t.type)) + "; quantizing it again to " +
                    std::string(dtype_name(j.choice.type)) +
                    " adds a second rounding error. Quantize from an F16/BF16/F32 file (make one with "
                    "`ember quantize IN OUT F16`), or pass --allow-requantize");
}

std::vector<Job> plan_jobs(const GgufFile& in, const QuantScheme& scheme) {
    const int n_layers = static_cast<int>(in.opt_u64(in.architecture() + ".block_count").value_or(0));
    const QuantPlanner planner(scheme, n_layers, in.find_tensor("output.weight") == nullptr);
    std::vector<Job> jobs;
    for (const auto& t : in.tensors()) jobs.push_back({&t, planner.choose({t.name, t.dims, t.type})});
    return jobs;
}

// The output's metadata: the source's in order (a split input, its parts joined, makes one
// file), with the scheme's file type and, for a quantized scheme, the block layout version.
GgufWriter output_writer(const GgufFile& in, const QuantScheme& scheme) {
    GgufWriter w(static_cast<uint32_t>(in.alignment()));
    for (const auto& key : in.metadata_order())
        if (!key.starts_with("split.")) w.set(key, in.metadata().at(key));
    w.set("general.file_type", GgufValue::u32(scheme.file_type));
    if (!scheme.is_float()) w.set("general.quantization_version", GgufValue::u32(2));
    return w;
}

}  // namespace

uint64_t quantized_file_size(const GgufFile& in, const std::string& type) {
    const QuantScheme scheme = quant_scheme(type);
    GgufWriter w = output_writer(in, scheme);
    for (const Job& j : plan_jobs(in, scheme))
        w.add_tensor_lazy(j.src->name, j.choice.quantize ? j.choice.type : j.src->type, j.src->dims, nullptr);
    return w.file_size();
}

int QuantizeResult::n_fallback() const {
    return static_cast<int>(std::count_if(tensors.begin(), tensors.end(), [](auto& t) { return t.fallback; }));
}

QuantizeResult quantize_model(const QuantizeOptions& opts) {
    const QuantScheme scheme = quant_scheme(opts.type);
    if (opts.output.empty()) throw Error("quantize: no output path");
    std::error_code ec;
    if (std::filesystem::equivalent(opts.input, opts.output, ec))
        throw Error(opts.output + ": the output must not be the input file");
    const GgufFile in = GgufFile::open(opts.input);
    const std::vector<Job> jobs = plan_jobs(in, scheme);
    QuantizeResult result;
    result.input_bytes = in.file_size();
    QuantizeProgress progress;
    progress.n_tensors = static_cast<int>(jobs.size());
    bool warned_q8 = false;
    for (const auto& j : jobs) {
        check_job(in, j, opts);
        if (j.choice.quantize) progress.total_elements += j.src->n_elements;
        if (j.choice.quantize && j.src->type == DType::Q8_0 && is_quantized(j.choice.type) && !warned_q8 &&
            opts.on_warning) {
            opts.on_warning(in.path() + " holds Q8_0 data: requantizing it adds Q8_0's small rounding error to " +
                            scheme.name + "'s; an F16/BF16/F32 source gives a slightly better file");
            warned_q8 = true;
        }
        result.tensors.push_back({j.src->name, j.src->type, j.choice.type, j.choice.fallback});
    }

    GgufWriter w = output_writer(in, scheme);

    cpu::ThreadPool pool(opts.n_threads);
    pool.set_spin_us(0);  // waves are long; idle workers should sleep, not spin
    TensorConverter converter(pool, opts, progress);
    for (size_t i = 0; i < jobs.size(); ++i) {
        const Job& j = jobs[i];
        const GgufTensor& t = *j.src;
        if (!j.choice.quantize) {
            w.add_tensor_lazy(t.name, t.type, t.dims, [&t](uint8_t* dst, size_t n) {
                std::memcpy(dst, t.data, std::min<size_t>(n, t.n_bytes));
            });
            continue;
        }
        w.add_tensor_lazy(t.name, j.choice.type, t.dims, [&, i](uint8_t* dst, size_t) {
            progress.tensor_index = static_cast<int>(i);
            progress.tensor = t.name;
            converter.convert(t, j.choice.type, dst);
        });
    }
    try {
        w.write_file(opts.output);
    } catch (const Cancelled&) {
        result.cancelled = true;
        return result;
    }
    try {
        in.check_unchanged();  // a source truncated while we read it gave zeros: not a valid output
    } catch (...) {
        std::filesystem::remove(opts.output, ec);
        throw;
    }
    result.output_bytes = std::filesystem::file_size(opts.output);
    if (opts.on_progress) opts.on_progress(progress);
    return result;
}

}  // namespace ember
