// EAGLE-3 test heads: tests/eagle3_fixtures.py builds them with Debian's torch, in the published
// layout, for a verifier the test wrote to DIR/verifier.gguf.
#pragma once

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include <doctest/doctest.h>

#include "shared_data.hpp"

namespace vkspec::test {

// Runs the fixture script on `dir` (ids: eagle_aux_hidden_state_layer_ids of e3_bin / e3_st, as
// "0,0,0", or "" for the default taps). false when /usr/bin/python3 has no torch (NOT RUN; a
// failure under CI=true); a script that fails is a test failure with its output.
inline bool eagle3_fixtures(const std::string& dir, const std::string& ids = "") {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    if (in_ci()) FAIL("CI=true but /usr/bin/python3 cannot import torch (apt-get install python3-torch)");
    MESSAGE("NOT RUN: /usr/bin/python3 cannot import torch (apt-get install python3-torch)");
    return false;
  }
  const std::string cmd = "/usr/bin/python3 " + std::string(VKSPEC_SOURCE_DIR) + "/tests/eagle3_fixtures.py " + dir +
                          (ids.empty() ? "" : " " + ids) + " > " + dir + "/log.txt 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream log(dir + "/log.txt");
    FAIL("tests/eagle3_fixtures.py failed:\n" << std::string(std::istreambuf_iterator<char>(log), {}));
  }
  return true;
}

}  // namespace vkspec::test
