// libFuzzer: a command line through the tool's option parser (src/cli/args.cpp), read the way
// `vkspec generate` reads its options (a list option through option_list), then checked for what
// was left unread. The input is the
// argument words separated by NUL bytes.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "vkspec/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> words(1);
  for (size_t i = 0; i < size && words.size() <= 64; ++i) {
    if (data[i] == 0)
      words.emplace_back();
    else
      words.back() += char(data[i]);
  }
  using vkspec::cli::Args;
  try {
    Args a(words);
    a.flag("json");
    a.flag("time-kernels");
    const std::string tokens = a.get("tokens", "");
    const std::string prompt = a.get_one({"p", "prompt"});
    const std::string model = a.get_one({"m", "model"});
    const uint64_t n = a.get_uint("n", 128);
    const uint64_t budget = a.get_uint("budget", 8, 64, 1);
    const double temp = a.get_double("temp", 0.0);
    // A float option (--top-p): accepted, it is finite, and nonzero wherever the text was.
    const float top_p = a.get_float("top-p", 1.0f);
    if (!std::isfinite(top_p) || (top_p == 0.0f && a.has("top-p") && a.get_double("top-p", 0.0) != 0.0)) __builtin_trap();
    if (n > UINT32_MAX || budget < 1 || budget > 64 || temp != temp) __builtin_trap();
    // A list option (--topk 1,2,4): what is accepted has no empty item and no item twice, and
    // joined with commas gives back the value exactly.
    const std::string topk = a.get("topk", "");
    if (!topk.empty()) {
      const std::vector<std::string> items = vkspec::cli::option_list("topk", topk);
      std::string joined;
      for (size_t i = 0; i < items.size(); ++i) {
        if (items[i].empty()) __builtin_trap();
        for (size_t j = 0; j < i; ++j)
          if (items[j] == items[i]) __builtin_trap();
        joined += (i ? "," : "") + items[i];
      }
      if (joined != topk) __builtin_trap();
    }
    // An option whose value may be left out (bench --suite --md [FILE]): given, it is never empty.
    const bool md_given = a.has("md");
    if (a.get_optional("md", "-", "").empty() == md_given) __builtin_trap();
    (void)tokens, (void)prompt, (void)model;
    a.reject_unknown();
    // Accepted: nothing the user typed was left unread.
    if (!a.positional.empty()) __builtin_trap();
  } catch (const vkspec::Error&) {
  }
  return 0;
}
