// libFuzzer: a GGUF file as the verifier loader sees it, short of uploading anything — parse the
// header, metadata and tensor table, derive and validate the Llama config, dequantize every
// tensor (what the upload reads), and build the tokenizer when the file carries one. Anything
// but a clean load or a vkspec::Error is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vkspec/gguf.hpp"
#include "vkspec/model_config.hpp"
#include "vkspec/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vkspec;
  try {
    const GgufFile f = GgufFile::from_bytes("fuzz.gguf", std::vector<uint8_t>(data, data + size));
    // Every numeric array element, through the accessors callers use.
    double sink = 0;
    for (const auto& [key, v] : f.metadata())
      if (v.type == GgufType::ARRAY && v.raw)
        for (uint64_t i = 0; i < v.count; ++i) sink += v.elem_f64(i);
    (void)sink;
    if (f.has("tokenizer.ggml.model")) {
      try {
        (void)Tokenizer::from_gguf(f);
      } catch (const Error&) {
      }
    }
    const LlamaConfig c = read_llama_config(f);
    (void)rope_divisors(c, {});  // YaRN's ramp from the file's numbers
    (void)rope_logit_gain(c);
    for (const GgufTensor& t : f.tensors()) (void)dequantize_tensor(t);
  } catch (const Error&) {
  }
  return 0;
}
