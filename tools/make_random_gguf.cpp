// make_random_gguf OUT.gguf [--dim 512] [--layers 8] [--heads 8] [--kv-heads 8] [--ffn 1408]
//                  [--vocab 32000] [--ctx 2048] [--type f16|f32|q8_0] [--seed 1] [--tied] [--arch llama]
//                  [--yarn FACTOR] [--orig-ctx N] [--longrope] [--tokenizer-from VOCAB.gguf]
// --tokenizer-from copies another file's tokenizer.* keys (e.g. llama.cpp's vocab-only files) and
// takes its token count as the vocabulary, so text runs through a real tokenizer end to end.
// --arch picks the architecture's tensors and RoPE pairing (llama, mistral, qwen2, qwen3, phi3,
// internlm2); --yarn writes YaRN scaling keys, --longrope Phi-3's two factor tables, both from the
// original context --orig-ctx (default: none written, the context 2048 then).
// A random Llama model with a given shape, for benchmarks on shapes nobody ships (weights are
// uniform in ±1/sqrt(fan_in); the file follows the GGUF spec, untied output unless --tied).
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "vkspec/gguf_writer.hpp"

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: %s OUT.gguf [--dim N] [--layers N] [--heads N] [--kv-heads N] [--ffn N] "
                         "[--vocab N] [--ctx N] [--type f16|f32|q8_0] [--seed N] [--tied] [--arch A] [--yarn FACTOR] "
                         "[--orig-ctx N] [--longrope] [--tokenizer-from VOCAB.gguf]\n", argv[0]);
    return 2;
  }
  vkspec::LlamaConfig c;
  c.C = 512, c.L = 8, c.H = 8, c.Hkv = 8, c.F = 1408, c.V = 32000, c.ctx = 2048, c.tied_output = false;
  vkspec::GgmlType t = vkspec::GgmlType::F16;
  uint64_t seed = 1;
  std::string tokenizer_from;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    // A size: decimal digits only, in [lo, hi]; anything else (a missing value, "abc", 0, -1)
    // is refused naming the option, not read as 0 or written into a model nothing can load.
    bool bad = false;
    auto next = [&](uint64_t lo, uint64_t hi) -> uint64_t {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        bad = true;
        return 0;
      }
      const char* v = argv[++i];
      char* end = nullptr;
      errno = 0;
      const unsigned long long x = std::strtoull(v, &end, 10);
      if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || x < lo || x > hi) {
        std::fprintf(stderr, "%s needs an integer from %llu to %llu, got '%s'\n", a.c_str(), (unsigned long long)lo,
                     (unsigned long long)hi, v);
        bad = true;
      }
      return x;
    };
    if (a == "--dim") c.C = int(next(1, 1u << 16));
    else if (a == "--layers") c.L = int(next(1, 1024));
    else if (a == "--heads") c.H = int(next(1, 1024));
    else if (a == "--kv-heads") c.Hkv = int(next(1, 1024));
    else if (a == "--ffn") c.F = int(next(1, 1u << 20));
    else if (a == "--vocab") c.V = int(next(1, 1u << 24));
    else if (a == "--seed") seed = next(0, UINT64_MAX);
    else if (a == "--ctx") c.ctx = int(next(1, 0x7fffffff));
    else if (a == "--tied") c.tied_output = true;
    else if (a == "--orig-ctx" && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(argv[++i], &end, 10);
      if (*argv[i] == '-' || *end != '\0' || v == 0 || v > 0x7fffffffULL) {
        std::fprintf(stderr, "--orig-ctx needs a context from 1 to 2^31-1, got '%s'\n", argv[i]);
        return 2;
      }
      c.rope_orig_ctx = uint32_t(v);
    }
    else if (a == "--longrope") c.rope_longrope = true;
    else if (a == "--arch" && i + 1 < argc) c.arch = argv[++i];
    else if (a == "--tokenizer-from" && i + 1 < argc) tokenizer_from = argv[++i];
    else if (a == "--yarn" && i + 1 < argc) {
      const double factor = std::atof(argv[++i]);
      if (!(factor >= 1.0 && factor <= 1e6)) {
        std::fprintf(stderr, "--yarn needs a factor from 1 to 1e6, got '%s'\n", argv[i]);
        return 2;
      }
      c.rope_yarn = true;
      c.rope_freq_scale = float(1.0 / factor);
    }
    else if (a == "--type" && i + 1 < argc) {
      const std::string s = argv[++i];
      t = s == "f32" ? vkspec::GgmlType::F32 : s == "q8_0" ? vkspec::GgmlType::Q8_0 : vkspec::GgmlType::F16;
      if (s != "f32" && s != "q8_0" && s != "f16") {
        std::fprintf(stderr, "unknown --type '%s'\n", s.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr, "unknown option '%s'\n", a.c_str());
      return 2;
    }
    if (bad) return 2;
  }
  if (c.H <= 0 || c.C % c.H || c.Hkv <= 0 || c.H % c.Hkv) {
    std::fprintf(stderr, "--heads must divide --dim and --kv-heads must divide --heads\n");
    return 2;
  }
  if (!vkspec::apply_arch_traits(c)) {
    std::fprintf(stderr, "unknown --arch '%s'\n", c.arch.c_str());
    return 2;
  }
  if (c.rope_longrope && c.arch != "phi3") {
    std::fprintf(stderr, "--longrope is Phi-3's: use --arch phi3\n");
    return 2;
  }
  c.D = c.C / c.H;
  std::error_code ec;
  if (!tokenizer_from.empty() && std::filesystem::equivalent(argv[1], tokenizer_from, ec)) {
    std::fprintf(stderr, "%s is the --tokenizer-from file: writing it would destroy it (give another output path)\n",
                 argv[1]);
    return 2;
  }
  try {
    if (tokenizer_from.empty()) {
      vkspec::write_random_llama(argv[1], c, seed, t);
    } else {
      const vkspec::GgufFile vocab = vkspec::GgufFile::open(tokenizer_from);
      const vkspec::GgufValue* tokens = vocab.find("tokenizer.ggml.tokens");
      if (!tokens || tokens->type != vkspec::GgufType::ARRAY || tokens->count == 0 || tokens->count > (1u << 30))
        throw std::runtime_error(tokenizer_from + " has no tokenizer.ggml.tokens list");
      c.V = int(tokens->count);
      vkspec::GgufWriter w = vkspec::random_llama(c, seed, t);
      for (const auto& [key, value] : vocab.metadata())
        if (key.starts_with("tokenizer.")) w.add_value(std::string(key), value);
      w.write(argv[1]);
    }
    std::fprintf(stderr, "wrote %s: C=%d L=%d H=%d Hkv=%d F=%d V=%d\n", argv[1], c.C, c.L, c.H, c.Hkv, c.F, c.V);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
