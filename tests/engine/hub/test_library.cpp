// The model library on a real SQLite file and real GGUF files: import validates with a full
// parse, listing notices files changed behind its back, removal takes files, rows and
// partial downloads, and the folder follows EMBER_MODELS_DIR / XDG_DATA_HOME / HOME; the
// drafts it offers for a model (engine/library/drafts.h).
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

#include "engine/gguf/gguf_writer.h"
#include "engine/hub/pull_lock.h"
#include "engine/hub/sha256.h"
#include "engine/library/drafts.h"
#include "engine/library/library.h"
#include "engine/quant/quantizer.h"
#include "engine/models/synthetic.h"
#include "kernels/common/error.h"
#include "test_data.h"

using namespace ember;
using namespace ember::library;
namespace fs = std::filesystem;

namespace {

std::string stories() {
    const std::string p = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(p);
    return p;
}

// Sets an environment variable for one scope.
class EnvVar {
public:
    EnvVar(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old, had_ = true;
        if (value) setenv(name, value, 1);
        else unsetenv(name);
    }
    ~EnvVar() {
        if (had_) setenv(name_, old_.c_str(), 1);
        else unsetenv(name_);
    }

private:
    const char* name_;
    std::string old_;
    bool had_ = false;
};

}  // namespace

TEST_CASE("the library folder: EMBER_MODELS_DIR, else XDG_DATA_HOME, else ~/.local/share") {
    EnvVar a("EMBER_MODELS_DIR", "/tmp/m1"), b("XDG_DATA_HOME", "/tmp/xdg"), c("HOME", "/tmp/home");
    CHECK(Library::default_dir() == "/tmp/m1");
    EnvVar a2("EMBER_MODELS_DIR", nullptr);
    CHECK(Library::default_dir() == "/tmp/xdg/ember/models");
    EnvVar b2("XDG_DATA_HOME", nullptr);
    CHECK(Library::default_dir() == "/tmp/home/.local/share/ember/models");
}

TEST_CASE("import reads the GGUF's facts, references the file in place and keeps it on remove") {
    test::TempDir dir, user;
    fs::copy_file(stories(), user.file("stories260K.gguf"));
    Library lib(dir.path());
    const LibraryModel m = lib.import_file(user.file("stories260K.gguf"));
    CHECK(m.name == "stories260K");
    CHECK(m.source == ModelSource::Imported);
    CHECK(m.architecture == "llama");
    CHECK(m.context_length == 2048);
    CHECK(m.quantization == "F32");
    CHECK(m.parameters > 250000);
    CHECK(m.path == user.file("stories260K.gguf"));
    CHECK(m.sha256 == hub::sha256_file(stories()));

    const Library again(dir.path());  // a second client (the app and the CLI) sees the same rows
    const auto listed = again.list();
    REQUIRE(listed.size() == 1);
    CHECK(listed[0].present);
    CHECK(listed[0].parameters == m.parameters);
    CHECK(again.find("stories260K")->id == m.id);
    CHECK(again.find(std::to_string(m.id))->name == "stories260K");

    fs::resize_file(user.file("stories260K.gguf"), 1000);  // changed behind the library's back
    CHECK_FALSE(lib.list().at(0).present);
    fs::copy_file(stories(), user.file("stories260K.gguf"), fs::copy_options::overwrite_existing);
    lib.remove(m.id);
    CHECK(lib.list().empty());
    CHECK(fs::exists(user.file("stories260K.gguf")));  // the user's own file stays
}

TEST_CASE("import refuses what the GGUF reader refuses, and adds no row") {
    test::TempDir dir;
    Library lib(dir.path());
    const std::string whole = test::read_file(stories());
    test::write_file(dir.file("truncated.gguf"), whole.substr(0, whole.size() / 2));
    CHECK_THROWS_AS(lib.import_file(dir.file("truncated.gguf")), Error);
    test::write_file(dir.file("text.gguf"), "not a model");
    CHECK_THROWS_AS(lib.import_file(dir.file("text.gguf")), Error);
    CHECK_THROWS_WITH_AS(lib.import_file(dir.file("none.gguf")), doctest::Contains("not a readable file"), Error);
    CHECK(lib.list().empty());
}

