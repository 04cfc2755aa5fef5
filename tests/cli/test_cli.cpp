// The real `ember` binary, run with inputs that used to mean something else silently or end
// a session: numeric options out of range, --device cuda without a GPU, hostile model files,
// FIFOs, and chat turns that fail. Each asserts the exit status and the message.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/gguf/gguf_writer.h"
#include "kernels/common/dtype.h"
#include "kernels/cpu/matmul.h"
#include "test_data.h"
#include "test_util.h"

extern char** environ;

using namespace ember;
namespace fs = std::filesystem;

namespace {

struct Run {
    int status = -1;  // exit status (-1: killed by a signal)
    std::string out, err;
    double seconds = 0;
};

fs::path temp(const std::string& name) {
    return fs::temp_directory_path() / ("ember-cli-" + std::to_string(::getpid()) + "-" + name);
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// Runs `ember ARGS...` with `input` on stdin; stdout and stderr captured through files.
Run run_ember(const std::vector<std::string>& args, const std::string& input = "") {
    const fs::path in = temp("stdin"), out = temp("stdout"), err = temp("stderr");
    std::ofstream(in, std::ios::binary) << input;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, in.c_str(), O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<std::string> argv_s = {EMBER_CLI};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    const auto t0 = std::chrono::steady_clock::now();
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, EMBER_CLI, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE_MESSAGE(rc == 0, "cannot start " EMBER_CLI);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    Run r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    fs::remove(in);
    fs::remove(out);
    fs::remove(err);
    return r;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

size_t count(const std::string& s, const std::string& part) {
    size_t n = 0;
    for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
    return n;
}

std::string stories() {
    const std::string p = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(p);
    return p;
}

}  // namespace

TEST_CASE("numeric options out of range are refused by name, before the model loads") {
    struct Case {
        std::vector<std::string> args;
        const char* expect;
    };
    const Case cases[] = {
        {{"-n", "4294967296"}, "option -n: 4294967296 is out of range (-1..2147483647)"},
        {{"--threads", "4294967297"}, "option --threads: 4294967297 is out of range (0..1024)"},
        {{"-t", "-2"}, "option -t: -2 is out of range (0..1024)"},
        {{"--ctx", "68719476752"}, "option --ctx: 68719476752 is out of range (0..1073741824)"},
        {{"--batch", "0"}, "option --batch: 0 is out of range (1..65536)"},
        {{"--top-k", "99999999999999999999"}, "option --top-k: 99999999999999999999 is out of range"},
        {{"--temp", "nan"}, "option --temp expects a finite number, got 'nan'"},
        {{"--temp", "-1"}, "option --temp: -1 is out of range"},
        {{"--top-p", "1.5"}, "option --top-p: 1.5 is out of range (0..1)"},
        {{"--seed", "-1"}, "option --seed expects a non-negative integer, got '-1'"},
        {{"--repeat-last-n", "12x"}, "option --repeat-last-n expects an integer, got '12x'"},
        {{"--device", "gpu"}, "option --device: 'gpu' is not a device (auto, cpu or cuda)"},
    };
    for (const Case& c : cases) {
        std::vector<std::string> args = {"run", stories(), "-p", "Once"};
        args.insert(args.end(), c.args.begin(), c.args.end());
        const Run r = run_ember(args);
        INFO(c.args[0], " ", c.args[1], ": status ", r.status, ", stderr: ", r.err);
        CHECK(r.status == 1);
        CHECK(contains(r.err, std::string("ember run: error: ") + c.expect));
        CHECK(r.out.empty());  // refused before anything ran
    }
    const Run bench = run_ember({"bench", stories(), "--pp", "-1"});
    CHECK(bench.status == 1);
    CHECK(contains(bench.err, "option --pp: -1 is out of range (0..65536)"));
}

TEST_CASE("options in range still run (the positive control)") {
    const Run r = run_ember(
        {"run", stories(), "-p", "Once", "-n", "4", "--temp", "0", "--threads", "1", "--ctx", "64", "--quiet"});
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.out.rfind("Once", 0) == 0);
    CHECK(r.out.size() > 5);
}

// A number after `"key": ` in the one-line JSON of ember bench --json (-1 when absent).
double json_number(const std::string& json, const std::string& key) {
    const size_t at = json.find("\"" + key + "\": ");
    return at == std::string::npos ? -1 : std::stod(json.substr(at + key.size() + 4));
}

TEST_CASE("ember bench --parallel: N requests through the scheduler, round and decode-step rates") {
    const Run r = run_ember(
        {"bench", stories(), "--parallel", "4", "--pp", "8", "--tg", "8", "-r", "1", "--threads", "1", "--json"});
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(json_number(r.out, "parallel") == 4);
    CHECK(json_number(r.out, "round_tok_s") > 0);
    // Steps where all 4 sequences decode exist (8 tokens each): their rate and step time.
    CHECK(json_number(r.out, "decode_tok_s") > 0);
    CHECK(json_number(r.out, "decode_step_ms") > 0);
    const Run bad = run_ember({"bench", stories(), "--parallel", "2", "--tg", "1"});
    CHECK(bad.status == 1);
    CHECK(contains(bad.err, "--parallel needs --pp >= 1 and --tg >= 2"));
}

TEST_CASE("-n 0 processes the prompt and generates nothing") {
    const Run r = run_ember({"run", stories(), "-p", "Once", "-n", "0", "--temp", "0", "--ctx", "64"});
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.out == "Once\n");  // the prompt echoed, no generated text
    CHECK(contains(r.err, " 0 generated;"));
    CHECK(contains(r.err, "stop: length]"));
}

