#include "engine/fit/quant_choice.h"

#include <algorithm>
#include <map>

#include "engine/gguf/gguf_split.h"
#include "kernels/common/error.h"
#include "kernels/common/format.h"

namespace ember::fit {

int quant_quality(const std::string& q) {
    // Roughly by bits per weight, the K-quant mixes between their base types. Full-precision
    // files share the top rank: F32 is no better to run than F16 and twice the size.
    static const std::map<std::string, int> rank = {
        {"F32", 100},    {"F16", 100},   {"BF16", 100},  {"Q8_0", 90},   {"Q6_K", 80},   {"Q5_K_M", 72},
        {"Q5_K", 70},    {"Q5_K_S", 70}, {"Q5_1", 68},   {"Q5_0", 66},   {"Q4_K_M", 60}, {"Q4_K", 55},
        {"Q4_K_S", 55},  {"Q4_1", 52},   {"IQ4_NL", 50}, {"IQ4_XS", 49}, {"Q4_0", 48},   {"Q3_K_L", 42},
        {"Q3_K_M", 40},  {"Q3_K", 38},   {"Q3_K_S", 36}, {"IQ3_M", 34},  {"IQ3_S", 33},  {"IQ3_XS", 32},
        {"IQ3_XXS", 31}, {"Q2_K", 20},   {"Q2_K_S", 18}, {"IQ2_M", 16},  {"IQ2_S", 15},  {"IQ2_XS", 14},
        {"IQ2_XXS", 13}, {"IQ1_M", 11},  {"IQ1_S", 10}};
    if (q == "MXFP4_MOE") return 58;  // gpt-oss: 4.25-bit experts, Q8_0 around them
    auto it = rank.find(q);
    return it == rank.end() ? 0 : it->second;
}

namespace {

struct Option {
    size_t index;  // into the candidates
    FitPlan plan;
};

FitPlan plan_at(const FitModel& m, const ChoiceOptions& o, const Budget& b, int64_t ctx) {
    FitOptions f = o.fit;
    f.n_ctx = ctx;
    return plan(m, f, b);
}

int64_t target_ctx(const FitModel& m, const ChoiceOptions& o) {
    return std::min<int64_t>(o.fit.n_ctx > 0 ? o.fit.n_ctx : 8192, m.config.n_ctx_train);
}

std::vector<int64_t> contexts(int64_t target, int64_t min_ctx) {
    std::vector<int64_t> out{target};
    for (int64_t c = target / 2; c >= min_ctx; c /= 2) out.push_back(c);
    return out;
}

std::string ctx_words(int64_t ctx) { return context_words(ctx); }

class Chooser {
public:
    Chooser(const std::vector<Candidate>& c, const Budget& b, const ChoiceOptions& o) : c_(c), b_(b), o_(o) {
        eff_ = b;
        eff_.vram = static_cast<uint64_t>(static_cast<double>(b.vram) * (1.0 - o.margin));
        eff_.ram = static_cast<uint64_t>(static_cast<double>(b.ram) * (1.0 - o.margin));
        for (size_t i = 0; i < c.size(); ++i)
            if (c[i].model) order_.push_back(i);
        // Best quality first; among equals the smaller file.
        std::stable_sort(order_.begin(), order_.end(), [&](size_t x, size_t y) {
            const int qx = quality(x), qy = quality(y);
            return qx != qy ? qx > qy : c_[x].size < c_[y].size;
        });
    }

    std::optional<Option> choose(std::string& reason) {
        const int min_q = quant_quality(o_.min_quant);
        for (bool good : {true, false}) {
            if (auto o = on_gpu(good, min_q, reason)) return o;
            if (auto o = experts_in_ram(good, min_q, reason)) return o;
            if (auto o = split(good, min_q, reason)) return o;
            if (auto o = on_cpu(good, min_q, reason)) return o;
        }
        reason = nothing_fits();
        return std::nullopt;
    }

    FitPlan target_plan(size_t i) const { return plan_at(model(i), o_, eff_, target_ctx(model(i), o_)); }

private:
    const FitModel& model(size_t i) const { return *c_[i].model; }
    int quality(size_t i) const { return quant_quality(model(i).quant); }
    bool eligible(size_t i, bool good, int min_q) const { return good == (quality(i) >= min_q); }
    std::string vram() const { return format_bytes(b_.vram); }

