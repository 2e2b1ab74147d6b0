#include "vkspec/eagle_head.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "vkspec/dtype.hpp"
#include "vkspec/safetensors.hpp"
#include "vkspec/torch_file.hpp"

#include "decoder_layer.hpp"
#include "formats/json_excerpt.hpp"
#include "formats/regular_file.hpp"

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

// True when every value is an f16 exactly, so storing the weight in f16 alters nothing.
bool f16_exact(const std::vector<float>& v) {
  for (float x : v)
    if (f16_to_f32(f32_to_f16(x)) != x) return false;
  return true;
}

// The rows of `parts` as one device weight: in f16 when every part is F16 or every value is an
// f16 exactly, else in f32 (a bf16 or f32 value past f16's range would become Inf, a tiny one
// would lose its bits: the weights are kept as the file gives them). glu: `parts` are the gate
// rows and the up rows of a gated MLP, for the matmul that folds act(gate) · up in.
DeviceWeight upload_rows(Context& ctx, const std::vector<const SafeTensor*>& parts, bool glu = false) {
  const uint64_t K = parts[0]->shape.back();
  bool all_f16 = true;
  uint64_t N = 0;
  for (auto* p : parts) {
    all_f16 &= p->dtype == "F16";
    N += p->shape[0];
  }
  std::vector<uint8_t> raw;
  WeightType t = WeightType::F16;
  if (all_f16) {
    for (auto* p : parts) raw.insert(raw.end(), p->data, p->data + p->bytes);
  } else {
    std::vector<float> v;
    for (auto* p : parts) {
      const std::vector<float> f = p->to_f32();
      v.insert(v.end(), f.begin(), f.end());
    }
    if (f16_exact(v)) {
      raw.resize(v.size() * 2);
      for (size_t i = 0; i < v.size(); ++i) {
        const uint16_t h = f32_to_f16(v[i]);
        raw[2 * i] = uint8_t(h & 0xff), raw[2 * i + 1] = uint8_t(h >> 8);
      }
    } else {
      t = WeightType::F32;
      raw.resize(v.size() * 4);
      std::memcpy(raw.data(), v.data(), raw.size());
    }
  }
  return glu ? upload_glu_weight(ctx, t, uint32_t(N / 2), uint32_t(K), raw.data())
             : upload_weight(ctx, t, uint32_t(N), uint32_t(K), raw.data());
}

// The JSON value under `key` as the runtime reads it; every failure names the file and the key.
struct ConfigReader {
  const nlohmann::json& j;
  const std::string& path;
  const char* prefix = "";  // a nested object's keys are named "<prefix><key>"

  std::string where(const char* key) const { return path + ": key '" + prefix + key + "'"; }
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
      throw Error(where(key) + ": expected an integer, found " + (std::isfinite(v.get<double>()) ? json_excerpt(v) : "a number out of range"));
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
  // A number, or the fallback when absent, that must satisfy ok (what it must be: `expected`).
  double number(const char* key, double fallback, bool (*ok)(double), const char* expected) const {
    const double v = number(key, fallback);
    if (!ok(v)) throw Error(where(key) + ": expected " + expected + ", found " + (find(key) ? json_excerpt(*find(key)) : "nothing"));
    return v;
  }
};

