// The command-line tool's options (cli/commands.hpp: Args) and the file reader its commands share.
// Apart from main.cpp so that tests/fuzz/fuzz_args.cpp can drive it without a device.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <unistd.h>

#include "cli/commands.hpp"
#include "vkspec/error.hpp"

namespace vkspec::cli {

// A word that names an option: "-x", "--name", "--name=value"; "-5" and "-.5" are values.
static bool is_option(const std::string& w) {
  return w.size() > 1 && w[0] == '-' && !((w[1] >= '0' && w[1] <= '9') || w[1] == '.');
}

Args::Args(const std::vector<std::string>& argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (!is_option(a)) {
      positional.push_back(a);
      continue;
    }
    std::string key = a.substr(a[1] == '-' ? 2 : 1);
    std::string val;
    Valued valued = i + 1 < argv.size() ? kNone : kEnd;
    if (const auto eq = key.find('='); eq != std::string::npos) {
      val = key.substr(eq + 1);
      key = key.substr(0, eq);
      valued = kEquals;
    } else if (i + 1 < argv.size() && !is_option(argv[i + 1])) {
      val = argv[++i];
      valued = kNextWord;
    }
    opts_.emplace_back(key, val);
    used_.push_back(false);
    valued_.push_back(valued);
  }
}

// An option as the user types it: -p, -n, --ctx.
static std::string option_name(const std::string& name) { return (name.size() == 1 ? "-" : "--") + name; }

bool Args::has(const std::string& name) const {
  for (auto& [k, v] : opts_)
    if (k == name) return true;
  return false;
}

bool Args::flag(const std::string& name) {
  for (size_t i = 0; i < opts_.size(); ++i)
    if (opts_[i].first == name) {
      used_[i] = true;
      if (valued_[i] == kEquals) throw Error("option " + option_name(name) + " takes no value, got '" + option_name(name) + "=" + opts_[i].second + "'");
      // A flag followed by a word (--json true, --ignore-eos yes): the word would be dropped.
      if (valued_[i] == kNextWord)
        throw Error("option " + option_name(name) + " takes no value, got '" + opts_[i].second + "' after it");
      return true;
    }
  return false;
}

std::string Args::get(const std::string& name, const std::string& fallback) {
  for (size_t i = 0; i < opts_.size(); ++i)
    if (opts_[i].first == name) {
      used_[i] = true;
      if (valued_[i] == kEnd) throw Error("option " + option_name(name) + " needs a value, and it is the last word");
      if (valued_[i] == kNone)  // a value that starts with '-' reads as the next option
        throw Error("option " + option_name(name) + " needs a value (one that starts with '-': " + option_name(name) + "=VALUE)");
      if (opts_[i].second.empty()) throw Error("option " + option_name(name) + " was given an empty value");
      return opts_[i].second;
    }
  return fallback;
}

std::string Args::get_optional(const std::string& name, const std::string& bare, const std::string& fallback) {
  for (size_t i = 0; i < opts_.size(); ++i)
    if (opts_[i].first == name) {
      if (valued_[i] == kNone || valued_[i] == kEnd) {
        used_[i] = true;
        return bare;
      }
      return get(name);
    }
  return fallback;
}

std::string Args::get_one(std::initializer_list<const char*> names, const std::string& fallback) {
  std::string given;
  for (const char* n : names)
    if (has(n)) {
      if (!given.empty())
        throw Error("give one of " + option_name(given) + " and " + option_name(n) + ", not both: they are the same option");
      given = n;
    }
  return given.empty() ? fallback : get(given);
}

std::string read_file(const std::string& path, const std::string& what, size_t max_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error("cannot read " + what + " " + path + ": it is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read " + what + " " + path + ": " + std::strerror(errno));
  // Read in pieces up to a limit: a device or pipe without end (/dev/zero) is refused, not read
  // until memory runs out.
  std::string out;
  char buf[1 << 16];
  while (f.read(buf, sizeof buf) || f.gcount() > 0) {
    out.append(buf, size_t(f.gcount()));
    if (out.size() > max_bytes)
      throw Error(what + " " + path + " is larger than " + std::to_string(max_bytes >> 20) + " MiB");
  }
  if (f.bad()) throw Error("cannot read " + what + " " + path + ": read error");
  return out;
}

std::vector<std::string> option_list(const std::string& what, const std::string& v, bool distinct) {
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    const size_t comma = v.find(',', start);
    std::string item = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty())
      throw Error("option " + option_name(what) + " has an empty item in '" + v + "' (items separated by single commas, e.g. 1,2,4)");
    if (distinct && std::find(out.begin(), out.end(), item) != out.end())
      throw Error("option " + option_name(what) + " lists '" + item + "' more than once");
    out.push_back(std::move(item));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

