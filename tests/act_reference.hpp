// The gated MLP's gate activations in double, from their definitions (std::erf, std::tanh): the
// reference for glu_mul, the matmul's GLU fold and the draft heads' hidden_act.
#pragma once

#include <cmath>

#include "vkspec/ops.hpp"

namespace vkspec::test {

inline double glu_act_ref(GluAct act, double a) {
  switch (act) {
    case GluAct::GeluTanh: return 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a)));
    case GluAct::GeluErf: return 0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0)));
    case GluAct::Silu: break;
  }
  return a / (1.0 + std::exp(-a));
}

inline constexpr GluAct kGluActs[] = {GluAct::Silu, GluAct::GeluTanh, GluAct::GeluErf};

}  // namespace vkspec::test