// rope_scaling (Hugging Face's rope_type, or the older `type`): see HeadConfig. Llama 3's
// frequencies as transformers' _compute_llama3_parameters makes them, expressed as divisors: a
// pair whose wavelength 2π/f is shorter than original / high_freq_factor keeps f (1), one longer
// than original / low_freq_factor gets f / factor, and between them f · ((1 − s) / factor + s) with
// s = (original / wavelength − low) / (high − low).
void read_head_rope_scaling(const nlohmann::json& rs, const std::string& path, HeadConfig& c) {
  if (!rs.is_object())
    throw Error(path + ": key 'rope_scaling': expected an object or null, found " + std::string(rs.type_name()));
  const ConfigReader r{rs, path, "rope_scaling."};
  const char* type_key = r.find("rope_type") ? "rope_type" : "type";
  const nlohmann::json* t = r.find(type_key);
  if (!t || !t->is_string()) throw Error(r.where(type_key) + ": expected a string naming the scaling");
  const std::string type = t->get<std::string>();
  if (type == "default") return;
  if (type != "linear" && type != "llama3")
    throw Error(r.where(type_key) + ": RoPE scaling '" + type + "' is not implemented for draft heads (linear, llama3)");
  auto positive = [](double v) { return v > 0.0 && std::isfinite(v) && v < 1e30; };
  const double factor = r.number("factor", 0.0, positive, "a positive number");
  if (type == "linear") {
    c.rope_freq_scale = float(1.0 / factor);
    return;
  }
  const double low = r.number("low_freq_factor", 1.0, positive, "a positive number");
  const double high = r.number("high_freq_factor", 4.0, positive, "a positive number");
  if (!(high > low))
    throw Error(r.where("high_freq_factor") + ": expected more than low_freq_factor " + std::to_string(low));
  const nlohmann::json* o = r.find("original_max_position_embeddings");
  if (!o) throw Error(r.where("original_max_position_embeddings") + ": missing (llama3 scaling needs it)");
  const double original = r.integer("original_max_position_embeddings", *o);
  c.rope_divisors.resize(size_t(c.D) / 2);
  for (size_t i = 0; i < c.rope_divisors.size(); ++i) {
    const double f = std::pow(double(c.rope_theta), -2.0 * double(i) / c.D);
    const double wavelength = 2 * 3.14159265358979323846 / f;
    double d = 1.0;
    if (wavelength > original / low) {
      d = factor;
    } else if (wavelength >= original / high) {
      const double s = (original / wavelength - low) / (high - low);
      d = 1.0 / ((1.0 - s) / factor + s);
    }
    c.rope_divisors[i] = float(d);
  }
}

}  // namespace

// Every tensor a head reads is a float of the expected shape and passes the NaN/Inf check on its way in.
struct HeadTensors {
  const std::map<std::string, SafeTensor>& tensors;
  const std::string& file;
  bool check;
  std::set<std::string>* read;  // every name looked up (the unread ones are refused at the end)
  const SafeTensor& get(const std::string& name, std::vector<uint64_t> shape) const {
    read->insert(name);
    const SafeTensor& t = find_tensor(tensors, file, name, shape);
    if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16")
      throw Error(file + ": tensor " + name + " has dtype " + t.dtype + ", expected F32, F16 or BF16");
    return check ? finite(t, name, file) : t;
  }
};

