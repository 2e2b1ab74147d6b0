// Hostile pytorch_model.bin files, pickles built by hand: each must end in a vkspec::Error that
// names the file and the problem (the refused global or opcode, the storage, the view) — never a
// call, a crash, a giant allocation or a deep recursion. Crashes the fuzzer
// (tests/fuzz/fuzz_torch.cpp) finds are added here.
#include <doctest/doctest.h>

#include <cstring>

#include "torch_test_util.hpp"
#include "vkspec/error.hpp"
#include "vkspec/torch_file.hpp"

using namespace vkspec;
using namespace vkspec::test;

namespace {

std::string f32_bytes(size_t n) { return std::string(n * 4, '\0'); }

// The message TorchFile throws for `archive` (and a failed check if it does not throw one).
std::string torch_error(const std::vector<uint8_t>& archive) {
  try {
    (void)TorchFile::from_bytes("hostile.bin", archive);
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL_CHECK("threw a non-vkspec exception: " << e.what());
    return "";
  }
  FAIL_CHECK("did not throw");
  return "";
}
std::string pickle_error(const Pickle& p, const std::vector<std::pair<std::string, std::string>>& storages = {}) {
  return torch_error(torch_zip(p, storages));
}

// A one-tensor state dict {"w": view of storage "0"}.
Pickle one_tensor(const std::string& storage, int64_t numel, int64_t offset, const std::vector<int64_t>& size,
                  const std::vector<int64_t>& stride) {
  Pickle p;
  p.state_dict_begin().str("w").tensor(storage, "0", numel, offset, size, stride);
  return p.state_dict_end();
}

void expect_contains(const std::string& msg, std::initializer_list<const char*> parts) {
  CAPTURE(msg);
  CHECK(msg.find("hostile.bin") != std::string::npos);
  for (const char* s : parts) CHECK_MESSAGE(msg.find(s) != std::string::npos, "missing: " << std::string(s));
}

}  // namespace

