// Shared state of the tokenizers (private to src/tokenizer/).
#pragma once

#include <array>
#include <string>
#include <unordered_map>
#include <vector>

#include "vkspec/error.hpp"
#include "vkspec/tokenizer.hpp"

namespace vkspec {

struct Tokenizer::Impl {
  std::string path;  // for error messages
  Kind kind = Kind::Spm;
  Pre pre = Pre::None;
  std::vector<std::string> tokens;  // owned copies: the GgufFile may be closed after loading
  std::vector<float> scores;        // empty for gpt2 vocabs without scores
  std::vector<TokenType> types;
  std::unordered_map<std::string_view, uint32_t> index;  // views into `tokens`
  // BPE: (left id << 32 | right id) -> rank (lower merges first) and the merged token.
  struct Merge {
    uint32_t rank, result;
  };
  std::unordered_map<uint64_t, Merge> merges;
  int64_t bos = -1, eos = -1, unk = -1, eot = -1, eom = -1;
  std::vector<std::string> ignored;  // Tokenizer::ignored_keys
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  bool ignore_merges = false;  // llama3: a piece that is already a token is not split
  static constexpr uint32_t kNone = 0xffffffffu;
  std::array<uint32_t, 256> byte_token{};  // SPM: id of <0xNN>; BPE: id of the mapped byte
  // Tokens matched literally in text: their ids sorted by (text, id). At a place of the text the
  // range of literals that match it so far narrows byte by byte (two binary searches a byte), so
  // 60k user-defined tokens cost little more per byte than one (a list scanned at every byte took
  // minutes for 1 MB of text), and the set takes 4 bytes a literal (a trie's nodes would take
  // ~40 bytes per byte of literal text: gigabytes for a hostile vocabulary).
  struct LiteralSet {
    std::vector<uint32_t> ids;
    void build(std::vector<uint32_t> literal_ids, const std::vector<std::string>& tokens);
    // The longest literal text[i..] starts with (its id; the lowest of equal texts), or kNone.
    uint32_t longest_at(std::string_view text, size_t i, const std::vector<std::string>& tokens) const;
    bool empty() const { return ids.empty(); }
  };
  LiteralSet literal_control;  // control/unknown: only with parse_special
  LiteralSet literal_user;     // user-defined: always (llama.cpp does the same)

  uint32_t find(std::string_view s) const {
    auto it = index.find(s);
    return it == index.end() ? kNone : it->second;
  }
  // A byte of the text with no token (no byte token, no <unk>): refused naming it and the file.
  [[noreturn]] void throw_unencodable_byte(uint8_t b) const {
    static const char* hex = "0123456789ABCDEF";
    const std::string nn{hex[b >> 4], hex[b & 15]};
    throw Error(path + ": the text holds byte 0x" + nn + ", which the vocabulary has no token for (no " +
                (kind == Kind::Spm ? "<0x" + nn + ">" : std::string("byte-level")) +
                " token and no unknown token, tokenizer.ggml.unknown_token_id): it cannot be encoded");
  }
  void encode_spm(std::string_view text, std::vector<uint32_t>& out) const;
  void encode_bpe(std::string_view text, std::vector<uint32_t>& out) const;
};

}  // namespace vkspec
