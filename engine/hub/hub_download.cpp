// HubClient::download: one file into its `.part`, resumed with Range where the server agrees,
// hashed as it arrives, checked, fsynced and renamed. The rules that keep a corrupt file from
// ever reaching its final name:
//   - bytes are appended only after a 206 whose Content-Range starts exactly at the partial
//     size and names the file's size; a 200 means the server sends the whole file, so the
//     partial file is emptied first; any other answer empties it and starts again;
//   - the SHA-256 covers every byte of the partial file (what was there is hashed again
//     before resuming), and the rename happens only when it equals the published one.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "engine/core/log.h"
#include "engine/hub/hub_client.h"
#include "engine/hub/hub_http.h"
#include "engine/hub/pull_lock.h"
#include "engine/hub/sha256.h"

namespace ember::hub {
namespace {

using namespace http;

[[noreturn]] void disk_error(const std::string& what, const std::string& path) {
    throw HubError(HubErrorKind::Disk, what + " " + path + ": " + std::strerror(errno));
}

// The partial file, open for the whole download, with the hash of its bytes so far.
class PartFile {
public:
    explicit PartFile(const std::string& path) : path_(path) {
        std::error_code ec;
        std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
        fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd_ < 0) disk_error("cannot open", path);
    }
    ~PartFile() {
        if (fd_ >= 0) ::close(fd_);
    }
    PartFile(const PartFile&) = delete;
    PartFile& operator=(const PartFile&) = delete;

    uint64_t size() const { return size_; }

    // Hashes what is already on disk (a resumed download); empties it when it is longer than
    // the file can be.
    void load(uint64_t max_size) {
        struct stat st {};
        if (::fstat(fd_, &st) != 0) disk_error("cannot stat", path_);
        if (static_cast<uint64_t>(st.st_size) > max_size) return truncate();
        std::vector<char> buf(1 << 20);
        hash_ = Sha256();
        size_ = 0;
        while (size_ < static_cast<uint64_t>(st.st_size)) {
            const ssize_t n = ::pread(fd_, buf.data(), buf.size(), static_cast<off_t>(size_));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) disk_error("cannot read", path_);
            hash_.update(buf.data(), static_cast<size_t>(n));
            size_ += static_cast<uint64_t>(n);
        }
    }
    void truncate() {
        if (::ftruncate(fd_, 0) != 0) disk_error("cannot truncate", path_);
        size_ = 0;
        hash_ = Sha256();
    }
    // Unbuffered: what arrived is on disk (in the page cache) at once, so a killed process
    // resumes from every byte it received.
    void append(const char* p, size_t n) {
        hash_.update(p, n);
        while (n > 0) {
            const ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(size_));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) disk_error("cannot write", path_);
            p += w, n -= static_cast<size_t>(w), size_ += static_cast<uint64_t>(w);
        }
    }
    std::string digest() { return hash_.finish_hex(); }
    // fsync, close, rename onto `final_path`, fsync the folder: after a crash the file is
    // either absent or complete under its final name.
    void commit(const std::string& final_path) {
        if (::fsync(fd_) != 0) disk_error("cannot fsync", path_);
        ::close(fd_);
        fd_ = -1;
        if (std::rename(path_.c_str(), final_path.c_str()) != 0)
            disk_error("cannot rename to " + final_path + ":", path_);
        const std::string dir = std::filesystem::path(final_path).parent_path().string();
        const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) ::fsync(dfd), ::close(dfd);
    }
    void remove() {
        ::close(fd_);
        fd_ = -1;
        ::unlink(path_.c_str());
    }

private:
    std::string path_;
    int fd_ = -1;
    uint64_t size_ = 0;
    Sha256 hash_;
};

// Whether `path` is already the complete file, its bytes hashing to the published SHA-256.
bool verified_file(const std::string& path, const RemoteFile& file) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec) || std::filesystem::file_size(path, ec) != file.size || ec)
        return false;
    return sha256_file(path) == file.sha256;
}

// What one attempt's first body bytes told us about the server's answer.
enum class Answer { None, Append, Restart, BadRange, TooLong };

}  // namespace

