// The settings page's remote endpoints and the model picker's remote models (issue #41), as
// QML sees them (singleton "Remote"). An endpoint is a name, a URL, prices per 1M input and
// output tokens, an optional CA file and which optional fields its server gets
// (app/core/remote_endpoints.h), saved in the settings file; its API key goes to the system
// keyring (key_store.h) and nowhere else.
//
// "Test connection" asks the server's /v1/models on a thread of its own and lists the models
// (or shows the server's error in plain words); the models found are offered in the model
// picker, marked with the endpoint's name and their context length where the server says it.
// useModel() puts one behind the app's engine slot through ModelController: the chats, their
// history and search, the monitor and the cost view then work as with a local model.
//
// Nothing here blocks the GUI thread: keyring calls are asynchronous, HTTP runs on threads
// that the destructor joins (each bounded by the connect and read timeouts).
#pragma once
#include <QObject>
#include <QVariantList>
#include <memory>
#include <thread>
#include <vector>

#include "app/core/remote_endpoints.h"
#include "app/remote/key_store.h"

namespace ember::app {

class AppSettings;
class ModelController;

class RemoteController : public QObject {
    Q_OBJECT
    Q_PROPERTY(QVariantList endpoints READ endpoints NOTIFY endpointsChanged)
    // [{endpoint, id, context, label}]: every model the endpoints listed at their last test.
    Q_PROPERTY(QVariantList models READ models NOTIFY modelsChanged)
    // The last connection test: which endpoint, whether it is still running, how it went.
    Q_PROPERTY(QString testedEndpoint READ testedEndpoint NOTIFY testChanged)
    Q_PROPERTY(bool testing READ testing NOTIFY testChanged)
    Q_PROPERTY(bool testOk READ testOk NOTIFY testChanged)
    Q_PROPERTY(QString testMessage READ testMessage NOTIFY testChanged)
    // Why the last save or key failed ("" when it did not): a bad URL, the keyring's refusal.
    Q_PROPERTY(QString error READ error NOTIFY errorChanged)

public:
    // `key_service`: the keyring's service name for the keys (tests use their own).
    RemoteController(AppSettings& settings, ModelController& models, QString key_service = QStringLiteral("Ember"),
                     QObject* parent = nullptr);
    ~RemoteController() override;

    QVariantList endpoints() const;
    QVariantList models() const { return models_; }
    QString testedEndpoint() const { return tested_; }
    bool testing() const { return testing_ > 0; }
    bool testOk() const { return test_ok_; }
    QString testMessage() const { return test_message_; }
    QString error() const { return error_; }
    const QList<RemoteEndpoint>& list() const { return list_; }
    const RemoteEndpoint* find(const QString& name) const;

    // Adds or replaces (by `original_name`, "" for a new one) an endpoint; `api_key` non-empty
    // stores that key, "" keeps the one stored (moved along when the name changes), and
    // `clear_key` removes it. False, with `error` set, for an endpoint that cannot be saved.
    Q_INVOKABLE bool saveEndpoint(const QVariantMap& endpoint, const QString& original_name, const QString& api_key,
                                  bool clear_key = false);
    Q_INVOKABLE void removeEndpoint(const QString& name);
    Q_INVOKABLE QVariantMap endpoint(const QString& name) const;
    Q_INVOKABLE void testConnection(const QString& name);
    Q_INVOKABLE void refreshModels();  // tests every endpoint quietly (the picker, when opened)
    // Routes the chats through `model` on endpoint `name` (its context from the last listing).
    Q_INVOKABLE void useModel(const QString& name, const QString& model);

signals:
    void endpointsChanged();
    void modelsChanged();
    void testChanged();
    void errorChanged();
    void keySaved(const QString& name);  // the keyring took it (or refused: error says so)

private:
    struct Listing;
    void save_list();
    void set_error(const QString& e);
    void list_models(const QString& name, bool report);
    void on_listed(const Listing& l, bool report);
    void set_models_of(const QString& name, const QVariantList& models);

    AppSettings& settings_;
    ModelController& models_ctl_;
    KeyStore keys_;
    QList<RemoteEndpoint> list_;
    QVariantList models_;
    QString tested_, test_message_, error_;
    bool test_ok_ = false;
    int testing_ = 0;
    std::vector<std::thread> threads_;  // model listings in flight (joined by the destructor)
};

}  // namespace ember::app
