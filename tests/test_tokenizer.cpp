// Tokenizers against llama.cpp's test vectors, round trips, streaming decode, the 256-byte
// demo vocab, and malformed tokenizer metadata.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <fstream>
#include <sstream>

#include "gguf_test_util.hpp"
#include "shared_data.hpp"
#include "vkspec/gguf_writer.hpp"
#include "tokenizer/pretokenize.hpp"
#include "tokenizer/unicode.hpp"
#include "byte_vocab.hpp"
#include "vkspec/tokenizer.hpp"

using namespace vkspec;
using vkspec::test::TempFile;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// .inp: every text is followed by "\n__ggml_vocab_test__\n"; .out: one line of ids per text.
void run_vectors(const std::string& vocab, bool lossless) {
  const std::string path = vkspec::test::shared_file("tokenizer-vectors/" + vocab);
  if (path.empty()) return;
  const std::string inp = read_all(path + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t e = inp.find(sep, pos);
    REQUIRE(e != std::string::npos);
    texts.push_back(inp.substr(pos, e - pos));
    pos = e + sep.size();
  }
  std::istringstream outs(read_all(path + ".out"));
  std::vector<std::vector<uint32_t>> expected;
  for (std::string line; std::getline(outs, line);) {
    std::istringstream ls(line);
    std::vector<uint32_t> ids;
    for (uint32_t id; ls >> id;) ids.push_back(id);
    expected.push_back(ids);
  }
  REQUIRE(texts.size() == expected.size());
  GgufFile g = GgufFile::open(path);
  Tokenizer tok = Tokenizer::from_gguf(g);
  int matched = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    CAPTURE(i);
    CAPTURE(texts[i]);
    const auto ids = tok.encode(texts[i]);
    CHECK(ids == expected[i]);
    matched += ids == expected[i];
    if (lossless) CHECK(tok.decode(ids) == texts[i]);
  }
  MESSAGE(std::string(vocab) << ": " << matched << "/" << texts.size() << " test vectors match");
}

}  // namespace

TEST_CASE("tokenizer: llama-spm matches llama.cpp's test vectors") { run_vectors("ggml-vocab-llama-spm.gguf", true); }

TEST_CASE("tokenizer: gpt-2 matches llama.cpp's test vectors") { run_vectors("ggml-vocab-gpt-2.gguf", true); }

TEST_CASE("tokenizer: special tokens only when asked; BOS with --add-special") {
  const std::string path = vkspec::test::shared_file("tokenizer-vectors/ggml-vocab-llama-spm.gguf");
  if (path.empty()) return;
  GgufFile g = GgufFile::open(path);
  Tokenizer tok = Tokenizer::from_gguf(g);
  const auto plain = tok.encode("<s>hi");
  CHECK(std::find(plain.begin(), plain.end(), 1u) == plain.end());
  const auto sp = tok.encode("<s>hi", false, true);
  REQUIRE(!sp.empty());
  CHECK(sp[0] == 1u);
  CHECK(tok.encode("hi", true) == std::vector<uint32_t>{1, 7251});
  CHECK(tok.encode("hi", true)[1] == tok.encode("hi")[0]);
  CHECK(tok.decode(tok.encode("hi", true)) == "hi");
  CHECK(tok.decode(tok.encode("hi", true), true) == "<s>hi");
}

TEST_CASE("tokenizer: a continuation keeps its first token's space; only a sequence's start drops it") {
  // A generation's tokens follow the prompt: "▁Paris" after "The capital is" is " Paris". The
  // space prefix the encoder adds is undone only at the start of a sequence (the prompt's echo).
  const std::string path = vkspec::test::shared_file("tokenizer-vectors/ggml-vocab-llama-spm.gguf");
  if (path.empty()) return;
  GgufFile g = GgufFile::open(path);
  Tokenizer tok = Tokenizer::from_gguf(g);
  const auto ids = tok.encode("The capital is Paris");
  REQUIRE(ids.size() >= 2);
  const std::vector<uint32_t> tail(ids.end() - 1, ids.end());
  CHECK(tok.decode(ids) == "The capital is Paris");
  CHECK(tok.decode(tail) == "Paris");
  CHECK(tok.decode(tail, false, true) == " Paris");
  StreamDecoder cont(tok, false, true), start(tok);
  CHECK(cont.push(tail[0]) == " Paris");
  CHECK(start.push(tail[0]) == "Paris");
}

