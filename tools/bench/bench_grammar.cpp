// ember-bench-grammar: what grammar-constrained decoding costs (issue #37). For each model:
//   free        decode tok/s, greedy, no grammar (ignore_eog, --tokens tokens)
//   schema      decode tok/s, greedy, under a JSON schema that keeps the model writing
//               (16 strings of 8-40 characters), on the engine's own path (candidates first,
//               the full mask only when none is allowed); masks: how many of its steps
//               needed the full mask, walked / taken from the masks kept per position
//   grammar     the grammar's own time per schema token (GenerateStats::grammar_ms: candidate
//               checks, full masks, advancing the matcher), and that as a share of a free
//               step: the constrained step's extra cost, less noisy than the tok/s ratio on a
//               shared machine (it leaves out only asking the backend for 32 candidates, not 1)
//   mask        the full mask (TokenMatcher::allowed_tokens, a trie walk over the whole
//               vocabulary) in microseconds per call, median and max over every position of
//               a JSON text of the schema
// Prints a table; --json FILE writes the numbers. Timings: best of --reps runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/grammar/json_schema.h"
#include "engine/runtime/model.h"
#include "engine/scheduler/sequence.h"

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

const char* kSchema = R"({"type":"object","properties":{"items":{"type":"array",
    "items":{"type":"string","minLength":8,"maxLength":40},"minItems":16,"maxItems":16}},"required":["items"]})";

struct Row {
    std::string model;
    int32_t vocab = 0;
    double free_tok_s = 0, schema_tok_s = 0;
    int32_t schema_tokens = 0, masks_walked = 0, masks_kept = 0;
    double grammar_us_per_token = 1e30;  // best of the runs, as the tok/s
    double mask_median_us = 0, mask_max_us = 0;
    int mask_positions = 0;
};

GenerateStats decode(Model& m, const std::vector<int32_t>& prompt, int32_t tokens,
                     std::shared_ptr<const grammar::Grammar> g) {
    Sequence seq(m);
    GenerateOptions o;
    o.sampling = SamplingParams::greedy();
    o.max_tokens = tokens;
    o.ignore_eog = !g;
    o.grammar = std::move(g);
    return seq.generate(prompt, o, nullptr);
}

// The full mask at every position of a text the schema accepts.
void mask_cost(const Model& m, const std::shared_ptr<const grammar::Grammar>& g, Row& row) {
    std::string text = "{\"items\": [";
    for (int i = 0; i < 16; ++i)
        text += std::string(i ? ", " : "") + "\"the quick brown fox " + std::to_string(i) + "\"";
    text += "]}";
    grammar::TokenMatcher matcher(g, m.grammar_vocab());
    std::vector<double> us;
    std::vector<int32_t> ids;
    for (size_t i = 0; i < text.size(); ++i) {
        const auto t0 = Clock::now();
        matcher.walk_mask(ids);
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        if (!matcher.accept_bytes(text.substr(i, 1))) throw Error("bench: the sample text left the grammar");
    }
    std::sort(us.begin(), us.end());
    row.mask_median_us = us[us.size() / 2];
    row.mask_max_us = us.back();
    row.mask_positions = static_cast<int>(us.size());
}

