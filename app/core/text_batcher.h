// Coalesces streamed text so the GUI gets at most ~60 updates a second however fast the
// engine produces tokens (a small model on a GPU can do thousands per second; one queued
// signal and one QML relayout per token would swamp the GUI thread).
#pragma once
#include <QElapsedTimer>
#include <QString>
#include <string_view>
#include <utility>

namespace ember::app {

class TextBatcher {
public:
    explicit TextBatcher(int interval_ms = 16) : interval_ms_(interval_ms) { timer_.start(); }

    // Adds a piece (answer text, and a reasoning model's thinking); returns true when the
    // batch should be sent now.
    bool add(const char* data, size_t size, std::string_view reasoning = {}) {
        pending_ += QString::fromUtf8(data, static_cast<qsizetype>(size));
        reasoning_ += QString::fromUtf8(reasoning.data(), static_cast<qsizetype>(reasoning.size()));
        ++pieces_;
        return timer_.elapsed() >= interval_ms_;
    }
    bool empty() const { return pending_.isEmpty() && reasoning_.isEmpty() && pieces_ == 0; }
    // The batch's thinking; take() then hands over the rest.
    QString take_reasoning() { return std::exchange(reasoning_, QString()); }
    // Hands over the batch (text, pieces) and starts a new interval.
    std::pair<QString, int> take() {
        std::pair<QString, int> out{std::move(pending_), pieces_};
        pending_.clear();
        pieces_ = 0;
        timer_.restart();
        return out;
    }

private:
    int interval_ms_;
    QString pending_;
    QString reasoning_;
    int pieces_ = 0;
    QElapsedTimer timer_;
};

}  // namespace ember::app
