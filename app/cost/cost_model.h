// The cost view's arithmetic, on plain numbers: what a million input (prompt) and output
// (generated) tokens cost on this machine, from the energy the answers drew times the
// electricity price, plus the hardware's price spread over the hours it is used.
//
// Input tokens are the prompt tokens the engine processed (those already in the KV cache cost
// nothing again); their share is the prefill, start -> first token. Output tokens are the
// generated ones; their share is the rest of the answer.
#pragma once
#include <cstdint>
#include <optional>

namespace ember::app {

struct CostInputs {
    double electricity_per_kwh = 0;  // in the user's currency
    double hardware_price = 0;       // 0: no amortization
    double hardware_years = 4;       // how long the machine is used
    double hours_per_day = 8;        // ... for how many hours a day (365 days a year)
};

// One answer, or a sum of them. Joules include estimates where a meter was unreadable.
struct EnergyUse {
    int64_t input_tokens = 0, output_tokens = 0;
    double prefill_j = 0, decode_j = 0;
    double prefill_s = 0, decode_s = 0;
    int answers = 0;
    int estimated_answers = 0;  // answers whose CPU energy is watts x time, not measured
    // Answers that ran alongside others: their joules and seconds are an even split of the
    // stretches they shared (app/core/energy_ledger.h). The sum over answers is still what
    // the meters read; how it divides between input and output tokens is the estimate.
    int shared_answers = 0;
    void add(const EnergyUse& o);
};

// One answer's use: the measured joules, plus cpu_watts x its seconds where the CPU meter was
// unreadable (then it counts as estimated).
EnergyUse answer_use(int64_t input_tokens, int64_t output_tokens, double prefill_s, double decode_s,
                     double measured_prefill_j, double measured_decode_j, bool cpu_measured, double cpu_watts);

double energy_cost(double joules, double per_kwh);  // 1 kWh = 3.6 MJ
double hardware_cost_per_second(const CostInputs& in);

struct LocalCost {
    // Per token; empty where no such token was seen.
    std::optional<double> input_j_per_token, output_j_per_token;
    // Per 1M tokens, energy and hardware parts, in the user's currency.
    std::optional<double> input_energy_per_1m, input_hardware_per_1m;
    std::optional<double> output_energy_per_1m, output_hardware_per_1m;
    std::optional<double> input_per_1m() const;
    std::optional<double> output_per_1m() const;
};
LocalCost local_cost(const EnergyUse& use, const CostInputs& in);

// What `input` and `output` tokens cost at the given per-1M prices.
double cost_of(int64_t input_tokens, int64_t output_tokens, double input_per_1m, double output_per_1m);

}  // namespace ember::app
