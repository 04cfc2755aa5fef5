// Remote endpoints' API keys in the system keyring, through QtKeychain (on Linux the Secret
// Service: GNOME Keyring or KWallet; the macOS Keychain; Windows' Credential Manager). Never in
// a file Ember writes: not the settings file, not the log, not the database.
//
// QtKeychain's plaintext fallback (a QSettings file) is never turned on. Where no keyring
// answers (no D-Bus session, no Secret Service, a locked keyring whose prompt cannot show), a
// key that was typed in is kept in this process's memory only, for this session, and the
// error says so: the user is told, the key is never written in plain text.
//
// Every call returns at once; `done` runs later on the calling (GUI) thread.
#pragma once
#include <QHash>
#include <QObject>
#include <QString>
#include <functional>

namespace ember::app {

class KeyStore : public QObject {
    Q_OBJECT
public:
    // `service`: the keyring entries' service name ("Ember"); one entry per endpoint name.
    explicit KeyStore(QString service = QStringLiteral("Ember"), QObject* parent = nullptr);

    // The endpoint's key ("" when none is stored); `error` says why the keyring could not be read.
    void read(const QString& endpoint, std::function<void(const QString& key, const QString& error)> done);
    // Stores `key` ("" removes it); `error` ("" on success) says why it is only kept for this session.
    void write(const QString& endpoint, const QString& key, std::function<void(const QString& error)> done);
    void remove(const QString& endpoint);
    // True when the keyring refused a key: it is held for this session only.
    bool sessionOnly() const { return refused_; }

private:
    QString service_;
    // Keys typed in this session, so a read right after a write (the connection test after
    // "Save") never races the keyring; and the only copy of a key the keyring refused.
    QHash<QString, QString> typed_;
    bool refused_ = false;
};

}  // namespace ember::app
