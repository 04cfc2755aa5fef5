#include "app/cost/cost_model.h"

namespace ember::app {
namespace {

constexpr double kJoulesPerKwh = 3.6e6;
constexpr double kMillion = 1e6;

std::optional<double> sum(const std::optional<double>& a, const std::optional<double>& b) {
    if (!a || !b) return std::nullopt;
    return *a + *b;
}

}  // namespace

void EnergyUse::add(const EnergyUse& o) {
    input_tokens += o.input_tokens;
    output_tokens += o.output_tokens;
    prefill_j += o.prefill_j;
    decode_j += o.decode_j;
    prefill_s += o.prefill_s;
    decode_s += o.decode_s;
    answers += o.answers;
    estimated_answers += o.estimated_answers;
    shared_answers += o.shared_answers;
}

EnergyUse answer_use(int64_t input_tokens, int64_t output_tokens, double prefill_s, double decode_s,
                     double measured_prefill_j, double measured_decode_j, bool cpu_measured, double cpu_watts) {
    EnergyUse u;
    u.input_tokens = input_tokens;
    u.output_tokens = output_tokens;
    u.prefill_s = prefill_s;
    u.decode_s = decode_s;
    u.prefill_j = measured_prefill_j + (cpu_measured ? 0 : cpu_watts * prefill_s);
    u.decode_j = measured_decode_j + (cpu_measured ? 0 : cpu_watts * decode_s);
    u.answers = 1;
    u.estimated_answers = cpu_measured ? 0 : 1;
    return u;
}

double energy_cost(double joules, double per_kwh) { return joules / kJoulesPerKwh * per_kwh; }

double hardware_cost_per_second(const CostInputs& in) {
    const double seconds_of_use = in.hardware_years * 365.0 * in.hours_per_day * 3600.0;
    return in.hardware_price > 0 && seconds_of_use > 0 ? in.hardware_price / seconds_of_use : 0;
}

std::optional<double> LocalCost::input_per_1m() const { return sum(input_energy_per_1m, input_hardware_per_1m); }
std::optional<double> LocalCost::output_per_1m() const { return sum(output_energy_per_1m, output_hardware_per_1m); }

LocalCost local_cost(const EnergyUse& use, const CostInputs& in) {
    LocalCost c;
    const double hw = hardware_cost_per_second(in);
    if (use.input_tokens > 0) {
        const double n = static_cast<double>(use.input_tokens);
        c.input_j_per_token = use.prefill_j / n;
        c.input_energy_per_1m = energy_cost(use.prefill_j, in.electricity_per_kwh) * kMillion / n;
        c.input_hardware_per_1m = use.prefill_s * hw * kMillion / n;
    }
    if (use.output_tokens > 0) {
        const double n = static_cast<double>(use.output_tokens);
        c.output_j_per_token = use.decode_j / n;
        c.output_energy_per_1m = energy_cost(use.decode_j, in.electricity_per_kwh) * kMillion / n;
        c.output_hardware_per_1m = use.decode_s * hw * kMillion / n;
    }
    return c;
}

double cost_of(int64_t input_tokens, int64_t output_tokens, double input_per_1m, double output_per_1m) {
    return (static_cast<double>(input_tokens) * input_per_1m + static_cast<double>(output_tokens) * output_per_1m) /
           kMillion;
}

}  // namespace ember::app
