#include "engine/fit/context_choice.h"

#include <algorithm>
#include <string>
#include <vector>

namespace ember::fit {
namespace {

// The trained length capped at max_ctx, then halvings down to the floor.
std::vector<int64_t> candidates(int64_t top, int64_t floor) {
    std::vector<int64_t> out{top};
    for (int64_t c = top / 2; c >= floor; c /= 2) out.push_back(c);
    if (out.back() > floor) out.push_back(floor);
    return out;
}

FitPlan plan_at(const FitModel& m, const ContextOptions& o, const Budget& b, int64_t ctx) {
    return plan(m, FitOptions{ctx, o.n_seqs, o.n_batch, o.kv_type}, b);
}

// `p` is as good a placement as `base`: the same kind, no fewer layers (nor layers' experts)
// on the GPU.
bool as_good(const FitPlan& p, const FitPlan& base) {
    return fits(p) && p.placement == base.placement && p.gpu_layers >= base.gpu_layers &&
           p.gpu_expert_layers >= base.gpu_expert_layers;
}

// "32,768 tokens".
std::string tokens(int64_t n) {
    const std::string d = std::to_string(n);
    std::string out;
    for (size_t i = 0; i < d.size(); ++i) {
        if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
        out += d[i];
    }
    return out + " tokens";
}

}  // namespace

ContextChoice choose_context(const FitModel& m, const Budget& b, const ContextOptions& o) {
    ContextChoice c;
    c.trained = m.config.n_ctx_train > 0 ? m.config.n_ctx_train : o.min_ctx;
    const int64_t top = std::min(c.trained, o.max_ctx);
    const int64_t floor = std::min(top, o.min_ctx);
    Budget eff = b;
    eff.vram = static_cast<uint64_t>(static_cast<double>(b.vram) * (1.0 - o.margin));
    eff.ram = static_cast<uint64_t>(static_cast<double>(b.ram) * o.ram_share);

    const FitPlan base = plan_at(m, o, eff, floor);
    c.n_ctx = floor;
    c.plan = base;
    if (!fits(base)) {
        c.fits_up_to = 0;
        c.reason = tokens(floor) + ": even this does not fit the free memory (" + base.reason + ")";
        return c;
    }
    for (int64_t ctx : candidates(top, floor)) {
        FitPlan p = plan_at(m, o, eff, ctx);
        if (!as_good(p, base)) continue;
        c.n_ctx = ctx;
        c.fits_up_to = ctx;
        c.plan = std::move(p);
        break;
    }
    if (c.n_ctx == c.trained) c.reason = tokens(c.n_ctx) + ": all the model was made for";
    else if (c.n_ctx == top)
        c.reason = tokens(c.n_ctx) + " of the model's " + tokens(c.trained) + ": Ember's upper limit";
    else
        c.reason = tokens(c.n_ctx) + " of the model's " + tokens(c.trained) + ": a longer one would not fit " +
                   (c.plan.placement == Placement::Cpu ? "half the free RAM" : "the GPU's free memory");
    return c;
}

}  // namespace ember::fit
