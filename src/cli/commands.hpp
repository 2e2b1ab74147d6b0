// The vkspec command-line tool: each subcommand lives in its own file and registers itself.
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <cstdint>
#include <string>
#include <vector>

namespace vkspec {
class GgufFile;
class Tokenizer;
}  // namespace vkspec

namespace vkspec::cli {

// The file's tokenizer, each key it ignored (Tokenizer::ignored_keys) printed as a warning.
Tokenizer load_tokenizer(const GgufFile& f);

using CommandFn = std::function<int(const std::vector<std::string>& args)>;

struct Command {
  std::string name;
  std::string summary;
  CommandFn run;
};

std::vector<Command>& commands();

struct RegisterCommand {
  RegisterCommand(std::string name, std::string summary, CommandFn fn) {
    commands().push_back({std::move(name), std::move(summary), std::move(fn)});
  }
};

// Small argument helper: "--key value" and "--flag" options, everything else positional.
// Parses `v` (the value of option --what, or one element of its list) as an integer in 0..max.
uint64_t parse_uint(const std::string& what, const std::string& v, uint64_t max = UINT32_MAX, uint64_t min = 0);

struct Args {
  explicit Args(const std::vector<std::string>& argv);
  bool flag(const std::string& name);                       // --name present?
  std::string get(const std::string& name, const std::string& fallback = "");
  // The value of whichever of `names` (spellings of one option: "p", "prompt") was given; more
  // than one of them is refused by name, since only one could be read.
  std::string get_one(std::initializer_list<const char*> names, const std::string& fallback = "");
  bool has(const std::string& name) const;
  // An option whose value may be left out (--json [FILE]): its value, `bare` when given without
  // one, `fallback` when not given; a value typed empty (--json '') is refused.
  std::string get_optional(const std::string& name, const std::string& bare, const std::string& fallback);
  // An integer in `min`..`max`; anything else (a sign, a fraction, a value outside the range) is
  // refused by name, with the range, rather than wrapped into a huge unsigned count.
  uint64_t get_uint(const std::string& name, uint64_t fallback, uint64_t max = UINT32_MAX, uint64_t min = 0);
  double get_double(const std::string& name, double fallback);
  // A get_double a 32-bit float holds: 1e-50 does not silently become 0, nor 1e39 infinity.
  float get_float(const std::string& name, float fallback);
  std::vector<std::string> positional;
  // Throws vkspec::Error naming every option that was given but never read, every option given
  // twice, and any bare word left over (no command takes one).
  void reject_unknown() const;

 private:
  std::vector<std::pair<std::string, std::string>> opts_;  // value "" for flags
  std::vector<bool> used_;
  // How a value was typed, even an empty one: kNone (the next word is an option), kEnd (no word
  // follows), kNextWord (--budget '') or kEquals (--stop=).
  enum Valued : char { kNone, kEnd, kNextWord, kEquals };
  std::vector<Valued> valued_;
};

// The items of a comma-separated option value (--budget 2,4,8). An empty item ('1,,2', ',') is
// refused by name rather than dropped, and with `distinct` so is an item given twice ('3,3'),
// which would otherwise be dropped by one command and run twice by another.
std::vector<std::string> option_list(const std::string& what, const std::string& v, bool distinct = true);

// Refuses writing `out` (given as option `out_option`) where it names the same file as one of
// `inputs` (option, path): the input would be overwritten before or while it is read.
void refuse_overwrite(const std::string& out_option, const std::string& out,
                      const std::vector<std::pair<std::string, std::string>>& inputs);
// Whether two paths name one file: the same file if both exist (links and ./ spellings too),
// else the same path once made absolute and normal.
bool same_file(const std::string& a, const std::string& b);

// Refuses an output path the command could not write, before the work whose result it would hold
// (a benchmark suite runs for minutes): a missing folder, a directory, a read-only or virtual file
// system. "-" (stdout), a device and a FIFO pass; an existing file is not truncated here.
void check_writable(const std::string& out_option, const std::string& out);

// The whole of a file the user named; `what` says what it is for the error ("prompt file"). A
// directory, a read that fails or more than kMaxReadFileBytes is refused naming the path.
inline constexpr size_t kMaxReadFileBytes = size_t(256) << 20;
std::string read_file(const std::string& path, const std::string& what, size_t max_bytes = kMaxReadFileBytes);

}  // namespace vkspec::cli
