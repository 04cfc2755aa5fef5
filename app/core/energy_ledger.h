// What each answer drew when several answers run at once. The meters measure the whole
// machine, so an answer's own energy cannot be read off them while another one shares its
// passes. The ledger is read at every answer event (started, first token, finished: three
// meter reads per answer, never per token) and splits each stretch between two reads evenly
// among the answers running in it; an answer's share goes to its prefill (before its first
// token) or decode part by the phase it was in. Seconds are split the same way, so the watts
// estimate (CPU meter unreadable) and hardware amortization are not counted twice.
//
// The shares always add up to what the meters measured, so totals over many answers (the
// cost view's per-token prices) are measured; only the split between overlapping answers is
// an estimate (a long prefill costs more than a decode step), and those answers say so
// (`shared`). An answer that ran alone gets exactly its start -> first token -> end readings.
//
// Plain C++, one thread (the engine's event thread) at a time: the caller serializes.
#pragma once
#include <cstdint>
#include <map>
#include <optional>

#include "engine/telemetry/energy.h"

namespace ember::app {

struct EnergyShare {
    double prefill_s = 0, decode_s = 0;
    double prefill_j = 0, decode_j = 0;             // measured joules only (0 from an unreadable meter)
    bool cpu_measured = true, gpu_measured = true;  // every stretch it took part in was read
    bool shared = false;                            // some stretch had other answers in it
};

class EnergyLedger {
public:
    void start(uint64_t id, const ember::EnergySample& now);
    void first_token(uint64_t id, const ember::EnergySample& now);  // later calls: no effect
    // Ends the answer and returns its share; an unknown id gets an empty share.
    EnergyShare finish(uint64_t id, const ember::EnergySample& now);
    int running() const { return static_cast<int>(running_.size()); }

private:
    struct Running {
        bool decoding = false;
        EnergyShare share;
    };
    // Splits the stretch since the last reading among the answers running in it.
    void advance(const ember::EnergySample& now);

    std::map<uint64_t, Running> running_;
    std::optional<ember::EnergySample> last_;
};

}  // namespace ember::app