// A tensor the head does not read would be silently dropped (an input_layernorm, a bias, a
// second layer): refused, naming it. Two kinds are known and harmless: EAGLE-1/2's
// embed_tokens.weight, the base model's embedding that the reference code also takes from the
// verifier, and a saved rotary_emb.inv_freq buffer, recomputed from rope_theta and rope_scaling.
static void refuse_unread(const std::map<std::string, SafeTensor>& tensors, const std::set<std::string>& read, bool eagle3,
                          const std::string& path) {
  for (const auto& [name, t] : tensors) {
    if (read.count(name) || (!eagle3 && name == "embed_tokens.weight") || name.ends_with("rotary_emb.inv_freq")) continue;
    // A projection's bias is read where config.json switches it on: say which switch.
    // (fc.bias is unread only where "bias" is false: its default is true.)
    const char* flag = !name.ends_with("_proj.bias")               ? nullptr
                       : name.find("self_attn.") != std::string::npos ? "attention_bias"
                                                                      : "mlp_bias";
    const std::string why = name == "fc.bias" && !eagle3 ? "; config.json sets bias to false"
                            : flag                       ? std::string("; config.json does not set ") + flag + " to true"
                                                         : std::string();
    throw Error(path + ": tensor " + name + " is not part of " + (eagle3 ? "an EAGLE-3" : "an EAGLE-1/2") +
                " head as vkspec computes it (it would be ignored, computing another head)" + why);
  }
}

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
                ", found " + json_excerpt(*hd));
  if (const nlohmann::json* rs = r.find("rope_scaling"); rs && !rs->is_null()) read_head_rope_scaling(*rs, path, c);
  // One gated-MLP decoder layer is what a head computes; its gate's activation as Hugging Face's
  // ACT2FN names it (gelu_new is the same tanh formula as gelu_pytorch_tanh). Another is refused.
  if (const nlohmann::json* a = r.find("hidden_act"); a && !a->is_null()) {
    static constexpr std::pair<const char*, GluAct> kActs[] = {{"silu", GluAct::Silu},
                                                               {"swish", GluAct::Silu},
                                                               {"gelu", GluAct::GeluErf},
                                                               {"gelu_pytorch_tanh", GluAct::GeluTanh},
                                                               {"gelu_new", GluAct::GeluTanh}};
    bool known = false;
    for (const auto& [name, act] : kActs)
      if (a->is_string() && a->get<std::string>() == name) c.hidden_act = act, known = true;
    if (!known)
      throw Error(r.where("hidden_act") + ": " + json_excerpt(*a) +
                  " is not implemented (draft heads compute silu, swish, gelu, gelu_pytorch_tanh, gelu_new)");
  }
  if (const nlohmann::json* n = r.find("num_hidden_layers"); n && r.integer("num_hidden_layers", *n) != 1)
    throw Error(r.where("num_hidden_layers") + ": " + json_excerpt(*n) + " layers; a draft head is one decoder layer");
  for (auto [k, flag] : {std::pair{"attention_bias", &c.attention_bias}, std::pair{"mlp_bias", &c.mlp_bias},
                         std::pair{"bias", &c.fc_bias}})
    if (const nlohmann::json* b = r.find(k); b && !b->is_null()) {
      if (!b->is_boolean()) throw Error(r.where(k) + ": " + json_excerpt(*b) + " is not true or false");
      *flag = b->get<bool>();
    }
  // EAGLE-3: named so by an architectures entry (LlamaForCausalLMEagle3, Eagle3LlamaForCausalLM)
  // or by the key only EAGLE-3 heads have.
  if (const nlohmann::json* arch = r.find("architectures"); arch && arch->is_array())
    for (const nlohmann::json& e : *arch)
      if (e.is_string()) {
        std::string n = e.get<std::string>();
        std::transform(n.begin(), n.end(), n.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
        c.eagle3 |= n.find("eagle3") != std::string::npos;
      }
  c.eagle3 |= r.find("draft_vocab_size") != nullptr;
  if (!c.eagle3) return c;
  const nlohmann::json* dv = r.find("draft_vocab_size");
  c.draft_V = dv ? r.integer("draft_vocab_size", *dv) : c.V;
  if (c.draft_V > c.V)
    throw Error(r.where("draft_vocab_size") + ": " + std::to_string(c.draft_V) + " is larger than vocab_size " +
                std::to_string(c.V));
  const nlohmann::json* tc = r.find("target_hidden_size");
  c.target_C = tc && !tc->is_null() ? r.integer("target_hidden_size", *tc) : c.C;
  const nlohmann::json* ids = r.find("eagle_aux_hidden_state_layer_ids");
  if (const nlohmann::json* ec = r.find("eagle_config"); !ids && ec && ec->is_object())
    if (auto it = ec->find("eagle_aux_hidden_state_layer_ids"); it != ec->end()) ids = &*it;
  if (ids && !ids->is_null()) {
    const std::string w = r.where("eagle_aux_hidden_state_layer_ids");
    if (!ids->is_array() || ids->size() != 3)
      throw Error(w + ": expected an array of 3 layer ids (fc reads three verifier layers), found " + json_excerpt(*ids));
    for (size_t i = 0; i < 3; ++i) {
      const nlohmann::json& v = (*ids)[i];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= kMaxHeadDim)
        throw Error(w + ": entry " + std::to_string(i) + " is " + json_excerpt(v) + ", expected a layer index >= 0");
      c.aux_layer_ids.push_back(int(v.get<int64_t>()));
    }
  }
  return c;
}

std::vector<uint32_t> eagle3_tap_points(const HeadConfig& c, int L, const std::string& head_path) {
  std::vector<int> p;
  if (c.aux_layer_ids.empty()) {
    p = {2, L / 2, L - 3};
    for (int x : p)
      if (x < 0 || x > L)
        throw Error("EAGLE-3 head " + head_path + ": the default taps (inputs of layers 2, L/2, L-3) need a verifier "
                    "of at least 3 layers, this one has " + std::to_string(L) +
                    "; give eagle_aux_hidden_state_layer_ids in config.json");
  } else {
    for (size_t i = 0; i < c.aux_layer_ids.size(); ++i) {
      const int id = c.aux_layer_ids[i];
      if (id >= L)
        throw Error("EAGLE-3 head " + head_path + ": eagle_aux_hidden_state_layer_ids entry " + std::to_string(i) +
                    " is layer " + std::to_string(id) + ", but the verifier has " + std::to_string(L) +
                    " layers (ids 0.." + std::to_string(L - 1) + ")");
      p.push_back(id + 1);  // the output of layer id is the input of layer id + 1
    }
  }
  return {p.begin(), p.end()};
}

HeadConfig read_head_config(const std::string& config_path) {
  require_regular_file(config_path, "head config");
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
  if (c.eagle3) {
    if (c.target_C != vc.C)
      refuse("target_hidden_size " + std::to_string(c.target_C) + " != verifier width " + std::to_string(vc.C));
    eagle3_tap_points(c, vc.L, head_path);
  } else if (c.C != vc.C) {
    refuse("hidden_size " + std::to_string(c.C) + " != verifier width " + std::to_string(vc.C));
  }
  if (c.V != vc.V) refuse("vocab_size " + std::to_string(c.V) + " != verifier vocab " + std::to_string(vc.V));
  if (c.D > int(kAttentionMaxHeadDim) || c.D % 2) refuse("head width " + std::to_string(c.D) + " unsupported");
}

