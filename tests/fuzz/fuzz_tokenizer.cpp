// libFuzzer: a tokenizer built from GGUF metadata, then arbitrary text encoded and decoded.
// Two input forms, chosen by the first byte:
//   odd:  u32 n, n bytes of a GGUF file (the seeds are real vocabularies), then the text;
//   even: a small vocabulary described by the bytes (kind, tokens, types, scores, merges, pre,
//         special ids and flags) and written with GgufWriter, then the text. Most of these
//         vocabularies are valid, so encode and decode are reached, not only the checks.
// Beyond "no crash": ids are in range, and a byte-level BPE vocabulary holding all 256 byte
// tokens decodes what it encoded back to the same bytes.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstring>
#include <string>
#include <vector>

#include "../byte_vocab.hpp"
#include "vkspec/gguf.hpp"
#include "vkspec/gguf_writer.hpp"
#include "vkspec/tokenizer.hpp"

namespace {

using namespace vkspec;

struct Built {
  std::vector<uint8_t> gguf;
  bool roundtrip = false;  // gpt2, every byte token present, all tokens normal
};

Built build_vocab(FuzzedDataProvider& in) {
  GgufWriter w;
  const bool spm = in.ConsumeBool();
  std::vector<std::string> toks;
  std::vector<int32_t> types;
  bool all_bytes = true;
  if (spm) {
    toks = {"<unk>", "<s>", "</s>"};
    types = {2, 3, 3};
    const bool bytes = in.ConsumeBool();
    for (int b = 0; bytes && b < 256; ++b) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", b);
      toks.push_back(buf);
      types.push_back(6);
    }
  } else {
    const int drop = in.ConsumeBool() ? in.ConsumeIntegralInRange<int>(0, 255) : -1;
    all_bytes = drop < 0;
    static const std::vector<std::string> vocab = vkspec::test::byte_vocab();
    for (int b = 0; b < 256; ++b)
      if (b != drop) {
        toks.push_back(vocab[b]);
        types.push_back(1);
      }
  }
  const int extra = in.ConsumeIntegralInRange<int>(0, 40);
  for (int i = 0; i < extra; ++i) {
    if (in.ConsumeBool() && toks.size() >= 2) {  // a concatenation of two tokens: a merge can make it
      const std::string a = toks[in.ConsumeIntegralInRange<size_t>(0, toks.size() - 1)];
      const std::string b = toks[in.ConsumeIntegralInRange<size_t>(0, toks.size() - 1)];
      toks.push_back(a + b);
    } else {
      toks.push_back(in.ConsumeRandomLengthString(12));
    }
    types.push_back(in.ConsumeIntegralInRange<int32_t>(0, 7));  // 7 is invalid
  }
  w.add_string("tokenizer.ggml.model", spm ? "llama" : in.ConsumeBool() ? "gpt2" : "t5");
  w.add_array_string("tokenizer.ggml.tokens", toks);
  const bool write_types = in.ConsumeBool();
  if (write_types) w.add_array_i32("tokenizer.ggml.token_type", types);
  if (spm || in.ConsumeBool()) {
    std::vector<float> scores(toks.size());
    for (float& s : scores) s = float(in.ConsumeIntegralInRange<int>(-100, 100));
    w.add_array_f32("tokenizer.ggml.scores", scores);
  }
  if (!spm) {
    std::vector<std::string> merges;
    const int n = in.ConsumeIntegralInRange<int>(0, 40);
    for (int i = 0; i < n; ++i) {
      // Merges that exist as concatenations in the vocab, and now and then one that does not.
      const std::string a = toks[in.ConsumeIntegralInRange<size_t>(0, toks.size() - 1)];
      const std::string b = toks[in.ConsumeIntegralInRange<size_t>(0, toks.size() - 1)];
      if (in.ConsumeIntegralInRange<int>(0, 7) != 0) {
        bool found = false;
        for (const std::string& t : toks) found = found || t == a + b;
        if (!found) continue;
      }
      merges.push_back(a + " " + b);
    }
    w.add_array_string("tokenizer.ggml.merges", merges);
    static const char* pres[] = {"default", "gpt2", "llama-bpe", "qwen2", "smollm", "deepseek-coder"};
    w.add_string("tokenizer.ggml.pre", pres[in.ConsumeIntegralInRange<int>(0, 5)]);
  }
  if (in.ConsumeBool()) w.add_u32("tokenizer.ggml.bos_token_id", in.ConsumeIntegralInRange<uint32_t>(0, uint32_t(toks.size())));
  if (in.ConsumeBool()) w.add_u32("tokenizer.ggml.eos_token_id", in.ConsumeIntegralInRange<uint32_t>(0, uint32_t(toks.size())));
  if (in.ConsumeBool()) w.add_bool("tokenizer.ggml.add_bos_token", in.ConsumeBool());
  if (in.ConsumeBool()) w.add_bool("tokenizer.ggml.add_space_prefix", in.ConsumeBool());
  Built b;
  b.gguf = w.to_bytes();
  b.roundtrip = !spm && all_bytes && !write_types;
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::vector<uint8_t> gguf;
  std::string text;
  bool roundtrip = false;
  if (data[0] & 1) {
    uint32_t n = 0;
    if (size < 5) return 0;
    std::memcpy(&n, data + 1, 4);
    const size_t len = std::min<size_t>(n, size - 5);
    gguf.assign(data + 5, data + 5 + len);
    text.assign(reinterpret_cast<const char*>(data + 5 + len), size - 5 - len);
  } else {
    FuzzedDataProvider in(data + 1, size - 1);
    Built b = build_vocab(in);
    gguf = std::move(b.gguf);
    roundtrip = b.roundtrip;
    text = in.ConsumeRemainingBytesAsString();
  }
  try {
    const GgufFile f = GgufFile::from_bytes("fuzz-vocab.gguf", std::move(gguf));
    const Tokenizer tok = Tokenizer::from_gguf(f);
    for (int mode = 0; mode < 3; ++mode) {
      const bool add_special = mode == 1, parse_special = mode == 2;
      const std::vector<uint32_t> ids = tok.encode(text, add_special, parse_special);
      for (uint32_t id : ids)
        if (id >= tok.vocab_size()) __builtin_trap();
      const std::string back = tok.decode(ids, true);
      if (mode == 0 && roundtrip && back != text) __builtin_trap();
      StreamDecoder sd(tok, parse_special);
      std::string streamed;
      for (uint32_t id : ids) streamed += sd.push(id);
      streamed += sd.flush();
    }
    // Decoding must accept every id of the vocabulary, and refuse the first id past it.
    for (uint32_t id = 0; id < tok.vocab_size() && id < 4096; ++id) (void)tok.token_bytes(id, true);
    try {
      (void)tok.token_bytes(uint32_t(tok.vocab_size()));
      __builtin_trap();
    } catch (const vkspec::Error&) {
    }
  } catch (const vkspec::Error&) {
  }
  return 0;
}
