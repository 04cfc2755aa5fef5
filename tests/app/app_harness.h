// The app's non-visual parts wired as ember-app wires them, on a throw-away data folder:
// store, settings, engine thread, model and chat controllers. Shared by the controller test
// and the screenshot/QML tests.
#pragma once
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "app/core/app_settings.h"
#include "app/core/chat_controller.h"
#include "app/core/engine_host.h"
#include "app/core/model_controller.h"
#include "app/storage/store_open.h"

namespace ember::test {

struct AppHarness {
    QTemporaryDir dir;
    app::OpenedStore store;
    app::AppSettings settings;
    app::EngineHost host;
    app::ModelController models;
    app::ChatController chat;

    // kv_disk: the KV cache's disk tier in <dir>/kv (as ember-app has it), else none.
    explicit AppHarness(int context = 1024, int cached_chats = 4, bool kv_disk = false)
        : store(app::open_conversation_store(dir.path())),
          settings(dir.filePath(QStringLiteral("settings.ini"))),
          models(host, settings, kv_disk ? dir.filePath(QStringLiteral("kv")) : QString()),
          chat(*store.store, host, models, settings) {
        settings.setContextLength(context);
        settings.setCachedChats(cached_chats);
        // Tests share two cores with everything else: one engine thread keeps timings sane.
        settings.setThreads(1);
    }

    // Loads and waits; returns false (with the error in models.error()) on failure.
    bool load(const std::string& path, int timeout_ms = 120'000) {
        models.load(QString::fromStdString(path));
        if (!QTest::qWaitFor([&] { return models.state() != app::ModelController::Loading; }, timeout_ms)) return false;
        return models.ready();
    }

    // Sets sampling for the current (or draft) conversation.
    void set_sampling(int max_tokens, double temperature = 0.0, qint64 seed = 1) {
        QVariantMap s = chat.sampling();
        s[QStringLiteral("max_tokens")] = max_tokens;
        s[QStringLiteral("temperature")] = temperature;
        s[QStringLiteral("seed")] = seed;
        chat.setSampling(s);
    }
};

}  // namespace ember::test
