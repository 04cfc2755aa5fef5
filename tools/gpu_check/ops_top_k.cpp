// Op check of Backend::top_k (the sampler's candidates): rows with ties, mostly -inf and
// mostly NaN, each with its own penalties and bias (tools/op_data make_top_k_case), GPU vs
// the CPU backend. Ids, logit bits, counts and the adjusted rows must match bit for bit: the
// sampler's tokens depend on them.
#include <cstdio>
#include <cstring>

#include "tools/gpu_check/check.h"
#include "tools/op_data/op_data.h"

namespace ember::gpucheck {

using namespace ember::opdata;

namespace {

struct TopKCheck {
    int64_t vocab;
    int n_rows, k;
    double mismatches;  // the bound: none
};
const TopKCheck kTopKCases[] = {{128256, 3, 1, 0}, {128256, 3, 40, 0}, {128256, 3, 1024, 0}};

// Differences between the two backends' outputs: adjusted-row bits, then per row a count
// mismatch (k) or each candidate whose id or logit bits differ. `note` gets the counts.
size_t top_k_mismatches(Pair& p, const TopKCheck& tc, std::string& note) {
    const int n_rows = tc.n_rows, k = tc.k;
    std::vector<TopKCandidate> oc(static_cast<size_t>(n_rows * kMaxTopK)), og(oc.size());
    const TopKCase c = make_top_k_case(tc.vocab, n_rows);
    Tensor lc = put(p.cpu, c.logits, tc.vocab, n_rows), lg = put(p.gpu, c.logits, tc.vocab, n_rows);
    std::fill(og.begin(), og.end(), TopKCandidate{-1, NAN});
    std::vector<int32_t> cc(static_cast<size_t>(n_rows)), cg(static_cast<size_t>(n_rows), -1);
    p.cpu.top_k(lc, k, c.rows, oc, cc);
    p.gpu.top_k(lg, k, c.rows, og, cg);
    size_t bad = bits_differ(get(p.cpu, lc), get(p.gpu, lg));
    note = "counts";
    for (size_t r = 0; r < cc.size(); ++r) {
        note.append(1, ' ').append(std::to_string(cg[r]));
        if (cc[r] != cg[r]) {
            bad += static_cast<size_t>(k);
            continue;
        }
        for (int i = 0; i < cc[r]; ++i) {
            const TopKCandidate& a = oc[r * static_cast<size_t>(k) + static_cast<size_t>(i)];
            const TopKCandidate& b = og[r * static_cast<size_t>(k) + static_cast<size_t>(i)];
            bad += a.id != b.id || std::memcmp(&a.logit, &b.logit, sizeof(float)) != 0;
        }
    }
    note += " (cpu";
    for (int32_t n : cc) note.append(1, ' ').append(std::to_string(n));
    note += ")";
    p.cpu.free(lc);
    p.gpu.free(lg);
    return bad;
}

}  // namespace

void check_top_k(Pair& p) {
    std::printf(
        "\n[ops] top_k: 3 rows x 128256 (ties; mostly -inf; mostly NaN), penalties + bias, GPU vs CPU backend:\n"
        "      ids, logit bits, counts and the adjusted rows identical\n");
    for (const TopKCheck& tc : kTopKCases) {
        const std::string name = "top_k k=" + std::to_string(tc.k);
        try {
            std::string note;
            const size_t bad = top_k_mismatches(p, tc, note);
            record("ops", name, "mismatches", static_cast<double>(bad), tc.mismatches, note);
        } catch (const std::exception& e) {
            fail("ops", name, e.what());
        }
    }
}

}  // namespace ember::gpucheck
