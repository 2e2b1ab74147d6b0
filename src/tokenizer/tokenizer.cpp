// Tokenizer loading from GGUF metadata, special-token handling, decoding and streaming.
// The two segmentation algorithms live in spm.cpp and bpe.cpp.
#include <algorithm>
#include <cstdio>

#include "tokenizer/tokenizer_impl.hpp"
#include "tokenizer/unicode.hpp"

namespace vkspec {

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer::Kind Tokenizer::kind() const { return impl_->kind; }
Tokenizer::Pre Tokenizer::pre() const { return impl_->pre; }
size_t Tokenizer::vocab_size() const { return impl_->tokens.size(); }
namespace {
void check_id(const Tokenizer::Impl& m, uint32_t id) {
  if (id >= m.tokens.size())
    throw Error(m.path + ": token id " + std::to_string(id) + " is out of range (vocab has " +
                std::to_string(m.tokens.size()) + " tokens)");
}
}  // namespace

std::string_view Tokenizer::token_text(uint32_t id) const {
  check_id(*impl_, id);
  return impl_->tokens[id];
}
TokenType Tokenizer::token_type(uint32_t id) const {
  check_id(*impl_, id);
  return impl_->types[id];
}
int64_t Tokenizer::bos() const { return impl_->bos; }
int64_t Tokenizer::eos() const { return impl_->eos; }
std::vector<uint32_t> Tokenizer::end_of_generation() const {
  std::vector<uint32_t> ids;
  for (int64_t id : {impl_->eos, impl_->eot, impl_->eom})
    if (id >= 0 && std::find(ids.begin(), ids.end(), uint32_t(id)) == ids.end()) ids.push_back(uint32_t(id));
  return ids;
}
int64_t Tokenizer::unk() const { return impl_->unk; }
const std::vector<std::string>& Tokenizer::ignored_keys() const { return impl_->ignored; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
bool Tokenizer::add_space_prefix() const { return impl_->add_space_prefix; }

// ---- loading ---------------------------------------------------------------------------------

namespace {

// A special token's id, -1 without the key. Out of range, bos / eos / unk (which llama.cpp would
// replace by a default of its own) are refused; the optional ones (eot, eom, padding) are ignored
// with a note in `ignored`, as llama.cpp ignores them.
int64_t token_id_key(const GgufFile& f, const char* key, size_t n_vocab, std::vector<std::string>* ignored = nullptr) {
  if (!f.has(key)) return -1;
  const int64_t v = f.get_i64(key);
  if (v >= 0 && uint64_t(v) < n_vocab) return v;
  const std::string why = std::string("metadata key '") + key + "': token id " + std::to_string(v) +
                          " is out of range (vocab has " + std::to_string(n_vocab) + " tokens)";
  if (!ignored) f.fail(why);
  ignored->push_back(why + "; ignored, as llama.cpp does");
  return -1;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte an SPM byte token "<0xHH>" stands for, or -1 if the text is not of that form.
int spm_byte_value(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& f) {
  auto m = std::make_unique<Impl>();
  m->path = f.path();
  const std::string model(f.get_string("tokenizer.ggml.model"));
  if (model == "llama") {
    m->kind = Kind::Spm;
  } else if (model == "gpt2") {
    m->kind = Kind::Bpe;
  } else {
    f.fail("metadata key 'tokenizer.ggml.model': unsupported tokenizer '" + model + "' (expected 'llama' or 'gpt2')");
  }

  const GgufValue& toks = f.get_array("tokenizer.ggml.tokens", GgufType::STRING);
  const size_t n = toks.strings.size();
  if (n == 0) f.fail("metadata key 'tokenizer.ggml.tokens': the vocab is empty");
  if (n > size_t(0x7fffffff)) f.fail("metadata key 'tokenizer.ggml.tokens': too many tokens");
  m->tokens.assign(toks.strings.begin(), toks.strings.end());

  if (f.has("tokenizer.ggml.scores")) {
    const GgufValue& sc = f.get_array("tokenizer.ggml.scores", GgufType::F32);
    if (sc.count != n)
      f.fail("metadata key 'tokenizer.ggml.scores': " + std::to_string(sc.count) + " scores for " + std::to_string(n) +
             " tokens (expected one per token)");
    m->scores.resize(n);
    for (size_t i = 0; i < n; ++i) m->scores[i] = float(sc.elem_f64(i));
  } else if (m->kind == Kind::Spm) {
    f.fail("missing required metadata key 'tokenizer.ggml.scores' (a 'llama' tokenizer merges by score)");
  }

  m->types.assign(n, TokenType::Normal);
  if (f.has("tokenizer.ggml.token_type")) {
    const GgufValue& tt = f.get_array("tokenizer.ggml.token_type", GgufType::I32);
    if (tt.count != n)
      f.fail("metadata key 'tokenizer.ggml.token_type': " + std::to_string(tt.count) + " types for " +
             std::to_string(n) + " tokens (expected one per token)");
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = tt.elem_i64(i);
      if (t < 0 || t > 6)
        f.fail("metadata key 'tokenizer.ggml.token_type': token " + std::to_string(i) + " has type " +
               std::to_string(t) + " (expected 0..6)");
      m->types[i] = TokenType(int32_t(t));
    }
  }

  // Index. Duplicate pieces happen in real vocabs (e.g. unused slots); the last id wins, as in
  // llama.cpp's index, so that text tokenizes to the ids llama.cpp gives.
  m->index.reserve(n);
  for (size_t i = 0; i < n; ++i) m->index.insert_or_assign(m->tokens[i], uint32_t(i));

  m->bos = token_id_key(f, "tokenizer.ggml.bos_token_id", n);
  m->eos = token_id_key(f, "tokenizer.ggml.eos_token_id", n);
  m->unk = token_id_key(f, "tokenizer.ggml.unknown_token_id", n);
  m->eot = token_id_key(f, "tokenizer.ggml.eot_token_id", n, &m->ignored);
  m->eom = token_id_key(f, "tokenizer.ggml.eom_token_id", n, &m->ignored);
  (void)token_id_key(f, "tokenizer.ggml.padding_token_id", n, &m->ignored);
  // llama.cpp's defaults: SentencePiece vocabs add BOS and a space prefix, byte-level BPE neither
  // (but the Llama 3 family adds BOS, below). The file's keys decide where present.
  m->add_bos = f.get_bool("tokenizer.ggml.add_bos_token", m->kind == Kind::Spm);
  m->add_eos = f.get_bool("tokenizer.ggml.add_eos_token", false);
  m->add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", m->kind == Kind::Spm);

  m->byte_token.fill(Impl::kNone);
  if (m->kind == Kind::Spm) {
    m->pre = Pre::None;
    // Decoding turns a byte-type token back into its byte: its text must say which byte.
    for (size_t i = 0; i < n; ++i)
      if (m->types[i] == TokenType::Byte && spm_byte_value(m->tokens[i]) < 0)
        f.fail("metadata key 'tokenizer.ggml.tokens': token " + std::to_string(i) + " '" + m->tokens[i] +
               "' has type byte (tokenizer.ggml.token_type 6) but is not '<0xHH>' with two hex digits");
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      m->byte_token[b] = m->find(name);
    }
    // A byte token written in lower-case hex ("<0x7a>") decodes to its byte, so it encodes it
    // too: otherwise that byte would fall back to <unk> without a word.
    for (size_t i = 0; i < n; ++i)
      if (m->types[i] == TokenType::Byte) {
        uint32_t& slot = m->byte_token[spm_byte_value(m->tokens[i])];
        if (slot == Impl::kNone) slot = uint32_t(i);
      }
  } else {
    // The names llama.cpp's converter writes, grouped as llama.cpp splits them.
    struct PreName {
      const char* name;
      Pre pre;
    };
    static constexpr PreName kPreNames[] = {
        {"default", Pre::Gpt2},         {"gpt2", Pre::Gpt2},          {"gpt-2", Pre::Gpt2},
        {"phi-2", Pre::Gpt2},           {"llama-bpe", Pre::Llama3},   {"llama3", Pre::Llama3},
        {"llama-v3", Pre::Llama3},      {"falcon3", Pre::Llama3},     {"pixtral", Pre::Llama3},
        {"qwen2", Pre::Qwen2},          {"deepseek-r1-qwen", Pre::Qwen2}, {"megrez", Pre::Qwen2},
        {"smollm", Pre::Gpt2Digits},    {"starcoder", Pre::Gpt2Digits}, {"refact", Pre::Gpt2Digits},
        {"command-r", Pre::Gpt2Digits}, {"codeshell", Pre::Gpt2Digits}, {"exaone", Pre::Gpt2Digits},
        {"minerva-7b", Pre::Gpt2Digits},
    };
    const std::string pre(f.get_string("tokenizer.ggml.pre", "default"));
    const PreName* found = nullptr;
    std::string names;
    for (const PreName& n : kPreNames) {
      if (pre == n.name) found = &n;
      names += (names.empty() ? "" : ", ") + std::string(n.name);
    }
    if (!found) f.fail("metadata key 'tokenizer.ggml.pre': unsupported pre-tokenizer '" + pre + "' (supported: " + names + ")");
    m->pre = found->pre;
    if (m->pre == Pre::Llama3) {
      // As llama.cpp does for the Llama 3 family: a piece that is already a token is not split,
      // and BOS is added unless the file says otherwise.
      m->ignore_merges = true;
      if (!f.has("tokenizer.ggml.add_bos_token")) m->add_bos = true;
    }
    for (int b = 0; b < 256; ++b) {
      std::string s;
      unicode::append_utf8(s, unicode::byte_to_cp(uint8_t(b)));
      m->byte_token[b] = m->find(s);
    }
    // Merges "left right": both sides and the result must be tokens. A merge that cannot apply
    // is an inconsistent vocab, which would silently change how text splits: reject it.
    const GgufValue& mg = f.get_array("tokenizer.ggml.merges", GgufType::STRING);
    m->merges.reserve(mg.strings.size());
    for (size_t r = 0; r < mg.strings.size(); ++r) {
      const std::string_view s = mg.strings[r];
      const size_t sp = s.find(' ', 1);  // from 1: a merge may start with a literal space
      if (sp == std::string_view::npos)
        f.fail("metadata key 'tokenizer.ggml.merges': merge " + std::to_string(r) + " '" + std::string(s) +
               "' is not 'left right'");
      const std::string_view a = s.substr(0, sp), b = s.substr(sp + 1);
      const uint32_t ia = m->find(a), ib = m->find(b), ir = m->find(std::string(a) + std::string(b));
      if (ia == Impl::kNone || ib == Impl::kNone || ir == Impl::kNone)
        f.fail("metadata key 'tokenizer.ggml.merges': merge " + std::to_string(r) + " '" + std::string(s) + "': '" +
               (ia == Impl::kNone ? std::string(a) : ib == Impl::kNone ? std::string(b) : std::string(a) + std::string(b)) +
               "' is not a token");
      m->merges.emplace((uint64_t(ia) << 32) | ib, Impl::Merge{uint32_t(r), ir});  // first (best) rank wins
    }
  }
  if (m->add_bos && m->bos < 0)
    f.fail(std::string(f.has("tokenizer.ggml.add_bos_token") ? "'tokenizer.ggml.add_bos_token' is true"
                                                              : "a BOS token is added (the default for this vocabulary; 'tokenizer.ggml.add_bos_token' is absent)") +
           " but there is no 'tokenizer.ggml.bos_token_id'");
  if (m->add_eos && m->eos < 0) f.fail("'tokenizer.ggml.add_eos_token' is true but there is no eos_token_id");

  std::vector<uint32_t> control, user;
  for (size_t i = 0; i < n; ++i) {
    if (m->tokens[i].empty()) continue;
    if (m->types[i] == TokenType::Control || m->types[i] == TokenType::Unknown) control.push_back(uint32_t(i));
    if (m->types[i] == TokenType::UserDefined) user.push_back(uint32_t(i));
  }
  m->literal_control.build(std::move(control), m->tokens);
  m->literal_user.build(std::move(user), m->tokens);
  return Tokenizer(std::move(m));
}

void Tokenizer::Impl::LiteralSet::build(std::vector<uint32_t> literal_ids, const std::vector<std::string>& tokens) {
  ids = std::move(literal_ids);
  std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) {
    const int c = tokens[a].compare(tokens[b]);
    return c != 0 ? c < 0 : a < b;
  });
}