TEST_CASE("tokenizer: round trips and streaming decode with byte fallback") {
  for (const char* vocab : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"}) {
    const std::string path = vkspec::test::shared_file(std::string("tokenizer-vectors/") + vocab);
    if (path.empty()) return;
    CAPTURE(vocab);
    GgufFile g = GgufFile::open(path);
    Tokenizer tok = Tokenizer::from_gguf(g);
    const std::string texts[] = {"Hello, world!\n\n  Indented\ttab",
                                 "emoji 🦙🔥 and 中文字符 and ελληνικά, Ünïcödé",
                                 "  leading and trailing  ", "a'll 'S 're 123456789 3.14 x",
                                 std::string("nul\0byte", 8)};
    for (const std::string& t : texts) {
      CAPTURE(t);
      const auto ids = tok.encode(t);
      CHECK(tok.decode(ids) == t);
      StreamDecoder d(tok);
      std::string streamed;
      for (uint32_t id : ids) {
        const std::string piece = d.push(id);
        CHECK(utf8_complete_prefix(piece) == piece.size());  // never half a character
        streamed += piece;
      }
      streamed += d.flush();
      CHECK(streamed == t);
    }
  }
}

TEST_CASE("tokenizer: utf8_complete_prefix") {
  CHECK(utf8_complete_prefix("abc") == 3);
  CHECK(utf8_complete_prefix("a\xf0\x9f") == 1);           // 4-byte char cut after 2 bytes
  CHECK(utf8_complete_prefix("a\xf0\x9f\xa6\x99") == 5);   // complete
  CHECK(utf8_complete_prefix("\xff" "a") == 2);            // invalid byte passes through
  CHECK(utf8_complete_prefix("\xe4\xb8" "a") == 3);        // broken sequence passes through
}

// A byte-level vocab of exactly the 256 byte tokens, no merges (the bundled demo model's).
TEST_CASE("tokenizer: 256-byte gpt2 vocab with empty merges encodes raw bytes") {
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "default");
  w.add_array_string("tokenizer.ggml.tokens", test::byte_vocab());
  std::vector<int32_t> types(256, 1);
  w.add_array_i32("tokenizer.ggml.token_type", types);
  w.add_array_string("tokenizer.ggml.merges", {});
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  w.add_bool("tokenizer.ggml.add_eos_token", false);
  TempFile tf("bytevocab.gguf");
  w.write(tf.path);
  GgufFile g = GgufFile::open(tf.path);
  Tokenizer tok = Tokenizer::from_gguf(g);
  const std::string text = "Debian's apt-get  \n\tinstall ü 🦙 \x01\xff";
  const auto ids = tok.encode(text, true);
  REQUIRE(ids.size() == text.size());
  for (size_t i = 0; i < text.size(); ++i) CHECK(ids[i] == uint8_t(text[i]));
  CHECK(tok.decode(ids) == text);
}

TEST_CASE("tokenizer: a piece listed twice tokenizes to its last id, as in llama.cpp's index") {
  // The 256 byte pieces, then "a" again at id 256: text "a" must give 256 (llama.cpp's
  // token_to_id keeps the last), not 97.
  std::vector<std::string> pieces = test::byte_vocab();
  const std::string a = pieces['a'];
  pieces.push_back(a);
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "default");
  w.add_array_string("tokenizer.ggml.tokens", pieces);
  w.add_array_i32("tokenizer.ggml.token_type", std::vector<int32_t>(pieces.size(), 1));
  w.add_array_string("tokenizer.ggml.merges", {});
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  TempFile tf("dupvocab.gguf");
  w.write(tf.path);
  GgufFile g = GgufFile::open(tf.path);
  Tokenizer tok = Tokenizer::from_gguf(g);
  CHECK(tok.encode("bab", false) == std::vector<uint32_t>{'b', 256, 'b'});
  CHECK(tok.decode(std::vector<uint32_t>{97, 256}) == "aa");  // both ids still decode to the piece
}

