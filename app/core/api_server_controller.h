// The "Local API server" switch of the settings page: engine/server's OpenAI-compatible HTTP
// API on 127.0.0.1 over the app's own engine (EngineSlot), so other programs on this machine
// (editors, agents, scripts) use the model the app has loaded, sharing its scheduler with the
// chats. It follows AppSettings (serverEnabled, serverPort, serverApiKey): turning it on
// starts it, a new port or key restarts it, off stops it. A model load swaps what is behind
// the engine; the server keeps its port and answers "No model is loaded" in between.
//
// Starting (binding the port) and stopping (cancelling requests in flight, joining the
// server's threads) run on a thread of their own, so the GUI never waits for them; the outcome
// comes back as `url` or `error` (a port in use, say).
#pragma once
#include <QObject>
#include <QString>
#include <QThread>

namespace ember {
class InferenceEngine;
}

namespace ember::app {

class AppSettings;
class ApiServerRunner;

class ApiServerController : public QObject {
    Q_OBJECT
    Q_PROPERTY(bool available READ available CONSTANT)  // built with engine/server
    Q_PROPERTY(bool running READ running NOTIFY stateChanged)
    Q_PROPERTY(bool busy READ busy NOTIFY stateChanged)       // starting, stopping or restarting
    Q_PROPERTY(QString url READ url NOTIFY stateChanged)      // "http://127.0.0.1:8080" while running
    Q_PROPERTY(QString error READ error NOTIFY stateChanged)  // why it is off although switched on

public:
    ApiServerController(ember::InferenceEngine& engine, AppSettings& settings, QObject* parent = nullptr);
    // Stops the server and waits for it (shutdown only: requests in flight are cancelled).
    ~ApiServerController() override;

    static bool available();
    bool running() const { return !url_.isEmpty(); }
    bool busy() const { return pending_ > 0; }
    QString url() const { return url_; }
    QString error() const { return error_; }

signals:
    void stateChanged();

private:
    struct Config {
        bool on = false;
        int port = 0;
        QString api_key;
        bool operator==(const Config&) const = default;
    };
    void apply();  // the settings now -> the runner, when they differ from what it was last told
    void on_applied(const QString& url, const QString& error);

    AppSettings& settings_;
    QThread thread_;
    ApiServerRunner* runner_;  // lives on thread_, deleted when it finishes
    Config told_;              // what the runner was last asked for
    int pending_ = 0;          // requests the runner has not answered yet
    QString url_, error_;
};

}  // namespace ember::app
