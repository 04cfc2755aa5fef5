// The fake hub for tests/engine/hub: tests/engine/hub/hub_server.py (Python 3 stdlib, run as
// a child process on 127.0.0.1, port chosen by the OS), with repositories made of real GGUF
// files under a temporary folder. Every request it sees is read back from its log.
#pragma once
#include <doctest/doctest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_data.h"

namespace ember::test {

class HubServer {
public:
    // `tls`: serve HTTPS with the self-signed certificate in this folder.
    explicit HubServer(bool tls = false) {
        std::filesystem::create_directories(root());
        // libcurl honours proxy variables; a CI machine's proxy must not see loopback requests.
        setenv("no_proxy", "127.0.0.1,localhost", 1);
        setenv("NO_PROXY", "127.0.0.1,localhost", 1);
        int out[2];
        REQUIRE(pipe(out) == 0);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_addclose(&fa, out[0]);
        posix_spawn_file_actions_addclose(&fa, out[1]);
        std::vector<std::string> args = {
            EMBER_PYTHON3, std::string(EMBER_HUB_TEST_DIR) + "/hub_server.py", "--root", root(), "--log", log_path()};
        if (tls) {
            args.push_back("--tls");
            args.push_back(std::string(EMBER_HUB_TEST_DIR) + "/selfsigned.crt");
            args.push_back(std::string(EMBER_HUB_TEST_DIR) + "/selfsigned.key");
        }
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        close(out[1]);
        REQUIRE_MESSAGE(rc == 0, "cannot start ", EMBER_PYTHON3);
        std::string line;  // the server prints its port once it listens
        char c;
        while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
        close(out[0]);
        REQUIRE_MESSAGE(!line.empty(), "the test hub server did not start");
        port_ = std::stoi(line);
        url_ = std::string(tls ? "https" : "http") + "://127.0.0.1:" + line;
    }
    ~HubServer() {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
    }
    HubServer(const HubServer&) = delete;
    HubServer& operator=(const HubServer&) = delete;

    const std::string& url() const { return url_; }
    int port() const { return port_; }
    std::string root() const { return dir_.path() + "/repos"; }
    std::string log_path() const { return dir_.path() + "/requests.log"; }

    // Copies `source` into repository `repo` as `name`; returns the served path.
    std::string add_file(const std::string& repo, const std::string& name, const std::string& source) {
        const std::string dst = root() + "/" + repo + "/" + name;
        std::filesystem::create_directories(std::filesystem::path(dst).parent_path());
        std::filesystem::copy_file(source, dst, std::filesystem::copy_options::overwrite_existing);
        return dst;
    }
    void set_fault(const std::string& repo, const nlohmann::json& fault) {
        std::filesystem::create_directories(root() + "/" + repo);
        std::ofstream(root() + "/" + repo + "/.fault") << fault.dump();
    }
    void set_meta(const std::string& repo, const nlohmann::json& meta) {
        std::ofstream(root() + "/" + repo + "/.meta") << meta.dump();
    }
    // Every request so far, oldest first.
    std::vector<nlohmann::json> requests() const {
        std::vector<nlohmann::json> out;
        std::ifstream in(log_path());
        for (std::string line; std::getline(in, line);)
            if (!line.empty()) out.push_back(nlohmann::json::parse(line));
        return out;
    }
    std::vector<nlohmann::json> requests_to(const std::string& path_prefix) const {
        std::vector<nlohmann::json> out;
        for (auto& r : requests())
            if (r["path"].get<std::string>().rfind(path_prefix, 0) == 0) out.push_back(r);
        return out;
    }

private:
    TempDir dir_;
    pid_t pid_ = 0;
    int port_ = 0;
    std::string url_;
};

}  // namespace ember::test
