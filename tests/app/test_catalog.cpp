// The curated model catalog (resources/catalog.json as compiled into the app) and its
// parser: the real file parses into a dozen well-formed entries whose architectures the
// engine runs, and broken catalogs are refused with a message naming the entry and field.
#include <QSet>
#include <QtTest>

#include "app/models/catalog.h"
#include "app/models/row_list_model.h"
#include "engine/models/model_config.h"
#include "kernels/common/error.h"

using namespace ember;
using namespace ember::app;

class TestCatalog : public QObject {
    Q_OBJECT

    static QString error_of(const QByteArray& json) {
        try {
            parse_catalog(json, QStringLiteral("test.json"));
        } catch (const ember::Error& e) {
            return QString::fromStdString(e.what());
        }
        return {};
    }

private slots:
    void builtinCatalogIsComplete() {
        const std::vector<CatalogEntry> c = builtin_catalog();
        QVERIFY2(c.size() >= 12, qPrintable(QString::number(c.size())));
        QSet<QString> engine_archs;  // what the engine runs, from the one list that says so
        for (const std::string& a : supported_architectures()) engine_archs.insert(QString::fromStdString(a));
        QSet<QString> repos;
        for (const CatalogEntry& e : c) {
            QVERIFY2(engine_archs.contains(e.architecture), qPrintable(e.name + ": " + e.architecture));
            QVERIFY2(e.repo.count('/') == 1 && e.repo.endsWith("GGUF", Qt::CaseInsensitive), qPrintable(e.repo));
            QVERIFY(!e.description.isEmpty() && !e.licence.isEmpty());
            QVERIFY2(e.parameters.endsWith('B'), qPrintable(e.parameters));
            repos.insert(e.repo);
        }
        QVERIFY(repos.contains("bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"));
        QVERIFY(repos.contains("Qwen/Qwen2.5-1.5B-Instruct-GGUF"));
        QVERIFY(repos.contains("unsloth/gemma-3-4b-it-GGUF"));
        QVERIFY(repos.contains("Qwen/Qwen3-8B-GGUF"));
        const QVariantMap row = c.front().to_row();
        QCOMPARE(row.value("repo").toString(), c.front().repo);
        QCOMPARE(row.value("licence").toString(), c.front().licence);
    }

    void brokenCatalogsAreRefusedClearly() {
        QVERIFY(error_of("{").contains("test.json"));
        QVERIFY(error_of("{\"models\": 3}").contains("no \"models\" array"));
        QVERIFY(error_of("{\"models\": []}").contains("lists no models"));
        const QByteArray no_licence =
            R"({"models":[{"name":"A","repo":"a/b","parameters":"1B","architecture":"llama","description":"d"}]})";
        QCOMPARE(error_of(no_licence), QStringLiteral("The model catalog test.json is broken: entry 1 has no "
                                                      "\"licence\" text"));
        const QByteArray bad_repo =
            R"({"models":[{"name":"A","repo":"../etc","parameters":"1B","architecture":"llama","licence":"mit","description":"d"}]})";
        QVERIFY(error_of(bad_repo).contains("not owner/name"));
        const QByteArray twice =
            R"({"models":[{"name":"A","repo":"a/b","parameters":"1B","architecture":"llama","licence":"mit","description":"d"},
                          {"name":"B","repo":"A/B","parameters":"1B","architecture":"llama","licence":"mit","description":"d"}]})";
        QVERIFY(error_of(twice).contains("listed twice"));
        const QByteArray bad_active =
            R"({"models":[{"name":"A","repo":"a/b","parameters":"30B","active":3,"architecture":"llama","licence":"mit","description":"d"}]})";
        QVERIFY(error_of(bad_active).contains("\"active\" that is not a parameter count"));
    }

    // A mixture-of-experts entry shows what it reads per token beside its size.
    void activeParametersAreShown() {
        const QByteArray moe =
            R"({"models":[{"name":"M","repo":"a/m-GGUF","parameters":"30.5B","active":"3.3B","architecture":"llama","licence":"mit","description":"d"},
                          {"name":"D","repo":"a/d-GGUF","parameters":"8B","architecture":"llama","licence":"mit","description":"d"}]})";
        const std::vector<CatalogEntry> c = parse_catalog(moe, QStringLiteral("test.json"));
        QCOMPARE(c[0].to_row().value("sizeText").toString(), QStringLiteral("30.5B · 3.3B active"));
        QCOMPARE(c[1].to_row().value("sizeText").toString(), QStringLiteral("8B"));
    }

    void rowModelUpdatesInPlace() {
        RowListModel m({"id", "state", "progress"}, "id");
        m.upsert({{"id", 1}, {"state", "queued"}, {"progress", 0.0}});
        m.upsert({{"id", 2}, {"state", "queued"}, {"progress", 0.0}});
        QSignalSpy changed(&m, &QAbstractItemModel::dataChanged);
        m.upsert({{"id", 1}, {"progress", 0.5}});
        QCOMPARE(m.count(), 2);
        QCOMPARE(changed.count(), 1);
        QCOMPARE(m.find(1).value("state").toString(), QStringLiteral("queued"));  // merged, not replaced
        QCOMPARE(m.find(1).value("progress").toDouble(), 0.5);
        m.remove_key(1);
        QCOMPARE(m.count(), 1);
        QCOMPARE(m.get(0).value("id").toInt(), 2);
        QCOMPARE(m.data(m.index(0), Qt::UserRole + 2).toString(), QStringLiteral("queued"));
    }
};

QTEST_GUILESS_MAIN(TestCatalog)
#include "test_catalog.moc"
