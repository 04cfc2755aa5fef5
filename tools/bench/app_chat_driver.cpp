// ember-app-chat-driver: the desktop app's chat path without its window, for benchmarks that
// must go through the app's worker (tests/bench/long_chat_bench.py --app). It loads a model the
// way the app does (EngineHost -> EngineWorker on its own thread -> EngineSlot -> Scheduler)
// and answers chat turns submitted as the chat window submits them: the whole conversation,
// `conversation_id` as its cache_key (chat:<id>), so each turn continues the chat's kept KV
// sequence, and with --kv-disk the app's disk tier, which a new process finds again.
//
//   ember-app-chat-driver MODEL [--ctx N] [--threads N] [--chats N] [--kv-disk DIR]
//
// Protocol, one JSON object per line: stdout first {"loaded": true, "n_ctx": ...} (or
// {"error": ...}, exit 1); then for each line on stdin {"conversation": id, "max_tokens": n,
// "messages": [{"role", "content"}, ...]} one line {"prompt_tokens", "reused_tokens",
// "ttft_ms", "ttft_cpu_ms", "engine_ttft_ms", "generated_tokens", "text"} (or {"error": ...}).
// ttft_ms: from the submit to the first text the worker signals (what the chat window would
// show); ttft_cpu_ms: this process's CPU time over the same interval (all its threads: the
// figure that repeats on a loaded machine); engine_ttft_ms: the scheduler's own measure.
// Greedy (temperature 0). EOF on stdin: unload and exit 0.
#include <QCoreApplication>
#include <QEventLoop>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTimer>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <optional>
#include <string>

#include "app/core/engine_host.h"

using namespace ember::app;

namespace {

double cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

double wall_ms() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

void reply(const QJsonObject& o) {
    std::cout << QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString() << std::endl;
}

struct Options {
    QString model, kv_disk;
    qint64 ctx = 0;
    int threads = 0, chats = 4;
};

std::optional<Options> parse_args(const QStringList& args) {
    Options o;
    for (int i = 1; i < args.size(); ++i) {
        const QString& a = args[i];
        const bool has_value = i + 1 < args.size();
        if (a == "--ctx" && has_value) o.ctx = args[++i].toLongLong();
        else if (a == "--threads" && has_value) o.threads = args[++i].toInt();
        else if (a == "--chats" && has_value) o.chats = args[++i].toInt();
        else if (a == "--kv-disk" && has_value) o.kv_disk = args[++i];
        else if (!a.startsWith("--") && o.model.isEmpty()) o.model = a;
        else return std::nullopt;
    }
    if (o.model.isEmpty()) return std::nullopt;
    return o;
}

// Loads as ModelController does; returns the error, empty on success.
QString load(EngineHost& host, const Options& o, qint64* n_ctx) {
    LoadRequest r;
    r.path = o.model;
    r.n_ctx = o.ctx;
    r.n_seqs = o.chats;
    r.n_threads = o.threads;
    if (!o.kv_disk.isEmpty()) {
        r.kv_disk_folder = o.kv_disk;
        r.kv_disk_bytes = quint64{4} << 30;  // the app's default setting
    }
    QEventLoop loop;
    QString error;
    QObject::connect(host.worker(), &EngineWorker::modelLoaded, &loop, [&](const LoadedModelInfo& info) {
        *n_ctx = info.n_ctx;
        loop.quit();
    });
    QObject::connect(host.worker(), &EngineWorker::modelLoadFailed, &loop, [&](const QString&, const QString& e, bool) {
        error = e.isEmpty() ? QStringLiteral("load failed") : e;
        loop.quit();
    });
    host.load(r);
    loop.exec();
    return error;
}

// One turn through the worker, as ChatController submits it; waits for its end.
QJsonObject turn(EngineHost& host, const QJsonObject& in) {
    GenerationRequest req;
    req.id = host.nextRequestId();
    req.conversation_id = in.value("conversation").toInteger(1);
    for (const auto& m : in.value("messages").toArray()) {
        const QJsonObject o = m.toObject();
        req.turns.push_back({o.value("role").toString(), o.value("content").toString(), {}});
    }
    req.sampling.temperature = 0;
    req.sampling.max_tokens = in.value("max_tokens").toInt(48);
    req.sampling.thinking = false;
    req.sampling.reasoning_effort.clear();
    QEventLoop loop;
    QJsonObject out;
    QString text;
    double first_wall = -1, first_cpu = -1;
    const double wall0 = wall_ms(), cpu0 = cpu_ms();
    QObject::connect(host.worker(), &EngineWorker::textReady, &loop,
                     [&](quint64 id, const QString& piece, int, const QString&) {
                         if (id != req.id || piece.isEmpty()) return;
                         if (first_wall < 0) {
                             first_cpu = cpu_ms() - cpu0;
                             first_wall = wall_ms() - wall0;
                         }
                         text += piece;
                     });
    QObject::connect(host.worker(), &EngineWorker::generationFinished, &loop,
                     [&](quint64 id, const GenerationResult& r) {
                         if (id != req.id) return;
                         out["prompt_tokens"] = r.prompt_tokens;
                         out["reused_tokens"] = r.reused_tokens;
                         out["generated_tokens"] = r.generated_tokens;
                         out["engine_ttft_ms"] = r.ttft_ms;
                         loop.quit();
                     });
    QObject::connect(host.worker(), &EngineWorker::generationFailed, &loop,
                     [&](quint64 id, const QString& error, qint64) {
                         if (id != req.id) return;
                         out["error"] = error;
                         loop.quit();
                     });
    host.generate(req);
    loop.exec();
    // A finished answer's text may still be queued behind its end: take what has arrived.
    QCoreApplication::processEvents();
    if (out.contains("error")) return out;
    if (first_wall < 0) return {{"error", "no text was generated"}};
    out["ttft_ms"] = first_wall;
    out["ttft_cpu_ms"] = first_cpu;
    out["text"] = text;
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    QCoreApplication app(argc, argv);
    const auto opts = parse_args(app.arguments());
    if (!opts) {
        std::fprintf(stderr,
                     "usage: ember-app-chat-driver MODEL [--ctx N] [--threads N] [--chats N] [--kv-disk DIR]\n");
        return 2;
    }
    EngineHost host;
    qint64 n_ctx = 0;
    if (const QString error = load(host, *opts, &n_ctx); !error.isEmpty()) {
        reply({{"error", error}});
        return 1;
    }
    reply({{"loaded", true}, {"n_ctx", n_ctx}});
    for (std::string line; std::getline(std::cin, line);) {
        if (line.empty()) continue;
        QJsonParseError err{};
        const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString(line), &err);
        if (!doc.isObject()) {
            reply({{"error", "not a JSON object: " + err.errorString()}});
            continue;
        }
        reply(turn(host, doc.object()));
    }
    host.unload();
    return 0;
}