    std::optional<Option> on_gpu(bool good, int min_q, std::string& reason) {
        if (b_.vram == 0) return std::nullopt;
        if (order_.empty()) return std::nullopt;
        // Context outside, quality inside: the best file at the target context wins over a
        // better file at a shorter one.
        const int64_t target = target_ctx(model(order_.front()), o_);
        for (int64_t ctx : contexts(target, std::min(o_.min_ctx, target))) {
            for (size_t k = 0; k < order_.size(); ++k) {
                const size_t i = order_[k];
                if (!eligible(i, good, min_q)) continue;
                FitPlan p = plan_at(model(i), o_, eff_, ctx);
                if (p.placement != Placement::Gpu) continue;
                reason = model(i).quant + ": fits your " + vram() + " GPU with " + ctx_words(ctx) + " (" +
                         format_bytes(p.gpu.total()) + ")" + why_not_better(k, ctx, target);
                if (ctx < target) {
                    // Only reached when no eligible file fits at a longer context.
                    reason += "; at " + std::to_string(target) + " tokens it would need " +
                              format_bytes(plan_layers(model(i), with_ctx(target), eff_, -1).gpu.total());
                }
                return Option{i, p};
            }
        }
        return std::nullopt;
    }

    // A better file than order_[k] that did not fit: what it would need at ctx.
    std::string why_not_better(size_t k, int64_t ctx, int64_t) const {
        for (size_t j = k; j-- > 0;) {
            const size_t i = order_[j];
            if (quality(i) == quality(order_[k])) continue;
            return "; " + model(i).quant + " would need " +
                   format_bytes(plan_layers(model(i), with_ctx(ctx), eff_, -1).gpu.total());
        }
        return k == 0 ? ", the best file here" : "";
    }

    FitOptions with_ctx(int64_t ctx) const {
        FitOptions f = o_.fit;
        f.n_ctx = ctx;
        return f;
    }

    // A mixture-of-experts file with every layer's attention on the GPU and some experts in
    // RAM, before any layer split: the experts in RAM are read at RAM speed, as a model on the
    // CPU is, so the smallest file of the wanted quality wins (fewer bytes per token there).
    std::optional<Option> experts_in_ram(bool good, int min_q, std::string& reason) {
        if (b_.vram == 0) return std::nullopt;
        std::optional<Option> best;
        for (size_t i : order_) {
            if (!eligible(i, good, min_q)) continue;
            FitPlan p = target_plan(i);
            if (p.placement != Placement::ExpertsInRam) continue;
            if (!best || c_[i].size < c_[best->index].size) best = Option{i, p};
        }
        if (!best) return std::nullopt;
        const FitPlan& p = best->plan;
        reason = model(best->index).quant + ": all " + std::to_string(p.n_layers) + " layers on your " + vram() +
                 " GPU, the experts of " + std::to_string(p.n_layers - p.gpu_expert_layers) + " in RAM (" +
                 format_bytes(p.cpu.total()) + "), with " + ctx_words(p.n_ctx) + "; no " +
                 (good ? o_.min_quant + " or better " : "") +
                 "file fits the GPU entirely, and the smallest one reads the fewest bytes from RAM per token";
        return best;
    }

    std::optional<Option> split(bool good, int min_q, std::string& reason) {
        if (b_.vram == 0) return std::nullopt;
        std::optional<Option> best;
        double best_share = -1;
        for (size_t i : order_) {
            if (!eligible(i, good, min_q)) continue;
            FitPlan p = target_plan(i);
            if (p.placement != Placement::Split) continue;
            const double share = double(p.gpu_layers) / p.n_layers;
            if (share > best_share) {  // ties keep the better quality (order_)
                best_share = share;
                best = Option{i, p};
            }
        }
        if (!best) return std::nullopt;
        const FitPlan& p = best->plan;
        reason = model(best->index).quant + ": " + std::to_string(p.gpu_layers) + " of " + std::to_string(p.n_layers) +
                 " layers on your " + vram() + " GPU, the rest on the CPU (" + format_bytes(p.cpu.total()) +
                 " of RAM), with " + ctx_words(p.n_ctx) + "; no " + (good ? o_.min_quant + " or better" : "") +
                 " file fits the GPU entirely";
        return best;
    }

    std::optional<Option> on_cpu(bool good, int min_q, std::string& reason) {
        std::optional<Option> best;
        for (size_t i : order_) {
            if (!eligible(i, good, min_q)) continue;
            FitPlan p = target_plan(i);
            if (p.placement != Placement::Cpu) continue;
            if (!best || c_[i].size < c_[best->index].size) best = Option{i, p};
        }
        if (!best) return std::nullopt;
        reason = model(best->index).quant + ": on the CPU with " + ctx_words(best->plan.n_ctx) + " (" +
                 format_bytes(best->plan.cpu.total()) + " of " + format_bytes(b_.ram) + " RAM)" +
                 (b_.vram ? "; not one layer fits the GPU" : "; no GPU") + "; the smallest file of " + o_.min_quant +
                 " or better is the fastest on a CPU";
        if (!good) reason += " (below " + o_.min_quant + ": nothing better fits)";
        return best;
    }

    std::string nothing_fits() const {
        if (order_.empty()) return "no plannable model file";
        const size_t smallest = *std::min_element(order_.begin(), order_.end(),
                                                  [&](size_t x, size_t y) { return c_[x].size < c_[y].size; });
        const FitPlan p = target_plan(smallest);
        return "nothing fits (the smallest file, " + model(smallest).quant + "): " + p.reason;
    }