namespace {
// Widths of a head state's scratch buffers (each (max_rows + 1, width) f32, the + 1 the root
// slot): cat, x, xn, qkv, attn, gu, act, h, logits.
std::array<uint64_t, 8> head_scratch_widths(const HeadConfig& c) {
  const uint32_t C = uint32_t(c.C), HD = uint32_t(c.H * c.D), KV = uint32_t(c.Hkv * c.D);
  return {pad4(2 * C), pad4(C), pad4(C), pad4(HD + 2 * KV), pad4(HD), pad4(uint32_t(2 * c.F)), pad4(uint32_t(c.F)),
          pad4(uint32_t(c.V))};
}
uint64_t head_kv_bytes(const HeadConfig& c, uint32_t capacity, KvType t) {  // one of K, V
  return std::max<uint64_t>(16, uint64_t(capacity) * uint64_t(c.Hkv) * c.D * kv_value_bytes(t));
}
}  // namespace

HeadPaths head_paths(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  if (!fs::is_directory(p, ec)) {
    // A file is the head's weights, its config.json beside it. The config itself named here would
    // be read as weights and fail on a header length; say what to give instead.
    if (p.extension() == ".json")
      throw Error("draft head " + path + " is a JSON file; give the head's folder (holding config.json and model.safetensors) or its weights file");
    return {p.string(), (p.parent_path() / "config.json").string()};
  }
  // Both present: model.safetensors, which needs no pickle interpreter.
  fs::path weights = p / "model.safetensors";
  if (!fs::exists(weights, ec) && fs::exists(p / "pytorch_model.bin", ec)) weights = p / "pytorch_model.bin";
  return {weights.string(), (p / "config.json").string()};
}

namespace {
DecoderLayerShape heads_of(const HeadConfig& c) {
  DecoderLayerShape s;
  s.H = uint32_t(c.H), s.Hkv = uint32_t(c.Hkv), s.D = uint32_t(c.D);
  return s;
}
}  // namespace

StateBytes head_state_bytes(const HeadConfig& c, uint32_t capacity, uint32_t max_rows, KvType kv_type) {
  StateBytes b;
  b.kv = 2 * head_kv_bytes(c, capacity, kv_type);
  for (uint64_t w : head_scratch_widths(c)) b.scratch += (uint64_t(max_rows) + 1) * w * 4;
  b.scratch += o_fold_scratch_bytes(heads_of(c), uint32_t(c.C), max_rows + 1);
  return b;
}

namespace {
// A head's weights file in either format (safetensors, or a torch.save .bin / .pt / .pth) as one
// tensor list; it owns the bytes the tensors point to.
class HeadFile {
 public:
  explicit HeadFile(const std::string& weights) {
    const std::string ext = std::filesystem::path(weights).extension().string();
    tensors_ = ext == ".bin" || ext == ".pt" || ext == ".pth" ? &torch_.emplace(TorchFile::open(weights)).tensors()
                                                             : &st_.emplace(SafetensorsFile::open(weights)).tensors();
  }
  HeadFile(const HeadFile&) = delete;
  HeadFile& operator=(const HeadFile&) = delete;
  const std::map<std::string, SafeTensor>& tensors() const { return *tensors_; }

 private:
  std::optional<SafetensorsFile> st_;
  std::optional<TorchFile> torch_;
  const std::map<std::string, SafeTensor>* tensors_ = nullptr;
};

// The head's config.json, read and parsed; a missing one is named with the head the caller gave
// (a verifier GGUF given as a head was refused as "<its folder>/config.json: cannot open").
HeadConfig head_config_of(const std::string& head, const HeadPaths& files) {
  std::error_code ec;
  if (!std::filesystem::exists(files.config, ec))
    throw Error("draft head " + head + ": no config.json at " + files.config +
                " (a head is a folder holding config.json and model.safetensors or pytorch_model.bin, or such a weights "
                "file with its config.json beside it)");
  return read_head_config(files.config);
}
}  // namespace