TEST_CASE("ember run --lookup: the same greedy text, and how many guesses held") {
    const std::vector<std::string> base = {
        "run", stories(), "-p", "Once upon a time", "-n", "200", "--temp", "0", "--threads", "1", "--ctx", "256"};
    const Run plain = run_ember(base);
    std::vector<std::string> args = base;
    args.push_back("--lookup");
    const Run spec = run_ember(args);
    INFO(spec.err);
    REQUIRE(plain.status == 0);
    REQUIRE(spec.status == 0);
    CHECK(spec.out == plain.out);
    CHECK(plain.out.size() > 200);
    CHECK(contains(spec.err, "[lookup: "));
    CHECK_FALSE(contains(plain.err, "[lookup: "));
    CHECK_FALSE(contains(spec.err, "[lookup: 0 drafted"));  // tiny stories repeat their phrases
}

TEST_CASE("ember run --draft: the same greedy text; a draft of another vocabulary is refused") {
    const std::vector<std::string> base = {
        "run", stories(), "-p", "Once upon a time", "-n", "120", "--temp", "0", "--threads", "1", "--ctx", "256"};
    const Run plain = run_ember(base);
    std::vector<std::string> args = base;
    // A Q8_0 copy drafts (a third of the bytes: it pays while it agrees; the model as its own
    // draft would cost as much as it saves, and is not tried).
    test::TempDir dir;
    const std::string q8 = dir.file("stories-q8_0.gguf");
    REQUIRE(run_ember({"quantize", stories(), q8, "Q8_0", "--quiet"}).status == 0);
    for (const std::string& a : {std::string("--draft"), q8, std::string("--draft-max"), std::string("4")})
        args.push_back(a);
    const Run spec = run_ember(args);
    INFO(spec.err);
    REQUIRE(plain.status == 0);
    REQUIRE(spec.status == 0);
    CHECK(spec.out == plain.out);
    CHECK(contains(spec.err, "draft model: "));
    CHECK(contains(spec.err, "[draft: "));
    CHECK_FALSE(contains(spec.err, "[draft: 0 drafted"));
    args = base;
    for (const std::string& a : {std::string("--draft"), test::test_model(test::kSmolLM2)}) args.push_back(a);
    const Run other = run_ember(args);
    CHECK(other.status == 1);
    CHECK(contains(other.err, "does not share the vocabulary"));
    CHECK(contains(other.err, "tokenizer kind differs (target spm, draft bpe/"));
    args = base;
    for (const char* a : {"--draft-max", "4"}) args.push_back(a);
    CHECK(contains(run_ember(args).err, "option --draft-max needs --draft MODEL"));
}

TEST_CASE("--device cuda without a usable GPU fails loudly") {
    const Run devices = run_ember({"info", "--devices"});
    REQUIRE(devices.status == 0);
    const bool have_gpu = contains(devices.out, "\ncuda:");  // a device line (the CPU's comes first)
    const Run r = run_ember({"run", stories(), "-p", "Once", "-n", "2", "--device", "cuda", "--quiet"});
    INFO(r.err);
    if (have_gpu) {
        CHECK(r.status == 0);
    } else {
        CHECK(r.status == 1);
        CHECK(contains(r.err, "device cuda was requested but no CUDA device can be used"));
    }
}

TEST_CASE("ember info checks the configuration against the tensors") {
    const GgufFile f = GgufFile::open(stories());
    GgufWriter w;
    for (const auto& k : f.metadata_order()) w.set(k, f.metadata().at(k));
    w.set("llama.block_count", GgufValue::u32(0x7fffffff));
    for (const auto& t : f.tensors())
        w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
    const fs::path bad = temp("layers.gguf");
    w.write_file(bad.string());
    const Run r = run_ember({"info", bad.string()});
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(contains(r.out, "layers:          2147483647"));
    CHECK(contains(r.err, "llama.block_count = 2147483647 but the tensors describe 5 layers"));
    const Run run = run_ember({"run", bad.string(), "-p", "Once"});
    CHECK(run.status == 1);
    CHECK(contains(run.err, "but the tensors describe 5 layers"));
    CHECK(run.seconds < 5);
    fs::remove(bad);

    const Run good = run_ember({"info", stories()});
    CHECK(good.status == 0);
    CHECK(contains(good.out, "runs here:       yes"));
}

