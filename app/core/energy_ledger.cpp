#include "app/core/energy_ledger.h"

namespace ember::app {

void EnergyLedger::advance(const ember::EnergySample& now) {
    if (last_ && !running_.empty()) {
        const ember::EnergySpan span = ember::energy_between(*last_, now);
        const double n = static_cast<double>(running_.size());
        for (auto& [id, r] : running_) {
            EnergyShare& s = r.share;
            (r.decoding ? s.decode_s : s.prefill_s) += span.seconds / n;
            (r.decoding ? s.decode_j : s.prefill_j) += span.measured_j() / n;
            s.cpu_measured = s.cpu_measured && span.cpu_measured;
            s.gpu_measured = s.gpu_measured && span.gpu_measured;
            s.shared = s.shared || running_.size() > 1;
        }
    }
    last_ = now;
}

void EnergyLedger::start(uint64_t id, const ember::EnergySample& now) {
    advance(now);
    running_[id] = Running{};
}

void EnergyLedger::first_token(uint64_t id, const ember::EnergySample& now) {
    const auto it = running_.find(id);
    if (it == running_.end() || it->second.decoding) return;
    advance(now);
    it->second.decoding = true;
}

EnergyShare EnergyLedger::finish(uint64_t id, const ember::EnergySample& now) {
    const auto it = running_.find(id);
    if (it == running_.end()) return EnergyShare{0, 0, 0, 0, false, false, false};
    advance(now);
    const EnergyShare s = it->second.share;
    running_.erase(it);
    return s;
}

}  // namespace ember::app