HeadBytes estimate_head_bytes(const std::string& path, uint32_t capacity, uint32_t max_rows, KvType kv_type) {
  const HeadPaths files = head_paths(path);
  std::error_code ec;
  (void)std::filesystem::file_size(files.weights, ec);
  if (ec) throw Error("draft head " + path + ": cannot read " + files.weights + ": " + ec.message());
  const HeadConfig c = head_config_of(path, files);
  // The tensors' bytes, a bf16 tensor's counted twice: upload_rows keeps it in f32 where a value
  // is not an f16. (Reading the file's tensor list maps it; no weight is converted here.)
  uint64_t weights = 0;
  const HeadFile file(files.weights);
  for (const auto& [name, t] : file.tensors()) weights += t.dtype == "BF16" ? 2 * t.bytes : t.bytes;
  // EAGLE-3: the lm_head is expanded on the device from draft_V to V rows (counted at 4 bytes an
  // element: exact for an f32 head, an upper bound for a 16-bit one), plus a V-wide f32 bias.
  if (c.eagle3) weights += uint64_t(c.V - c.draft_V) * uint64_t(c.C) * 4 + uint64_t(c.V) * 4;
  return {weights, head_state_bytes(c, capacity, max_rows, kv_type), c.eagle3 ? 3u : 0u};
}

EagleHeadWeights::EagleHeadWeights(Context& ctx, const std::string& path, const LlamaConfig& verifier, bool check_finite) {
  namespace fs = std::filesystem;
  const HeadPaths files = head_paths(path);
  const fs::path weights(files.weights), cj(files.config);
  path_ = files.weights;
  if (!fs::exists(weights))
    throw Error("draft head " + path + ": no model.safetensors (or pytorch_model.bin) at " + weights.string());
  cfg_ = head_config_of(path, files);
  check_head_fits(cfg_, verifier, path);

  const HeadFile file(path_);
  const std::map<std::string, SafeTensor>& tensors = file.tensors();
  std::set<std::string> read;
  const HeadTensors f{tensors, path_, check_finite, &read};
  const uint64_t C = cfg_.C, F = cfg_.F, HD = uint64_t(cfg_.H) * cfg_.D, KV = uint64_t(cfg_.Hkv) * cfg_.D;
  // EAGLE-3's attention reads the 2C-wide concat(embedding, hidden), under the `midlayer` name.
  const std::string L = cfg_.eagle3 ? "midlayer." : "layers.0.";
  const uint64_t Kin = cfg_.eagle3 ? 2 * C : C;
  if (cfg_.eagle3) {
    load_eagle3(ctx, f, verifier);
  } else {
    fc_ = upload_rows(ctx, {&f.get("fc.weight", {C, 2 * C})});
    if (cfg_.fc_bias) fc_bias_ = upload_f32(ctx, f.get("fc.bias", {C}).to_f32());
    // A saved copy of the base model's embedding is not read (the verifier's is), but its shape
    // must be the verifier's: another one says the head was trained for another model.
    if (tensors.count("embed_tokens.weight")) {
      const uint64_t V = uint64_t(verifier.V);
      const std::vector<uint64_t>& shape = tensors.at("embed_tokens.weight").shape;
      if (shape != std::vector<uint64_t>{V, C})
        throw Error(path_ + ": tensor embed_tokens.weight has shape " + shape_str(shape) + ", not the verifier's embedding " +
                    shape_str({V, C}) + ": the head was made for another model");
    }
  }
  wqkv_ = upload_rows(ctx, {&f.get(L + "self_attn.q_proj.weight", {HD, Kin}), &f.get(L + "self_attn.k_proj.weight", {KV, Kin}),
                            &f.get(L + "self_attn.v_proj.weight", {KV, Kin})});
  wo_ = upload_rows(ctx, {&f.get(L + "self_attn.o_proj.weight", {C, HD})});
  // Biases concatenated as their weights' rows are: q, k, v; gate, up.
  const auto biases = [&](std::initializer_list<std::pair<std::string, uint64_t>> parts) {
    std::vector<float> all;
    for (const auto& [name, n] : parts) {
      const std::vector<float> b = f.get(L + name, {n}).to_f32();
      all.insert(all.end(), b.begin(), b.end());
    }
    return upload_f32(ctx, all);
  };
  if (cfg_.attention_bias) {
    qkv_bias_ = biases({{"self_attn.q_proj.bias", HD}, {"self_attn.k_proj.bias", KV}, {"self_attn.v_proj.bias", KV}});
    o_bias_ = biases({{"self_attn.o_proj.bias", C}});
  }
  if (cfg_.mlp_bias) {
    gu_bias_ = biases({{"mlp.gate_proj.bias", F}, {"mlp.up_proj.bias", F}});
    down_bias_ = biases({{"mlp.down_proj.bias", C}});
  }
  if (!cfg_.rope_divisors.empty()) rope_divisors_ = upload_f32(ctx, cfg_.rope_divisors);
  // With MLP biases the layer adds them between the matmul and glu_mul (decoder_layer.cpp): rows in order.
  wgu_ = upload_rows(ctx, {&f.get(L + "mlp.gate_proj.weight", {F, C}), &f.get(L + "mlp.up_proj.weight", {F, C})},
                     !cfg_.mlp_bias);
  wdown_ = upload_rows(ctx, {&f.get(L + "mlp.down_proj.weight", {C, F})});
  post_norm_ = upload_f32(ctx, f.get(L + "post_attention_layernorm.weight", {C}).to_f32());
  refuse_unread(tensors, read, cfg_.eagle3, path_);
}

