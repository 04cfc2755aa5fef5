// Model files that are not regular files, or that change while mapped: a FIFO used to block
// open() forever, and truncating the file under a loaded model killed the process with
// SIGBUS. Now the first is refused at once and the second fails the request with a clear
// error while the process lives on.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/core/mapped_file.h"
#include "engine/runtime/model.h"
#include "engine/scheduler/sequence.h"
#include "kernels/common/error.h"
#include "test_data.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

fs::path temp(const std::string& name) {
    return fs::temp_directory_path() / ("ember-guard-" + std::to_string(::getpid()) + "-" + name);
}

void write_bytes(const fs::path& p, size_t n, char c) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    const std::string s(n, c);
    out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Runs `f` in a child process; true when the child ended cleanly (exit 0).
template <class F>
bool child_exits_cleanly(F&& f) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        f();
        ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

TEST_CASE("a FIFO is refused at once, not waited on") {
    const fs::path fifo = temp("fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string err = error_of([&] { MappedFile m(fifo.string()); });
    CHECK(contains(err, "it is a FIFO (named pipe), not a regular file"));
    LoadOptions o;
    o.path = fifo.string();
    CHECK(contains(error_of([&] { Model::load(o); }), "not a regular file"));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
    fs::remove(fifo);
}

TEST_CASE("directories and devices are refused by name") {
    CHECK(contains(error_of([] { MappedFile m(fs::temp_directory_path().string()); }),
                   "it is a directory, not a regular file"));
    CHECK(contains(error_of([] { MappedFile m("/dev/null"); }), "it is a character device, not a regular file"));
}

TEST_CASE("reads past the end of a truncated map return zeros and flag the map") {
    const fs::path p = temp("trunc.bin");
    write_bytes(p, 64 * 1024, '\xAB');
    MappedFile m(p.string());
    REQUIRE(m.size() == 64 * 1024);
    CHECK(m.data()[40000] == 0xAB);
    CHECK_FALSE(m.changed_underneath());
    fs::resize_file(p, 4096);
    // This read raised SIGBUS and killed the process before the guard existed.
    CHECK(static_cast<const volatile uint8_t*>(m.data())[40000] == 0);
    CHECK(static_cast<const volatile uint8_t*>(m.data())[65535] == 0);
    CHECK(m.data()[100] == 0xAB);  // the part still in the file is untouched
    CHECK(m.changed_underneath());
    fs::remove(p);
}

// Overwrites one byte at `at` in place (same inode, same size) and moves the mtime on.
void rewrite_byte(const fs::path& p, size_t at, char c) {
    {
        std::fstream f(p, std::ios::binary | std::ios::in | std::ios::out);
        f.seekp(static_cast<std::streamoff>(at));
        f.put(c);
    }
    fs::last_write_time(p, fs::last_write_time(p) + std::chrono::seconds(5));
}

TEST_CASE("a rewrite in place (same size, other bytes in the head or the tail) is noticed") {
    const fs::path p = temp("rewrite.bin");
    for (size_t at : {size_t{4}, size_t{(1 << 20) - 1}}) {
        CAPTURE(at);
        write_bytes(p, 1 << 20, 'a');
        MappedFile m(p.string());
        CHECK_FALSE(m.changed_underneath());
        rewrite_byte(p, at, 'b');
        CHECK(m.changed_underneath());
        CHECK(m.changed_underneath());  // and stays so
    }
    fs::remove(p);
}

TEST_CASE("touching the file (new mtime, same bytes) is no change") {
    const fs::path p = temp("touch.bin");
    write_bytes(p, 1 << 20, 'a');
    MappedFile m(p.string());
    fs::last_write_time(p, fs::last_write_time(p) + std::chrono::seconds(5));
    CHECK_FALSE(m.changed_underneath());
    rewrite_byte(p, 7, 'a');  // written again with the very same byte
    CHECK_FALSE(m.changed_underneath());
    rewrite_byte(p, 7, 'c');  // a real change after the touches is still noticed
    CHECK(m.changed_underneath());
    fs::remove(p);
}

// (Under ASan the children's "AddressSanitizer: BUS" reports are expected: the guard hands
// foreign faults to the handler that was there before it, ASan's.)
TEST_CASE("SIGBUS outside a guarded map still ends the process") {
    const fs::path guarded = temp("guarded.bin"), other = temp("other.bin");
    write_bytes(guarded, 8192, 'g');
    write_bytes(other, 64 * 1024, 'o');
    MappedFile m(guarded.string());  // installs the handler in this process (and the child)
    // A fault on a map the guard does not know.
    CHECK_FALSE(child_exits_cleanly([&] {
        const int fd = ::open(other.c_str(), O_RDWR);
        auto* p = static_cast<volatile uint8_t*>(::mmap(nullptr, 64 * 1024, PROT_READ, MAP_SHARED, fd, 0));
        if (::ftruncate(fd, 0) != 0) ::_exit(3);
        static_cast<void>(p[40000]);  // SIGBUS: the default action must still apply
    }));
    // A SIGBUS sent, not caused by a fault.
    CHECK_FALSE(child_exits_cleanly([] { ::raise(SIGBUS); }));
    // The guarded map in the parent is unharmed.
    CHECK(m.data()[0] == 'g');
    CHECK_FALSE(m.changed_underneath());
    fs::remove(guarded);
    fs::remove(other);
}

// stories260K copied to `copy`, to be loaded from there on the CPU (context 64).
LoadOptions copy_of_stories(const fs::path& copy) {
    const std::string src = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(src);
    fs::copy_file(src, copy, fs::copy_options::overwrite_existing);
    LoadOptions o;
    o.path = copy.string();
    o.device = BackendPreference::Cpu;
    o.n_ctx = 64;
    o.n_threads = 2;
    return o;
}

TEST_CASE("touching a loaded model's file is no false alarm: the next pass runs") {
    const fs::path copy = temp("touched.gguf");
    auto model = Model::load(copy_of_stories(copy));
    const std::vector<int32_t> bos = {1};
    Sequence seq(*model);
    const std::vector<float> before = seq.prefill(bos);
    seq.reset();
    fs::last_write_time(copy, fs::last_write_time(copy) + std::chrono::seconds(5));  // touch
    const std::string err = error_of([&] { seq.prefill(bos); });
    CHECK_MESSAGE(err.empty(), err);
    seq.reset();
    CHECK(seq.prefill(bos) == before);
    fs::remove(copy);
}

TEST_CASE("truncating a loaded model fails the next pass with a clear error; the process lives") {
    const std::string src = test::testdata(test::kStories);
    const fs::path copy = temp("stories.gguf");
    const LoadOptions o = copy_of_stories(copy);
    auto model = Model::load(o);
    const std::vector<int32_t> bos = {1};
    std::vector<float> before;
    {
        Sequence seq(*model);
        before = seq.prefill(bos);
        seq.reset();

        fs::resize_file(copy, 4096);  // the weights are gone from under the map
        const std::string err = error_of([&] { seq.prefill(bos); });
        INFO(err);
        CHECK(
            contains(err, copy.string() + ": the model file was truncated or changed while in use; reload the model"));
        CHECK(seq.tokens().empty());  // the failed pass left nothing in the cache
        // Every later request fails the same way (the weights read as zeros now).
        CHECK(contains(error_of([&] { seq.prefill(bos); }), "truncated or changed while in use"));
    }

    // The same file written back and loaded again runs as before.
    model.reset();
    fs::copy_file(src, copy, fs::copy_options::overwrite_existing);
    model = Model::load(o);
    Sequence again(*model);
    CHECK(again.prefill(bos) == before);
    fs::remove(copy);
}
