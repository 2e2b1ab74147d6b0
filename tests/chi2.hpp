// Chi-square tests for the sampling cases: a critical value and two statistics.
#pragma once

#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

namespace vkspec::test {

// Chi-square critical value at significance 0.001 by the Wilson–Hilferty approximation
// (z_{0.999} = 3.0902): within ~1% of the exact quantile for df >= 3.
inline double chi2_crit_001(int df) {
  const double z = 3.0902, a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Goodness of fit of observed counts to expected ones. Cells with expected 0 must be empty
// (checked); cells with expected < 5 are pooled into one cell so the chi-square law applies.
struct Chi2 {
  double stat = 0;
  int df = 0;
  long impossible = 0;  // observations in cells of probability 0
};
inline Chi2 chi2_fit(const std::vector<double>& observed, const std::vector<double>& expected) {
  Chi2 r;
  double po = 0, pe = 0;
  int cells = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    if (expected[i] == 0) {
      r.impossible += long(observed[i]);
    } else if (expected[i] < 5) {
      po += observed[i], pe += expected[i];
    } else {
      r.stat += (observed[i] - expected[i]) * (observed[i] - expected[i]) / expected[i];
      ++cells;
    }
  }
  if (pe > 0) r.stat += (po - pe) * (po - pe) / pe, ++cells;
  r.df = cells - 1;
  return r;
}

// Two-sample homogeneity: are counts a and b draws from one distribution? Cells where the
// pooled count is < 10 are pooled together. df = cells - 1.
inline Chi2 chi2_two_sample(const std::vector<double>& a, const std::vector<double>& b) {
  const double na = std::accumulate(a.begin(), a.end(), 0.0), nb = std::accumulate(b.begin(), b.end(), 0.0);
  std::vector<std::pair<double, double>> cells;
  std::pair<double, double> rest{0, 0};
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] + b[i] < 10) rest.first += a[i], rest.second += b[i];
    else cells.push_back({a[i], b[i]});
  }
  if (rest.first + rest.second > 0) cells.push_back(rest);
  Chi2 r;
  for (auto [x, y] : cells) {
    const double ea = (x + y) * na / (na + nb), eb = (x + y) * nb / (na + nb);
    r.stat += (x - ea) * (x - ea) / ea + (y - eb) * (y - eb) / eb;
  }
  r.df = int(cells.size()) - 1;
  return r;
}

}  // namespace vkspec::test