void EagleHeadWeights::load_eagle3(Context& ctx, const HeadTensors& f, const LlamaConfig& vc) {
  const uint64_t C = cfg_.C, V = cfg_.V, Vd = cfg_.draft_V;
  taps_ = eagle3_tap_points(cfg_, vc.L, path_);
  // The token embedding: the head's own when it ships one, else the verifier's (same width only).
  if (f.tensors.count("embed_tokens.weight")) {
    embd_ = upload_rows(ctx, {&f.get("embed_tokens.weight", {V, C})});
    own_embd_ = true;
  } else if (cfg_.C != vc.C) {
    throw Error("draft head " + path_ + ": hidden_size " + std::to_string(C) + " differs from the verifier width " +
                std::to_string(vc.C) + " and the file has no embed_tokens.weight [" + std::to_string(V) + ", " +
                std::to_string(C) + "] to embed tokens with");
  }
  fc_ = upload_rows(ctx, {&f.get("fc.weight", {C, uint64_t(taps_.size()) * uint64_t(cfg_.target_C)})});
  in_norm_ = upload_f32(ctx, f.get("midlayer.input_layernorm.weight", {C}).to_f32());
  hid_norm_ = upload_f32(ctx, f.get("midlayer.hidden_norm.weight", {C}).to_f32());
  out_norm_ = upload_f32(ctx, f.get("norm.weight", {C}).to_f32());
  // d2t: draft id i -> verifier id i + d2t[i], each in the vocabulary and no two the same.
  std::vector<int64_t> map(Vd);
  for (uint64_t i = 0; i < Vd; ++i) map[i] = int64_t(i);
  if (f.tensors.count("d2t")) {
    f.read->insert("d2t");
    const SafeTensor& d = find_tensor(f.tensors, path_, "d2t", {Vd});
    if (d.dtype != "I64") throw Error(path_ + ": tensor d2t has dtype " + d.dtype + ", expected I64");
    for (uint64_t i = 0; i < Vd; ++i) {
      int64_t off;
      std::memcpy(&off, d.data + 8 * i, 8);
      if (off < -int64_t(i) || off >= int64_t(V) - int64_t(i))
        throw Error(path_ + ": tensor d2t: entry " + std::to_string(i) + " is " + std::to_string(off) +
                    ", mapping draft id " + std::to_string(i) + " outside the verifier vocabulary of " + std::to_string(V));
      map[i] = int64_t(i) + off;
    }
  } else if (Vd != V) {
    throw Error(path_ + ": draft_vocab_size " + std::to_string(Vd) + " < vocab_size " + std::to_string(V) +
                " but the file has no d2t tensor mapping draft ids to verifier ids");
  }
  std::vector<int64_t> owner(V, -1);
  for (uint64_t i = 0; i < Vd; ++i) {
    if (owner[map[i]] >= 0)
      throw Error(path_ + ": tensor d2t maps draft ids " + std::to_string(owner[map[i]]) + " and " + std::to_string(i) +
                  " both to verifier id " + std::to_string(map[i]));
    owner[map[i]] = int64_t(i);
  }
  // t2d, when there, is d2t's inverse as a mask: it must name exactly the mapped ids.
  if (f.tensors.count("t2d")) {
    f.read->insert("t2d");
    const SafeTensor& t = find_tensor(f.tensors, path_, "t2d", {V});
    if (t.dtype != "BOOL") throw Error(path_ + ": tensor t2d has dtype " + t.dtype + ", expected BOOL");
    for (uint64_t j = 0; j < V; ++j)
      if ((t.data[j] != 0) != (owner[j] >= 0))
        throw Error(path_ + ": tensor t2d: entry " + std::to_string(j) + " is " + (t.data[j] ? "true" : "false") +
                    " but d2t " + (owner[j] >= 0 ? "maps a draft id to it" : "maps no draft id to it"));
  }
  // The lm_head over the verifier's vocabulary: draft row i at row map[i]; the others zero with
  // a bias of -inf, so topk, the tree's scores and sampling see probability 0 there.
  const SafeTensor& lm = f.get("lm_head.weight", {Vd, C});
  const std::vector<float> w = lm.to_f32();
  std::vector<float> full(V * C, 0.0f), bias(V, -INFINITY);
  for (uint64_t i = 0; i < Vd; ++i) {
    std::copy(w.begin() + i * C, w.begin() + (i + 1) * C, full.begin() + map[i] * C);
    bias[map[i]] = 0.0f;
  }
  // As upload_rows: f16 only where that alters no value.
  if (lm.dtype != "F16" && !f16_exact(full)) {
    lm_head_ = upload_weight(ctx, WeightType::F32, uint32_t(V), uint32_t(C), full.data());
  } else {
    std::vector<uint16_t> h(full.size());
    for (size_t i = 0; i < full.size(); ++i) h[i] = f32_to_f16(full[i]);
    lm_head_ = upload_weight(ctx, WeightType::F16, uint32_t(V), uint32_t(C), h.data());
  }
  vocab_bias_ = upload_f32(ctx, bias);
}

