// A pickle interpreter for torch.save state dicts that executes nothing.
//
// Python's unpickler calls whatever GLOBAL names (os.system, builtins.eval, ...) when REDUCE
// applies it; here a GLOBAL resolves only to an entry of kAllowed, and REDUCE interprets those
// few entries itself: OrderedDict() makes an empty dict, _rebuild_tensor_v2 records a strided view
// of a storage, _rebuild_parameter unwraps one. Every other global or opcode is refused by name.
//
// Format facts (Python's pickletools documents each opcode): integers are little-endian, BINFLOAT
// is big-endian; MARK pushes a fence that TUPLE/LIST/DICT/APPENDS/SETITEMS pop to; BINPERSID
// hands the top value to the loader, which torch.save makes the tuple
// ('storage', storage type, key, location, numel).
//
// Memory stays proportional to the pickle: values are shared (a BINGET pushes a reference, never
// a copy), and the stack, memo and object count have fixed caps. The interpreter is one loop
// with no recursion, and teardown empties every object before freeing it, so a million-deep
// nesting or a container holding itself neither overflows the C++ stack nor leaks.
#include "torch_pickle.hpp"

#include <bit>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "vkspec/error.hpp"

namespace vkspec::torch_pickle {

namespace {

// Far above any state dict (SETITEMS batches 1,000 pairs; a 70B model has ~1,000 tensors), far
// below what exhausts memory (a value is 32 bytes, an object about 80).
constexpr size_t kMaxStack = size_t(1) << 20;
constexpr size_t kMaxMemo = size_t(1) << 20;
constexpr size_t kMaxObjects = size_t(1) << 21;
constexpr size_t kMaxRank = 16;
constexpr size_t kMaxTensors = size_t(1) << 18;  // a view costs ~300 bytes; real files have < 10,000

enum class Kind : uint8_t { None, Bool, Int, Float, Str, Bytes, Tuple, List, Dict, Global, Storage, Tensor };

const char* kind_name(Kind k) {
  static const char* const names[] = {"None",  "a bool", "an int",  "a float",   "a string",  "bytes",
                                      "a tuple", "a list", "a dict", "a global", "a storage", "a tensor"};
  return names[size_t(k)];
}

// What a GLOBAL may name. Nothing is ever called: REDUCE interprets these itself.
enum class Role : uint8_t { OrderedDict, RebuildTensor, RebuildParameter, StorageType, Dtype };
struct Allowed {
  const char* module;
  const char* name;
  Role role;
  const char* dtype;  // storage types and dtype constants
};
constexpr Allowed kAllowed[] = {
    {"collections", "OrderedDict", Role::OrderedDict, nullptr},
    {"torch._utils", "_rebuild_tensor_v2", Role::RebuildTensor, nullptr},
    {"torch._utils", "_rebuild_parameter", Role::RebuildParameter, nullptr},
    {"torch", "FloatStorage", Role::StorageType, "F32"},
    {"torch", "HalfStorage", Role::StorageType, "F16"},
    {"torch", "BFloat16Storage", Role::StorageType, "BF16"},
    {"torch", "LongStorage", Role::StorageType, "I64"},
    {"torch", "BoolStorage", Role::StorageType, "BOOL"},
    {"torch", "float32", Role::Dtype, "F32"},
    {"torch", "float16", Role::Dtype, "F16"},
    {"torch", "bfloat16", Role::Dtype, "BF16"},
    {"torch", "int64", Role::Dtype, "I64"},
    {"torch", "bool", Role::Dtype, "BOOL"},
};

struct Obj;
struct Value {
  Kind kind = Kind::None;
  union {
    int64_t i = 0;  // Bool, Int; Global: index into kAllowed; Storage, Tensor: index into the result
    double f;       // Float
  };
  std::shared_ptr<Obj> obj;  // Str, Bytes, Tuple, List, Dict
};
struct Obj {
  std::string s;             // Str, Bytes
  std::vector<Value> items;  // Tuple, List; Dict: key, value, key, value, ...
};

// Text from the file as it may appear in a message: printable ASCII, at most 80 characters.
std::string printable(std::string_view s) {
  std::string o;
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      o += char(c);
    } else {
      static const char hex[] = "0123456789abcdef";
      o += "\\x";
      o += hex[c >> 4];
      o += hex[c & 15];
    }
  }
  return s.size() > 80 ? o + "..." : o;
}

