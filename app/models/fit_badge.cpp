#include "app/models/fit_badge.h"

#include <algorithm>

#include "engine/fit/byte_size.h"
#include "engine/fit/context_choice.h"
#include "engine/fit/measured_budget.h"
#include "kernels/common/format.h"

namespace ember::app {
namespace {

QString bytes_text(uint64_t n) { return QString::fromStdString(format_bytes(n)); }

}  // namespace

QString badge_key(fit::Placement p) {
    switch (p) {
        case fit::Placement::Gpu:
            return QStringLiteral("gpu");
        case fit::Placement::Split:
            return QStringLiteral("split");
        case fit::Placement::ExpertsInRam:
            return QStringLiteral("experts-in-ram");
        case fit::Placement::Cpu:
            return QStringLiteral("cpu");
        case fit::Placement::TooLarge:
            break;
    }
    return QStringLiteral("too-large");
}

QString badge_label(fit::Placement p) {
    switch (p) {
        case fit::Placement::Gpu:
            return QStringLiteral("Fits your GPU");
        case fit::Placement::Split:
            return QStringLiteral("GPU + CPU");
        case fit::Placement::ExpertsInRam:
            return QStringLiteral("GPU + experts in RAM");
        case fit::Placement::Cpu:
            return QStringLiteral("CPU only");
        case fit::Placement::TooLarge:
            break;
    }
    return QStringLiteral("Too large");
}

fit::Budget resolve_budget(const QString& vram, const QString& ram) {
    const bool typed_vram = !vram.trimmed().isEmpty(), typed_ram = !ram.trimmed().isEmpty();
    fit::Budget b;
    if (!typed_vram) b = fit::measured_budget();  // what the planner itself measures
    if (typed_vram) b.vram = fit::parse_byte_size(vram.toStdString(), "the VRAM budget");
    if (typed_ram) b.ram = fit::parse_byte_size(ram.toStdString(), "the RAM budget");
    else if (typed_vram) b.ram = fit::available_ram();
    return b;
}

QString describe_budget(const fit::Budget& b, bool vram_set, bool ram_set) {
    const QString vram = b.vram == 0 && !vram_set
                             ? QStringLiteral("no GPU")
                             : QStringLiteral("%1 VRAM (%2)").arg(bytes_text(b.vram), vram_set ? "set" : "measured");
    return QStringLiteral("%1, %2 RAM (%3)").arg(vram, bytes_text(b.ram), ram_set ? "set" : "measured");
}

QString plain_reason(const fit::FitPlan& p) {
    const QString chats = QStringLiteral("for chats up to %1 tokens").arg(p.n_ctx);
    const QString vram = bytes_text(p.budget.vram) + (p.budget.vram_measured ? QStringLiteral(" free") : QString());
    switch (p.placement) {
        case fit::Placement::Gpu:
            return QStringLiteral("Runs fully on your GPU: %1 of %2 VRAM, %3.")
                .arg(bytes_text(p.gpu.total()), vram, chats);
        case fit::Placement::Split:
            return QStringLiteral(
                       "Runs partly on your GPU (%1 of %2 layers), the rest on the CPU: slower. "
                       "Needs %3 of %4 VRAM and %5 of %6 RAM, %7.")
                .arg(p.gpu_layers)
                .arg(p.n_layers)
                .arg(bytes_text(p.gpu.total()), vram, bytes_text(p.cpu.total()), bytes_text(p.budget.ram), chats);
        case fit::Placement::ExpertsInRam:
            return QStringLiteral(
                       "Runs on your GPU with the experts of %1 of %2 layers in RAM: fast, because each word "
                       "reads only %3 of the %4 experts. Needs %5 of %6 VRAM and %7 of %8 RAM, %9.")
                .arg(p.n_layers - p.gpu_expert_layers)
                .arg(p.n_layers)
                .arg(p.n_expert_used)
                .arg(p.n_expert)
                .arg(bytes_text(p.gpu.total()), vram, bytes_text(p.cpu.total()), bytes_text(p.budget.ram), chats);
        case fit::Placement::Cpu:
            return (p.budget.vram == 0 ? QStringLiteral("No GPU: runs on the CPU, slower than a GPU. ")
                                       : QStringLiteral("Too big for your GPU; fits in RAM and runs on the CPU: "
                                                        "slower. ")) +
                   QStringLiteral("Needs %1 of %2 RAM, %3.")
                       .arg(bytes_text(p.cpu.total()), bytes_text(p.budget.ram), chats);
        case fit::Placement::TooLarge:
            break;
    }
    return QStringLiteral("Too large for this machine: it needs %1 of memory %2, and you have %3 VRAM and %4 RAM.")
        .arg(bytes_text(p.cpu.total()), chats, vram, bytes_text(p.budget.ram));
}

QString plain_choice(const fit::QuantChoice& c, const fit::ChoiceOptions& o) {
    if (!c.chosen || !c.plan) {
        for (auto it = c.ranked.rbegin(); it != c.ranked.rend(); ++it)  // ranked best first: the smallest last
            if (it->plan)
                return QStringLiteral("Nothing here fits this machine; even %1 needs %2 of memory.")
                    .arg(QString::fromStdString(it->quant), bytes_text(it->plan->cpu.total()));
        return {};
    }
    const fit::RankedFile& r = c.ranked[*c.chosen];
    const QString quant = QString::fromStdString(r.quant);
    QString line;
    switch (c.plan->placement) {
        case fit::Placement::Gpu:
            line = *c.chosen == 0
                       ? QStringLiteral("%1 is the best file here, and it runs fully on your GPU.").arg(quant)
                       : QStringLiteral("%1 is the best quality that runs fully on your GPU.").arg(quant);
            break;
        case fit::Placement::Split:
            line = QStringLiteral(
                       "%1 puts the most of the model on your GPU (%2 of %3 layers): no good file fits "
                       "there entirely.")
                       .arg(quant)
                       .arg(c.plan->gpu_layers)
                       .arg(c.plan->n_layers);
            break;
        case fit::Placement::ExpertsInRam:
            line = QStringLiteral(
                       "%1 is the best quality that runs on your GPU with some of its experts in RAM: "
                       "no good file fits the GPU entirely.")
                       .arg(quant);
            break;
        default:
            line =
                QStringLiteral("%1 runs on the CPU, where a smaller file answers faster: it is the smallest good one.")
                    .arg(quant);
            break;
    }
    if (fit::quant_quality(r.quant) < fit::quant_quality(o.min_quant))
        line += QStringLiteral(" Its quality is lower, but nothing better fits.");
    return line;
}

QVariantMap badge_fields(const fit::RankedFile& r, bool best, const std::optional<fit::FitPlan>& plan) {
    QVariantMap m;
    if (plan) {
        m[QStringLiteral("badge")] = badge_key(plan->placement);
        m[QStringLiteral("badgeText")] = badge_label(plan->placement);
        m[QStringLiteral("reason")] = plain_reason(*plan);
    } else {
        m[QStringLiteral("badge")] = QStringLiteral("unknown");
        m[QStringLiteral("badgeText")] = QStringLiteral("Cannot judge");
        m[QStringLiteral("reason")] =
            QStringLiteral("Could not read this file's header: %1").arg(QString::fromStdString(r.note));
    }
    m[QStringLiteral("best")] = best;
    m[QStringLiteral("checked")] = true;
    return m;
}

fit::ChoiceOptions load_choice_options(int n_ctx, int n_seqs) {
    fit::ChoiceOptions o;
    o.fit.n_seqs = std::max(1, n_seqs);
    if (n_ctx > 0) {
        o.fit.n_ctx = n_ctx;  // the user's setting: loaded as it is, so judged as it is
        o.min_ctx = n_ctx;
    } else {
        o.fit.n_ctx = fit::ContextOptions{}.max_ctx;  // capped at the model's own length
        o.min_ctx = fit::ContextOptions{}.min_ctx;
    }
    return o;
}

}  // namespace ember::app
