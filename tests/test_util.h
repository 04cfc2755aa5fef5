// Small std-only helpers for the doctest suites (engine, kernels): what the Qt Test suites got
// from QTemporaryDir, QFile and QProcess. No doctest and no Qt here; every failure throws
// std::runtime_error naming the path or command, so a test that hits one fails loudly.
// JSON fixtures: tests/test_json.h (nlohmann-json), kept apart so that only its users parse it.
#pragma once
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace ember::test {

// printf-style progress lines on stderr (what qInfo / qWarning printed in the Qt Test suites).
[[gnu::format(printf, 1, 2)]] inline void info(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
}
[[gnu::format(printf, 1, 2)]] inline void warn(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fputs("WARNING: ", stderr);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
}

// A fresh folder under $TMPDIR (or /tmp), removed with everything in it when the object dies.
class TempDir {
public:
    TempDir() {
        const char* base = std::getenv("TMPDIR");
        std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ember-test-XXXXXX";
        if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp " + tmpl + ": " + std::strerror(errno));
        path_ = tmpl;
    }
    ~TempDir() {
        std::error_code ec;  // never throw from a destructor; a leftover temp folder is harmless
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::string& path() const { return path_; }
    // The path of `name` inside the folder (the file itself is not created).
    std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

// The whole file as bytes; throws when it cannot be opened or read.
inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw std::runtime_error("cannot read " + path);
    return bytes;
}

// Writes `bytes` to `path` (replacing it); throws when the write does not complete.
inline void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) throw std::runtime_error("cannot write " + path);
}

// What a child process did: its exit code (or the signal that ended it) and its output.
struct ProcessResult {
    bool timed_out = false;  // killed (SIGKILL) after the time limit
    bool exited = false;     // ended by exit(), not by a signal
    int exit_code = -1;      // when exited
    int signal = 0;          // when not exited
    std::string out, err;    // everything it wrote to stdout and stderr
    bool ok() const { return exited && exit_code == 0; }
};

// Runs argv[0] (a path, not looked up on PATH) with argv, this process's environment and no
// stdin, collecting stdout and stderr; kills it after `timeout_ms`. Throws when it cannot start.
inline ProcessResult run_process(const std::vector<std::string>& argv, int timeout_ms = 60000) {
    if (argv.empty()) throw std::runtime_error("run_process: no command");
    int out_pipe[2], err_pipe[2];
    if (pipe(out_pipe) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    if (pipe(err_pipe) != 0) {
        close(out_pipe[0]), close(out_pipe[1]);
        throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) posix_spawn_file_actions_addclose(&fa, fd);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out_pipe[1]), close(err_pipe[1]);
    if (rc != 0) {
        close(out_pipe[0]), close(err_pipe[0]);
        throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
    }

    ProcessResult r;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    std::string* sinks[2] = {&r.out, &r.err};
    int open_fds = 2;
    while (open_fds > 0) {  // read both pipes until the child closes them (or time runs out)
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            r.timed_out = true;
            kill(pid, SIGKILL);
            break;
        }
        if (poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[4096];
            const ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n > 0) sinks[i]->append(buf, static_cast<size_t>(n));
            else if (n == 0 || errno != EINTR) close(fds[i].fd), fds[i].fd = -1, --open_fds;
        }
    }
    for (auto& f : fds)
        if (f.fd >= 0) close(f.fd);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    r.exited = WIFEXITED(status);
    r.exit_code = r.exited ? WEXITSTATUS(status) : -1;
    r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    return r;
}

// A TCP port on 127.0.0.1 that nothing listens on right now (for a server that cannot take
// port 0, such as llama-server); 0 when none could be found.
inline int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
    ::close(fd);
    return ok ? ntohs(a.sin_port) : 0;
}

// A child process that runs beside the test (a server): stdout and stderr go to `log_path`,
// stdin is /dev/null. The destructor sends SIGTERM, then SIGKILL after two seconds, and reaps
// it. Throws when it cannot start.
class ChildProcess {
public:
    ChildProcess(const std::vector<std::string>& argv, const std::string& log_path) : log_path_(log_path) {
        if (argv.empty()) throw std::runtime_error("ChildProcess: no command");
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        const int rc = posix_spawn(&pid_, argv[0].c_str(), &fa, nullptr, args.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
    }
    ~ChildProcess() { stop(SIGTERM); }
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    // Ends it with `sig` (SIGKILL: a server killed mid-answer) and reaps it.
    void stop(int sig) {
        if (pid_ <= 0) return;
        kill(pid_, sig);
        int status = 0;
        for (int i = 0; i < 200 && waitpid(pid_, &status, WNOHANG) == 0; ++i) usleep(10000);
        if (waitpid(pid_, &status, WNOHANG) == 0) kill(pid_, SIGKILL), waitpid(pid_, &status, 0);
        pid_ = -1;
    }
    bool running() const { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }
    std::string log() const {
        std::ifstream in(log_path_, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }

private:
    pid_t pid_ = -1;
    std::string log_path_;
};

}  // namespace ember::test