uint32_t Tokenizer::Impl::LiteralSet::longest_at(std::string_view text, size_t i,
                                                 const std::vector<std::string>& tokens) const {
  // Invariant: ids[lo, hi) are the literals that start with text[i, i + d), in (text, id) order,
  // so those equal to it come first and the rest are ordered by their byte d.
  size_t lo = 0, hi = ids.size();
  uint32_t best = kNone;
  for (size_t d = 0; lo < hi && i + d < text.size(); ++d) {
    const auto c = uint8_t(text[i + d]);
    const auto byte_d = [&](uint32_t id) { return tokens[id].size() > d ? int(uint8_t(tokens[id][d])) : -1; };
    lo = size_t(std::partition_point(ids.begin() + lo, ids.begin() + hi, [&](uint32_t id) { return byte_d(id) < int(c); }) -
                ids.begin());
    hi = size_t(std::partition_point(ids.begin() + lo, ids.begin() + hi, [&](uint32_t id) { return byte_d(id) == int(c); }) -
                ids.begin());
    if (lo < hi && tokens[ids[lo]].size() == d + 1) best = ids[lo];  // the lowest id of that text
  }
  return best;
}

// ---- encoding --------------------------------------------------------------------------------

std::vector<uint32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Impl& m = *impl_;
  std::vector<uint32_t> out;
  if (add_special && m.add_bos) out.push_back(uint32_t(m.bos));

  // Split the text at literal tokens (leftmost, then longest), encode the pieces between.
  bool after_special = true;  // SentencePiece adds the space prefix at the start and after a special
  auto encode_text = [&](std::string_view piece) {
    if (piece.empty()) return;
    if (m.kind == Kind::Spm) {
      if (m.add_space_prefix && after_special) {
        std::string s = " ";
        s += piece;
        m.encode_spm(s, out);
      } else {
        m.encode_spm(piece, out);
      }
    } else {
      m.encode_bpe(piece, out);
    }
    after_special = false;
  };
  size_t start = 0;
  const bool any_literal = !m.literal_user.empty() || (parse_special && !m.literal_control.empty());
  if (any_literal) {
    for (size_t i = 0; i < text.size();) {
      // The longest literal here; user-defined before control on equal lengths.
      uint32_t hit = m.literal_user.longest_at(text, i, m.tokens);
      if (parse_special) {
        const uint32_t c = m.literal_control.longest_at(text, i, m.tokens);
        if (c != Impl::kNone && (hit == Impl::kNone || m.tokens[c].size() > m.tokens[hit].size())) hit = c;
      }
      if (hit == Impl::kNone) {
        ++i;
        continue;
      }
      encode_text(text.substr(start, i - start));
      out.push_back(hit);
      after_special = true;
      i += m.tokens[hit].size();
      start = i;
    }
  }
  encode_text(text.substr(start));
  if (add_special && m.add_eos) out.push_back(uint32_t(m.eos));
  return out;
}