TEST_CASE("a split model imports from its first part, all parts or nothing") {
    test::TempDir dir, user;
    const SyntheticShape tiny = synthetic_shape("tiny");
    write_synthetic_model(user.file("m-Q8_0-00001-of-00002.gguf"), tiny, "Q8_0", 1);
    Library lib(dir.path());
    CHECK_THROWS_WITH_AS(lib.import_file(user.file("m-Q8_0-00001-of-00002.gguf")), doctest::Contains("is missing"),
                         Error);
    write_synthetic_model(user.file("m-Q8_0-00002-of-00002.gguf"), tiny, "Q8_0", 2);
    CHECK_THROWS_WITH_AS(lib.import_file(user.file("m-Q8_0-00002-of-00002.gguf")), doctest::Contains("import part 1"),
                         Error);
    const LibraryModel m = lib.import_file(user.file("m-Q8_0-00001-of-00002.gguf"));
    CHECK(m.name == "m-Q8_0");
    REQUIRE(m.parts.size() == 2);
    CHECK(m.size == fs::file_size(user.file("m-Q8_0-00001-of-00002.gguf")) * 2);
}

TEST_CASE("removing a download deletes its files, its partial files and its row") {
    test::TempDir dir;
    Library lib(dir.path());
    const fs::path final_path = lib.file_path("o/n", "main", "sub/m-F32.gguf");
    CHECK(final_path == fs::path(dir.path()) / "o/n/main/sub/m-F32.gguf");
    CHECK(lib.part_path("o/n", "main", "sub/m-F32.gguf").string() == final_path.string() + ".part");
    CHECK_THROWS_AS(lib.file_path("o/n", "main", "../../escape.gguf"), Error);
    CHECK_THROWS_AS(lib.file_path("../o", "main", "m.gguf"), Error);
    fs::create_directories(final_path.parent_path());
    fs::copy_file(stories(), final_path);
    const auto m = lib.add_download(
        "o/n", "main", "F32",
        {{"sub/m-F32.gguf", final_path.string(), fs::file_size(stories()), hub::sha256_file(stories())}});
    CHECK(m.name == "o/n:F32");
    CHECK(lib.find("o/n")->id == m.id);
    test::write_file(final_path.string() + ".part", "half");
    lib.remove(m.id);
    CHECK_FALSE(fs::exists(final_path));
    CHECK_FALSE(fs::exists(final_path.string() + ".part"));
    CHECK(lib.list().empty());

    test::write_file(lib.part_path("o/n", "main", "other.gguf").string(), "half");
    CHECK(lib.partial_downloads().size() == 1);
    CHECK(lib.remove_partials("o/n") == 1);
    CHECK(lib.partial_downloads().empty());
}

// Issue #34: a pull cancelled while another (a process, an app thread) holds a file's lock
// leaves that file's partial bytes alone; once no one holds it, cancelling removes them.
TEST_CASE("cancelling a pull leaves the partial file another pull holds") {
    test::TempDir dir;
    Library lib(dir.path());
    const std::string file = lib.file_path("t/m", "main", "m-F32.gguf").string();
    PendingPull p{"t/m", "main", "F32", {{"m-F32.gguf", file, 1000, std::string(64, 'a')}}, 1000, 0, 0};
    lib.begin_pull(p);
    fs::create_directories(fs::path(file).parent_path());
    test::write_file(file + ".part", "partial bytes");
    {
        const hub::PullLock other = hub::PullLock::try_take(file + ".part");
        REQUIRE(other.owns());
        CHECK_FALSE(hub::PullLock::try_take(file + ".part").owns());  // one holder at a time
        lib.discard_pull("t/m", "main", "F32");
        CHECK(fs::exists(file + ".part"));
    }
    lib.begin_pull(p);
    lib.discard_pull("t/m", "main", "F32");
    CHECK_FALSE(fs::exists(file + ".part"));
}

TEST_CASE("drafts offered for a model: its vocabulary, smaller, smallest first, never itself") {
    test::TempDir dir, lib_dir;
    const std::string target = stories();
    const std::string smol = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(smol);
    std::vector<std::string> copies;
    for (const char* type : {"Q8_0", "Q4_0"}) {  // the same weights in smaller files
        QuantizeOptions q;
        q.input = target;
        q.output = dir.file(std::string("stories-") + type + ".gguf");
        q.type = type;
        quantize_model(q);
        copies.push_back(q.output);
    }
    Library lib(lib_dir.path());
    lib.import_file(target);  // the model itself: never its own draft
    lib.import_file(smol);    // another vocabulary (and larger)
    for (const std::string& c : copies) lib.import_file(c);
    const std::vector<LibraryModel> drafts = compatible_drafts(lib, target);
    REQUIRE(drafts.size() == 2);
    CHECK(drafts[0].path == copies[1]);  // Q4_0, the smaller file
    CHECK(drafts[1].path == copies[0]);
    CHECK(compatible_drafts(lib, smol).empty());  // no smaller model shares SmolLM2's vocabulary
}
