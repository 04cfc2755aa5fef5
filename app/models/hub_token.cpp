#include "app/models/hub_token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QFile>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "kernels/common/error.h"

namespace ember::app {
namespace {

// Printable ASCII without blanks: a token goes into "Authorization: Bearer <token>", where a
// line break would start another header. Hub tokens are "hf_" and letters/digits.
bool valid_token(const std::string& t) {
    if (t.empty() || t.size() > 1024) return false;
    for (char c : t)
        if (c <= ' ' || c > '~') return false;
    return true;
}

std::string hint_of(const std::string& t) {
    if (t.size() < 12) return std::string(t.size(), '*');  // too short to show any of it
    return t.substr(0, 3) + "…" + t.substr(t.size() - 4);
}

void write_private(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp";
    ::unlink(tmp.c_str());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) throw Error("cannot save the access token in " + path + ": " + std::strerror(errno));
    bool ok = ::fchmod(fd, 0600) == 0;  // the umask may only narrow it; say it anyway
    for (size_t done = 0; ok && done < text.size();) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        ok = n > 0;
        done += ok ? static_cast<size_t>(n) : 0;
    }
    ok = ok && ::fsync(fd) == 0;
    ok = ::close(fd) == 0 && ok;
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        ::unlink(tmp.c_str());
        throw Error("cannot save the access token in " + path + ": " + why);
    }
}

}  // namespace

HubToken::HubToken(QString file) : file_(std::move(file)) {
    QFile f(file_);
    if (!f.open(QIODevice::ReadOnly)) return;
    const std::string t = f.read(4096).trimmed().toStdString();
    if (valid_token(t)) token_ = t;
    // A file someone else could read (copied in by hand): narrow it at once.
    const std::string path = file_.toStdString();
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) ::chmod(path.c_str(), 0600);
}

QString HubToken::source() const {
    if (!token_.empty()) return QStringLiteral("settings");
    const char* env = std::getenv("HF_TOKEN");
    return env && *env ? QStringLiteral("HF_TOKEN") : QString();
}

QString HubToken::hint() const { return QString::fromStdString(hint_of(config().token)); }

void HubToken::set(const QString& token) {
    const std::string t = token.trimmed().toStdString();
    const std::string path = file_.toStdString();
    if (t.empty()) {
        if (::unlink(path.c_str()) != 0 && errno != ENOENT)
            throw Error("cannot delete the access token file " + path + ": " + std::strerror(errno));
        token_.clear();
        return;
    }
    if (!valid_token(t))
        throw Error("that is not an access token: it may hold only letters, digits and punctuation, no spaces");
    write_private(path, t + "\n");
    token_ = t;
}

hub::HubConfig HubToken::config() const {
    hub::HubConfig c = hub::HubConfig::from_env();
    if (!token_.empty()) c.token = token_;
    return c;
}

}  // namespace ember::app