// ---- decoding --------------------------------------------------------------------------------

std::string Tokenizer::token_bytes(uint32_t id, bool special) const {
  const Impl& m = *impl_;
  check_id(m, id);
  const std::string& t = m.tokens[id];
  switch (m.types[id]) {
    case TokenType::Control:
      return special ? t : std::string();
    case TokenType::Unknown:
      return m.kind == Kind::Spm ? "\xe2\x96\x85" : t;  // llama.cpp shows <unk> as U+2585
    case TokenType::UserDefined:
      return t;  // added tokens are stored as plain text
    case TokenType::Byte:
      if (m.kind == Kind::Spm) return std::string(1, char(spm_byte_value(t)));  // checked when loaded
      break;
    default:
      break;
  }
  std::string out;
  if (m.kind == Kind::Spm) {
    for (size_t i = 0; i < t.size(); ++i) {
      if (t.compare(i, 3, "\xe2\x96\x81") == 0) {
        out += ' ';
        i += 2;
      } else {
        out += t[i];
      }
    }
  } else {
    for (const unicode::Char& c : unicode::decode(t)) {
      const int b = unicode::cp_to_byte(c.cp);
      if (b >= 0)
        out += char(b);
      else
        out.append(t, c.off, c.len);  // not a mapped byte: keep the text as is
    }
  }
  return out;
}

