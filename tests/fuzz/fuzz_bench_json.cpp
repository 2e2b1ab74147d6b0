// libFuzzer: a saved `bench --suite` result, rendered as `vkspec bench --from-json F --md` does.
// The file may be hand-edited or foreign: parse errors, a wrong schema and missing or mistyped
// fields are refusals (exceptions); anything else — a crash, undefined behaviour, a hang — is a bug.
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "cli/bench_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(data, data + size);
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  if (!j.is_object() || j.value("schema", "") != "vkspec-bench/1") return 0;
  try {
    const std::string md = vkspec::cli::suite_markdown(j);
    if (md.rfind("**Device:** ", 0) != 0) __builtin_trap();  // every rendering starts with the device line
  } catch (const nlohmann::json::exception&) {
  }
  return 0;
}
