// Tokenizers built from a GGUF file's tokenizer.ggml.* metadata, matching llama.cpp:
//  - "llama": SentencePiece-style BPE driven by piece scores, byte fallback <0xNN>, and the
//    leading-space convention (a space is prepended, spaces become U+2581 "▁");
//  - "gpt2": byte-level BPE (bytes mapped to printable code points, merges applied by rank)
//    after a pre-tokenizer split chosen by tokenizer.ggml.pre: default/gpt2/gpt-2, llama-bpe
//    (Llama 3) or qwen2.
// Control tokens written in the text are recognised only when parse_special is true.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vkspec/gguf.hpp"

namespace vkspec {

// llama.cpp's token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

class Tokenizer {
 public:
  enum class Kind { Spm, Bpe };
  // None: SentencePiece, no pre-split. Gpt2Digits: every digit its own piece, then GPT-2's split
  // within the text between digits (SmolLM, StarCoder).
  enum class Pre { None, Gpt2, Llama3, Qwen2, Gpt2Digits };

  // Throws vkspec::Error naming the file and key for missing or inconsistent metadata.
  static Tokenizer from_gguf(const GgufFile& f);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // add_special: BOS/EOS as the file's add_bos_token/add_eos_token say (llama.cpp's defaults:
  // BOS for "llama", none for "gpt2"). parse_special: control tokens such as "<s>" in the text
  // become their ids instead of being tokenized as text.
  std::vector<uint32_t> encode(std::string_view text, bool add_special = false, bool parse_special = false) const;

  // Bytes of the tokens concatenated (may end in the middle of a UTF-8 character). Control
  // tokens are dropped unless `special`. The leading space the encoder added is removed when
  // the first token is at the start of the text (ids[0] is the first token, or follows BOS),
  // unless `continuation`: the ids follow earlier text (a generation after its prompt), where
  // "▁Paris" after "The capital is" is " Paris".
  std::string decode(std::span<const uint32_t> ids, bool special = false, bool continuation = false) const;

  // The raw bytes one token stands for (byte tokens -> that byte, "▁" -> ' ', byte-level
  // pieces unmapped); control tokens give their text only with `special`.
  std::string token_bytes(uint32_t id, bool special = false) const;

  Kind kind() const;
  Pre pre() const;
  size_t vocab_size() const;
  std::string_view token_text(uint32_t id) const;  // the piece as stored in the vocab
  TokenType token_type(uint32_t id) const;
  int64_t bos() const;  // -1 when the vocab has none
  int64_t eos() const;
  // The ids that end a generation, as llama.cpp's end-of-generation set from the file's keys:
  // eos_token_id, eot_token_id and eom_token_id where present (no duplicates).
  std::vector<uint32_t> end_of_generation() const;
  int64_t unk() const;
  // Keys of the file that were ignored, one sentence each naming the key and why: an
  // eot / eom / padding token id past the vocab (llama.cpp warns and ignores such a key too; an id
  // no token has can never be generated, so it stops nothing). Callers show these as warnings.
  const std::vector<std::string>& ignored_keys() const;
  bool add_bos() const;
  bool add_eos() const;
  bool add_space_prefix() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Streaming detokenizer: feed ids as they are generated, print what comes back. Only complete
// UTF-8 characters are returned, so a character split over several byte tokens appears once
// its last byte arrives. flush() returns what is left (invalid/incomplete bytes as U+FFFD).
class StreamDecoder {
 public:
  // `continuation`: the ids follow earlier text, as in Tokenizer::decode.
  explicit StreamDecoder(const Tokenizer& tok, bool special = false, bool continuation = false)
      : tok_(tok), special_(special), at_start_(!continuation) {}
  std::string push(uint32_t id);
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool special_;
  bool at_start_;         // strip the encoder's leading space from the first text token
  std::string pending_;   // bytes of an incomplete UTF-8 character
};

// Length of the UTF-8 prefix of s that ends on a character boundary of valid characters; an
// invalid byte counts as complete (it will never become valid).
size_t utf8_complete_prefix(std::string_view s);

// s with every byte sequence that is not a valid UTF-8 character (stray continuation bytes,
// overlong forms, surrogates, truncated characters) replaced by U+FFFD, one per maximal
// invalid subpart (Unicode §3.9). Valid text comes back unchanged.
std::string utf8_sanitize(std::string_view s);

}  // namespace vkspec