TEST_CASE("tokenizer: pre-tokenizer splits (gpt2, llama3, qwen2)") {
  auto split = [](Tokenizer::Pre pre, const std::string& text) {
    std::vector<std::string> out;
    for (auto [off, len] : pretokenize(pre, text)) out.push_back(text.substr(off, len));
    return out;
  };
  using V = std::vector<std::string>;
  using P = Tokenizer::Pre;
  CHECK(split(P::Llama3, "Hello world's 12345 (x)\n\n  y") ==
        V{"Hello", " world", "'s", " ", "123", "45", " (", "x", ")\n\n", " ", " y"});
  CHECK(split(P::Llama3, "I'LL go!!\r\n") == V{"I", "'LL", " go", "!!\r\n"});
  CHECK(split(P::Llama3, "x \n \ny") == V{"x", " \n \n", "y"});
  CHECK(split(P::Llama3, "\u00e9t\u00e9 \u4e2d\u6587 \u0661\u0662") == V{"\u00e9t\u00e9", " \u4e2d\u6587", " ", "\u0661\u0662"});
  CHECK(split(P::Qwen2, "ab 123 ") == V{"ab", " ", "1", "2", "3", " "});
  CHECK(split(P::Gpt2, "I'LL go  now!!\n\nok 42x") == V{"I", "'", "LL", " go", " ", " now", "!!", "\n", "\n", "ok", " 42", "x"});
  CHECK(split(P::Gpt2, "a  \t b   ") == V{"a", "  \t", " b", "   "});
  // Invalid UTF-8 still tiles the text.
  CHECK(split(P::Gpt2, "a\xff\xfe b") == V{"a", "\xff\xfe", " b"});
  // SmolLM / StarCoder: a digit is a piece, and ends the text GPT-2's regex sees: the space
  // before a number stays apart, and a whitespace run before a digit stays whole.
  CHECK(split(P::Gpt2Digits, "abc 123 x  4've") == V{"abc", " ", "1", "2", "3", " x", "  ", "4", "'ve"});
  CHECK(split(P::Gpt2Digits, "x\u00bd\u0662y") == V{"x", "\u00bd", "\u0662", "y"});
}

// llama.cpp runs "\p{N}" first and GPT-2's regex on each piece between: built here from the
// GPT-2 split of each digit-free stretch, over llama.cpp's own tokenizer test texts.
TEST_CASE("tokenizer: the digit-isolating split is GPT-2's between single digits") {
  const std::string path = vkspec::test::shared_file("tokenizer-vectors/ggml-vocab-gpt-2.gguf.inp");
  if (path.empty()) return;
  const std::string inp = read_all(path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  int texts = 0, with_digits = 0;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t e = inp.find(sep, pos);
    REQUIRE(e != std::string::npos);
    const std::string text = inp.substr(pos, e - pos) + " 10 a1b2  3\t4'll 56 ";
    pos = e + sep.size();
    std::vector<std::pair<size_t, size_t>> want;
    size_t start = 0;
    auto stretch = [&](size_t end) {
      for (auto [off, len] : pretokenize(Tokenizer::Pre::Gpt2, std::string_view(text).substr(start, end - start)))
        want.emplace_back(start + off, len);
    };
    const auto chars = unicode::decode(text);
    for (size_t i = 0; i < chars.size(); ++i) {
      if (!unicode::is_number(chars[i].cp)) continue;
      const size_t end = i + 1 < chars.size() ? chars[i + 1].off : text.size();
      stretch(chars[i].off);
      want.emplace_back(chars[i].off, end - chars[i].off);
      start = end;
    }
    stretch(text.size());
    CAPTURE(text);
    CHECK(pretokenize(Tokenizer::Pre::Gpt2Digits, text) == want);
    ++texts;
    with_digits += pretokenize(Tokenizer::Pre::Gpt2Digits, text) != pretokenize(Tokenizer::Pre::Gpt2, text);
  }
  CHECK(texts > 20);
  CHECK(with_digits == texts);  // the suffix's digits split differently from GPT-2 in every text
}