// A header of a file Ember cannot run: an architecture it lacks, MXFP4 and Q8_1 tensors, and
// the given tokenizer. Tensors are tiny (one block); only the header matters to `ember info`.
fs::path unsupported_file(const std::string& name, const std::string& tok_model, const std::string& pre) {
    GgufWriter w;
    w.set("general.architecture", GgufValue::str("future-arch"));
    w.set("tokenizer.ggml.model", GgufValue::str(tok_model));
    w.set("tokenizer.ggml.pre", GgufValue::str(pre));
    w.set("tokenizer.ggml.tokens", GgufValue::array(ember::GgufType::STRING, {GgufValue::str("a")}));
    auto add = [&](const std::string& tensor, ember::DType type) {
        const auto info = ember::dtype_info(static_cast<uint32_t>(type));
        REQUIRE(info);
        w.add_tensor(tensor, type, {info->block_elems}, std::vector<uint8_t>(info->block_bytes));
    };
    for (int layer = 0; layer < 3; ++layer) {
        add("blk." + std::to_string(layer) + ".ffn_down_exps.weight", ember::DType::MXFP4);
        add("blk." + std::to_string(layer) + ".ffn_gate_exps.weight", ember::DType::MXFP4);
    }
    add("blk.0.attn_q.weight", ember::DType::Q8_1);
    add("output_norm.weight", ember::DType::F32);
    const fs::path path = temp(name);
    w.write_file(path.string());
    return path;
}

// The support lists come from the engine itself (supported_architectures, matmul_supports,
// the tokenizer's names): the test names the types and names it made up, and checks each is
// reported once, in one block, while `ember info` still succeeds.
TEST_CASE("ember info names everything a file needs that Ember lacks") {
    const fs::path f = unsupported_file("lacks.gguf", "gpt2", "made-up-pre");
    const Run r = run_ember({"info", f.string()});
    INFO(r.out, r.err);
    CHECK(r.status == 0);
    CHECK(contains(r.out, "runs here:       no, Ember lacks:\n"));
    CHECK(contains(r.out, "  - architecture 'future-arch' (Ember runs llama, "));
    if (!ember::cpu::matmul_supports(ember::DType::MXFP4))  // another engineer is adding it
        CHECK(contains(r.out,
                       "  - tensor type MXFP4 (6 tensors: blk.0.ffn_down_exps.weight, "
                       "blk.0.ffn_gate_exps.weight, blk.1.ffn_down_exps.weight, "
                       "blk.1.ffn_gate_exps.weight and 2 more)\n"));
    CHECK(contains(r.out, "  - tensor type Q8_1 (1 tensor: blk.0.attn_q.weight)\n"));
    CHECK(!contains(r.out, "tensor type F32"));
    CHECK(contains(r.out, "  - pre-tokenizer 'made-up-pre' (tokenizer.ggml.pre; Ember has default, gpt-2, "));
    fs::remove(f);

    const fs::path g = unsupported_file("lacks-tok.gguf", "made-up-model", "x");
    const Run t = run_ember({"info", g.string()});
    INFO(t.out);
    CHECK(t.status == 0);
    CHECK(contains(t.out, "  - tokenizer model 'made-up-model' (tokenizer.ggml.model; Ember has llama"));
    CHECK(!contains(t.out, "  - pre-tokenizer"));
    fs::remove(g);
}

TEST_CASE("a FIFO as the model fails at once (info, run, chat)") {
    const fs::path fifo = temp("fifo");
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    for (const char* cmd : {"info", "run", "chat"}) {
        std::vector<std::string> args = {cmd, fifo.string()};
        if (std::string(cmd) == "run") args.insert(args.end(), {"-p", "x"});
        const Run r = run_ember(args);
        INFO(cmd, ": ", r.err);
        CHECK(r.status == 1);
        CHECK(contains(r.err, "it is a FIFO (named pipe), not a regular file"));
        CHECK(r.seconds < 5);
    }
    fs::remove(fifo);
}

TEST_CASE("ember chat reports a 1 MB line as that turn's error and answers the next") {
    const std::string huge(1 << 20, 'a');
    const Run r = run_ember({"chat", stories(), "--temp", "0", "-n", "8", "--verbose"}, huge + "\nOnce upon a time\n");
    INFO(r.err);
    CHECK(r.status == 1);  // a turn failed
    CHECK(count(r.err, "ember chat: error: the message is ") == 1);
    CHECK(contains(r.err, "and the model is loaded with 2048 (send a shorter message, or raise --ctx)"));
    CHECK(count(r.err, " generated; TTFT ") == 1);  // the second line was answered
    CHECK(r.err.find("ember chat: error") < r.err.find(" generated; TTFT "));
    CHECK(r.out.size() > 1);
}

