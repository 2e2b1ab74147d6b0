// `vkspec bench-tokenizer -m MODEL.gguf [-f FILE] [--mib N] [--reps R] [--json]`: encode speed of
// the model's tokenizer on N MiB of text cut into ~1 KiB paragraphs, as prompts arrive. The text
// is FILE (repeated until N MiB) or a built-in English paragraph; the median of R runs is kept.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "vkspec/gguf.hpp"
#include "vkspec/tokenizer.hpp"

namespace vkspec::cli {

namespace {

const char* kDefaultText =
    "Once upon a time, in a small town by the sea, there lived a girl named Lily who loved to read. "
    "Every morning she walked 2.5 km to the library, counted the boats (17 on a good day!), and "
    "asked the librarian questions like \"Why is the sky blue?\" or \"How do whales sleep?\". "
    "The answers were not always simple: some took a week, some a year, and some were never found. "
    "Still, she wrote each one down in a notebook -- dates, numbers and all -- 'just in case'.\n";

// Paragraphs of at most ~1 KiB, cut after a space or newline so words stay whole.
std::vector<std::string> paragraphs(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t n = std::min<size_t>(1024, text.size() - i);
    if (i + n < text.size()) {
      const size_t cut = text.find_last_of(" \n", i + n - 1);
      if (cut != std::string::npos && cut >= i) n = cut + 1 - i;
    }
    out.push_back(text.substr(i, n));
    i += n;
  }
  return out;
}

int run_bench_tokenizer(const std::vector<std::string>& argv) {
  Args args(argv);
  const bool json = args.flag("json");
  const std::string model = args.get_one({"m", "model"});
  const std::string file = args.get_one({"f", "file"});
  const uint64_t mib = args.get_uint("mib", 1, 1024, 1);
  const int reps = int(args.get_uint("reps", 3, 1000, 1));
  args.reject_unknown();
  if (model.empty()) throw Error("no model given: -m MODEL.gguf (vkspec bench-tokenizer -m MODEL.gguf [-f FILE] [--mib N] [--reps R] [--json])");
  std::string text = kDefaultText;
  if (!file.empty()) {
    text = read_file(file, "text file");
    if (text.empty()) throw Error(file + ": the text file is empty");
  }
  const std::vector<std::string> base = paragraphs(text);
  std::vector<std::string> chunks;
  size_t bytes = 0;
  for (size_t i = 0; bytes < mib << 20; ++i) {
    chunks.push_back(base[i % base.size()]);
    bytes += chunks.back().size();
  }
  const GgufFile g = GgufFile::open(model);
  const Tokenizer tok = load_tokenizer(g);
  std::vector<double> ms;
  size_t tokens = 0;
  for (int r = 0; r < reps; ++r) {
    size_t n = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (const std::string& c : chunks) n += tok.encode(c).size();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    tokens = n;
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  nlohmann::json r = {{"op", "tokenizer_encode"},
                      {"bytes", bytes},
                      {"paragraphs", chunks.size()},
                      {"tokens", tokens},
                      {"ms", med},
                      {"mb_per_s", bytes / (med * 1e-3) / 1e6},
                      {"mtokens_per_s", tokens / (med * 1e-3) / 1e6},
                      {"reps", reps}};
  if (json) {
    nlohmann::json out = {{"model", model}, {"results", nlohmann::json::array({r})}};
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fprintf(stderr, "tokenizer encode: %zu bytes in %zu paragraphs -> %zu tokens in %.1f ms: %.2f MB/s, %.2f M tokens/s\n",
                 bytes, chunks.size(), tokens, med, double(r["mb_per_s"]), double(r["mtokens_per_s"]));
  }
  return 0;
}

}  // namespace

static RegisterCommand reg{"bench-tokenizer", "tokenizer encode MB/s and tokens/s on ~1 KiB paragraphs: -m MODEL.gguf [-f FILE] [--mib N] [--reps R] [--json]",
                           run_bench_tokenizer};

}  // namespace vkspec::cli
