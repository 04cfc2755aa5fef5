// Pearson's chi-square test of homogeneity for two samples of the same size, for tests that
// compare the token frequencies of two ways of sampling (speculative decoding against plain).
//
// Two samples of n draws each, counts a_c and b_c in category c: under the hypothesis that
// both come from one distribution the expected count of each is (a_c + b_c) / 2, and
// Pearson's statistic sum over both samples of (observed - expected)^2 / expected reduces to
//   X^2 = sum_c (a_c - b_c)^2 / (a_c + b_c),
// asymptotically chi-square with (categories - 1) degrees of freedom. Categories with fewer
// than 10 draws in all (expected count < 5 per sample, where the asymptotics fail) are pooled
// into one. The critical value for a false-failure probability alpha comes from the
// Wilson-Hilferty approximation of the chi-square quantile, (X^2/k)^(1/3) ~ normal with mean
// 1 - 2/(9k) and variance 2/(9k), accurate to a few percent for k >= 3.
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <string>

namespace ember::test {

struct ChiSquare {
    double statistic = 0;
    int32_t dof = 0;
    double critical = 0;  // the (1 - alpha) quantile
    bool rejects() const { return statistic > critical; }
};

// The normal quantile z with P(Z > z) = alpha, for the alphas tests use.
inline double upper_normal_quantile(double alpha) {
    // 1e-4 -> 3.7190, 1e-3 -> 3.0902 (tables); other values are a mistake in the test.
    if (alpha == 1e-4) return 3.7190;
    if (alpha == 1e-3) return 3.0902;
    return NAN;
}

inline double chi_square_quantile(int32_t dof, double alpha) {
    const double k = dof, z = upper_normal_quantile(alpha), v = 2.0 / (9.0 * k);
    return k * std::pow(1.0 - v + z * std::sqrt(v), 3.0);
}

template <class Key>
ChiSquare chi_square_same(const std::map<Key, int64_t>& a, const std::map<Key, int64_t>& b, double alpha) {
    std::map<Key, std::pair<int64_t, int64_t>> both;
    for (const auto& [k, n] : a) both[k].first += n;
    for (const auto& [k, n] : b) both[k].second += n;
    ChiSquare c;
    int64_t pooled_a = 0, pooled_b = 0;
    int32_t categories = 0;
    auto add = [&](int64_t x, int64_t y) {
        c.statistic += static_cast<double>((x - y) * (x - y)) / static_cast<double>(x + y);
        ++categories;
    };
    for (const auto& [k, ab] : both) {
        if (ab.first + ab.second >= 10) {
            add(ab.first, ab.second);
        } else {
            pooled_a += ab.first;
            pooled_b += ab.second;
        }
    }
    if (pooled_a + pooled_b > 0) add(pooled_a, pooled_b);
    c.dof = std::max(1, categories - 1);
    c.critical = chi_square_quantile(c.dof, alpha);
    return c;
}

}  // namespace ember::test