    const std::vector<Candidate>& c_;
    Budget b_, eff_;
    const ChoiceOptions& o_;
    std::vector<size_t> order_;
};

}  // namespace

QuantChoice choose_quant(const std::vector<Candidate>& candidates, const Budget& budget, const ChoiceOptions& options) {
    Chooser chooser(candidates, budget, options);
    QuantChoice out;
    const std::optional<Option> pick = chooser.choose(out.reason);
    std::vector<size_t> order(candidates.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto q = [&](size_t i) { return candidates[i].model ? quant_quality(candidates[i].model->quant) : -1; };
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        return q(x) != q(y) ? q(x) > q(y) : candidates[x].size < candidates[y].size;
    });
    for (size_t i : order) {
        const Candidate& c = candidates[i];
        RankedFile r{c.path, c.model ? c.model->quant : "", c.size, std::nullopt, c.skipped};
        if (c.model) {
            r.plan = chooser.target_plan(i);
            r.note = r.plan->reason;
        }
        if (pick && pick->index == i) {
            out.chosen = out.ranked.size();
            out.plan = pick->plan;
        }
        out.ranked.push_back(std::move(r));
    }
    return out;
}

GgufFile read_header(const ListedFile& file, const PrefixReader& read_prefix) {
    uint64_t want = std::min<uint64_t>(file.size, uint64_t{1} << 20);
    for (;;) {
        const std::vector<uint8_t> bytes = read_prefix(file.path, want);
        if (bytes.size() < want)
            throw Error(file.path + ": could read only " + std::to_string(bytes.size()) + " of the first " +
                        std::to_string(want) + " bytes");
        GgufPrefix p = GgufFile::parse_prefix(bytes.data(), static_cast<size_t>(want), file.size, file.path);
        if (p.file) return std::move(*p.file);
        if (p.need_bytes > kMaxHeaderBytes)
            throw Error(file.path + ": the GGUF header needs more than " + format_bytes(kMaxHeaderBytes));
        // At least what it asked for, and at least twice as much as before: few round trips.
        want = std::min(file.size, std::max(p.need_bytes, want * 2));
    }
}

namespace {

bool is_gguf(const std::string& path) { return path.size() >= 5 && path.substr(path.size() - 5) == ".gguf"; }

// A split model's parts after the first, from the listing; throws when one is missing.
std::vector<const ListedFile*> other_parts(const ListedFile& first, const SplitName& name,
                                           const std::map<std::string, const ListedFile*>& listed) {
    std::vector<const ListedFile*> out;
    for (uint32_t i = 2; i <= name.count; ++i) {
        const auto it = listed.find(split_part_name(name.stem, i, name.count));
        if (it == listed.end())
            throw Error(first.path + ": part " + std::to_string(i) + " of " + std::to_string(name.count) +
                        " of this split model is missing");
        out.push_back(it->second);
    }
    return out;
}

// One candidate: a single file, or a split model as a whole (its first part's path, the
// parts' sizes summed, the tensor tables of all parts joined).
Candidate read_candidate(const ListedFile& f, const std::map<std::string, const ListedFile*>& listed,
                         const PrefixReader& read_prefix) {
    Candidate c{f.path, f.size, std::nullopt, ""};
    try {
        const auto split = split_name_of(f.path);
        if (!split) {
            c.model = fit_model(read_header(f, read_prefix));
        } else {
            const std::vector<const ListedFile*> rest = other_parts(f, *split, listed);
            for (const ListedFile* p : rest) c.size += p->size;
            std::vector<GgufFile> parts;
            parts.push_back(read_header(f, read_prefix));
            for (const ListedFile* p : rest) parts.push_back(read_header(*p, read_prefix));
            c.model = fit_model(GgufFile::join_split(std::move(parts)));
        }
        c.model->file_bytes = c.size;
    } catch (const Error& e) {
        c.skipped = e.what();
    }
    return c;
}

}  // namespace

std::vector<Candidate> read_candidates(const std::vector<ListedFile>& files, const PrefixReader& read_prefix) {
    std::map<std::string, const ListedFile*> listed;
    for (const ListedFile& f : files) listed.emplace(f.path, &f);
    std::vector<Candidate> out;
    for (const ListedFile& f : files) {
        if (!is_gguf(f.path)) continue;
        if (const auto split = split_name_of(f.path); split && split->index != 1) continue;  // with part 1
        out.push_back(read_candidate(f, listed, read_prefix));
    }
    return out;
}

QuantChoice choose_from_listing(const std::vector<ListedFile>& files, const PrefixReader& read_prefix,
                                const Budget& budget, const ChoiceOptions& options) {
    return choose_quant(read_candidates(files, read_prefix), budget, options);
}

}  // namespace ember::fit
