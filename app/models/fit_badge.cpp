#include "app/models/fit_badge.h"

#include "engine/fit/byte_size.h"
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
            return QStringLiteral("Fits GPU");
        case fit::Placement::Split:
            return QStringLiteral("Partial offload");
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

QVariantMap badge_fields(const fit::RankedFile& r, bool best, const QString& best_reason) {
    QVariantMap m;
    if (r.plan) {
        m[QStringLiteral("badge")] = badge_key(r.plan->placement);
        m[QStringLiteral("badgeText")] = badge_label(r.plan->placement);
    } else {
        m[QStringLiteral("badge")] = QStringLiteral("unknown");
        m[QStringLiteral("badgeText")] = QStringLiteral("Cannot plan");
    }
    m[QStringLiteral("reason")] = best ? best_reason : QString::fromStdString(r.note);
    m[QStringLiteral("best")] = best;
    m[QStringLiteral("checked")] = true;
    return m;
}

}  // namespace ember::app
