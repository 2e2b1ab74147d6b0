#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include "cli/commands.hpp"
#include "vkspec/error.hpp"

namespace vkspec::cli {

std::vector<Command>& commands() {
  static std::vector<Command> all;
  return all;
}

}  // namespace vkspec::cli

static void usage() {
  std::fprintf(stderr, "usage: vkspec <command> [options]\n\ncommands:\n");
  for (auto& c : vkspec::cli::commands()) std::fprintf(stderr, "  %-14s %s\n", c.name.c_str(), c.summary.c_str());
}

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    usage();
    return argc < 2 ? 2 : 0;
  }
  std::string name = argv[1];
  std::vector<std::string> rest(argv + 2, argv + argc);
  for (auto& c : vkspec::cli::commands()) {
    if (c.name != name) continue;
    if (rest.size() == 1 && (rest[0] == "--help" || rest[0] == "-h")) {
      std::printf("vkspec %s: %s\n", c.name.c_str(), c.summary.c_str());
      return 0;
    }
    int rc = 1;
    bool reported = false;  // the command's own error already said what failed
    try {
      rc = c.run(rest);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vkspec %s: error: %s\n", name.c_str(), e.what());
      reported = true;
    }
    // Results go to standard output: a write that failed there (a full disk, /dev/full) is an
    // error, not a success with the results lost.
    errno = 0;
    const bool flush_failed = std::fflush(stdout) != 0;
    if (flush_failed || std::ferror(stdout)) {
      if (!reported)  // e.g. `logits --out -` names the failed write itself: one message, not two
        std::fprintf(stderr, "vkspec %s: error: cannot write standard output: %s\n", name.c_str(),
                     errno ? std::strerror(errno) : "a write failed");
      return 1;
    }
    return rc;
  }
  std::fprintf(stderr, "vkspec: unknown command '%s'\n", name.c_str());
  usage();
  return 2;
}