// The pre-tokenizer names llama.cpp's converter writes, and Llama 3's BOS default.
TEST_CASE("tokenizer: pre-tokenizer names map to their splits") {
  auto load = [](const char* pre, int add_bos) {
    GgufWriter w;
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", pre);
    w.add_array_string("tokenizer.ggml.tokens", test::byte_vocab());
    w.add_array_string("tokenizer.ggml.merges", {});
    w.add_u32("tokenizer.ggml.bos_token_id", 1);
    if (add_bos >= 0) w.add_bool("tokenizer.ggml.add_bos_token", add_bos != 0);
    TempFile tf("pre.gguf");
    w.write(tf.path);
    return Tokenizer::from_gguf(GgufFile::open(tf.path));
  };
  using P = Tokenizer::Pre;
  const std::pair<const char*, P> names[] = {
      {"default", P::Gpt2},       {"gpt-2", P::Gpt2},           {"llama-bpe", P::Llama3}, {"llama3", P::Llama3},
      {"falcon3", P::Llama3},     {"qwen2", P::Qwen2},          {"deepseek-r1-qwen", P::Qwen2},
      {"smollm", P::Gpt2Digits},  {"starcoder", P::Gpt2Digits},
  };
  for (const auto& [name, pre] : names) {
    CAPTURE(name);
    const Tokenizer t = load(name, -1);
    CHECK(t.pre() == pre);
    // Without add_bos_token, BOS only for the Llama 3 family (as llama.cpp); the key decides.
    CHECK(t.add_bos() == (pre == P::Llama3));
    CHECK(!load(name, 0).add_bos());
    CHECK(load(name, 1).add_bos());
  }
}

