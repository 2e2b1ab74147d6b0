// pytorch_model.bin test helpers: the torch.save fixtures tests/torch_fixtures.py writes with
// Debian's python3-torch, and a stored zip archive written with libzip for hand-built pickles.
#pragma once

#include <zip.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "shared_data.hpp"
#include "spec_fixtures.hpp"

namespace vkspec::test {

// The folder tests/torch_fixtures.py filled (once per test run), or "" if it could not run: no
// python3-torch reports NOT RUN (a failure under CI=true, where tools/dev.sh installs it), and a
// script that fails is a test failure with its output.
inline std::string torch_fixtures() {
  static TempDir dir("torch_fixtures");
  static const int state = [] {  // 0 ready, 1 no torch, 2 the script failed
    if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) return 1;
    const std::string cmd = "/usr/bin/python3 " + std::string(VKSPEC_SOURCE_DIR) + "/tests/torch_fixtures.py " +
                            dir.path + " " + VKSPEC_SOURCE_DIR + " > " + dir.path + "/log.txt 2>&1";
    return std::system(cmd.c_str()) == 0 ? 0 : 2;
  }();
  if (state == 1) {
    if (in_ci()) FAIL("CI=true but /usr/bin/python3 cannot import torch (apt-get install python3-torch)");
    MESSAGE("NOT RUN: /usr/bin/python3 cannot import torch (apt-get install python3-torch)");
    return "";
  }
  if (state == 2) {
    std::ifstream log(dir.path + "/log.txt");
    FAIL("tests/torch_fixtures.py failed:\n" << std::string(std::istreambuf_iterator<char>(log), {}));
  }
  return dir.path;
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// A zip archive of `entries` (name, content) as torch.save lays it out: every entry stored
// uncompressed, unless `method` says otherwise (ZIP_CM_DEFLATE for the refusal test).
inline std::vector<uint8_t> make_zip(const std::vector<std::pair<std::string, std::string>>& entries,
                                     int32_t method = ZIP_CM_STORE) {
  TempFile tmp("make_zip.zip");
  int err = 0;
  zip_t* za = zip_open(tmp.path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  REQUIRE(za != nullptr);
  for (const auto& [name, data] : entries) {
    zip_source_t* src = zip_source_buffer(za, data.data(), data.size(), 0);  // read at zip_close
    REQUIRE(src != nullptr);
    const zip_int64_t i = zip_file_add(za, name.c_str(), src, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8);
    REQUIRE(i >= 0);
    REQUIRE(zip_set_file_compression(za, zip_uint64_t(i), method, 0) == 0);
  }
  REQUIRE(zip_close(za) == 0);
  return read_bytes(tmp.path);
}

// Pickle opcodes written by hand: each method appends one opcode and its argument.
struct Pickle {
  std::string b;
  explicit Pickle(int protocol = 2) { b = {'\x80', char(protocol)}; }
  Pickle& op(char c) {
    b += c;
    return *this;
  }
  Pickle& le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b += char(v >> (8 * i));
    return *this;
  }
  Pickle& global(const std::string& module, const std::string& name) {
    b += 'c' + module + '\n' + name + '\n';
    return *this;
  }
  Pickle& str(const std::string& s) {
    op('X').le(s.size(), 4);
    b += s;
    return *this;
  }
  Pickle& integer(int64_t v) {  // LONG1 with all 8 bytes: any int64
    op('\x8a').le(8, 1).le(uint64_t(v), 8);
    return *this;
  }
  Pickle& tuple(const std::vector<int64_t>& v) {
    op('(');
    for (int64_t x : v) integer(x);
    return op('t');
  }
  // collections.OrderedDict() with MARK open for SETITEMS: the start of every state dict.
  Pickle& state_dict_begin() {
    global("collections", "OrderedDict").op(')').op('R');
    return op('(');
  }
  // _rebuild_tensor_v2(('storage', torch.<storage>, key, 'cpu', numel), offset, size, stride,
  // False, OrderedDict()): one tensor as torch.save writes it.
  Pickle& tensor(const std::string& storage, const std::string& key, int64_t numel, int64_t offset,
                 const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
    global("torch._utils", "_rebuild_tensor_v2").op('(');
    op('(').str("storage").global("torch", storage).str(key).str("cpu").integer(numel).op('t').op('Q');
    integer(offset).tuple(size).tuple(stride).op('\x89');
    global("collections", "OrderedDict").op(')').op('R');
    return op('t').op('R');
  }
  Pickle& state_dict_end() { return op('u').op('.'); }
};

// A torch.save-style archive: archive/data.pkl, archive/data/<key> for each storage, archive/version.
inline std::vector<uint8_t> torch_zip(const Pickle& p, const std::vector<std::pair<std::string, std::string>>& storages) {
  std::vector<std::pair<std::string, std::string>> e{{"archive/data.pkl", p.b}};
  for (const auto& [key, bytes] : storages) e.emplace_back("archive/data/" + key, bytes);
  e.emplace_back("archive/version", "3\n");
  return make_zip(e);
}

}  // namespace vkspec::test
