#include "vkspec/eagle_head.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "vkspec/dtype.hpp"
#include "vkspec/safetensors.hpp"
#include "vkspec/torch_file.hpp"

namespace vkspec {

namespace {

// A head with a NaN or Inf weight would only ever draft garbage (or, before the tree kernels
// ranked NaN last, corrupt the tree): refused at load, naming the tensor and element.
const SafeTensor& finite(const SafeTensor& t, const std::string& name, const std::string& file) {
  int64_t bad = -1;
  const uint64_t n = t.dtype == "F32" ? t.bytes / 4 : t.bytes / 2;
  if (t.dtype == "F32") bad = first_non_finite_f32(t.data, n);
  else if (t.dtype == "F16") bad = first_non_finite_f16(t.data, n);
  else if (t.dtype == "BF16") bad = first_non_finite_bf16(t.data, n);
  if (bad >= 0)
    throw Error(file + ": tensor " + name + " holds a NaN or Inf at element " + std::to_string(bad) +
                " (the file is damaged)");
  return t;
}

// f32 values (any safetensors dtype) → device weight in f16 (f32 stays f32).
DeviceWeight upload_rows(Context& ctx, const std::vector<const SafeTensor*>& parts) {
  const uint64_t K = parts[0]->shape.back();
  bool all_f32 = true;
  uint64_t N = 0;
  for (auto* p : parts) {
    all_f32 &= p->dtype == "F32";
    N += p->shape[0];
  }
  std::vector<uint8_t> raw;
  for (auto* p : parts) {
    if (all_f32) {
      raw.insert(raw.end(), p->data, p->data + p->bytes);
    } else if (p->dtype == "F16") {
      raw.insert(raw.end(), p->data, p->data + p->bytes);
    } else {
      for (float x : p->to_f32()) {
        uint16_t h = f32_to_f16(x);
        raw.push_back(uint8_t(h & 0xff));
        raw.push_back(uint8_t(h >> 8));
      }
    }
  }
  return upload_weight(ctx, all_f32 ? WeightType::F32 : WeightType::F16, uint32_t(N), uint32_t(K), raw.data());
}

// The JSON value under `key` as the runtime reads it; every failure names the file and the key.
struct ConfigReader {
  const nlohmann::json& j;
  const std::string& path;

  std::string where(const char* key) const { return path + ": key '" + key + "'"; }
  const nlohmann::json* find(const char* key) const {
    auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
  }
  // An exact integer in 1..max: no truncation of 2^32 + 192 to 192, no 192.5 read as 192.
  int integer(const char* key, const nlohmann::json& v) const {
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      return check_positive_int(u > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(u), kMaxHeadDim, where(key));
    }
    if (v.is_number_integer()) return check_positive_int(v.get<int64_t>(), kMaxHeadDim, where(key));
    if (v.is_number_float())
      throw Error(where(key) + ": expected an integer, found " + (std::isfinite(v.get<double>()) ? v.dump() : "a number out of range"));
    throw Error(where(key) + ": expected an integer, found " + v.type_name());
  }
  int integer(const char* key) const {
    const nlohmann::json* v = find(key);
    if (!v) throw Error(where(key) + ": missing (expected an integer)");
    return integer(key, *v);
  }
  double number(const char* key, double fallback) const {
    const nlohmann::json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number()) throw Error(where(key) + ": expected a number, found " + v->type_name());
    return v->get<double>();
  }
};

}  // namespace

HeadConfig parse_head_config(std::string_view json_text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(path + ": expected a JSON object, found " + std::string(j.type_name()));
  const ConfigReader r{j, path};
  HeadConfig c;
  c.C = r.integer("hidden_size");
  c.H = r.integer("num_attention_heads");
  const nlohmann::json* kv = r.find("num_key_value_heads");
  c.Hkv = kv ? r.integer("num_key_value_heads", *kv) : c.H;
  c.F = r.integer("intermediate_size");
  c.V = r.integer("vocab_size");
  c.rms_eps = check_rms_eps(r.number("rms_norm_eps", 1e-6), r.where("rms_norm_eps"));
  c.rope_theta = check_rope_theta(r.number("rope_theta", 10000.0), r.where("rope_theta"));
  if (c.C % c.H != 0 || c.H % c.Hkv != 0)
    throw Error(path + ": head counts " + std::to_string(c.H) + "/" + std::to_string(c.Hkv) +
                " (num_attention_heads/num_key_value_heads) do not divide hidden_size " + std::to_string(c.C));
  c.D = c.C / c.H;
  // Published configs may state the head width; one that disagrees is another layout.
  if (const nlohmann::json* hd = r.find("head_dim"); hd && r.integer("head_dim", *hd) != c.D)
    throw Error(r.where("head_dim") + ": expected hidden_size / num_attention_heads = " + std::to_string(c.D) +
                ", found " + hd->dump());
  return c;
}