TEST_CASE("ember chat --context-overflow stop: a conversation outgrowing --ctx 64 reports that turn and goes on") {
    std::string lines;
    for (int i = 0; i < 6; ++i) lines += "Once upon a time there was a little girl\n";
    const Run r = run_ember(
        {"chat", stories(), "--ctx", "64", "--temp", "0", "-n", "12", "--verbose", "--context-overflow", "stop"},
        lines);
    INFO(r.err);
    const size_t failed = count(r.err, "ember chat: error: ");
    const size_t answered = count(r.err, " generated; TTFT ");
    CHECK(failed >= 1);
    CHECK(contains(r.err, "does not fit the context of 64 tokens; the conversation so far was cleared"));
    CHECK(answered + failed == 6);
    CHECK(r.err.rfind(" generated; TTFT ") > r.err.find("ember chat: error: "));  // answered after the error
    CHECK(r.status == 1);
}

TEST_CASE("ember chat (truncate, the default): a conversation outgrowing --ctx 64 leaves out its oldest turns") {
    std::string lines;
    for (int i = 0; i < 6; ++i) lines += "Once upon a time there was a little girl\n";
    const Run r = run_ember({"chat", stories(), "--ctx", "64", "--temp", "0", "-n", "12", "--verbose"}, lines);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(count(r.err, " generated; TTFT ") == 6);  // every turn answered
    CHECK(count(r.err, "ember chat: error: ") == 0);
    CHECK(contains(r.err, " earlier messages left out to fit the context of 64 tokens]"));
    const Run bad = run_ember({"chat", stories(), "--context-overflow", "roll"}, "");
    CHECK(bad.status != 0);
    CHECK(contains(bad.err, "'roll' is not a policy of ember chat (truncate or stop)"));
}

// --- issue #15: `ember --version` (app/build_info) ------------------------------------------
TEST_CASE("ember --version: version, commit, build type, compiler and CUDA architectures on one line") {
    const Run r = run_ember({"--version"});
    INFO(r.out, r.err);
    CHECK(r.status == 0);
    CHECK(r.out.rfind(std::string("ember ") + EMBER_PROJECT_VERSION + " (commit ", 0) == 0);
    // A git checkout names its commit; a source tree without .git says "unknown".
    CHECK(contains(r.out, "(commit unknown,") == !EMBER_EXPECT_GIT);
    CHECK(contains(r.out, EMBER_CXX_COMPILER_ID));
    CHECK(contains(r.out, EMBER_EXPECT_CUDA));  // "CUDA ... sm_90" or "built without CUDA"
    CHECK(r.out.back() == '\n');
    CHECK(count(r.out, "\n") == 1);
}

// --json-schema FILE / --grammar FILE: the output follows them (stories260K, a tiny model that
// knows no JSON, so every structural token is forced), and a bad file is refused before loading.
TEST_CASE("ember run --json-schema and --grammar constrain the output") {
    const fs::path schema = temp("schema.json"), gbnf = temp("yesno.gbnf"), bad = temp("bad.json");
    std::ofstream(schema) << R"({"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9},
        "ok":{"type":"boolean"}},"required":["n","ok"]})";
    std::ofstream(gbnf) << "root ::= \"yes\" | \"no\"\n";
    std::ofstream(bad) << R"({"type":"object","patternProperties":{"^a":{"type":"string"}}})";
    const Run r = run_ember({"run", stories(), "-p", "Once", "-n", "64", "--seed", "3", "--threads", "1", "--ctx",
                             "128", "--quiet", "--json-schema", schema.string()});
    INFO(r.err);
    REQUIRE(r.status == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out.substr(4));  // after the echoed prompt
    CHECK(j.size() == 2);
    CHECK(j["n"].get<int>() >= 1);
    CHECK(j["n"].get<int>() <= 9);
    CHECK(j["ok"].is_boolean());
    const Run yn = run_ember({"run", stories(), "-p", "Once", "-n", "8", "--threads", "1", "--ctx", "64", "--quiet",
                              "--grammar", gbnf.string()});
    CHECK((yn.out == "Onceyes\n" || yn.out == "Onceno\n"));
    const Run refused = run_ember({"run", stories(), "-p", "x", "--json-schema", bad.string()});
    CHECK(refused.status == 1);
    CHECK(contains(refused.err, "the keyword 'patternProperties' is not supported"));
    fs::remove(schema);
    fs::remove(gbnf);
    fs::remove(bad);
}
