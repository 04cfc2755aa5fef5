// HubToken (app/models/hub_token.h): the access token typed on the model manager page. Saved
// in a 0600 file (created so, never wider), read back by the next start, used instead of
// HF_TOKEN when set; refused when no HTTP header may carry it; shown only as its hint.
#include <sys/stat.h>

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include "app/models/hub_token.h"

using ember::app::HubToken;

class TestHubToken : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString file() const { return dir_.filePath(QStringLiteral("hf_token")); }

private slots:
    void init() {
        QFile::remove(file());
        qunsetenv("HF_TOKEN");
    }

    void settingsTokenOverHfToken() {
        HubToken t(file());
        QCOMPARE(t.source(), QString());
        QCOMPARE(t.hint(), QString());
        QCOMPARE(t.config().token, std::string());
        qputenv("HF_TOKEN", "hf_fromTheEnvironment000abcd");
        QCOMPARE(t.source(), QStringLiteral("HF_TOKEN"));
        QCOMPARE(t.hint(), QStringLiteral("hf_…abcd"));
        QCOMPARE(t.config().token, std::string("hf_fromTheEnvironment000abcd"));
        t.set(QStringLiteral("  hf_EmberTestToken0123456789wxyz\n"));  // pasted with blanks
        QCOMPARE(t.source(), QStringLiteral("settings"));
        QCOMPARE(t.hint(), QStringLiteral("hf_…wxyz"));
        QCOMPARE(t.config().token, std::string("hf_EmberTestToken0123456789wxyz"));
        t.set(QString());  // removed: HF_TOKEN again
        QVERIFY(!QFile::exists(file()));
        QCOMPARE(t.config().token, std::string("hf_fromTheEnvironment000abcd"));
    }

    void savedPrivatelyAndReadBack() {
        {
            HubToken t(file());
            t.set(QStringLiteral("hf_EmberTestToken0123456789wxyz"));
        }
        struct stat st {};
        QCOMPARE(::stat(QFile::encodeName(file()).constData(), &st), 0);
        QCOMPARE(st.st_mode & 0777, 0600u);
        QFile f(file());
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(f.readAll(), QByteArray("hf_EmberTestToken0123456789wxyz\n"));
        QVERIFY(!QFile::exists(file() + ".tmp"));
        const HubToken next_start(file());
        QCOMPARE(next_start.source(), QStringLiteral("settings"));
        QCOMPARE(next_start.config().token, std::string("hf_EmberTestToken0123456789wxyz"));
        // A copy made readable by others is narrowed when read.
        QVERIFY(::chmod(QFile::encodeName(file()).constData(), 0644) == 0);
        const HubToken narrowed(file());
        QCOMPARE(::stat(QFile::encodeName(file()).constData(), &st), 0);
        QCOMPARE(st.st_mode & 0777, 0600u);
    }

    void refusedTokensChangeNothing() {
        HubToken t(file());
        t.set(QStringLiteral("hf_EmberTestToken0123456789wxyz"));
        for (const char* bad : {"hf_two words", "hf_line\r\nX-Evil: 1", "hf_\x01control"}) {
            try {
                t.set(QString::fromUtf8(bad));
                QFAIL(bad);
            } catch (const std::exception& e) {
                QVERIFY2(!QString::fromUtf8(e.what()).contains(QString::fromUtf8(bad)), e.what());  // never echoed
            }
        }
        QCOMPARE(t.config().token, std::string("hf_EmberTestToken0123456789wxyz"));
        QCOMPARE(HubToken(file()).config().token, std::string("hf_EmberTestToken0123456789wxyz"));
        // A short token shows no characters at all.
        t.set(QStringLiteral("hf_short"));
        QCOMPARE(t.hint(), QStringLiteral("********"));
    }

    void unwritableFolderIsAClearError() {
        HubToken t(dir_.filePath(QStringLiteral("no-such-folder/hf_token")));
        try {
            t.set(QStringLiteral("hf_EmberTestToken0123456789wxyz"));
            QFAIL("saved into a missing folder");
        } catch (const std::exception& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("cannot save the access token")), e.what());
            QVERIFY(!QString::fromUtf8(e.what()).contains(QStringLiteral("EmberTestToken")));
        }
        QCOMPARE(t.source(), QString());
    }
};

QTEST_GUILESS_MAIN(TestHubToken)
#include "test_hub_token.moc"
