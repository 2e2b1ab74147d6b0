// libFuzzer: a llama2.c checkpoint as tools/llama2c_to_gguf converts it — the header checks, the
// file-size arithmetic, the split of the weights into tensors (f32, f16 or q8_0, chosen by the
// input's length so every type is reached) — then the GGUF it writes read back as the verifier
// loader reads a file: parsed, its Llama config derived and validated, every tensor dequantized.
// The reader takes a path, so each input is written to one temporary file first. Anything but a
// clean conversion or a vkspec::Error is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

#include "vkspec/gguf.hpp"
#include "vkspec/llama2c.hpp"
#include "vkspec/model_config.hpp"

namespace {
// One file for the process's inputs, removed at exit.
const std::string& scratch_path() {
  static const std::string path = [] {
    char name[] = "/tmp/vkspec-fuzz-llama2c-XXXXXX";
    const int fd = mkstemp(name);
    if (fd < 0) std::abort();
    close(fd);
    std::atexit([] { std::remove(scratch_path().c_str()); });
    return std::string(name);
  }();
  return path;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vkspec;
  const std::string& path = scratch_path();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  const GgmlType types[] = {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0};
  try {
    LlamaConfig converted;
    const GgufWriter w = llama2c_to_gguf(path, types[size % 3], &converted);
    const GgufFile g = GgufFile::from_bytes("fuzz-llama2c.gguf", w.to_bytes());
    const LlamaConfig c = read_llama_config(g);
    if (c.C != converted.C || c.L != converted.L || c.V != converted.V || c.tied_output != converted.tied_output)
      std::abort();  // the GGUF written says another model than the checkpoint's header
    for (const GgufTensor& t : g.tensors()) (void)dequantize_tensor(t);
  } catch (const Error&) {
  }
  return 0;
}
