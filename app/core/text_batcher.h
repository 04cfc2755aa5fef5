// Coalesces streamed text so the GUI gets at most ~60 updates a second however fast the
// engine produces tokens (a small model on a GPU can do thousands per second; one queued
// signal and one QML relayout per token would swamp the GUI thread).
#pragma once
#include <QElapsedTimer>
#include <QString>

namespace ember::app {

class TextBatcher {
public:
    explicit TextBatcher(int interval_ms = 16) : interval_ms_(interval_ms) { timer_.start(); }

    // Adds a piece; returns true when the batch should be sent now.
    bool add(const char* data, size_t size) {
        pending_ += QString::fromUtf8(data, static_cast<qsizetype>(size));
        ++pieces_;
        return timer_.elapsed() >= interval_ms_;
    }
    bool empty() const { return pending_.isEmpty() && pieces_ == 0; }
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
    int pieces_ = 0;
    QElapsedTimer timer_;
};

}  // namespace ember::app
