// Runs blocking work (network, disk, SQLite, quantizing) on a thread pool and hands the
// result back to a QObject's thread as a queued call: how the model manager keeps the GUI
// thread from ever waiting. An exception in the work becomes an error message for `done`.
// If `context` is destroyed first, the queued call is dropped with it (Qt's rule for
// functor calls with a context object); owners wait for their pools before that.
#pragma once
#include <QMetaObject>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QThreadPool>
#include <exception>
#include <optional>
#include <utility>

namespace ember::app {

template <typename Result>
struct Outcome {
    std::optional<Result> value;  // set on success
    QString error;                // set on failure
};

template <typename Work, typename Done>
void run_async(QThreadPool& pool, QObject* context, Work work, Done done) {
    using Result = decltype(work());
    pool.start([context = QPointer<QObject>(context), work = std::move(work), done = std::move(done)]() mutable {
        Outcome<Result> out;
        try {
            out.value.emplace(work());
        } catch (const std::exception& e) {
            out.error = QString::fromStdString(e.what());
        }
        if (!context) return;
        QMetaObject::invokeMethod(
            context.data(), [out = std::move(out), done = std::move(done)]() mutable { done(std::move(out)); },
            Qt::QueuedConnection);
    });
}

}  // namespace ember::app