HeadConfig read_head_config(const std::string& config_path) {
  std::ifstream f(config_path, std::ios::binary);
  if (!f) throw Error(config_path + ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_head_config(ss.str(), config_path);
}

void check_head_fits(const HeadConfig& c, const LlamaConfig& vc, const std::string& head_path) {
  auto refuse = [&](const std::string& what) {
    throw Error("draft head " + head_path + " does not fit the verifier: " + what);
  };
  if (c.C != vc.C) refuse("hidden_size " + std::to_string(c.C) + " != verifier width " + std::to_string(vc.C));
  if (c.V != vc.V) refuse("vocab_size " + std::to_string(c.V) + " != verifier vocab " + std::to_string(vc.V));
  if (c.D > int(kAttentionMaxHeadDim) || c.D % 2) refuse("head width " + std::to_string(c.D) + " unsupported");
}

namespace {
// Widths of a head state's scratch buffers (each (max_rows + 1, width) f32, the + 1 the root
// slot): cat, x, xn, qkv, attn, gu, act, h, logits.
std::array<uint64_t, 9> head_scratch_widths(const HeadConfig& c) {
  const uint32_t C = uint32_t(c.C), HD = uint32_t(c.H * c.D), KV = uint32_t(c.Hkv * c.D);
  return {pad4(2 * C), pad4(C), pad4(C), pad4(HD + 2 * KV), pad4(HD), pad4(uint32_t(2 * c.F)), pad4(uint32_t(c.F)),
          pad4(C), pad4(uint32_t(c.V))};
}
uint64_t head_kv_bytes(const HeadConfig& c, uint32_t capacity, KvType t) {  // one of K, V
  return std::max<uint64_t>(16, uint64_t(capacity) * uint64_t(c.Hkv) * c.D * kv_value_bytes(t));
}
}  // namespace

HeadPaths head_paths(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  if (!fs::is_directory(p, ec)) return {p.string(), (p.parent_path() / "config.json").string()};
  // Both present: model.safetensors, which needs no pickle interpreter.
  fs::path weights = p / "model.safetensors";
  if (!fs::exists(weights, ec) && fs::exists(p / "pytorch_model.bin", ec)) weights = p / "pytorch_model.bin";
  return {weights.string(), (p / "config.json").string()};
}

StateBytes head_state_bytes(const HeadConfig& c, uint32_t capacity, uint32_t max_rows, KvType kv_type) {
  StateBytes b;
  b.kv = 2 * head_kv_bytes(c, capacity, kv_type);
  for (uint64_t w : head_scratch_widths(c)) b.scratch += (uint64_t(max_rows) + 1) * w * 4;
  return b;
}

HeadBytes estimate_head_bytes(const std::string& path, uint32_t capacity, uint32_t max_rows, KvType kv_type) {
  const HeadPaths files = head_paths(path);
  std::error_code ec;
  const uintmax_t n = std::filesystem::file_size(files.weights, ec);
  if (ec) throw Error("draft head " + path + ": cannot read " + files.weights + ": " + ec.message());
  return {uint64_t(n), head_state_bytes(read_head_config(files.config), capacity, max_rows, kv_type)};
}

EagleHeadWeights::EagleHeadWeights(Context& ctx, const std::string& path, const LlamaConfig& verifier, bool check_finite) {
  namespace fs = std::filesystem;
  const HeadPaths files = head_paths(path);
  const fs::path weights(files.weights), cj(files.config);
  path_ = files.weights;
  if (!fs::exists(weights))
    throw Error("draft head " + path + ": no model.safetensors (or pytorch_model.bin) at " + weights.string());
  if (!fs::exists(cj)) throw Error("draft head " + path + ": no config.json at " + cj.string());
  cfg_ = read_head_config(cj.string());
  check_head_fits(cfg_, verifier, path);

  // Either format yields the same SafeTensors; the file object owns the bytes they point to.
  const std::string ext = weights.extension().string();
  const bool torch = ext == ".bin" || ext == ".pt" || ext == ".pth";
  std::optional<SafetensorsFile> st_file;
  std::optional<TorchFile> torch_file;
  const std::map<std::string, SafeTensor>& tensors =
      torch ? torch_file.emplace(TorchFile::open(path_)).tensors() : st_file.emplace(SafetensorsFile::open(path_)).tensors();
  struct Checked {  // every tensor the head reads is a float and passes the NaN/Inf check on its way in
    const std::map<std::string, SafeTensor>& tensors;
    const std::string& file;
    bool check;
    const SafeTensor& get(const std::string& name, std::vector<uint64_t> shape) const {
      const SafeTensor& t = find_tensor(tensors, file, name, shape);
      if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16")
        throw Error(file + ": tensor " + name + " has dtype " + t.dtype + ", expected F32, F16 or BF16");
      return check ? finite(t, name, file) : t;
    }
  } f{tensors, path_, check_finite};
  const uint64_t C = cfg_.C, F = cfg_.F, HD = uint64_t(cfg_.H) * cfg_.D, KV = uint64_t(cfg_.Hkv) * cfg_.D;
  fc_ = upload_rows(ctx, {&f.get("fc.weight", {C, 2 * C})});
  fc_bias_ = upload_f32(ctx, f.get("fc.bias", {C}).to_f32());
  wqkv_ = upload_rows(ctx, {&f.get("layers.0.self_attn.q_proj.weight", {HD, C}),
                            &f.get("layers.0.self_attn.k_proj.weight", {KV, C}),
                            &f.get("layers.0.self_attn.v_proj.weight", {KV, C})});
  wo_ = upload_rows(ctx, {&f.get("layers.0.self_attn.o_proj.weight", {C, HD})});
  wgu_ = upload_rows(ctx, {&f.get("layers.0.mlp.gate_proj.weight", {F, C}), &f.get("layers.0.mlp.up_proj.weight", {F, C})});
  wdown_ = upload_rows(ctx, {&f.get("layers.0.mlp.down_proj.weight", {C, F})});
  post_norm_ = upload_f32(ctx, f.get("layers.0.post_attention_layernorm.weight", {C}).to_f32());

}

uint64_t EagleHeadWeights::bytes() const {
  return fc_.bytes() + wqkv_.bytes() + wo_.bytes() + wgu_.bytes() + wdown_.bytes() + fc_bias_.size() + post_norm_.size();
}

EagleHead::EagleHead(Context& ctx, const std::string& path, const LlamaModel& verifier, uint32_t capacity,
                     uint32_t max_rows, bool check_finite)
    : EagleHead(std::make_shared<const EagleHeadWeights>(ctx, path, verifier.config(), check_finite), verifier, capacity,
                max_rows) {}

EagleHead::EagleHead(std::shared_ptr<const EagleHeadWeights> weights, const LlamaModel& verifier, uint32_t capacity,
                     uint32_t max_rows)
    : w_(std::move(weights)), verifier_(verifier), cap_(capacity), max_rows_(max_rows) {
  const HeadConfig& c = w_->config();
  Context& ctx = verifier.context();
  check_head_fits(c, verifier.config(), w_->path());
  kv_type_ = verifier.kv_type();  // the heads' caches follow the verifier's type
  if (kv_type_ == KvType::F16 && c.D % 2 != 0)
    throw Error("draft head " + w_->path() + ": head width " + std::to_string(c.D) +
                " is odd; an f16 KV cache packs value pairs: use --kv-type f32");
  const uint64_t kv_bytes = head_kv_bytes(c, cap_, kv_type_);
  if (kv_bytes > ctx.caps().max_storage_buffer_range)
    throw Error("draft head " + w_->path() + ": a KV cache of " + std::to_string(cap_) + " tokens needs " +
                std::to_string(kv_bytes >> 20) + " MiB, more than the device's storage-buffer range of " +
                std::to_string(ctx.caps().max_storage_buffer_range >> 20) + " MiB; use a smaller --ctx");
  k_ = Buffer(ctx, kv_bytes);
  v_ = Buffer(ctx, kv_bytes);
  const std::array<uint64_t, 9> w = head_scratch_widths(c);
  Buffer* scratch[9] = {&cat_, &x_, &xn_, &qkv_, &attn_, &gu_, &act_, &h_, &logits_};
  for (size_t i = 0; i < w.size(); ++i) *scratch[i] = Buffer(ctx, (uint64_t(max_rows_) + 1) * w[i] * 4);
}

uint64_t EagleHead::scratch_bytes() const {
  return cat_.size() + x_.size() + qkv_.size() + attn_.size() + xn_.size() + gu_.size() + act_.size() + h_.size() +
         logits_.size();
}

void EagleHead::forward(Sequence& seq, const ForwardArgs& a) {
  const EagleHeadWeights& w = *w_;
  const HeadConfig& cfg = w.cfg_;
  const uint32_t N = a.N, C = uint32_t(cfg.C), F = uint32_t(cfg.F), H = uint32_t(cfg.H), Hkv = uint32_t(cfg.Hkv),
                 D = uint32_t(cfg.D), HD = H * D, KV = Hkv * D, QKV = pad4(HD + 2 * KV), C2 = pad4(2 * C);
  // Shapes are the caller's to check (Engine::check_fits); dynamic slots are checked there too.
  if (N == 0 || N > max_rows_ || (a.kv_slot.fixed() && a.kv_slot.base + N > cap_))
    throw Error("draft head forward over " + std::to_string(N) + " rows at slot " + std::to_string(a.kv_slot.base) +
                " does not fit (max rows " + std::to_string(max_rows_) + ", capacity " + std::to_string(cap_) + ")");
  const Mat cat{&cat_, 0, C2}, x{&x_, 0, pad4(C)}, xn{&xn_, 0, pad4(C)}, qkv{&qkv_, 0, QKV}, att{&attn_, 0, pad4(HD)},
      gu{&gu_, 0, pad4(2 * F)}, act{&act_, 0, pad4(F)}, h{&h_, 0, pad4(C)};

  // concat(embed(token), feature): embedding first, as the EAGLE reference code does.
  embed(seq, verifier_.embedding(), *a.tokens, a.tok_offset, cat, N);
  regions_.clear();
  for (uint32_t r = 0; r < N; ++r)
    regions_.push_back({uint64_t(a.features.offset + r * a.features.stride) * 4, (uint64_t(r) * C2 + C) * 4,
                        uint64_t(C) * 4});
  seq.copy(*a.features.buf, cat_, regions_);
  MatmulArgs fa;
  fa.bias = &w.fc_bias_;
  matmul(seq, w.fc_, cat, x, N, fa);  // x = fc(...) is also the residual stream

  // The decoder layer, without input_layernorm (EAGLE's layer 0).
  matmul(seq, w.wqkv_, x, qkv, N);
  const RopePositions pos = a.pos ? RopePositions::from_table(*a.pos, a.pos_offset) : RopePositions::run(a.pos_first, a.pos_step);
  rope(seq, qkv, pos, N, H + Hkv, D, D, {cfg.rope_theta, RopeMode::Halves});  // HF layout
  kv_write(seq, qkv, HD, HD + KV, N, KV, KvLayer{&k_, &v_, 0, 0, kv_type_}, a.kv_slot);
  AttentionArgs at;
  at.N = N, at.H = H, at.Hkv = Hkv, at.D = D, at.t = a.t;
  at.q = qkv, at.o = att, at.k_cache = &k_, at.v_cache = &v_, at.kv_type = kv_type_;
  at.mask = a.mask, at.mask_offset = a.mask_offset, at.mask_words = a.mask_words, at.causal = a.mask == nullptr;
  attention(seq, at);
  MatmulArgs acc;
  acc.accumulate = true;
  matmul(seq, w.wo_, att, x, N, acc);
  MatmulArgs ga;  // post_attention_layernorm and silu(gate) · up folded into the gate|up matmul
  ga.norm = &w.post_norm_, ga.norm_eps = cfg.rms_eps, ga.norm_scratch = xn;
  ga.glu = true, ga.glu_scratch = gu;
  matmul(seq, w.wgu_, x, act, N, ga);
  matmul(seq, w.wdown_, act, x, N, acc);
  // h goes straight to the verifier's lm_head, no norm (EAGLE-1/2).
  seq.copy(x_, 0, h_, 0, uint64_t(N) * pad4(C) * 4);
  if (a.root) {
    copy_rows(seq, h, a.root_row, h.row(root_slot()), 1, C);
    matmul(seq, verifier_.lm_head(), h.row(root_slot()), logits().row(root_slot()), 1);
  } else if (a.logits_from < N) {
    matmul(seq, verifier_.lm_head(), h.row(a.logits_from), logits().row(a.logits_from), N - a.logits_from);
  }
}

}  // namespace vkspec
