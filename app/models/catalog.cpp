#include "app/models/catalog.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>

#include "kernels/common/error.h"

namespace ember::app {
namespace {

[[noreturn]] void fail(const QString& source, const QString& what) {
    throw Error(QStringLiteral("The model catalog %1 is broken: %2").arg(source, what).toStdString());
}

QString required_text(const QJsonObject& o, const char* field, const QString& source, int index) {
    const QJsonValue v = o.value(QLatin1String(field));
    const QString text = v.toString().trimmed();
    if (!v.isString() || text.isEmpty())
        fail(source, QStringLiteral("entry %1 has no \"%2\" text").arg(index + 1).arg(QLatin1String(field)));
    return text;
}

// The same rule as the hub client's check_repo_id: "owner/name" of letters, digits, - _ .
bool valid_repo(const QString& repo) {
    static const QRegularExpression re(QStringLiteral("^[A-Za-z0-9_-][A-Za-z0-9._-]*/[A-Za-z0-9_-][A-Za-z0-9._-]*$"));
    return re.match(repo).hasMatch() && !repo.contains(QStringLiteral(".."));
}

}  // namespace

QVariantMap CatalogEntry::to_row() const {
    return {{QStringLiteral("name"), name},
            {QStringLiteral("repo"), repo},
            {QStringLiteral("parameters"), parameters},
            {QStringLiteral("active"), active},
            {QStringLiteral("sizeText"),
             active.isEmpty() ? parameters : QStringLiteral("%1 · %2 active").arg(parameters, active)},
            {QStringLiteral("architecture"), architecture},
            {QStringLiteral("licence"), licence},
            {QStringLiteral("description"), description}};
}

std::vector<CatalogEntry> parse_catalog(const QByteArray& json, const QString& source) {
    QJsonParseError err{};
    const QJsonDocument doc = QJsonDocument::fromJson(json, &err);
    if (err.error != QJsonParseError::NoError)
        fail(source, QStringLiteral("%1 at byte %2").arg(err.errorString()).arg(err.offset));
    const QJsonValue models = doc.object().value(QStringLiteral("models"));
    if (!doc.isObject() || !models.isArray()) fail(source, QStringLiteral("it has no \"models\" array"));
    std::vector<CatalogEntry> out;
    const QJsonArray list = models.toArray();
    for (int i = 0; i < list.size(); ++i) {
        if (!list[i].isObject()) fail(source, QStringLiteral("entry %1 is not an object").arg(i + 1));
        const QJsonObject o = list[i].toObject();
        CatalogEntry e;
        e.name = required_text(o, "name", source, i);
        e.repo = required_text(o, "repo", source, i);
        e.parameters = required_text(o, "parameters", source, i);
        e.architecture = required_text(o, "architecture", source, i);
        e.licence = required_text(o, "licence", source, i);
        e.description = required_text(o, "description", source, i);
        if (const QJsonValue a = o.value(QStringLiteral("active")); !a.isUndefined()) {
            e.active = a.toString().trimmed();
            if (!a.isString() || !e.active.endsWith('B'))
                fail(source, QStringLiteral("entry %1 (%2) has \"active\" that is not a parameter count like \"3.3B\"")
                                 .arg(i + 1)
                                 .arg(e.name));
        }
        if (!valid_repo(e.repo))
            fail(source, QStringLiteral("entry %1 (%2) has the repository \"%3\", not owner/name")
                             .arg(i + 1)
                             .arg(e.name, e.repo));
        for (const CatalogEntry& seen : out)
            if (seen.repo.compare(e.repo, Qt::CaseInsensitive) == 0)
                fail(source, QStringLiteral("the repository %1 is listed twice").arg(e.repo));
        out.push_back(std::move(e));
    }
    if (out.empty()) fail(source, QStringLiteral("it lists no models"));
    return out;
}

std::vector<CatalogEntry> builtin_catalog() {
    QFile f(QString::fromLatin1(kCatalogResource));
    if (!f.open(QIODevice::ReadOnly))
        throw Error("The model catalog is missing from this build (" + std::string(kCatalogResource) + ")");
    return parse_catalog(f.readAll(), QString::fromLatin1(kCatalogResource));
}

}  // namespace ember::app
