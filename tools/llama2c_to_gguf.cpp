// llama2c_to_gguf IN.bin OUT.gguf [f32|f16|q8_0]: convert a llama2.c checkpoint to GGUF.
// The conversion itself lives in the library (src/formats/llama2c.cpp) so tests use the same code.
#include <cstdio>
#include <exception>
#include <string>

#include "vkspec/llama2c.hpp"

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s IN.bin OUT.gguf [f32|f16|q8_0]\n", argv[0]);
    return 2;
  }
  vkspec::GgmlType t = vkspec::GgmlType::F32;
  if (argc == 4) {
    const std::string s = argv[3];
    if (s == "f16") t = vkspec::GgmlType::F16;
    else if (s == "q8_0") t = vkspec::GgmlType::Q8_0;
    else if (s != "f32") {
      std::fprintf(stderr, "unknown weight type '%s' (expected f32, f16 or q8_0)\n", s.c_str());
      return 2;
    }
  }
  try {
    const vkspec::LlamaConfig c = vkspec::convert_llama2c_file(argv[1], argv[2], t);
    std::fprintf(stderr, "wrote %s: C=%d L=%d H=%d Hkv=%d D=%d F=%d V=%d ctx=%d %s output\n", argv[2], c.C, c.L, c.H,
                 c.Hkv, c.D, c.F, c.V, c.ctx, c.tied_output ? "tied" : "separate");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
