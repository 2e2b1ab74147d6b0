// Pre-tokenizer splits for byte-level BPE, each a hand-written matcher equivalent to the regex
// the model was trained with (alternatives tried in order at each position, as a backtracking
// regex engine would):
//   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
//           |\s*[\r\n]+|\s+(?!\S)|\s+
//   qwen2:  as llama3 but \p{N} (one digit per piece)
//   gpt2 with digits (smollm, starcoder): \p{N} first, then gpt2 within each stretch between
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "vkspec/tokenizer.hpp"

namespace vkspec {

// Byte ranges (offset, length) of the pieces; they tile `text` exactly.
std::vector<std::pair<size_t, size_t>> pretokenize(Tokenizer::Pre pre, std::string_view text);

}  // namespace vkspec