uint64_t EagleHeadWeights::bytes() const {
  return fc_.bytes() + wqkv_.bytes() + wo_.bytes() + wgu_.bytes() + wdown_.bytes() + fc_bias_.size() + post_norm_.size() +
         lm_head_.bytes() + embd_.bytes() + in_norm_.size() + hid_norm_.size() + out_norm_.size() + vocab_bias_.size() +
         rope_divisors_.size() + qkv_bias_.size() + o_bias_.size() + gu_bias_.size() + down_bias_.size();
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
  const std::array<uint64_t, 8> w = head_scratch_widths(c);
  Buffer* scratch[8] = {&cat_, &x_, &xn_, &qkv_, &attn_, &gu_, &act_, &logits_};
  for (size_t i = 0; i < w.size(); ++i) *scratch[i] = Buffer(ctx, (uint64_t(max_rows_) + 1) * w[i] * 4);
  make_o_fold_scratch(ctx, heads_of(c), uint32_t(c.C), max_rows_ + 1, o_part_, o_arrivals_);
}

uint64_t EagleHead::scratch_bytes() const {
  return cat_.size() + x_.size() + qkv_.size() + attn_.size() + xn_.size() + gu_.size() + act_.size() + logits_.size() +
         o_part_.size() + o_arrivals_.size();
}

// The decoder layer both kinds share (decoder_layer.hpp): attention over `attn_in` (x itself for
// EAGLE-1/2, which has no input norm; the 2C-wide normalized concat for EAGLE-3), residual x,
// then the gated MLP (post_attention_layernorm is its ffn norm; hidden_act's gate); projection biases where the
// config asks for them, no q/k norm, HF's rotate_half RoPE, the head's own cache.
void EagleHead::layer(Sequence& seq, const ForwardArgs& a, Mat attn_in) {
  const EagleHeadWeights& w = *w_;
  const HeadConfig& cfg = w.cfg_;
  const uint32_t C = uint32_t(cfg.C), F = uint32_t(cfg.F), H = uint32_t(cfg.H), Hkv = uint32_t(cfg.Hkv),
                 D = uint32_t(cfg.D), HD = H * D, KV = Hkv * D;
  record_decoder_layer(
      seq,
      {.wqkv = &w.wqkv_,
       .qkv_bias = w.qkv_bias_.size() ? &w.qkv_bias_ : nullptr,
       .wo = &w.wo_,
       .o_bias = w.o_bias_.size() ? &w.o_bias_ : nullptr,
       .ffn_norm = &w.post_norm_,
       .wgu = &w.wgu_,
       .gu_bias = w.gu_bias_.size() ? &w.gu_bias_ : nullptr,
       .wdown = &w.wdown_,
       .down_bias = w.down_bias_.size() ? &w.down_bias_ : nullptr},
      {.H = H,
       .Hkv = Hkv,
       .D = D,
       .rms_eps = cfg.rms_eps,
       .rope = {cfg.rope_theta, RopeMode::Halves, cfg.rope_freq_scale, w.rope_divisors_.size() ? &w.rope_divisors_ : nullptr},
       .act = cfg.hidden_act},
      {.in = attn_in,
       .x = {&x_, 0, pad4(C)},
       .xn = {&xn_, 0, pad4(C)},
       .qkv = {&qkv_, 0, pad4(HD + 2 * KV)},
       .att = {&attn_, 0, pad4(HD)},
       .gu = {&gu_, 0, pad4(2 * F)},
       .act = {&act_, 0, pad4(F)},
       .o_part = o_part_.size() ? &o_part_ : nullptr,
       .o_arrivals = &o_arrivals_},
      {.N = a.N,
       .pos = a.pos ? RopePositions::from_table(*a.pos, a.pos_offset) : RopePositions::run(a.pos_first, a.pos_step),
       .kv = {&k_, &v_, 0, 0, kv_type_},
       .slot = a.kv_slot,
       .t = a.t,
       .max_keys = cap_,
       .mask = a.mask,
       .mask_offset = a.mask_offset,
       .mask_words = a.mask_words,
       // The root's row alone is wanted whole; with no logits at all, no row is (prefill).
       .out_row = a.root ? std::optional(DecoderLayerOutRow{a.root_row, a.root_t, root_slot()}) : std::nullopt,
       .kv_only = !a.root && a.logits_from >= a.N});
}

