// vkspec tokenize -m MODEL.gguf (-p TEXT | -f FILE) [--ids] [--add-special] [--special]
// Prints one line per token ("id<TAB>'piece'") or, with --ids, the ids on one line.
#include <cstdio>
#include <string>

#include "cli/commands.hpp"
#include "vkspec/error.hpp"
#include "vkspec/gguf.hpp"
#include "vkspec/tokenizer.hpp"

vkspec::Tokenizer vkspec::cli::load_tokenizer(const GgufFile& f) {
  Tokenizer tok = Tokenizer::from_gguf(f);
  for (const std::string& w : tok.ignored_keys()) std::fprintf(stderr, "warning: %s\n", w.c_str());
  return tok;
}

namespace {

int tokenize_main(const std::vector<std::string>& argv) {
  vkspec::cli::Args a(argv);
  const std::string model = a.get_one({"m", "model"});
  const bool has_p = a.has("p") || a.has("prompt");
  const std::string file = a.get_one({"f", "file"});
  std::string text = has_p ? a.get_one({"p", "prompt"}) : "";
  const bool ids_only = a.flag("ids");
  const bool add_special = a.flag("add-special");
  const bool parse_special = a.flag("special");
  a.reject_unknown();
  if (model.empty()) throw vkspec::Error("no model given: -m MODEL.gguf");
  if (has_p && !file.empty()) throw vkspec::Error("give one of -p TEXT and -f FILE, not both: each is the whole text");
  if (!has_p && file.empty()) throw vkspec::Error("no text: give -p TEXT or -f FILE");
  if (!file.empty()) {
    text = vkspec::cli::read_file(file, "text file");
  }
  const vkspec::GgufFile g = vkspec::GgufFile::open(model);
  const vkspec::Tokenizer tok = vkspec::cli::load_tokenizer(g);
  const std::vector<uint32_t> ids = tok.encode(text, add_special, parse_special);
  if (ids_only) {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
    std::printf("%s\n", line.c_str());
  } else {
    for (uint32_t id : ids) {
      // A vocabulary's text may hold a NUL, a newline or a terminal escape: one line a token,
      // such bytes as \n, \t, \xNN (vkspec::printable_message).
      std::string t;
      for (const char c : tok.token_text(id)) t += c == '\n' ? "\\n" : c == '\t' ? "\\t" : std::string(1, c);
      std::printf("%6u\t'%s'\n", id, vkspec::printable_message(t).c_str());
    }
  }
  std::fprintf(stderr, "%zu tokens\n", ids.size());
  return 0;
}

const vkspec::cli::RegisterCommand reg{
    "tokenize",
    "text -> token ids with the model's tokenizer: -m MODEL.gguf (-p TEXT | -f FILE) [--ids] [--add-special] [--special]; "
    "--ids: the ids on one line; --add-special: BOS/EOS as the model's metadata asks; --special: control tokens such as "
    "<s> written in the text are recognised",
    tokenize_main};

}  // namespace