TEST_CASE("tokenizer reject: malformed metadata") {
  auto reject = [](GgufWriter& w, const std::string& what) {
    TempFile tf("badtok.gguf");
    w.write(tf.path);
    GgufFile g = GgufFile::open(tf.path);
    CHECK_THROWS_WITH_AS(Tokenizer::from_gguf(g), doctest::Contains(what.c_str()), Error);
  };
  auto base = [] {
    GgufWriter w;
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_array_string("tokenizer.ggml.tokens", test::byte_vocab());
    w.add_array_string("tokenizer.ggml.merges", {});
    return w;
  };
  {
    GgufWriter w = base();
    w.remove("tokenizer.ggml.merges");
    reject(w, "missing required metadata key 'tokenizer.ggml.merges'");
  }
  {
    GgufWriter w = base();
    w.add_array_string("tokenizer.ggml.merges", {"a b"});
    reject(w, "merge 0 'a b': 'ab' is not a token");
  }
  {
    GgufWriter w = base();
    w.add_array_string("tokenizer.ggml.merges", {"zz q"});
    reject(w, "merge 0 'zz q': 'zz' is not a token");
  }
  {
    GgufWriter w = base();
    w.add_array_string("tokenizer.ggml.merges", {"ab"});
    reject(w, "merge 0 'ab' is not 'left right'");
  }
  {
    GgufWriter w = base();
    w.add_u32("tokenizer.ggml.eos_token_id", 256);
    reject(w, "'tokenizer.ggml.eos_token_id': token id 256 is out of range (vocab has 256 tokens)");
  }
  {
    GgufWriter w = base();
    w.add_u32("tokenizer.ggml.bos_token_id", 256);
    reject(w, "'tokenizer.ggml.bos_token_id': token id 256 is out of range (vocab has 256 tokens)");
  }
  {  // An optional special id past the vocab (a padding id one past the last token is seen in real
     // files) is ignored with a note naming the key, as llama.cpp does: it names no token.
    GgufWriter w = base();
    w.add_u32("tokenizer.ggml.eos_token_id", 7);
    w.add_u32("tokenizer.ggml.eot_token_id", 300);
    w.add_u32("tokenizer.ggml.padding_token_id", 256);
    TempFile tf("tok_ignored.gguf");
    w.write(tf.path);
    const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(tf.path));
    CHECK(tok.end_of_generation() == std::vector<uint32_t>{7});
    REQUIRE(tok.ignored_keys().size() == 2);
    CHECK(tok.ignored_keys()[0] ==
          "metadata key 'tokenizer.ggml.eot_token_id': token id 300 is out of range (vocab has 256 tokens); ignored, as llama.cpp does");
    CHECK(tok.ignored_keys()[1].find("'tokenizer.ggml.padding_token_id': token id 256 is out of range") != std::string::npos);
  }
  {  // The end-of-generation set: eos, eot, eom where given, each once.
    auto eog = [&](const std::function<void(GgufWriter&)>& keys) {
      GgufWriter w = base();
      keys(w);
      TempFile tf("tok_eog.gguf");
      w.write(tf.path);
      return Tokenizer::from_gguf(GgufFile::open(tf.path)).end_of_generation();
    };
    CHECK(eog([](GgufWriter&) {}).empty());
    CHECK(eog([](GgufWriter& w) { w.add_u32("tokenizer.ggml.eos_token_id", 7); }) == std::vector<uint32_t>{7});
    CHECK(eog([](GgufWriter& w) {
            w.add_u32("tokenizer.ggml.eos_token_id", 7);
            w.add_u32("tokenizer.ggml.eot_token_id", 9);
            w.add_u32("tokenizer.ggml.eom_token_id", 7);
          }) == std::vector<uint32_t>{7, 9});
    CHECK(eog([](GgufWriter& w) { w.add_u32("tokenizer.ggml.eom_token_id", 200); }) == std::vector<uint32_t>{200});
  }
  {
    GgufWriter w = base();
    std::vector<int32_t> types(255, 1);
    w.add_array_i32("tokenizer.ggml.token_type", types);
    reject(w, "'tokenizer.ggml.token_type': 255 types for 256 tokens");
  }
  {
    GgufWriter w = base();
    std::vector<float> scores(10, 0.0f);
    w.add_array_f32("tokenizer.ggml.scores", scores);
    reject(w, "'tokenizer.ggml.scores': 10 scores for 256 tokens");
  }
  {
    GgufWriter w = base();
    w.add_string("tokenizer.ggml.pre", "deepseek-coder");
    reject(w, "unsupported pre-tokenizer 'deepseek-coder'");
  }
  {
    GgufWriter w = base();
    w.add_string("tokenizer.ggml.model", "t5");
    reject(w, "unsupported tokenizer 't5'");
  }
  {
    GgufWriter w = base();
    w.remove("tokenizer.ggml.tokens");
    reject(w, "missing required metadata key 'tokenizer.ggml.tokens'");
  }
  {
    GgufWriter w = base();
    w.add_string("tokenizer.ggml.model", "llama");
    reject(w, "missing required metadata key 'tokenizer.ggml.scores'");
  }
}

// Speed is measured by `vkspec bench-tokenizer`; here only that encoding keeps no state between
// calls: a paragraph repeated many times encodes to the same ids every time.
TEST_CASE("tokenizer: a ~1 KB paragraph encodes to the same ids on every repetition") {
  for (const char* vocab : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"}) {
    const std::string path = vkspec::test::shared_file(std::string("tokenizer-vectors/") + vocab);
    if (path.empty()) return;
    GgufFile g = GgufFile::open(path);
    Tokenizer tok = Tokenizer::from_gguf(g);
    // The test inputs joined into ~1 KB of mixed prose, as a prompt would be.
    const std::string inp = read_all(path + ".inp");
    std::string para;
    for (size_t i = 0; i < inp.size() && para.size() < 1024; ++i)
      if (inp.compare(i, 19, "__ggml_vocab_test__") == 0)
        i += 18;
      else
        para += inp[i];
    const std::vector<uint32_t> first = tok.encode(para);
    INFO(vocab);
    REQUIRE(!first.empty());
    for (int r = 0; r < 64; ++r) REQUIRE(tok.encode(para) == first);
  }
}
