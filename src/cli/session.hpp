// What `generate` and `bench` share: loading the verifier, the heads and the tokenizer from the
// command line, and turning a prompt (text or ids) into token ids.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "vkspec/eagle_head.hpp"
#include "vkspec/engine.hpp"
#include "vkspec/tokenizer.hpp"

namespace vkspec::cli {

struct Session {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<EagleHead> head1, head2;
  std::optional<Tokenizer> tokenizer;
  std::string tokenizer_error;  // why the file's tokenizer was refused (empty: it loaded, or there is none)
  EngineOptions engine;
  uint32_t budget_max = 0;  // largest budget the session's buffers must serve
  // --topk: one value, a list (bench runs each; generate trials them) or `auto` (kAutoTopks).
  // engine.topk is the largest, which sizes the heads' rows; topk_given says the user chose.
  std::vector<uint32_t> topks;
  bool topk_given = false;
  uint32_t ctx_len = 0;     // --ctx; not given: default_context(), set when the verifier loads
  // Tokens the run needs in the cache, where the command knows them before the verifier loads
  // (the prompt, -n and a step's slack); 0 when it does not. Sizes the default context.
  uint64_t ctx_need = 0;
  uint32_t vocab = 0;       // the verifier's vocabulary (open() reads it): token ids are checked against it
  int trained_ctx = 0;      // the verifier's trained context (open() reads it; 0 if the file gives none)
  KvType kv_type = KvType::F16;  // --kv-type
  uint64_t reserve_bytes = 0;    // the draft heads' estimated device bytes (load() sets it)
  std::string device;       // --device
  BatchTiles batch_tiles = BatchTiles::Even;  // --batch-tiles even|pow2 (ContextOptions::batch_tiles)

  // Reads -m, --heads, --ctx, --kv-type, --batch-tiles, --depth, --topk, --budget, --device, --strategy and the sampling
  // options --temp --top-k --top-p --min-p --repeat-penalty --repeat-window --seed from args.
  // `budgets`: every budget this session will run (sizes the verifier's rows per pass).
  void load(Args& args, const std::vector<uint32_t>& budgets);
  // `need`, when given, runs right after open() (the tokenizer is there, no device yet) and returns
  // ctx_need: a command that can read its prompt first sizes the default context to it.
  void load(Args& args, const std::vector<uint32_t>& budgets, const std::function<uint64_t()>& need);
  // The verifier alone, in two steps: open() reads -m, --ctx, --kv-type, --device, --batch-tiles,
  // the GGUF (a broken file is refused before a device exists) and its tokenizer when it has one;
  // load_verifier() makes the device and the model with `max_rows` rows per pass.
  void open(Args& args);
  void load_verifier(uint32_t max_rows);
  // "1 2 3" or "1,2,3" (or one a line); `from` names where they came from in errors.
  std::vector<uint32_t> parse_tokens(const std::string& ids, const std::string& from = "--tokens") const;
  std::vector<uint32_t> encode(const std::string& text) const;       // needs the GGUF tokenizer
  std::string decode(const std::vector<uint32_t>& ids, bool continuation = false) const;  // Tokenizer::decode
  // Weight, KV and scratch bytes on the device of the verifier and each head (generate --json).
  nlohmann::json memory_json() const;
};

std::vector<std::string> split_list(const std::string& s, char sep);

// The context with no --ctx: the model's trained context (2048 if the file gives none), capped at
// kDefaultContext unless the run needs more (`need`, 0 if not known). llama.cpp's tools default
// to 4096 too: a 128k-token model does not get a 128k-token cache to score three tokens.
inline constexpr uint32_t kDefaultContext = 4096;
uint32_t default_context(int trained, uint64_t need);

// The top-k values `--topk auto` tries, and `--strategy auto` / `--budget auto` when no --topk is
// given: a narrower tree ranks fewer candidates per level, and on a device where a verify row
// is dear it can win over the wider default (lavapipe, demo: single1 1.30x ar at top-k 2 and
// budget 6, 1.13x at top-k 4); top-k 1 drafts chains, one row per level and head, which suits
// merge-trie (1.26-1.32x at budget 4, depth 5, against 1.10-1.22x at top-k 2). The default
// top-k is the largest, so heads sized for the default fit every trial.
inline constexpr uint32_t kDefaultTopk = 4;
inline const std::vector<uint32_t> kAutoTopks = {1, 2, kDefaultTopk};

}  // namespace vkspec::cli
