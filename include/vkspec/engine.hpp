// The speculative decoding engine: plain greedy (`ar`), one head, routing (seed 001), merged
// tree (seed 000) and merged trie (our extension), all emitting exactly `ar`'s tokens.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vkspec/eagle_head.hpp"
#include "vkspec/model.hpp"
#include "vkspec/sample.hpp"
#include "vkspec/tree.hpp"

namespace vkspec {

enum class Strategy { AR, Single1, Single2, Route, Merge, MergeTrie };
const char* strategy_name(Strategy s);
Strategy parse_strategy(const std::string& s);  // throws naming the valid choices

// What the user calls each option, for the errors that name one: the command line's flags, or
// the C API's struct fields.
struct OptionNames {
  const char *topk, *depth, *budget, *temp, *top_p, *min_p, *repeat_penalty, *repeat_window, *heads, *ctx, *n_new;
};
inline constexpr OptionNames kCliOptionNames{"--topk", "--depth", "--budget", "--temp", "--top-p", "--min-p",
                                             "--repeat-penalty", "--repeat-window", "--heads H1,H2", "--ctx", "-n"};
inline constexpr OptionNames kCApiOptionNames{"topk", "depth", "budget", "temperature", "top_p", "min_p",
                                              "repeat_penalty", "repeat_window", "vkspec_model_desc.head1, head2",
                                              "vkspec_model_desc.context_tokens", "max_tokens"};

struct EngineOptions {
  const OptionNames* names = &kCliOptionNames;  // how errors name the options below
  Strategy strategy = Strategy::AR;
  uint32_t depth = 4;   // D: draft levels below the root
  uint32_t topk = 4;    // k: children per expanded node, and frontier width
  uint32_t budget = 8;  // B: draft nodes kept per head
  bool time_kernels = false;  // timestamp every dispatch (draft / verify / commit split)
  // Decoding operator G and seed (include/vkspec/sample.hpp). Temperature 0 without a penalty
  // is the greedy path; anything else samples with G on the GPU in `ar` and, through tree
  // rejection sampling, in every speculative strategy.
  SamplingOptions sampling;
  bool force_sampling_path = false;  // tests: G + rejection sampling even when greedy would do
  // Steps chained in one submission (DESIGN.md §7): the host waits and reads tokens once per
  // submission. Steps past a stop token or the token limit do nothing on the GPU.
  uint32_t steps_per_submit = 1;
  // Generation ends after emitting any of these (included in the output); at most kOutMaxStop.
  std::vector<uint32_t> stop_tokens;
  // Two distinct heads draft in shared dispatches where the device can (DeviceCaps::pair_dispatch):
  // each op of a draft level runs once for both, the head index in the grid. Off: one head after
  // the other (the same drafts, more dispatches).
  bool pair_heads = true;
  // With pair_heads, on devices that read weights through texel views: the two heads' weights
  // copied into one buffer, and the heads' states made in it, so that a paired dispatch fetches
  // each texel once (PairPack; costs the heads' weight bytes and a state each once more,
  // GenerateStats::pair_pack_bytes). Off only to compare. A pack the device cannot hold (an
  // allocation past its limits or memory) is not an error: the heads run paired but unpacked,
  // and GenerateStats::pair_pack_refused says why.
  bool pack_pairs = true;
};

// What the tree kernels take (vkspec/tree_limits.h), as option ranges. Each head drafts a pool of
// 1 + K + (D-1)·K² candidates, ranked and selected by single-workgroup kernels that hold at most
// kTreeMaxNodes nodes; the verified tree (1 + B nodes, 1 + 2B for merge / merge-trie) goes
// through tree_meta and acceptance, which hold as many; a path holds at most kTreeMaxPath nodes.
// The Engine refuses, by option name, whatever lies outside (before allocating anything).
uint64_t draft_pool_nodes(uint32_t topk, uint32_t depth);  // 1 + K + (D-1)·K², no wrap
// A budget the user did not give: `ceiling`, lowered to the candidates the tree draws (top-k 1,
// depth 4 draws 4), never below 1 — so a default never fails as an option the user never typed.
uint32_t default_draft_budget(uint32_t topk, uint32_t depth, uint32_t ceiling);
// The most cache slots a speculative step writes past the committed tokens with these options,
// whatever the strategy (verified tree of at most 1 + 2B nodes, D draft levels of K rows, 2 more):
// Engine::check_fits's exact figure is never above it. What the CLI sizes a default context by.
uint64_t max_step_slack(uint32_t budget, uint32_t depth, uint32_t topk);
uint32_t max_draft_depth(uint32_t topk);                   // 0 if no depth fits
uint32_t max_draft_topk(uint32_t depth, uint32_t vocab);   // 0 if no top-k fits
uint32_t max_draft_budget(Strategy s, uint32_t topk, uint32_t depth);  // per head; 0 if none
// `budget` as a ceiling: lowered to max_draft_budget where one fits, else kept as given (so the
// engine refuses it by name). What `--strategy auto` and `bench --suite` try per top-k.
uint32_t budget_within(Strategy s, uint32_t topk, uint32_t depth, uint32_t budget);
// The depth a head actually drafts: a node at depth d needs its d - 1 ancestors in the verified
// tree (a child never outscores its parent, and ties rank the parent first), so a tree of B
// candidates per head (single, route, merge) holds no node deeper than B, and merge-trie's 2B
// kept nodes none deeper than 2B. Levels below that are never verified: they are not drafted.
uint32_t drafted_depth(Strategy s, uint32_t depth, uint32_t budget);
// The draft options every strategy shares (top-k, depth, per-head budget against the kernels'
// limits and the vocabulary); throws naming the option and its range. Callers that size buffers
// from these options (rows per pass) check them first; Engine checks them again with the
// strategy's own limit on the verified tree.
void check_draft_options(uint32_t topk, uint32_t depth, uint32_t budget, uint32_t vocab,
                         const OptionNames& names = kCliOptionNames);

struct GenerateStats {
  std::vector<uint32_t> tokens;  // generated ids, prompt excluded
  uint32_t steps = 0;            // verifier passes after the prompt
  double tau = 0;                // tokens committed per verifier pass
  std::vector<uint32_t> accept_hist;  // steps by accepted draft tokens a = 0 .. drafted depth, as emitted (-n or a stop token cuts the last)
  std::array<uint32_t, 4> head_wins{};  // route: steps won by head 1/2; merge: head of the accepted path (0 none, 3 both)
  double seconds = 0, prefill_seconds = 0;
  double tokens_per_s = 0;
  double host_waits_per_step = 0;
  double host_waits_per_token = 0;   // host waits per generated token after the prefill's
  double host_cpu_us_per_step = 0;   // host thread CPU time per step (submit + wait + readback)
  bool stopped = false;              // ended on a stop token
  uint32_t dispatches_per_step = 0;
  uint32_t paired_per_step = 0;  // of those, PAIR dispatches doing both heads' op (EngineOptions::pair_heads)
  uint32_t single_fetch_per_step = 0;  // their texel bindings read from one descriptor (EngineOptions::pack_pairs)
  uint64_t pair_pack_bytes = 0;        // device bytes of the pack (PairPack: weight copies, head states), 0 without
  std::string pair_pack_refused;       // why a pack asked for (pack_pairs) was not made; "" otherwise
  uint32_t nodes_per_step = 0;  // verified tree nodes incl. root
  // GPU time per step (time_kernels), without the first submission when others follow: that one
  // carries the driver's one-time costs (lavapipe compiles each pipeline at its first dispatch).
  double draft_ms = 0, verify_ms = 0, commit_ms = 0;
  uint32_t timed_submissions = 0;  // how many submissions those times average over
  std::map<std::string, double> kernel_ms;              // GPU time per step by kernel label (time_kernels)
  std::map<std::string, uint32_t> kernel_dispatches;    // dispatches per step by kernel label (time_kernels)
  // time_kernels: the step's dispatches in recording order (the gate first), each with its phase
  // and its GPU time averaged over the timed steps. Where the step's time goes dispatch by
  // dispatch: on a driver whose every dispatch has a fixed cost, its count shows here.
  struct TimedDispatch {
    std::string label;
    const char* phase = "";  // "draft", "verify" or "commit"
    double us = 0;
  };
  std::vector<TimedDispatch> kernel_timeline;
};

// The engine: a StepPlan (src/speculative/step_plan.hpp) built once from the verifier, the
// strategy's drafters and combiner, and the options; generate() prefills, then resubmits it.
class Engine {
 public:
  Engine(Context& ctx, LlamaModel& verifier, EagleHead* head1, EagleHead* head2, const EngineOptions& opts);
  ~Engine();
  // Greedy generation of n_new tokens after `prompt`. on_token is called as tokens are
  // committed (several at once after a speculative step).
  GenerateStats generate(const std::vector<uint32_t>& prompt, uint32_t n_new,
                         const std::function<void(const uint32_t*, size_t)>& on_tokens = {});
  // Non-blocking generation, for a frame loop. begin() checks the prompt, submits the prefill and
  // returns; submit(steps) chains `steps` decoding steps in one submission and returns at once,
  // or returns false while the previous submission is still in flight (one at a time); poll()
  // never waits: once the GPU is done it returns the tokens emitted since the last poll. cancel()
  // ends the generation (work in flight still completes; poll reports done). generate() is
  // begin + submit + wait + poll.
  void begin(const std::vector<uint32_t>& prompt, uint32_t n_new);
  bool submit(uint32_t steps);
  struct Progress {
    std::vector<uint32_t> tokens;  // new since the last poll
    bool in_flight = false;        // a submission is still running
    bool done = false;             // stop token, token limit or cancel(): nothing more will come
  };
  Progress poll();
  void wait();  // blocks until the submission in flight (if any) is done
  void cancel();
  // Nothing more will come: cancelled, finished as a poll saw it, or (never waiting) the device is
  // idle and its step state says the generation ended, which a poll has not read yet.
  bool done();
  // From now on every submission also signals `timeline` (a timeline semaphore the caller owns
  // and keeps alive while this engine may submit) to ++*counter. Null: none.
  void set_timeline(VkSemaphore timeline, uint64_t* counter);
  VkFence fence() const;  // of the submission in flight (prefill or steps); null when none was left pending
  const EngineOptions& options() const { return opts_; }
  // Throws the error generate() would give for this prompt and length, without running.
  void check_fits(const std::vector<uint32_t>& prompt, uint32_t n_new) const;
  uint32_t dispatches_per_step() const;  // of the recorded step, its gate included
  // Whether options `o` record the same step as this engine's. They then differ at most in the
  // sampler's values (temperature above 0 to another above 0, top-p, min-p, the penalty, the
  // seed) and the stop ids, which go to the GPU with each prompt: retune(o) takes them for the
  // generations begun after it, without building anything (a C API start with a new seed).
  bool records_same_step(const EngineOptions& o) const;
  void retune(const EngineOptions& o);  // checks o's values as the constructor does; throws, changing nothing

 private:
  struct Parts;
  uint32_t verify_nodes() const;
  uint32_t draft_depth() const { return drafted_depth(opts_.strategy, opts_.depth, opts_.budget); }  // ar: 0
  void check_tree_options(const EagleHead* h1, const EagleHead* h2) const;
  static void check_values(const EngineOptions& opts, uint32_t vocab);
  bool sampling() const { return opts_.sampling.active() || opts_.force_sampling_path; }
  void record_prefill(Sequence& seq, const std::vector<uint32_t>& prompt);

  Context& ctx_;
  LlamaModel& model_;
  EngineOptions opts_;
  std::unique_ptr<Parts> parts_;
};

}  // namespace vkspec