const DeviceWeight& EagleHead::token_embedding() const { return verifier_.embedding(); }

void EagleHead::forward(Sequence& seq, const ForwardArgs& a) {
  const EagleHeadWeights& w = *w_;
  const HeadConfig& cfg = w.cfg_;
  const uint32_t N = a.N, C = uint32_t(cfg.C), C2 = pad4(2 * C);
  // Shapes are the caller's to check (Engine::check_fits); dynamic slots are checked there too.
  if (N == 0 || N > max_rows_ || (a.kv_slot.fixed() && a.kv_slot.base + N > cap_))
    throw Error("draft head forward over " + std::to_string(N) + " rows at slot " + std::to_string(a.kv_slot.base) +
                " does not fit (max rows " + std::to_string(max_rows_) + ", capacity " + std::to_string(cap_) + ")");
  const Mat cat{&cat_, 0, C2}, x{&x_, 0, pad4(C)}, xn{&xn_, 0, pad4(C)};
  MatmulArgs la;  // the logits matmul: EAGLE-3 folds its own norm in and masks non-draft ids
  const DeviceWeight* lm = &verifier_.lm_head();
  if (cfg.eagle3) {
    // x = fc(tap rows), or the fed-back outputs as they are: the residual stream.
    if (a.taps)
      matmul(seq, w.fc_, a.features, x, N);
    else
      copy_rows(seq, a.features, 0, x, N, C);
    embed(seq, w.own_embd_ ? w.embd_ : verifier_.embedding(), *a.tokens, a.tok_offset, xn, N);
    rmsnorm(seq, xn, w.in_norm_, cat, N, C, cfg.rms_eps);
    rmsnorm(seq, x, w.hid_norm_, Mat{&cat_, C, C2}, N, C, cfg.rms_eps);
    layer(seq, a, cat);
    lm = &w.lm_head_;
    la.norm = &w.out_norm_, la.norm_eps = cfg.rms_eps, la.norm_scratch = xn, la.bias = &w.vocab_bias_;
  } else {
    // concat(embed(token), feature): embedding first, as the EAGLE reference code does.
    if (!a.embedded) embed(seq, verifier_.embedding(), *a.tokens, a.tok_offset, cat, N);
    const Mat in = feature_input();
    if (a.features.buf != in.buf || a.features.offset != in.offset || a.features.stride != in.stride) {
      regions_.clear();
      for (uint32_t r = 0; r < N; ++r)
        regions_.push_back({uint64_t(a.features.offset + r * a.features.stride) * 4, (uint64_t(r) * C2 + C) * 4,
                            uint64_t(C) * 4});
      seq.copy(*a.features.buf, cat_, regions_);
    }
    MatmulArgs fa;
    if (cfg.fc_bias) fa.bias = &w.fc_bias_;
    matmul(seq, w.fc_, cat, x, N, fa);  // x = fc(...) is also the residual stream
    layer(seq, a, x);                   // EAGLE's layer 0 has no input_layernorm
  }
  // h = x: EAGLE-1/2 feed it straight to the verifier's lm_head; EAGLE-3 through its norm and lm_head.
  if (a.root) {  // the layer left the root row's h in the root slot
    matmul(seq, *lm, x.row(root_slot()), logits().row(root_slot()), 1, la);
  } else if (a.logits_from < N) {
    matmul(seq, *lm, x.row(a.logits_from), logits().row(a.logits_from), N - a.logits_from, la);
  }
}

}  // namespace vkspec
