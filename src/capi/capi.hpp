// What the C API's handles hold (include/vkspec/vkspec.h): shared pointers to the C++ objects, so
// handles can be destroyed in any order, and each handle's last error text.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "vkspec/context.hpp"
#include "vkspec/eagle_head.hpp"
#include "vkspec/engine.hpp"
#include "vkspec/gguf.hpp"
#include "vkspec/tokenizer.hpp"
#include "vkspec/vkspec.h"

namespace vkspec::capi {

// The device. Every C call on a runtime, or on a model or context made on it, holds `mu` (but a
// model load: it touches only the new model and the Context, which is safe from several threads),
// so calls on one context or model serialize.
struct Runtime {
  // Held by every call but while a blocking call waits for its own submission on the GPU
  // (vkspec_wait, vkspec_generate, a start, a destroy) and while a start builds and submits (its
  // context's other calls refused meanwhile): a poll, submit or cancel from another thread, on
  // any other context, goes ahead meanwhile.
  std::recursive_mutex mu;
  // Signalled when the part of a context's start done without `mu` ends (vkspec_context::start_unlocked).
  std::condition_variable_any built;
  ContextOptions::QueueLock app_lock;  // the application's queue lock, called inside ours
  std::unique_ptr<Context> ctx;
};

// A loaded model: the verifier's and heads' weights on the device, uploaded once and shared by
// every context made from it (each context's Instance holds the same shared_ptrs).
struct Model {
  std::shared_ptr<Runtime> rt;  // first: destroyed last
  std::unique_ptr<GgufFile> file;
  std::optional<Tokenizer> tokenizer;
  std::string tokenizer_error;  // why a file's tokenizer could not be loaded ("" if it was, or has none)
  std::string warnings;         // what the load noticed and went on without, a line each (vkspec_model_warnings)
  std::string head1, head2;
  ModelOptions model_opts;  // context resolved at load: what every context's state gets
  uint32_t head_rows = 0;
  uint32_t max_budget = 16, depth = 4, topk = 4;
  std::shared_ptr<const LlamaWeights> verifier;
  std::shared_ptr<const EagleHeadWeights> w1, w2;
  void load(vkspec_progress_fn progress, void* user);  // the weights, once
  ~Model();
};
// Why text cannot be tokenized: the file has no tokenizer, or its tokenizer failed to load (the
// reason); `instead` is what to give.
std::string no_tokenizer(const Model& m, const char* instead);

// One context's generation state over its model's shared weights: its own KV caches and
// scratch (LlamaModel and EagleHead own those and share the weights).
struct Instance {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<EagleHead> head1, head2;  // read model's embedding: declared after it, destroyed first
  explicit Instance(const Model& m);
};

// A call out of order (VKSPEC_ERROR_STATE).
struct StateError : Error {
  using Error::Error;
};
// An argument the call refuses whatever the files hold (VKSPEC_ERROR_INVALID_ARGUMENT).
struct ArgumentError : Error {
  using Error::Error;
};
// The application asked to stop: a progress callback, or vkspec_cancel during vkspec_generate
// (VKSPEC_ERROR_CANCELLED).
struct Cancelled : Error {
  using Error::Error;
};

// Turns the exception in flight into a status and `err`'s text; `fallback` for vkspec::Error.
class ErrorText;
vkspec_status status_of_exception(std::string& err, vkspec_status fallback);
vkspec_status status_of_exception(ErrorText& err, vkspec_status fallback);
void set_thread_error(const std::string& s);

}  // namespace vkspec::capi

namespace vkspec::capi {
// A handle's last error text, kept per calling thread: two threads calling on one handle each
// read their own call's error (one shared string was read by one thread while another's call
// wrote it). Each is numbered for the process's life, so a later handle at the same address
// reads nothing stale; a thread's text goes when its next call on the handle starts.
class ErrorText {
 public:
  ErrorText();
  ~ErrorText();
  ErrorText(const ErrorText&) = delete;
  ErrorText& operator=(const ErrorText&) = delete;
  ErrorText& operator=(const std::string& text);  // the calling thread's
  void clear();
  const std::string& str() const;  // the calling thread's ("" if none)
  operator const std::string&() const { return str(); }

 private:
  uint64_t id_;
};

// What every handle starts with: vkspec_last_error(handle) reads `err` through it.
struct Handle {
  static constexpr uint32_t kMagic = 0x766b7370;  // "vksp"
  uint32_t magic = kMagic;
  ErrorText err;
  ~Handle() { magic = 0; }
};
}  // namespace vkspec::capi

struct vkspec_runtime : vkspec::capi::Handle {
  std::shared_ptr<vkspec::capi::Runtime> rt;
  std::string device_name;
};

struct vkspec_model : vkspec::capi::Handle {
  std::shared_ptr<vkspec::capi::Model> m;
};

// Runs `body` (returning vkspec_status) with every exception turned into a status and the handle's
// error text.
#define VKSPEC_CAPI_GUARD(handle_err, fallback, ...)                   \
  try {                                                                 \
    handle_err.clear();                                                 \
    __VA_ARGS__                                                         \
  } catch (...) {                                                       \
    return ::vkspec::capi::status_of_exception(handle_err, fallback);   \
  }
