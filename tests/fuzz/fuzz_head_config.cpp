// libFuzzer: a draft head's config.json, parsed and checked against a verifier the way
// EagleHead does before it touches the device.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "vkspec/eagle_head.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vkspec;
  try {
    const HeadConfig c = parse_head_config(std::string_view(reinterpret_cast<const char*>(data), size), "config.json");
    // What the loader relies on afterwards.
    if (c.C < 1 || c.H < 1 || c.Hkv < 1 || c.F < 1 || c.V < 1 || c.C % c.H || c.H % c.Hkv || c.D * c.H != c.C ||
        !(c.rms_eps > 0) || !(c.rope_theta > 0) || uint32_t(c.hidden_act) > uint32_t(GluAct::GeluErf))
      __builtin_trap();
    LlamaConfig verifier;  // the bundled demo's shape
    verifier.C = 192, verifier.V = 256, verifier.H = 6, verifier.Hkv = 3, verifier.D = 32;
    check_head_fits(c, verifier, "head");
  } catch (const Error&) {
  }
  return 0;
}