void refuse_overwrite(const std::string& out_option, const std::string& out,
                      const std::vector<std::pair<std::string, std::string>>& inputs) {
  for (const auto& [option, in] : inputs) {
    std::error_code ec;
    if (!out.empty() && !in.empty() && std::filesystem::equivalent(out, in, ec))
      throw Error(out_option + " " + out + " is the file " + (option.starts_with("-") ? "given as " : "") + option +
                  ": writing it would destroy it (give another output path)");
  }
}

bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  std::error_code ea, eb;
  // Absolute first: a relative path none of whose parts exists yet ("a.json") is left as given by
  // weakly_canonical, and would then differ from "./a.json" or "$PWD/a.json".
  const fs::path aa = fs::absolute(a, ea), ab = fs::absolute(b, eb);
  if (ea || eb) return a == b;
  const fs::path pa = fs::weakly_canonical(aa, ea), pb = fs::weakly_canonical(ab, eb);
  return ea || eb ? aa.lexically_normal() == ab.lexically_normal() : pa == pb;
}

void check_writable(const std::string& out_option, const std::string& out) {
  if (out.empty() || out == "-") return;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(out, ec);
  if (fs::is_directory(st)) throw Error(out_option + " " + out + " is a directory; give a file path");
  if (fs::exists(st)) {
    if (fs::is_regular_file(st) && ::access(out.c_str(), W_OK) != 0)
      throw Error("cannot write " + out_option + " " + out + ": " + std::strerror(errno));
    return;
  }
  // Not there yet: create it to learn whether it can be, then leave no trace.
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot write " + out_option + " " + out + ": " + std::strerror(errno));
  ::close(fd);
  ::unlink(out.c_str());
}

uint64_t parse_uint(const std::string& what, const std::string& v, uint64_t max, uint64_t min) {
  bool ok = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
  const std::string digits = ok ? v.substr(std::min(v.find_first_not_of('0'), v.size() - 1)) : v;  // 0008 is 8
  ok = ok && digits.size() <= 20;
  unsigned long long x = 0;
  if (ok) {
    try {
      x = std::stoull(digits);
      ok = x >= min && x <= max;
    } catch (...) {
      ok = false;  // past the range of the type: too large, like any value past max
    }
  }
  if (!ok) throw Error("option " + option_name(what) + " expects an integer in " + std::to_string(min) + ".." + std::to_string(max) + ", got '" + v + "'");
  return x;
}

uint64_t Args::get_uint(const std::string& name, uint64_t fallback, uint64_t max, uint64_t min) {
  return has(name) ? parse_uint(name, get(name), max, min) : fallback;
}

double Args::get_double(const std::string& name, double fallback) {
  if (!has(name)) return fallback;
  std::string v = get(name);
  try {
    // Decimal only: stod also reads leading spaces, hex (0x10 as 16) and 'infinity', which the
    // integer options refuse.
    if (v.find_first_not_of("0123456789+-.eE") != std::string::npos) throw 0;
    size_t pos = 0;
    double x = std::stod(v, &pos);
    if (pos != v.size() || !std::isfinite(x)) throw 0;
    return x;
  } catch (...) {
    throw Error("option " + option_name(name) + " expects a finite number, got '" + v + "'");
  }
}

float Args::get_float(const std::string& name, float fallback) {
  if (!has(name)) return fallback;
  const double x = get_double(name, fallback);
  const float f = float(x);
  if (!std::isfinite(f) || (x != 0 && f == 0))
    throw Error("option " + option_name(name) + " expects a number a 32-bit float holds (0, or about 1.4e-45 .. 3.4e38 " +
                "in magnitude), got '" + get(name) + "'");
  return f;
}

void Args::reject_unknown() const {
  // A command reads the first of an option's occurrences; a second one would be dropped unseen, so
  // it is refused too, named as repeated rather than as unknown.
  std::vector<std::string> bad, repeated;
  for (size_t i = 0; i < opts_.size(); ++i) {
    if (used_[i]) continue;
    const std::string name = option_name(opts_[i].first);
    bool read = false;
    for (size_t j = 0; j < i; ++j) read = read || (used_[j] && opts_[j].first == opts_[i].first);
    std::vector<std::string>& list = read ? repeated : bad;
    if (std::find(list.begin(), list.end(), name) == list.end()) list.push_back(name);
  }
  auto joined = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
  };
  if (!bad.empty()) throw Error("unknown option(s): " + joined(bad));
  if (!repeated.empty()) throw Error("option(s) given more than once: " + joined(repeated) + " (give each once)");
  // No command takes bare words: one here is a value that lost its quotes (-p two words) or a word
  // after a flag, and would be dropped unseen.
  if (!positional.empty()) {
    std::vector<std::string> quoted;
    for (const std::string& w : positional) quoted.push_back("'" + w + "'");
    throw Error("unexpected argument(s): " + joined(quoted) + " (an option takes one value: quote one with spaces, e.g. -p \"two words\")");
  }
}

}  // namespace vkspec::cli
