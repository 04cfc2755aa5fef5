// The settings page's "Local API server" switch, end to end: AppSettings -> ApiServerController
// -> engine/server's HttpServer over the app's own engine (EngineSlot, the chats' scheduler),
// with SmolLM2 loaded. Turning it on serves real HTTP on 127.0.0.1 (QNetworkAccessManager), an
// API key is enforced, a chat and an API request answer at the same time, a port in use is
// reported instead of crashing, and turning it off closes the port.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QSignalSpy>
#include <QTcpServer>
#include <QTcpSocket>
#include <QtTest>

#include "app/core/api_server_controller.h"
#include "app_harness.h"
#include "test_paths.h"

using namespace ember::app;
using ember::test::AppHarness;

namespace {

const std::string kSmolPath = ember::test::test_model(ember::test::kSmolLM2);

struct Reply {
    int status = 0;
    QJsonObject json;
    QByteArray body;
};

// One HTTP request on the GUI thread's event loop (the server answers from its own threads).
Reply http(const QString& method, const QUrl& url, const QByteArray& body = {}, const QString& key = {}) {
    QNetworkAccessManager nam;
    QNetworkRequest req(url);
    req.setHeader(QNetworkRequest::ContentTypeHeader, QStringLiteral("application/json"));
    if (!key.isEmpty()) req.setRawHeader("Authorization", "Bearer " + key.toUtf8());
    QNetworkReply* r = nam.sendCustomRequest(req, method.toUtf8(), body);
    QSignalSpy finished(r, &QNetworkReply::finished);
    if (!finished.wait(120'000)) return {};
    Reply out;
    out.status = r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    out.body = r->readAll();
    out.json = QJsonDocument::fromJson(out.body).object();
    r->deleteLater();
    return out;
}

// A port nothing listens on right now.
int free_port() {
    QTcpServer s;
    if (!s.listen(QHostAddress::LocalHost, 0)) return 0;
    return s.serverPort();
}

bool port_open(int port) {
    QTcpSocket s;
    s.connectToHost(QHostAddress::LocalHost, static_cast<quint16>(port));
    return s.waitForConnected(5000);
}

}  // namespace

class TestApiServer : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() { EMBER_REQUIRE_FILE(kSmolPath); }

    void switchServesAndStops() {
        QVERIFY(ApiServerController::available());
        AppHarness h;
        ApiServerController server(h.host.engine(), h.settings);
        QVERIFY(!server.running());
        QVERIFY(!h.settings.serverEnabled());  // off unless asked
        QCOMPARE(h.settings.serverPort(), 8080);
        QVERIFY(h.load(kSmolPath));

        const int port = free_port();
        QVERIFY(port > 0);
        h.settings.setServerPort(port);
        h.settings.setServerApiKey(QStringLiteral("s3cret"));
        h.settings.setServerEnabled(true);
        QTRY_VERIFY_WITH_TIMEOUT(server.running(), 30'000);
        QCOMPARE(server.url(), QStringLiteral("http://127.0.0.1:%1").arg(port));
        QVERIFY(server.error().isEmpty());
        const QUrl base(server.url());

        const Reply health = http("GET", base.resolved(QUrl("/health")));
        QCOMPARE(health.status, 200);
        QCOMPARE(health.json.value("status").toString(), QStringLiteral("ok"));
        QCOMPARE(http("GET", base.resolved(QUrl("/v1/models"))).status, 401);  // the key is required
        const Reply models = http("GET", base.resolved(QUrl("/v1/models")), {}, "s3cret");
        QCOMPARE(models.status, 200);
        QCOMPARE(models.json.value("data").toArray().at(0).toObject().value("id").toString(),
                 QStringLiteral("SmolLM2-135M-Instruct.Q4_1"));

        // A chat answers while an API request is served by the same scheduler.
        QSignalSpy done(&h.chat, &ChatController::answerFinished);
        h.set_sampling(24);
        QVERIFY(h.chat.send(QStringLiteral("Name a fruit.")));
        const QByteArray body = R"({"messages":[{"role":"user","content":"Name a fruit."}],
                                    "max_tokens":24,"temperature":0})";
        const Reply chat = http("POST", base.resolved(QUrl("/v1/chat/completions")), body, "s3cret");
        QCOMPARE(chat.status, 200);
        const QString api_text = chat.json.value("choices")
                                     .toArray()
                                     .at(0)
                                     .toObject()
                                     .value("message")
                                     .toObject()
                                     .value("content")
                                     .toString();
        QVERIFY(!api_text.isEmpty());
        QTRY_VERIFY_WITH_TIMEOUT(done.count() == 1, 120'000);
        // Same model, same messages but the system prompt: the chat has one, the API request not.
        QVERIFY(!h.store.store->messages(h.chat.currentConversationId()).back().content.isEmpty());
        QCOMPARE(chat.json.value("usage").toObject().value("completion_tokens").toInt() > 0, true);

        // Off closes the port.
        h.settings.setServerEnabled(false);
        QTRY_VERIFY_WITH_TIMEOUT(!server.running() && !server.busy(), 30'000);
        QVERIFY(server.error().isEmpty());
        QVERIFY(!port_open(port));
    }

    void portInUseIsReported() {
        AppHarness h;
        QTcpServer taken;
        QVERIFY(taken.listen(QHostAddress::LocalHost, 0));
        ApiServerController server(h.host.engine(), h.settings);
        h.settings.setServerPort(taken.serverPort());
        h.settings.setServerEnabled(true);
        QTRY_VERIFY_WITH_TIMEOUT(!server.busy() && !server.error().isEmpty(), 30'000);
        QVERIFY(!server.running());
        QVERIFY2(server.error().contains(QString::number(taken.serverPort())), qPrintable(server.error()));
        // Another port works, with no model loaded: the server says so per request.
        const int port = free_port();
        h.settings.setServerPort(port);
        QTRY_VERIFY_WITH_TIMEOUT(server.running(), 30'000);
        QVERIFY(server.error().isEmpty());
        const QByteArray body = R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":4})";
        const Reply r = http("POST", QUrl(server.url()).resolved(QUrl("/v1/chat/completions")), body);
        QVERIFY2(r.status >= 400, r.body.constData());
        QVERIFY2(r.body.contains("No model is loaded"), r.body.constData());
    }
};

QTEST_GUILESS_MAIN(TestApiServer)
#include "test_api_server.moc"