std::string Tokenizer::decode(std::span<const uint32_t> ids, bool special, bool continuation) const {
  std::string out;
  bool at_start = !continuation;
  for (uint32_t id : ids) {
    std::string b = token_bytes(id, special);
    // Undo the encoder's space prefix on the first text token (BOS and other control tokens
    // before it do not count), only at the start of the sequence as llama.cpp does.
    if (at_start && !b.empty() && impl_->types[id] != TokenType::Control) {
      if (impl_->kind == Kind::Spm && impl_->add_space_prefix && b[0] == ' ') b.erase(0, 1);
      at_start = false;
    }
    out += b;
  }
  return out;  // raw bytes: may end inside a UTF-8 character (StreamDecoder handles that)
}

size_t utf8_complete_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const int len = unicode::utf8_len(uint8_t(s[i]));
    if (len == 1) {
      ++i;  // ASCII, or an invalid byte that can never complete
      continue;
    }
    size_t k = 1;
    while (k < size_t(len) && i + k < s.size() && (uint8_t(s[i + k]) & 0xc0) == 0x80) ++k;
    if (k == size_t(len)) {
      i += k;
    } else if (i + k == s.size()) {
      return i;  // a valid start that the next token may complete
    } else {
      i += k;  // broken sequence: emit as is, it will never become valid
    }
  }
  return i;
}

std::string StreamDecoder::push(uint32_t id) {
  std::string b = tok_.token_bytes(id, special_);
  if (at_start_ && !b.empty() && tok_.token_type(id) != TokenType::Control) {
    if (tok_.kind() == Tokenizer::Kind::Spm && tok_.add_space_prefix() && b[0] == ' ') b.erase(0, 1);
    at_start_ = false;
  }
  pending_ += b;
  const size_t n = utf8_complete_prefix(pending_);
  // Only complete characters leave; bytes that can never become one are shown as U+FFFD.
  std::string out = utf8_sanitize(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = utf8_sanitize(pending_);  // a character cut off at the end: one U+FFFD
  pending_.clear();
  return out;
}

}  // namespace vkspec