TEST_CASE("hostile pytorch_model.bin: a hand-built state dict reads, so the refusals below are the mutation's") {
  const TorchFile f = TorchFile::from_bytes("ok.bin", torch_zip(one_tensor("FloatStorage", 6, 0, {2, 3}, {3, 1}),
                                                                {{"0", f32_bytes(6)}}));
  CHECK(f.get("w", {2, 3}).bytes == 24);
  // The transposed view of the same storage, copied out row-major.
  std::string s;
  for (float v : {0.f, 1.f, 2.f, 3.f, 4.f, 5.f}) s.append(reinterpret_cast<const char*>(&v), 4);
  const TorchFile t = TorchFile::from_bytes("t.bin", torch_zip(one_tensor("FloatStorage", 6, 0, {3, 2}, {1, 3}), {{"0", s}}));
  CHECK(t.get("w", {3, 2}).to_f32() == std::vector<float>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("hostile pytorch_model.bin: globals other than a state dict's are refused by name, nothing runs") {
  // torch.load(weights_only=False) would run `touch`: the marker file must not appear.
  TempFile marker("torch_pwned");
  std::remove(marker.path.c_str());
  Pickle os_system;
  os_system.global("os", "system").str("touch " + marker.path).op('\x85').op('R').op('.');
  expect_contains(pickle_error(os_system), {"GLOBAL 'os.system' is refused"});
  CHECK_FALSE(std::filesystem::exists(marker.path));

  Pickle posix;
  posix.global("posix", "system").str("true").op('\x85').op('R').op('.');
  expect_contains(pickle_error(posix), {"'posix.system' is refused"});

  Pickle eval(4);  // STACK_GLOBAL: module and name from the stack
  eval.op('\x8c').le(8, 1);
  eval.b += "builtins";
  eval.op('\x8c').le(4, 1);
  eval.b += "eval";
  eval.op('\x93').str("1+1").op('\x85').op('R').op('.');
  expect_contains(pickle_error(eval), {"STACK_GLOBAL 'builtins.eval' is refused"});

  // Inside an otherwise valid state dict, as a tensor's hook or as the rebuild function.
  Pickle hidden;
  hidden.state_dict_begin().str("w").global("torch._utils", "_rebuild_tensor_v2").op('(').op('(').str("storage");
  hidden.global("torch", "FloatStorage").str("0").str("cpu").integer(1).op('t').op('Q');
  hidden.integer(0).tuple({1}).tuple({1}).op('\x89').global("builtins", "exec");
  expect_contains(pickle_error(hidden, {{"0", f32_bytes(1)}}), {"'builtins.exec' is refused"});
  Pickle rebuild;
  rebuild.global("torch._utils", "_rebuild_from_type_v2").op('.');
  expect_contains(pickle_error(rebuild), {"'torch._utils._rebuild_from_type_v2' is refused"});
  // An allowed global that is not a constructor: calling a storage type.
  Pickle call_type;
  call_type.global("torch", "FloatStorage").op(')').op('R').op('.');
  expect_contains(pickle_error(call_type), {"torch.FloatStorage", "not a constructor"});
  // Garbage names are quoted printably.
  Pickle binary;
  binary.global(std::string("o\x01s", 3), "sys").op('.');
  expect_contains(pickle_error(binary), {"'o\\x01s.sys' is refused"});
}

TEST_CASE("hostile pytorch_model.bin: opcodes a state dict does not use are refused by name") {
  for (auto [code, name] : {std::pair{'i', "INST"}, {'o', "OBJ"}, {'\x81', "NEWOBJ"}, {'\x82', "EXT1"},
                            {'P', "PERSID"}, {'\x8f', "EMPTY_SET"}, {'\x97', "NEXT_BUFFER"}, {'I', "INT"}}) {
    Pickle p;
    p.op(code).op('.');
    expect_contains(pickle_error(p), {name, "is refused"});
  }
  Pickle unknown;
  unknown.op('\xff').op('.');
  expect_contains(pickle_error(unknown), {"unknown opcode 0xff", "byte 2"});
  Pickle proto;
  proto.b = "\x80\x06.";
  expect_contains(pickle_error(proto), {"protocol 6"});
  Pickle truncated;
  truncated.state_dict_begin().str("w");
  expect_contains(pickle_error(truncated), {"ends without STOP"});
  Pickle short_string;
  short_string.op('X').le(1000, 4);
  short_string.b += "abc";
  expect_contains(pickle_error(short_string), {"BINUNICODE wants 1000 bytes"});
  Pickle underflow;
  underflow.op('(').op('R').op('.');
  expect_contains(pickle_error(underflow), {"stack underflow"});
  Pickle two_values;
  two_values.op('N').op('N').op('.');
  expect_contains(pickle_error(two_values), {"STOP with 2 values"});
  Pickle wide;
  wide.op('\x8a').le(9, 1).le(0, 8).le(0, 1).op('.');
  expect_contains(pickle_error(wide), {"9 bytes exceeds 64 bits"});
}

TEST_CASE("hostile pytorch_model.bin: memo indices, deep nesting and cycles stay bounded") {
  Pickle get;
  get.op('j').le(0xffffffffu, 4).op('.');
  expect_contains(pickle_error(get), {"LONG_BINGET of memo entry 4294967295, which was never stored"});
  Pickle put;  // a huge index costs one entry, not a table that large
  put.op('N').op('r').le(0xfffffff0u, 4).op('0').op('j').le(0xfffffff0u, 4).op('.');
  expect_contains(pickle_error(put), {"holds None, expected a state dict"});

  const size_t deep = 1'000'000;
  Pickle lists;  // a list inside a list ... a million deep: freed without recursion
  for (size_t i = 0; i < deep; ++i) lists.op(']');
  for (size_t i = 1; i < deep; ++i) lists.op('a');
  lists.op('.');
  expect_contains(pickle_error(lists), {"holds a list, expected a state dict"});
  Pickle tuples;
  for (size_t i = 0; i < deep; ++i) tuples.op('(');
  tuples.op(')');
  for (size_t i = 0; i < deep; ++i) tuples.op('t');
  tuples.op('.');
  expect_contains(pickle_error(tuples), {"holds a tuple"});
  Pickle marks;
  for (size_t i = 0; i < 1'100'000; ++i) marks.op('(');
  expect_contains(pickle_error(marks), {"open MARKs"});

  Pickle cycle;  // a list appended to itself, and a dict holding itself: no leak, no loop
  cycle.op(']').op('q').le(0, 1).op('h').le(0, 1).op('a').op('0');
  cycle.op('}').op('q').le(1, 1).str("k").op('h').le(1, 1).op('s').op('.');
  expect_contains(pickle_error(cycle), {"state dict entry 'k' holds a dict, expected a tensor"});

  Pickle copies;  // one long string pushed a million times: references, not copies
  copies.str(std::string(100'000, 'x')).op('q').le(0, 1).op('0');
  for (size_t i = 0; i < 500'000; ++i) copies.op('h').le(0, 1);
  copies.op('.');
  expect_contains(pickle_error(copies), {"STOP with 500000 values"});
}

TEST_CASE("hostile pytorch_model.bin: views and storages outside the archive are refused") {
  const auto six = std::vector<std::pair<std::string, std::string>>{{"0", f32_bytes(6)}};
  expect_contains(pickle_error(one_tensor("FloatStorage", 6, 5, {2}, {1}), six),
                  {"offset 5, size (2), stride (1)", "reaches past the end of its storage"});
  expect_contains(pickle_error(one_tensor("FloatStorage", 6, 0, {2, 3}, {4, 1}), six), {"reaches past the end"});
  expect_contains(pickle_error(one_tensor("FloatStorage", 6, 0, {int64_t(1) << 40, int64_t(1) << 40}, {int64_t(1) << 40, 1}), six),
                  {"overflows 64 bits"});
  expect_contains(pickle_error(one_tensor("FloatStorage", 6, -1, {2}, {1}), six), {"storage offset", "is negative"});
  expect_contains(pickle_error(one_tensor("FloatStorage", 6, 0, {-2}, {1}), six), {"size[0]", "is negative"});
  expect_contains(pickle_error(one_tensor("FloatStorage", 6, 0, {100}, {0}), six), {"more elements than its storage"});
  // numel x element size overflows: refused before any allocation.
  expect_contains(pickle_error(one_tensor("FloatStorage", int64_t(1) << 62, 0, {2}, {1}), six),
                  {"storage '0' of 4611686018427387904 F32 elements overflows 64 bits"});
  expect_contains(pickle_error(one_tensor("FloatStorage", 1 << 20, 0, {2}, {1}), six),
                  {"archive/data/0 holds 24 bytes", "4194304 bytes"});
  expect_contains(pickle_error(one_tensor("FloatStorage", 6, 0, {2}, {1})), {"has no entry archive/data/0"});
  expect_contains(pickle_error(one_tensor("DoubleStorage", 6, 0, {2}, {1}), six),
                  {"storage type torch.DoubleStorage is not supported"});
  Pickle path_key;
  path_key.state_dict_begin().str("w").tensor("FloatStorage", "../../etc/passwd", 1, 0, {1}, {1}).state_dict_end();
  expect_contains(pickle_error(path_key), {"key '../../etc/passwd' is not 1-64 letters"});
  Pickle twice;  // one key referenced with two sizes
  twice.state_dict_begin().str("a").tensor("FloatStorage", "0", 6, 0, {1}, {1});
  twice.str("b").tensor("HalfStorage", "0", 6, 0, {1}, {1}).state_dict_end();
  expect_contains(pickle_error(twice, six), {"storage '0' is referenced as 6 F16 elements and as 6 F32"});
  Pickle dup;
  dup.state_dict_begin().str("w").tensor("FloatStorage", "0", 6, 0, {1}, {1});
  dup.str("w").tensor("FloatStorage", "0", 6, 0, {1}, {1}).state_dict_end();
  expect_contains(pickle_error(dup, six), {"tensor w appears twice"});
  Pickle not_tensor;
  not_tensor.state_dict_begin().str("w").integer(3).state_dict_end();
  expect_contains(pickle_error(not_tensor), {"state dict entry 'w' holds an int, expected a tensor"});
  Pickle bad_pid;
  bad_pid.op('(').str("storage").op('t').op('Q').op('.');
  expect_contains(pickle_error(bad_pid), {"persistent id", "a tuple of 1 items"});
}

TEST_CASE("hostile pytorch_model.bin: broken archives are refused before anything is allocated from them") {
  const Pickle p = one_tensor("FloatStorage", 6, 0, {2, 3}, {3, 1});
  const std::vector<uint8_t> good = torch_zip(p, {{"0", f32_bytes(6)}});
  expect_contains(torch_error({}), {"found 0"});  // libzip reads no bytes as an empty archive
  expect_contains(torch_error({good.begin(), good.begin() + ptrdiff_t(good.size() / 2)}), {"not a torch.save zip archive"});
  const std::vector<uint8_t> legacy{0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};
  expect_contains(torch_error(legacy), {"before PyTorch 1.6"});
  expect_contains(torch_error(make_zip({{"archive/version", "3\n"}})), {"expected one <prefix>/data.pkl", "found 0"});
  expect_contains(torch_error(make_zip({{"a/data.pkl", p.b}, {"b/data.pkl", p.b}})), {"found 2"});
  expect_contains(torch_error(make_zip({{"archive/data.pkl", p.b}, {"archive/data/0", f32_bytes(6)}}, ZIP_CM_DEFLATE)),
                  {"compressed with zip method 8"});
  expect_contains(torch_error(make_zip({{"archive/data.pkl", p.b}, {"archive/byteorder", "big"}, {"archive/data/0", f32_bytes(6)}})),
                  {"byteorder is 'big'"});

  // The storage entry's size rewritten to 2 GB in both the local header and the central directory.
  std::vector<uint8_t> big = good;
  const std::string name = "archive/data/0";
  for (size_t i = 0; i + 46 < big.size(); ++i) {
    const bool local = std::memcmp(&big[i], "PK\x03\x04", 4) == 0, central = std::memcmp(&big[i], "PK\x01\x02", 4) == 0;
    const size_t name_at = local ? 30 : 46, sizes_at = local ? 18 : 20;
    if ((local || central) && i + name_at + name.size() <= big.size() &&
        std::memcmp(&big[i + name_at], name.data(), name.size()) == 0)
      for (size_t b = 0; b < 8; ++b) big[i + sizes_at + b] = b % 4 == 3 ? 0x7f : 0xff;  // compressed, then full size
  }
  // libzip's consistency check (the entry would overlap the directory) refuses it first.
  expect_contains(torch_error(big), {"not a torch.save zip archive"});
  // One flipped byte inside the stored storage: the CRC catches it.
  std::vector<uint8_t> flipped = good;
  const std::vector<uint8_t> pkl(p.b.begin(), p.b.end());
  auto at = std::search(flipped.begin(), flipped.end(), pkl.begin(), pkl.end());
  REQUIRE(at != flipped.end());
  *(at + 10) ^= 0x20;
  expect_contains(torch_error(flipped), {"archive/data.pkl: CRC error"});
}
