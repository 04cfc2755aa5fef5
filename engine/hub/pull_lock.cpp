// PullLock: flock(2) on FILE.part.lock (pull_lock.h).
#include "engine/hub/pull_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include "kernels/common/error.h"

namespace ember::hub {
namespace {

std::string lock_path(const std::string& part_path) { return part_path + ".lock"; }

int open_lock(const std::string& part_path) {
    const std::string path = lock_path(part_path);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) throw Error("cannot open the lock file " + path + ": " + std::strerror(errno));
    return fd;
}

// Non-blocking flock; true when taken. Another error than "held" is thrown.
bool lock_now(int fd, const std::string& part_path) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
    if (errno == EWOULDBLOCK || errno == EINTR) return false;
    throw Error("cannot lock " + lock_path(part_path) + ": " + std::strerror(errno));
}

void write_holder(int fd) {
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
}

std::string read_holder(int fd) {
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    std::string s(buf, n > 0 ? static_cast<size_t>(n) : 0);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
}

}  // namespace

PullLock PullLock::try_take(const std::string& part_path) {
    const int fd = open_lock(part_path);
    if (lock_now(fd, part_path)) {
        write_holder(fd);
        return PullLock(fd);
    }
    ::close(fd);
    return PullLock();
}

PullLock PullLock::take(const std::string& part_path, const std::function<bool()>& stop,
                        const std::function<void(const std::string& holder)>& on_wait) {
    const int fd = open_lock(part_path);
    for (bool told = false;; std::this_thread::sleep_for(std::chrono::milliseconds(100))) {
        try {
            if (lock_now(fd, part_path)) break;
        } catch (...) {
            ::close(fd);
            throw;
        }
        if (stop && stop()) {
            ::close(fd);
            return PullLock();
        }
        if (!told && on_wait) on_wait(read_holder(fd));
        told = true;
    }
    write_holder(fd);
    return PullLock(fd);
}

PullLock::PullLock(PullLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

PullLock& PullLock::operator=(PullLock&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
}

PullLock::~PullLock() {
    if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace ember::hub