Row bench(const std::string& path, int32_t tokens, int reps, int threads) {
    LoadOptions lo;
    lo.path = path;
    lo.device = BackendPreference::Cpu;
    lo.n_threads = threads;
    lo.n_ctx = 1024;
    auto m = Model::load(lo);
    Row r;
    r.model = path.substr(path.find_last_of('/') + 1);
    r.vocab = m->tokenizer().n_vocab();
    const auto g = grammar::Grammar::parse(grammar::json_schema_to_gbnf(nlohmann::json::parse(kSchema)));
    m->grammar_vocab();  // built once per model, not part of a request's cost
    const std::vector<int32_t> prompt =
        m->tokenizer().encode("Write a list of sixteen short phrases as JSON:", true, false);
    for (int i = 0; i < reps; ++i) {  // interleaved, so drift on a shared machine hits both alike
        r.free_tok_s = std::max(r.free_tok_s, decode(*m, prompt, tokens, nullptr).decode_tok_s());
        const GenerateStats st = decode(*m, prompt, tokens, g);
        r.schema_tok_s = std::max(r.schema_tok_s, st.decode_tok_s());
        r.schema_tokens = st.generated_tokens;
        r.masks_walked = st.masks_walked;
        r.masks_kept = st.masks_kept;
        r.grammar_us_per_token = std::min(r.grammar_us_per_token, 1000.0 * st.grammar_ms / st.generated_tokens);
    }
    mask_cost(*m, g, r);
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> models;
    const char* json_path = nullptr;
    int32_t tokens = 96;
    int reps = 3, threads = 2;
    for (int i = 1; i < argc; ++i) {
        const bool more = i + 1 < argc;
        if (!std::strcmp(argv[i], "--json") && more) json_path = argv[++i];
        else if (!std::strcmp(argv[i], "--tokens") && more) tokens = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--reps") && more) reps = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--threads") && more) threads = std::atoi(argv[++i]);
        else if (argv[i][0] != '-') models.push_back(argv[i]);
        else {
            std::fprintf(stderr,
                         "usage: ember-bench-grammar MODEL... [--tokens N] [--reps N] [--threads N] [--json FILE]\n");
            return 2;
        }
    }
    if (models.empty() || tokens < 2 || reps < 1) {
        std::fprintf(stderr,
                     "usage: ember-bench-grammar MODEL... [--tokens N] [--reps N] [--threads N] [--json FILE]\n");
        return 2;
    }
    std::vector<Row> rows;
    try {
        for (const std::string& m : models) rows.push_back(bench(m, tokens, reps, threads));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ember-bench-grammar: %s\n", e.what());
        return 1;
    }
    std::printf("%-40s %7s %10s %12s %8s %9s %12s %10s %9s %11s %10s\n", "model", "vocab", "free t/s", "schema t/s",
                "slower", "(tokens)", "masks w/kept", "grammar us", "of step", "mask med us", "mask max us");
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows) {
        const double slower = r.free_tok_s > 0 ? 100.0 * (1.0 - r.schema_tok_s / r.free_tok_s) : 0;
        const std::string masks = std::to_string(r.masks_walked) + "/" + std::to_string(r.masks_kept);
        const double share = 100.0 * r.grammar_us_per_token * r.free_tok_s / 1e6;
        std::printf("%-40s %7d %10.2f %12.2f %7.1f%% %9d %12s %10.0f %8.1f%% %11.0f %10.0f\n", r.model.c_str(), r.vocab,
                    r.free_tok_s, r.schema_tok_s, slower, r.schema_tokens, masks.c_str(), r.grammar_us_per_token, share,
                    r.mask_median_us, r.mask_max_us);
        out.push_back({{"model", r.model},
                       {"vocab", r.vocab},
                       {"free_tok_s", r.free_tok_s},
                       {"schema_tok_s", r.schema_tok_s},
                       {"schema_tokens", r.schema_tokens},
                       {"masks_walked", r.masks_walked},
                       {"masks_kept", r.masks_kept},
                       {"grammar_us_per_token", r.grammar_us_per_token},
                       {"grammar_percent_of_free_step", share},
                       {"slower_percent", slower},
                       {"mask_median_us", r.mask_median_us},
                       {"mask_max_us", r.mask_max_us},
                       {"mask_positions", r.mask_positions},
                       {"tokens", tokens},
                       {"reps", reps},
                       {"threads", threads}});
    }
    if (json_path) {
        std::FILE* f = std::fopen(json_path, "w");
        if (!f) {
            std::fprintf(stderr, "ember-bench-grammar: cannot write %s\n", json_path);
            return 1;
        }
        std::fputs(out.dump(2).c_str(), f);
        std::fclose(f);
    }
    return 0;
}
