#include "app/core/api_server_controller.h"

#include <memory>

#include "app/core/app_settings.h"
#include "engine/scheduler/inference_engine.h"
#ifdef EMBER_HAVE_SERVER
#include "engine/server/http_server.h"
#endif

namespace ember::app {

// Owns the HTTP server on the controller's thread; every call runs there, one at a time.
class ApiServerRunner : public QObject {
    Q_OBJECT
public:
    explicit ApiServerRunner(ember::InferenceEngine& engine) : engine_(engine) {}
    ~ApiServerRunner() override { stop(); }

    // Stops what runs, then starts on `port` when `on`; reports the URL or the error.
    void configure(bool on, int port, const QString& api_key) {
        stop();
        if (!on) {
            emit applied({}, {});
            return;
        }
#ifdef EMBER_HAVE_SERVER
        ember::server::ServerOptions o;
        o.host = "127.0.0.1";  // this machine only, whatever the port
        o.port = port;
        o.api_key = api_key.toStdString();
        try {
            auto server = std::make_unique<ember::server::HttpServer>(engine_, o);
            server->start();
            server_ = std::move(server);
            emit applied(QString::fromStdString(server_->url()), {});
        } catch (const std::exception& e) {
            emit applied({}, QStringLiteral("The server could not start on 127.0.0.1:%1: %2")
                                 .arg(port)
                                 .arg(QString::fromUtf8(e.what())));
        }
#else
        (void)port;
        (void)api_key;
        emit applied({}, QStringLiteral("This build of Ember has no API server (cpp-httplib was not found)."));
#endif
    }

signals:
    void applied(const QString& url, const QString& error);

private:
    void stop() {
#ifdef EMBER_HAVE_SERVER
        if (server_) server_->stop();
        server_.reset();
#endif
    }

    ember::InferenceEngine& engine_;
#ifdef EMBER_HAVE_SERVER
    std::unique_ptr<ember::server::HttpServer> server_;
#endif
};

ApiServerController::ApiServerController(ember::InferenceEngine& engine, AppSettings& settings, QObject* parent)
    : QObject(parent), settings_(settings), runner_(new ApiServerRunner(engine)) {
    thread_.setObjectName(QStringLiteral("ember-api-server"));
    runner_->moveToThread(&thread_);
    connect(&thread_, &QThread::finished, runner_, &QObject::deleteLater);
    connect(runner_, &ApiServerRunner::applied, this, &ApiServerController::on_applied);
    connect(&settings_, &AppSettings::changed, this, &ApiServerController::apply);
    thread_.start();
    apply();
}

ApiServerController::~ApiServerController() {
    thread_.quit();  // the runner's destructor stops the server on its own thread
    thread_.wait();
}

bool ApiServerController::available() {
#ifdef EMBER_HAVE_SERVER
    return true;
#else
    return false;
#endif
}

void ApiServerController::apply() {
    const Config want{settings_.serverEnabled(), settings_.serverPort(), settings_.serverApiKey()};
    if (want == told_) return;
    // Off needs no new port or key: only the switch matters then.
    if (!want.on && !told_.on) {
        told_ = want;
        return;
    }
    told_ = want;
    ++pending_;
    QMetaObject::invokeMethod(
        runner_, [r = runner_, want] { r->configure(want.on, want.port, want.api_key); }, Qt::QueuedConnection);
    emit stateChanged();
}

void ApiServerController::on_applied(const QString& url, const QString& error) {
    --pending_;
    // Only the answer to the newest request counts; older ones were already replaced.
    if (pending_ == 0) {
        url_ = url;
        error_ = error;
    }
    emit stateChanged();
}

}  // namespace ember::app

#include "api_server_controller.moc"  // ApiServerRunner is a QObject defined here
