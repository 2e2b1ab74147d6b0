// Kernels at the sizes real models have. Some drivers end a shader's loops after a fixed budget
// of passes per invocation, counted over all its loops (DeviceCaps::Quirks::loop_iteration_limit:
// 65535 on lavapipe), and the kernel then returns a wrong number. Small test shapes never reach
// the budget. Here: the matmul over K = 14336 (a Llama-3-8B ffn_down) against the CPU reference,
// and the model's refusal of a context longer than attention can visit. Attention at that bound
// is in test_attention.cpp, sampling over the largest vocabulary allowed in test_sample.cpp.
#include "matmul_reference.hpp"
#include "spec_fixtures.hpp"
#include "vk_fixture.hpp"
#include "vkspec/model.hpp"
#include "vkspec/sample.hpp"
#include "vkspec/tree_limits.h"

using namespace vkspec;
using namespace vkspec::test;

TEST_CASE_FIXTURE(VkTest, "loop budget: matmul over K = 14336 equals the CPU reference for the device's own choice") {
  for (auto t : {WeightType::F16, WeightType::Q8_0, WeightType::Q4_K, WeightType::Q6_K})
    for (uint32_t B : {1u, 5u}) {
      CAPTURE(weight_type_name(t));
      run_matmul_case(ctx, t, WeightPath::Texel, 9, 14336, B, {}, false, false);
      run_matmul_case(ctx, t, WeightPath::Storage, 9, 14336, B, {}, false, false);
    }
}

TEST_CASE_FIXTURE(VkTest, "loop budget: a context longer than attention can visit is refused by name, one within it loads") {
  // Where the driver has no loop budget there is no such bound, and nothing to refuse.
  const uint32_t D = 16, max_keys = attention_max_keys(ctx, D, (kTreeMaxNodes + 31) / 32);
  if (max_keys == UINT32_MAX) {
    MESSAGE("NOT RUN: device '" << ctx.caps().name << "' ends no loops early");
    return;
  }
  TempDir dir("loop_budget");
  const std::string path = dir.path + "/long.gguf";
  write_verifier(path, 3, 0.5f, 96, 64, 1, false, int(max_keys) + 1000);  // D = C / 4 = 16
  GgufFile g = GgufFile::open(path);
  ModelOptions mo;
  mo.kv_type = KvType::F16;
  mo.context = max_keys + 1;
  CHECK_THROWS_WITH(LlamaModel(ctx, g, mo),
                    doctest::Contains(("use a smaller --ctx (at most " + std::to_string(max_keys) + ")").c_str()));
  mo.context = max_keys;
  CHECK_NOTHROW(LlamaModel(ctx, g, mo));
}