DownloadOutcome HubClient::download(const std::string& repo, const std::string& revision, const RemoteFile& file,
                                    const std::string& part_path, const std::string& final_path,
                                    TransferControl& control, const ProgressFn& progress) const {
    if (file.sha256.empty())
        throw HubError(HubErrorKind::Protocol, repo + "/" + file.path +
                                                   ": the server publishes no SHA-256 for it (not stored in LFS); "
                                                   "Ember downloads only files it can verify");
    const std::string what = "download " + repo + "/" + file.path;
    // One pull of this file at a time (pull_lock.h): a second one waits here for the first.
    const PullLock lock = PullLock::take(
        part_path, [&] { return control.stopped(); },
        [&](const std::string& holder) {
            const std::string who =
                holder.empty() ? std::string("another process") : "another process (pid " + holder + ")";
            log_warn("hub: " + file.path + " is being pulled by " + who + "; waiting for it to finish");
            if (progress) {
                TransferProgress waiting;
                waiting.total = file.size;
                waiting.waiting_for = who;
                progress(waiting);
            }
        });
    if (!lock.owns()) return control.cancel ? DownloadOutcome::Cancelled : DownloadOutcome::Paused;
    // The pull that held the lock may have finished this very file: a verified file is kept as
    // it is, never written again.
    if (verified_file(final_path, file)) return DownloadOutcome::Done;
    PartFile part(part_path);
    part.load(file.size);
    RateMeter rate;
    TransferProgress p;
    p.total = file.size;
    auto report = [&] {
        p.bytes = part.size();
        rate.add(p.bytes);
        p.bytes_per_s = rate.bytes_per_s();
        p.eta_s = p.bytes_per_s > 0 ? static_cast<double>(file.size - p.bytes) / p.bytes_per_s : -1;
        if (progress) progress(p);
    };
    report();
    int failures = 0;
    while (part.size() < file.size || file.size == 0) {
        if (control.stopped()) return control.cancel ? DownloadOutcome::Cancelled : DownloadOutcome::Paused;
        const uint64_t start = part.size();
        Answer answer = Answer::None;
        Request req;
        req.url = resolve_url(repo, revision, file.path);
        if (start > 0) req.range = "bytes=" + std::to_string(start) + "-";
        req.control = &control;
        req.stall_timeout = config_.stall_timeout;
        req.sink = [&](const char* data, size_t n, const Response& r) {
            if (answer == Answer::None) {
                const auto cr = parse_content_range(r.header("content-range"));
                if (r.status == 206 && start > 0 && cr && cr->first == start &&
                    (cr->total == file.size || (cr->total == 0 && cr->last + 1 == file.size)))
                    answer = Answer::Append;
                else if (r.status == 200) answer = Answer::Restart, part.truncate();
                else return answer = Answer::BadRange, false;
            }
            if (part.size() + n > file.size) return answer = Answer::TooLong, false;
            part.append(data, n);
            report();
            return true;
        };
        const Response r = fetch(config_, req);
        if (r.stopped) return control.cancel ? DownloadOutcome::Cancelled : DownloadOutcome::Paused;
        if (file.size == 0 && r.code == CURLE_OK && r.status / 100 == 2) break;
        std::string failure;
        if (r.status == 416 || answer == Answer::BadRange || answer == Answer::TooLong) {
            // The server does not agree with what we have: start over from byte 0.
            const std::string status = "HTTP " + std::to_string(r.status);
            if (answer == Answer::TooLong)
                failure = what + ": the server sent more than the file's " + std::to_string(file.size) + " bytes (" +
                          status + "); starting again";
            else if (start > 0)
                failure = what + ": the server's answer to a resume from byte " + std::to_string(start) + " (" +
                          status + ") did not fit the partial file; starting again";
            else failure = what + ": an answer that is not the file (" + status + "); starting again";
            part.truncate();
        } else {
            try {
                check(config_, r, what);
                if (part.size() < file.size)
                    failure = what + ": the connection ended at byte " + std::to_string(part.size()) + " of " +
                              std::to_string(file.size);
            } catch (const HubError& e) {
                if (!retryable(e)) throw;
                failure = e.what();
            }
        }
        if (failure.empty()) continue;
        failures = part.size() > start ? 1 : failures + 1;  // progress resets the count
        if (failures >= config_.max_attempts)
            throw HubError(HubErrorKind::Network, failure + " (gave up after " + std::to_string(failures) +
                                                      " attempts without progress; run it again to resume)");
        log_warn("hub: " + failure + "; retrying");
        ++p.attempt;
        if (!backoff_wait(backoff_for(config_, failures), &control))
            return control.cancel ? DownloadOutcome::Cancelled : DownloadOutcome::Paused;
    }
    const std::string got = part.digest();
    if (got != file.sha256) {
        part.remove();
        throw HubError(HubErrorKind::HashMismatch,
                       what + ": the downloaded bytes do not match the published SHA-256 (expected " + file.sha256 +
                           ", got " + got + "); the partial file was removed");
    }
    part.commit(final_path);
    return DownloadOutcome::Done;
}

}  // namespace ember::hub
