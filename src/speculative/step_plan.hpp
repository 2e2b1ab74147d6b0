// A StepPlan: one decoding step, recorded once and resubmitted (DESIGN.md §7).
//
// Built once per (verifier, drafters, combiner, K, D, B, sampling on/off): building resolves
// every pipeline, allocates and writes every descriptor set and records the command buffer.
// Running a step is a resubmission — nothing is allocated, looked up or recorded — and S steps
// chain in one submission; a step after the generation is done is a no-op on the GPU
// (Sequence::gate). The host reads the output list once per submission.
#pragma once

#include <vector>

#include "speculative/parts.hpp"
#include "vkspec/sample.hpp"

namespace vkspec::speculative {

struct PlanShape {
  uint32_t K = 4, D = 4, B = 8;
  bool sampling = false;
  SamplingOptions sampler;
  bool timed = false;  // timestamps per dispatch (of the last step in a submission)
  bool pair = false;   // two drafters over distinct heads: record_drafters pairs them
  const PairPack* pack = nullptr;  // with `pair`: their weights packed (Sequence::begin_pair)
};

class StepPlan {
 public:
  // `drafters` empty and `combiner` null: the plan is `ar` (one token per step).
  StepPlan(Context& ctx, Verifier& verifier, std::vector<Drafter*> drafters, const Combiner* combiner,
           const PlanShape& shape, StepBuffers& buffers);
  void submit(uint32_t steps) { seq_.submit(steps); }
  void submit(uint32_t steps, VkSemaphore timeline, uint64_t value) { seq_.submit(steps, timeline, value); }
  void wait() { seq_.wait(); }
  bool ready() { return seq_.ready(); }  // never waits
  VkFence fence() const { return seq_.fence(); }
  bool pending() const { return seq_.pending(); }
  uint32_t dispatches() const { return seq_.dispatch_count(); }
  uint32_t paired() const { return seq_.paired_count(); }  // PAIR dispatches among them
  uint32_t single_fetch() const { return seq_.single_fetch_bindings(); }  // their texel bindings read once
  uint32_t verify_nodes() const { return n_verify_nodes_; }
  // GPU milliseconds of the last step by phase and by kernel (timed plans).
  struct Timing {
    double draft_ms = 0, verify_ms = 0, commit_ms = 0;
    std::vector<DispatchTiming> kernels;
    std::vector<const char*> phases;  // kernels[i]'s phase: "draft", "verify" or "commit"
  };
  Timing timing() const;

 private:
  void record_ar();
  void record_tree();

  Verifier& verifier_;
  std::vector<Drafter*> drafters_;
  const Combiner* combiner_;
  PlanShape shape_;
  StepBuffers& b_;
  uint32_t n_verify_nodes_ = 1, end_draft_ = 0, end_verify_ = 0;
  DeviceTree vtree_;
  Buffer vargmax_, accepted_, arrivals_, probs_;
  Sequence seq_;
};

}  // namespace vkspec::speculative