const char* opcode_name(uint8_t op) {
  switch (op) {
    case '(': return "MARK";            case '.': return "STOP";           case '0': return "POP";
    case '1': return "POP_MARK";        case '2': return "DUP";            case 'F': return "FLOAT";
    case 'I': return "INT";             case 'J': return "BININT";         case 'K': return "BININT1";
    case 'L': return "LONG";            case 'M': return "BININT2";        case 'N': return "NONE";
    case 'P': return "PERSID";          case 'Q': return "BINPERSID";      case 'R': return "REDUCE";
    case 'S': return "STRING";          case 'T': return "BINSTRING";      case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";         case 'X': return "BINUNICODE";     case 'a': return "APPEND";
    case 'b': return "BUILD";           case 'c': return "GLOBAL";         case 'd': return "DICT";
    case '}': return "EMPTY_DICT";      case 'e': return "APPENDS";        case 'g': return "GET";
    case 'h': return "BINGET";          case 'i': return "INST";           case 'j': return "LONG_BINGET";
    case 'l': return "LIST";            case ']': return "EMPTY_LIST";     case 'o': return "OBJ";
    case 'p': return "PUT";             case 'q': return "BINPUT";         case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";         case 't': return "TUPLE";          case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";        case 'G': return "BINFLOAT";       case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";         case 0x82: return "EXT1";          case 0x83: return "EXT2";
    case 0x84: return "EXT4";           case 0x85: return "TUPLE1";        case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";         case 0x88: return "NEWTRUE";       case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";          case 0x8b: return "LONG4";         case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";  case 0x8c: return "SHORT_BINUNICODE"; case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";      case 0x8f: return "EMPTY_SET";     case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";      case 0x92: return "NEWOBJ_EX";     case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";        case 0x95: return "FRAME";         case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

class Unpickler {
 public:
  Unpickler(const uint8_t* data, size_t size, const std::string& where) : p_(data), n_(size), where_(where) {}
  Unpickler(const Unpickler&) = delete;
  Unpickler& operator=(const Unpickler&) = delete;
  ~Unpickler() {
    // Empty every object before any is freed: no destructor then reaches another object, so
    // freeing is flat however deep the nesting, and cycles (a list appended to itself) break.
    for (auto& o : objects_) o->items.clear();
  }
  StateDict run();

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw Error(where_ + " byte " + std::to_string(op_pos_) + ": " + msg);
  }
  const char* op() const { return opcode_name(p_[op_pos_]); }

  // ---- reading the opcode's argument ----
  std::string_view bytes(uint64_t len) {
    if (len > n_ - pos_)
      fail(std::string(op()) + " wants " + std::to_string(len) + " bytes but the pickle has " + std::to_string(n_ - pos_) +
           " left (truncated or corrupt)");
    std::string_view s(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
    pos_ += size_t(len);
    return s;
  }
  uint64_t le(size_t width) {  // unsigned little-endian integer
    const std::string_view b = bytes(width);
    uint64_t v = 0;
    for (size_t i = width; i-- > 0;) v = v << 8 | uint8_t(b[i]);
    return v;
  }
  std::string_view line() {  // GLOBAL's text arguments end in '\n'
    const void* nl = std::memchr(p_ + pos_, '\n', n_ - pos_);
    if (!nl) fail("GLOBAL: its module and name do not end in a newline before the end of the pickle");
    const size_t len = size_t(static_cast<const uint8_t*>(nl) - (p_ + pos_));
    std::string_view s = bytes(len);
    ++pos_;
    return s;
  }

  // ---- the stack ----
  size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(Value v) {
    if (stack_.size() >= kMaxStack) fail("stack holds more than " + std::to_string(kMaxStack) + " values");
    stack_.push_back(std::move(v));
  }
  Value pop() {
    if (stack_.size() <= fence()) fail(std::string(op()) + " finds no value above the last MARK (stack underflow)");
    Value v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  Value& top() {
    if (stack_.size() <= fence()) fail(std::string(op()) + " finds no value above the last MARK (stack underflow)");
    return stack_.back();
  }
  std::vector<Value> pop_mark() {
    if (marks_.empty()) fail(std::string(op()) + " without a MARK");
    std::vector<Value> items(std::make_move_iterator(stack_.begin() + ptrdiff_t(marks_.back())),
                             std::make_move_iterator(stack_.end()));
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  Value make(Kind k, std::vector<Value> items = {}, std::string_view s = {}) {
    if (objects_.size() >= kMaxObjects) fail("the pickle builds more than " + std::to_string(kMaxObjects) + " objects");
    Value v;
    v.kind = k;
    v.obj = std::make_shared<Obj>();
    v.obj->items = std::move(items);
    v.obj->s = s;
    objects_.push_back(v.obj);
    return v;
  }
  static Value scalar(Kind k, int64_t i) {
    Value v;
    v.kind = k;
    v.i = i;
    return v;
  }
  Obj& expect(const Value& v, Kind k, const std::string& what) const {
    if (v.kind != k) fail(what + ": expected " + kind_name(k) + ", found " + kind_name(v.kind));
    return *v.obj;
  }
  uint64_t expect_count(const Value& v, const std::string& what) const {
    if (v.kind != Kind::Int || v.i < 0) {
      if (v.kind == Kind::Int) fail(what + ": " + std::to_string(v.i) + " is negative");
      fail(what + ": expected an int, found " + kind_name(v.kind));
    }
    return uint64_t(v.i);
  }
  void memo_put(uint64_t idx) {
    if (memo_.size() >= kMaxMemo && !memo_.count(idx))
      fail("the memo holds more than " + std::to_string(kMaxMemo) + " entries");
    memo_[idx] = top();
  }
  void memo_get(uint64_t idx) {
    auto it = memo_.find(idx);
    if (it == memo_.end()) fail(std::string(op()) + " of memo entry " + std::to_string(idx) + ", which was never stored");
    push(it->second);
  }

  // ---- what the allowed globals become ----
  Value global(std::string_view module, std::string_view name);
  Value reduce(const Value& callable, const Obj& args);
  Value persistent_storage(const Value& pid);
  Value rebuild_tensor(const Obj& args);
  StateDict finish(Value root);

  const uint8_t* p_;
  size_t n_, pos_ = 0, op_pos_ = 0;
  const std::string& where_;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value> memo_;
  std::vector<std::shared_ptr<Obj>> objects_;
  std::vector<Storage> storages_;
  std::vector<TensorView> views_;  // every tensor rebuilt, named or not
  std::map<std::string, size_t, std::less<>> storage_index_;
};

Value Unpickler::global(std::string_view module, std::string_view name) {
  for (size_t i = 0; i < std::size(kAllowed); ++i)
    if (module == kAllowed[i].module && name == kAllowed[i].name) return scalar(Kind::Global, int64_t(i));
  const std::string full = printable(module) + "." + printable(name);
  if (module == "torch" && name.size() > 7 && name.substr(name.size() - 7) == "Storage")
    fail("storage type " + full + " is not supported (FloatStorage, HalfStorage, BFloat16Storage, LongStorage and "
         "BoolStorage are)");
  fail(std::string(op()) + " '" + full + "' is refused: a state dict needs only collections.OrderedDict, "
       "torch._utils._rebuild_tensor_v2 / _rebuild_parameter and torch's storage types, and nothing in the file is "
       "ever called (a pickle naming other callables may be malicious)");
}

Value Unpickler::persistent_storage(const Value& pid) {
  const std::string what = "persistent id ('storage', type, key, location, numel)";
  const Obj& t = expect(pid, Kind::Tuple, what);
  if (t.items.size() != 5) fail(what + ": a tuple of " + std::to_string(t.items.size()) + " items");
  if (expect(t.items[0], Kind::Str, what + " item 0").s != "storage")
    fail(what + ": item 0 is '" + printable(t.items[0].obj->s) + "', expected 'storage'");
  const Value& type = t.items[1];
  if (type.kind != Kind::Global || kAllowed[type.i].role != Role::StorageType)
    fail(what + ": item 1 is " + (type.kind == Kind::Global ? std::string(kAllowed[type.i].module) + "." +
                                                                  kAllowed[type.i].name
                                                            : kind_name(type.kind)) +
         ", expected a storage type");
  const std::string& key = expect(t.items[2], Kind::Str, what + " item 2 (key)").s;
  // torch names storages 0, 1, 2, ...: a key is a file name under data/, never a path.
  bool plain = !key.empty() && key.size() <= 64;
  for (char c : key) plain &= (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (!plain) fail(what + ": key '" + printable(key) + "' is not 1-64 letters, digits or '_'");
  (void)expect(t.items[3], Kind::Str, what + " item 3 (location)");
  const uint64_t numel = expect_count(t.items[4], what + " item 4 (numel)");
  Storage s{key, kAllowed[type.i].dtype, numel};
  auto [it, fresh] = storage_index_.try_emplace(key, storages_.size());
  if (fresh) {
    storages_.push_back(std::move(s));
  } else if (const Storage& o = storages_[it->second]; o.dtype != s.dtype || o.numel != s.numel) {
    fail("storage '" + key + "' is referenced as " + std::to_string(numel) + " " + s.dtype + " elements and as " +
         std::to_string(o.numel) + " " + o.dtype + " elements");
  }
  return scalar(Kind::Storage, int64_t(it->second));
}

Value Unpickler::rebuild_tensor(const Obj& args) {
  const std::string fn = "_rebuild_tensor_v2";
  if (args.items.size() != 6 && args.items.size() != 7)
    fail(fn + " takes (storage, offset, size, stride, requires_grad, hooks[, metadata]), given " +
         std::to_string(args.items.size()) + " arguments");
  const Value& st = args.items[0];
  if (st.kind != Kind::Storage) fail(fn + " argument 0: expected a storage, found " + std::string(kind_name(st.kind)));
  TensorView t;
  t.storage = size_t(st.i);
  t.offset = expect_count(args.items[1], fn + " argument 1 (storage offset)");
  const Obj& size = expect(args.items[2], Kind::Tuple, fn + " argument 2 (size)");
  const Obj& stride = expect(args.items[3], Kind::Tuple, fn + " argument 3 (stride)");
  if (size.items.size() != stride.items.size())
    fail(fn + ": size has " + std::to_string(size.items.size()) + " dimensions, stride " +
         std::to_string(stride.items.size()));
  if (size.items.size() > kMaxRank) fail(fn + ": rank " + std::to_string(size.items.size()) + " exceeds " + std::to_string(kMaxRank));
  for (size_t d = 0; d < size.items.size(); ++d) {
    t.shape.push_back(expect_count(size.items[d], fn + " size[" + std::to_string(d) + "]"));
    t.stride.push_back(expect_count(stride.items[d], fn + " stride[" + std::to_string(d) + "]"));
  }
  if (args.items[4].kind != Kind::Bool) fail(fn + " argument 4 (requires_grad): expected a bool, found " + kind_name(args.items[4].kind));
  (void)expect(args.items[5], Kind::Dict, fn + " argument 5 (backward hooks)");
  // The view's last element, overflow-checked, must lie inside the storage; an empty tensor
  // reads nothing.
  const Storage& s = storages_[t.storage];
  uint64_t last = t.offset, numel = 1;
  bool empty = false, overflow = false;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (t.shape[d] == 0) empty = true;
    overflow |= __builtin_mul_overflow(numel, t.shape[d], &numel);
    uint64_t reach;
    overflow |= __builtin_mul_overflow(t.shape[d] ? t.shape[d] - 1 : 0, t.stride[d], &reach);
    overflow |= __builtin_add_overflow(last, reach, &last);
  }
  std::string view = "storage '" + s.key + "' of " + std::to_string(s.numel) + " " + s.dtype + " elements, offset " +
                     std::to_string(t.offset) + ", size (";
  for (size_t d = 0; d < t.shape.size(); ++d) view += (d ? ", " : "") + std::to_string(t.shape[d]);
  view += "), stride (";
  for (size_t d = 0; d < t.stride.size(); ++d) view += (d ? ", " : "") + std::to_string(t.stride[d]);
  view += ")";
  if (overflow && !empty) fail(fn + ": the view " + view + " overflows 64 bits");
  if (!empty && last >= s.numel) fail(fn + ": the view " + view + " reaches past the end of its storage");
  // Broadcast views (stride 0, overlapping rows) would be copied out larger than the storage: a
  // state dict never holds them, and refusing keeps every copy within the archive's size.
  if (!empty && numel > s.numel) fail(fn + ": the view " + view + " has more elements than its storage (overlapping strides are not supported)");
  if (views_.size() >= kMaxTensors) fail("more than " + std::to_string(kMaxTensors) + " tensors");
  views_.push_back(std::move(t));
  return scalar(Kind::Tensor, int64_t(views_.size() - 1));
}

Value Unpickler::reduce(const Value& callable, const Obj& args) {
  if (callable.kind != Kind::Global)
    fail(std::string("REDUCE applies ") + kind_name(callable.kind) + ", expected an allowed global");
  const Allowed& g = kAllowed[callable.i];
  const std::string name = std::string(g.module) + "." + g.name;
  switch (g.role) {
    case Role::OrderedDict:
      if (!args.items.empty()) fail(name + " with arguments (only the empty constructor is supported)");
      return make(Kind::Dict);
    case Role::RebuildTensor:
      return rebuild_tensor(args);
    case Role::RebuildParameter:  // (data, requires_grad, backward_hooks): the data is the tensor
      if (args.items.size() != 3 || args.items[0].kind != Kind::Tensor)
        fail(name + " takes (tensor, requires_grad, hooks)");
      return args.items[0];
    default:
      fail("REDUCE applies " + name + ", which is a type, not a constructor a state dict uses");
  }
}

StateDict Unpickler::finish(Value root) {
  if (root.kind != Kind::Dict)
    fail(std::string("the pickle holds ") + kind_name(root.kind) + ", expected a state dict (a dict of tensors)");
  const std::vector<Value>& kv = root.obj->items;
  StateDict sd;
  sd.storages = std::move(storages_);
  for (size_t i = 0; i + 1 < kv.size(); i += 2) {
    const std::string& key = expect(kv[i], Kind::Str, "state dict key").s;
    if (kv[i + 1].kind != Kind::Tensor)
      fail("state dict entry '" + printable(key) + "' holds " + kind_name(kv[i + 1].kind) + ", expected a tensor");
    // The same tensor object under two names (tied weights) is one view, listed under each.
    sd.tensors.emplace_back(key, views_[size_t(kv[i + 1].i)]);
  }
  return sd;
}

StateDict Unpickler::run() {
  for (;;) {
    op_pos_ = pos_;
    if (pos_ >= n_) fail("the pickle ends without STOP (truncated)");
    const uint8_t code = p_[pos_++];
    switch (code) {
      case 0x80: {  // PROTO
        const uint64_t v = le(1);
        if (v > 5) fail("pickle protocol " + std::to_string(v) + " is newer than 5");
        break;
      }
      case 0x95: (void)le(8); break;  // FRAME: only groups opcodes for buffered reading
      case '.': {                     // STOP
        if (!marks_.empty() || stack_.size() != 1)
          fail("STOP with " + std::to_string(stack_.size()) + " values and " + std::to_string(marks_.size()) +
               " open MARKs on the stack, expected one value");
        return finish(std::move(stack_.back()));
      }
      case '(':
        if (marks_.size() >= kMaxStack) fail("more than " + std::to_string(kMaxStack) + " open MARKs");
        marks_.push_back(stack_.size());
        break;
      case '0':  // POP: a value, or the mark if nothing stands above it
        if (stack_.size() == fence() && !marks_.empty()) marks_.pop_back();
        else (void)pop();
        break;
      case '1': (void)pop_mark(); break;
      case '2': push(Value(top())); break;
      case 'N': push(Value()); break;
      case 0x88: push(scalar(Kind::Bool, 1)); break;
      case 0x89: push(scalar(Kind::Bool, 0)); break;
      case 'J': push(scalar(Kind::Int, int64_t(int32_t(uint32_t(le(4)))))); break;
      case 'K': push(scalar(Kind::Int, int64_t(le(1)))); break;
      case 'M': push(scalar(Kind::Int, int64_t(le(2)))); break;
      case 0x8a: {  // LONG1: n bytes of little-endian two's complement
        const uint64_t n = le(1);
        if (n > 8) fail("LONG1 integer of " + std::to_string(n) + " bytes exceeds 64 bits");
        uint64_t v = n ? le(size_t(n)) : 0;
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t(0) << (8 * n);  // sign-extend
        push(scalar(Kind::Int, int64_t(v)));
        break;
      }
      case 'G': {  // BINFLOAT: big-endian IEEE double
        const std::string_view b = bytes(8);
        uint64_t bits = 0;
        for (char c : b) bits = bits << 8 | uint8_t(c);
        Value v;
        v.kind = Kind::Float;
        v.f = std::bit_cast<double>(bits);
        push(v);
        break;
      }
      case 'X': push(make(Kind::Str, {}, bytes(le(4)))); break;
      case 0x8c: push(make(Kind::Str, {}, bytes(le(1)))); break;
      case 0x8d: push(make(Kind::Str, {}, bytes(le(8)))); break;
      case 'B': push(make(Kind::Bytes, {}, bytes(le(4)))); break;
      case 'C': push(make(Kind::Bytes, {}, bytes(le(1)))); break;
      case 0x8e: push(make(Kind::Bytes, {}, bytes(le(8)))); break;
      case ')': push(make(Kind::Tuple)); break;
      case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
        std::vector<Value> items(code - 0x84);
        for (size_t i = items.size(); i-- > 0;) items[i] = pop();
        push(make(Kind::Tuple, std::move(items)));
        break;
      }
      case 't': push(make(Kind::Tuple, pop_mark())); break;
      case ']': push(make(Kind::List)); break;
      case 'l': push(make(Kind::List, pop_mark())); break;
      case 'a': {
        Value v = pop();
        expect(top(), Kind::List, "APPEND target").items.push_back(std::move(v));
        break;
      }
      case 'e': {
        std::vector<Value> items = pop_mark();
        Obj& list = expect(top(), Kind::List, "APPENDS target");
        for (Value& v : items) list.items.push_back(std::move(v));
        break;
      }
      case '}': push(make(Kind::Dict)); break;
      case 'd': case 'u': {  // DICT, SETITEMS: key, value pairs above the mark
        std::vector<Value> items = pop_mark();
        if (items.size() % 2) fail(std::string(op()) + " with an odd number (" + std::to_string(items.size()) + ") of keys and values");
        if (code == 'd') {
          push(make(Kind::Dict, std::move(items)));
        } else {
          Obj& dict = expect(top(), Kind::Dict, "SETITEMS target");
          for (Value& v : items) dict.items.push_back(std::move(v));
        }
        break;
      }
      case 's': {
        Value v = pop(), k = pop();
        Obj& dict = expect(top(), Kind::Dict, "SETITEM target");
        dict.items.push_back(std::move(k));
        dict.items.push_back(std::move(v));
        break;
      }
      case 'c': {
        const std::string_view module = line();
        const std::string_view name = line();
        push(global(module, name));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        const Value name = pop(), module = pop();
        push(global(expect(module, Kind::Str, "STACK_GLOBAL module").s, expect(name, Kind::Str, "STACK_GLOBAL name").s));
        break;
      }
      case 'Q': push(persistent_storage(pop())); break;
      case 'R': {
        const Value args = pop(), callable = pop();
        push(reduce(callable, expect(args, Kind::Tuple, "REDUCE arguments")));
        break;
      }
      case 'b': {  // BUILD: only the instance state of an OrderedDict (state_dict's _metadata)
        (void)pop();
        if (top().kind != Kind::Dict) fail(std::string("BUILD on ") + kind_name(top().kind) + " (only an OrderedDict's state is accepted)");
        break;
      }
      case 'q': memo_put(le(1)); break;
      case 'r': memo_put(le(4)); break;
      case 0x94: memo_put(memo_.size()); break;
      case 'h': memo_get(le(1)); break;
      case 'j': memo_get(le(4)); break;
      default: {
        const char* name = opcode_name(code);
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", code);
        if (!name) fail(std::string("unknown opcode ") + hex + " (not a pickle, or corrupt)");
        fail(std::string("opcode ") + name + " (" + hex + ") is refused: torch.save state dicts do not use it, and "
             "it can build objects other than tensors");
      }
    }
  }
}

}  // namespace

StateDict parse_state_dict(const uint8_t* data, size_t size, const std::string& where) {
  if (size > kMaxPickleBytes)
    throw Error(where + ": " + std::to_string(size) + " bytes of pickle, more than a state dict's limit of " +
                std::to_string(kMaxPickleBytes));
  Unpickler u(data, size, where);
  return u.run();
}

}  // namespace vkspec::torch_pickle
