#include "cli/session.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace vkspec::cli {

// A token id: decimal digits only, within 32 bits.
static bool parse_id(const std::string& w, uint32_t& out) {
  if (w.empty() || w.find_first_not_of("0123456789") != std::string::npos) return false;
  const std::string digits = w.substr(std::min(w.find_first_not_of('0'), w.size() - 1));  // 0007 is 7
  if (digits.size() > 10) return false;
  const unsigned long long v = std::stoull(digits);
  if (v > UINT32_MAX) return false;
  out = uint32_t(v);
  return true;
}

std::vector<std::string> split_list(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    // (a space list also splits at commas and any whitespace: a file from Windows ends lines in \r\n)
    if (c == sep || (sep == ' ' && (c == ',' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'))) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// The heads' bytes count in the verifier's fit check; a head that cannot be read is reported
// when it is loaded, not here. `taps`: the most verifier tap rows a head reads (EAGLE-3).
static uint64_t head_reserve_bytes(const std::string& path, uint32_t cap, uint32_t rows, KvType kv, uint32_t& taps) {
  try {
    const HeadBytes b = estimate_head_bytes(path, cap, rows, kv);
    taps = std::max(taps, b.tap_points);
    return b.weights + b.state.kv + b.state.scratch;
  } catch (const Error&) {
    return 0;
  }
}

nlohmann::json Session::memory_json() const {
  auto part = [](uint64_t w, uint64_t kv, uint64_t sc) {
    return nlohmann::json{{"weight_bytes", w}, {"kv_bytes", kv}, {"scratch_bytes", sc}};
  };
  nlohmann::json j = {{"kv_type", kv_type_name(model->kv_type())},
                      {"context", model->capacity()},
                      {"verifier", part(model->weight_bytes(), model->kv_bytes(), model->scratch_bytes())}};
  uint64_t total = model->weight_bytes() + model->kv_bytes() + model->scratch_bytes();
  nlohmann::json hs = nlohmann::json::array();
  for (const EagleHead* h : {head1.get(), head2.get()}) {
    if (!h) continue;
    hs.push_back(part(h->weight_bytes(), h->kv_bytes(), h->scratch_bytes()));
    total += h->weight_bytes() + h->kv_bytes() + h->scratch_bytes();
  }
  j["heads"] = hs;
  j["total_bytes"] = total;
  j["device_local_bytes"] = ctx->caps().device_local_bytes;
  return j;
}

void Session::open(Args& args) {
  const std::string model_path = args.get_one({"m", "model"});
  if (model_path.empty()) throw Error("no model given: -m MODEL.gguf");
  ctx_len = uint32_t(args.get_uint("ctx", 0, UINT32_MAX, 1));  // not given: the model's own (0 was taken as that)
  kv_type = parse_kv_type(args.get("kv-type", "f16"));
  device = args.get("device", "");
  const std::string tiles = args.get("batch-tiles", "even");
  if (tiles != "even" && tiles != "pow2") throw Error("--batch-tiles expects even or pow2, got '" + tiles + "'");
  batch_tiles = tiles == "pow2" ? BatchTiles::PowersOfTwo : BatchTiles::Even;
  // The file first: a broken model is refused before a device is created.
  file = std::make_unique<GgufFile>(GgufFile::open(model_path));
  const LlamaConfig cfg = read_llama_config(*file);
  vocab = uint32_t(cfg.V), trained_ctx = cfg.ctx;
  if (file->has("tokenizer.ggml.model") && file->has("tokenizer.ggml.tokens")) {
    try {
      tokenizer = load_tokenizer(*file);
    } catch (const Error& e) {
      tokenizer_error = e.what();
      std::fprintf(stderr, "warning: %s; text prompts unavailable, use --tokens\n", e.what());
    }
  }
}

uint32_t default_context(int trained, uint64_t need) {
  const uint64_t model = trained > 0 ? uint64_t(trained) : 2048;
  return uint32_t(std::min<uint64_t>(model, std::max<uint64_t>(kDefaultContext, need)));
}

void Session::load_verifier(uint32_t max_rows) {
  ContextOptions co;
  co.device = device;
  co.batch_tiles = batch_tiles;
  ctx = std::make_unique<Context>(co);
  if (ctx_len == 0) ctx_len = default_context(trained_ctx, ctx_need);
  ModelOptions mo;
  mo.context = ctx_len;
  mo.kv_type = kv_type;
  mo.max_rows = max_rows;
  mo.reserve_bytes = reserve_bytes;
  mo.progress = true;
  model = std::make_unique<LlamaModel>(*ctx, *file, mo);
  // Allowed (a user may know the model extrapolates), but never silent: positions past the
  // trained context are outside what the model has seen, and its output there is unreliable.
  if (model->config().ctx > 0 && ctx_len > uint32_t(model->config().ctx))
    std::fprintf(stderr, "warning: --ctx %u exceeds the model's trained context of %d tokens; output past it is unreliable\n",
                 ctx_len, model->config().ctx);
}

void Session::load(Args& args, const std::vector<uint32_t>& budgets) { load(args, budgets, {}); }

void Session::load(Args& args, const std::vector<uint32_t>& budgets, const std::function<uint64_t()>& need) {
  const std::string heads = args.get("heads", "");
  engine.depth = uint32_t(args.get_uint("depth", 4, UINT32_MAX, 1));
  const std::string topk_opt = args.get("topk", "");
  topk_given = !topk_opt.empty();
  topks.clear();
  if (topk_opt == "auto") {
    topks = kAutoTopks;
  } else if (topk_given) {
    for (const std::string& w : option_list("topk", topk_opt)) {
      const uint32_t k = uint32_t(parse_uint("topk", w, UINT32_MAX, 1));
      if (std::find(topks.begin(), topks.end(), k) != topks.end())  // 1,01
        throw Error("option --topk lists " + std::to_string(k) + " more than once");
      topks.push_back(k);
    }
  } else {
    topks = {kDefaultTopk};
  }
  engine.topk = *std::max_element(topks.begin(), topks.end());
  engine.steps_per_submit = uint32_t(args.get_uint("steps-per-submit", 1));
  const std::string pair = args.get("pair-heads", "on");
  if (pair != "on" && pair != "off" && pair != "unpacked")
    throw Error("--pair-heads must be on, off or unpacked, got '" + pair + "'");
  engine.pair_heads = pair != "off";
  engine.pack_pairs = pair == "on";  // unpacked: paired, each weight read through both heads' views
  const std::string stop = args.get("stop", "");
  for (const std::string& w : stop.empty() ? std::vector<std::string>{} : option_list("stop", stop)) {
    uint32_t id = 0;
    if (!parse_id(w, id)) throw Error("--stop expects token ids separated by commas, got '" + w + "'");
    engine.stop_tokens.push_back(id);
  }
  // Decoding operator G and seed (include/vkspec/sample.hpp); defaults are greedy.
  SamplingOptions& so = engine.sampling;
  so.temperature = args.get_float("temp", 0);
  so.top_k = uint32_t(args.get_uint("top-k", 0));
  so.top_p = args.get_float("top-p", 1);
  so.min_p = args.get_float("min-p", 0);
  so.repeat_penalty = args.get_float("repeat-penalty", 1);
  so.repeat_window = uint32_t(args.get_uint("repeat-window", 64));
  so.seed = args.get_uint("seed", 0, UINT64_MAX);
  // With no --temp the run is greedy, which draws nothing: a sampling option given then would be
  // dropped unseen (a forgotten --temp), so it is refused by name. An explicit --temp 0 keeps them
  // (a script comparing greedy and sampled runs passes the same options to each). The repeat
  // penalty shapes greedy decoding too.
  if (!args.has("temp")) {
    std::string unused;
    for (const char* o : {"top-k", "top-p", "min-p", "seed"})
      if (args.has(o)) unused += (unused.empty() ? "--" : ", --") + std::string(o);
    if (!unused.empty())
      throw Error(unused + " set(s) how tokens are sampled, but no --temp was given, so decoding is greedy and samples "
                  "nothing: give --temp T (> 0 samples; 0 is greedy), or drop " + unused);
  }
  open(args);
  if (need) ctx_need = need();
  // Top-k and depth next: the heads' rows per pass are sized from them (the largest top-k).
  // (Each budget is checked by the engine of its run; bench and --budget auto report one that
  // cannot run and go on.)
  if (!heads.empty())
    for (uint32_t k : topks) check_draft_options(k, engine.depth, 1, uint32_t(read_llama_config(*file).V));
  budget_max = budgets.empty() ? 0 : *std::max_element(budgets.begin(), budgets.end());
  // Merge verifies 1 + 2B rows. A budget no strategy's tree can hold at these top-k and depth
  // sizes nothing: its engine refuses it with the range (a --budget 70000 was refused as scratch
  // past the device's buffer range, naming bench-kernels' --cost-rows).
  uint32_t runnable = 0;
  if (!heads.empty())
    for (uint32_t k : topks)
      for (Strategy st : {Strategy::Single1, Strategy::Route, Strategy::Merge, Strategy::MergeTrie})
        runnable = std::max(runnable, std::min(budget_max, max_draft_budget(st, k, engine.depth)));
  const uint64_t rows = std::max<uint64_t>(64, 1 + 2 * uint64_t(runnable));
  // The same head twice is allowed: two drafters that agree (what the agreement tests run).
  auto parts = heads.empty() ? std::vector<std::string>{} : option_list("heads", heads, false);
  if (!heads.empty() && (parts.empty() || parts.size() > 2))
    throw Error("--heads takes one or two head folders separated by a comma, got '" + heads + "'");
  // The heads' device bytes count when checking that the verifier fits the device.
  {
    const LlamaConfig vc = read_llama_config(*file);
    if (ctx_len == 0) ctx_len = default_context(trained_ctx, ctx_need);
    const uint32_t cap = ctx_len;
    const uint32_t head_rows = std::max<uint32_t>({uint32_t(rows), engine.topk, engine.depth + 1});
    uint32_t taps = 0;
    for (const std::string& h : parts) reserve_bytes += head_reserve_bytes(h, cap, head_rows, kv_type, taps);
    reserve_bytes += llama_tap_bytes(vc, uint32_t(rows), taps);  // the verifier's tap rows, one buffer for both heads
  }
  load_verifier(uint32_t(rows));
  if (!heads.empty()) {
    // A draft level runs top-k rows through a head; a step's ingest runs depth + 1.
    const uint32_t rows = std::max<uint32_t>({model->max_rows(), engine.topk, engine.depth + 1});
    head1 = std::make_unique<EagleHead>(*ctx, parts[0], *model, model->capacity(), rows);
    if (parts.size() == 2) head2 = std::make_unique<EagleHead>(*ctx, parts[1], *model, model->capacity(), rows);
  }
}

std::vector<uint32_t> Session::parse_tokens(const std::string& text, const std::string& from) const {
  std::vector<uint32_t> ids;
  // A UTF-8 byte-order mark (a Windows editor's) is no id: skipped, not refused as an invisible '1'.
  const std::string s = text.rfind("\xEF\xBB\xBF", 0) == 0 ? text.substr(3) : text;
  for (const std::string& w : split_list(s, ' ')) {
    uint32_t v = 0;
    if (!parse_id(w, v))
      throw Error(from + " expects token ids (decimal, below 2^32) separated by spaces, commas or newlines, got '" + w + "'");
    if (v >= vocab) throw Error("token id " + w + " is outside the model's vocabulary of " + std::to_string(vocab));
    ids.push_back(uint32_t(v));
  }
  return ids;
}

std::vector<uint32_t> Session::encode(const std::string& text) const {
  if (!tokenizer && !tokenizer_error.empty())
    throw Error("the tokenizer of " + file->path() + " was refused (" + tokenizer_error + "): give --tokens instead of -p");
  if (!tokenizer) throw Error(file->path() + " carries no tokenizer (tokenizer.ggml.*): give --tokens instead of -p");
  return tokenizer->encode(text, tokenizer->add_bos(), false);
}

std::string Session::decode(const std::vector<uint32_t>& ids, bool continuation) const {
  if (!tokenizer) return {};
  return tokenizer->decode(ids, false, continuation);
}

}  // namespace vkspec::cli
