// Test data that lives beside the clone in ../shared/ (never copied into the repo).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include <doctest/doctest.h>

namespace vkspec::test {

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

// Path of ../shared/<rel>. If it is missing: under CI=true the test fails (absent data is a
// failure there); elsewhere the test reports clearly that it did not run and returns "".
inline std::string shared_file(const std::string& rel) {
  std::filesystem::path p = std::filesystem::path(VKSPEC_SHARED_DIR) / rel;
  if (std::filesystem::exists(p)) return p.string();
  if (in_ci()) {
    FAIL("CI=true but shared test data is missing: " << p.string());
  } else {
    MESSAGE("NOT RUN: shared test data missing: " << p.string());
  }
  return {};
}

}  // namespace vkspec::test
