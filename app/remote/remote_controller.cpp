#include "app/remote/remote_controller.h"

#include <QPointer>
#include <algorithm>
#include <utility>

#include "app/core/app_settings.h"
#include "app/core/model_controller.h"
#include "engine/remote/remote_engine.h"

namespace ember::app {
namespace {

// How Ember talks to an endpoint: its URL, key and CA file; the fields it sends. A connection
// test tries once (a retry would only make the user wait for the same answer).
remote::RemoteConfig config_of(const RemoteEndpoint& e, const QString& key, const QString& model = {}) {
    remote::RemoteConfig c;
    c.base_url = e.base_url.toStdString();
    c.api_key = key.toStdString();
    c.ca_file = e.ca_file.toStdString();
    c.model = model.toStdString();
    c.sent.set_extras(e.send_extras);
    return c;
}

QString context_words(qint64 n) {
    if (n <= 0) return {};
    return n % 1024 == 0 ? QStringLiteral("%1k ctx").arg(n / 1024) : QStringLiteral("%1 ctx").arg(n);
}

}  // namespace

// One /v1/models answer, carried from the listing thread to the GUI thread.
struct RemoteController::Listing {
    QString name;
    bool ok = false;
    QString message;
    QVariantList models;
};

RemoteController::RemoteController(AppSettings& settings, ModelController& models, QString key_service, QObject* parent)
    : QObject(parent), settings_(settings), models_ctl_(models), keys_(std::move(key_service)) {
    list_ = remote_endpoints_from_json(settings_.remoteEndpointsJson());
}

RemoteController::~RemoteController() {
    for (std::thread& t : threads_) t.join();  // each bounded by its timeouts
}

QVariantList RemoteController::endpoints() const {
    QVariantList out;
    for (const RemoteEndpoint& e : list_) out.append(to_variant(e));
    return out;
}

const RemoteEndpoint* RemoteController::find(const QString& name) const {
    for (const RemoteEndpoint& e : list_)
        if (e.name == name) return &e;
    return nullptr;
}

QVariantMap RemoteController::endpoint(const QString& name) const {
    const RemoteEndpoint* e = find(name);
    return e ? to_variant(*e) : QVariantMap{};
}

void RemoteController::save_list() {
    settings_.setRemoteEndpointsJson(remote_endpoints_to_json(list_));
    emit endpointsChanged();
}

void RemoteController::set_error(const QString& e) {
    if (e == error_) return;
    error_ = e;
    emit errorChanged();
}

bool RemoteController::saveEndpoint(const QVariantMap& endpoint, const QString& original_name, const QString& api_key,
                                    bool clear_key) {
    const RemoteEndpoint e = remote_endpoint_from(endpoint);
    QString problem = remote_endpoint_problem(e);
    if (problem.isEmpty() && e.name != original_name && find(e.name))
        problem = QStringLiteral("An endpoint named “%1” is there already.").arg(e.name);
    if (!problem.isEmpty()) {
        set_error(problem);
        return false;
    }
    set_error({});
    auto it =
        std::find_if(list_.begin(), list_.end(), [&](const RemoteEndpoint& x) { return x.name == original_name; });
    if (it != list_.end() && !original_name.isEmpty()) *it = e;
    else list_.append(e);
    save_list();
    const QPointer<RemoteController> self(this);
    const auto saved = [self, name = e.name](const QString& error) {
        if (!self) return;
        self->set_error(error);
        emit self->keySaved(name);
    };
    if (!api_key.isEmpty() || clear_key) {
        keys_.write(e.name, clear_key ? QString() : api_key, saved);
        if (!original_name.isEmpty() && original_name != e.name) keys_.remove(original_name);
    } else if (!original_name.isEmpty() && original_name != e.name) {
        keys_.read(original_name,
                   [this, self, old = original_name, name = e.name, saved](const QString& key, const QString&) {
                       if (!self) return;
                       keys_.write(name, key, saved);
                       keys_.remove(old);
                   });
    }
    if (!original_name.isEmpty() && original_name != e.name) set_models_of(original_name, {});
    return true;
}

void RemoteController::removeEndpoint(const QString& name) {
    list_.erase(std::remove_if(list_.begin(), list_.end(), [&](const RemoteEndpoint& e) { return e.name == name; }),
                list_.end());
    keys_.remove(name);
    set_models_of(name, {});
    save_list();
}

void RemoteController::testConnection(const QString& name) { list_models(name, true); }

void RemoteController::refreshModels() {
    for (const RemoteEndpoint& e : list_) list_models(e.name, false);
}

void RemoteController::list_models(const QString& name, bool report) {
    const RemoteEndpoint* found = find(name);
    if (!found) return;
    if (report) {
        tested_ = name;
        test_ok_ = false;
        test_message_ = QStringLiteral("Asking %1 for its models…").arg(found->base_url);
    }
    ++testing_;
    emit testChanged();
    const QPointer<RemoteController> self(this);
    keys_.read(name, [this, self, e = *found, report](const QString& key, const QString& key_error) {
        if (!self) return;
        remote::RemoteConfig cfg = config_of(e, key);
        cfg.max_attempts = 1;
        cfg.read_timeout = std::chrono::seconds(30);
        threads_.emplace_back([self, cfg, name = e.name, key_error, report] {
            Listing l;
            l.name = name;
            try {
                for (const remote::RemoteModel& m : remote::RemoteEngine(cfg).list_models())
                    l.models.append(QVariantMap{{"endpoint", name},
                                                {"id", QString::fromStdString(m.id)},
                                                {"context", static_cast<qlonglong>(m.context_length)}});
                l.ok = true;
                l.message = l.models.isEmpty()     ? QStringLiteral("Connected, but the server lists no models.")
                            : l.models.size() == 1 ? QStringLiteral("Connected: 1 model.")
                                                   : QStringLiteral("Connected: %1 models.").arg(l.models.size());
            } catch (const std::exception& ex) {
                l.message = QString::fromUtf8(ex.what());
                if (!key_error.isEmpty()) l.message += QStringLiteral("\n") + key_error;
            }
            QMetaObject::invokeMethod(
                self.data(),
                [self, l, report] {
                    if (self) self->on_listed(l, report);
                },
                Qt::QueuedConnection);
        });
    });
}

void RemoteController::on_listed(const Listing& l, bool report) {
    --testing_;
    if (l.ok || report) set_models_of(l.name, l.models);
    if (report && l.name == tested_) {
        test_ok_ = l.ok;
        test_message_ = l.message;
    }
    emit testChanged();
}

void RemoteController::set_models_of(const QString& name, const QVariantList& models) {
    QVariantList out;
    for (const QVariant& v : std::as_const(models_))
        if (v.toMap().value(QStringLiteral("endpoint")).toString() != name) out.append(v);
    for (QVariant v : models) {
        QVariantMap m = v.toMap();
        const QString ctx = context_words(m.value(QStringLiteral("context")).toLongLong());
        m[QStringLiteral("label")] = m.value(QStringLiteral("id")).toString() + QStringLiteral("  ·  ") + name +
                                     (ctx.isEmpty() ? QString() : QStringLiteral("  ·  ") + ctx);
        out.append(m);
    }
    models_ = out;
    emit modelsChanged();
}

void RemoteController::useModel(const QString& name, const QString& model) {
    const RemoteEndpoint* found = find(name);
    if (!found || model.isEmpty()) return;
    qint64 context = 0;
    for (const QVariant& v : std::as_const(models_)) {
        const QVariantMap m = v.toMap();
        if (m.value(QStringLiteral("endpoint")).toString() == name && m.value(QStringLiteral("id")).toString() == model)
            context = m.value(QStringLiteral("context")).toLongLong();
    }
    const QPointer<RemoteController> self(this);
    keys_.read(name, [this, self, e = *found, model, context](const QString& key, const QString& key_error) {
        if (!self) return;
        if (!key_error.isEmpty()) set_error(key_error);
        RemoteLoad r;
        r.endpoint = e.name;
        r.model = model;
        r.context = context;
        r.reasoning_effort = e.reasoning_effort;
        r.url = QString::fromStdString(remote::printable_url(e.base_url.toStdString()));
        const remote::RemoteConfig cfg = config_of(e, key, model);
        r.make = [cfg] { return std::unique_ptr<InferenceEngine>(std::make_unique<remote::RemoteEngine>(cfg)); };
        models_ctl_.loadRemote(std::move(r));
    });
}

}  // namespace ember::app
