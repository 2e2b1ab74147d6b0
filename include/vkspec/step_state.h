/* The decoding step's state on the GPU, and the host-visible output list: ONE file read by both
 * languages (like tree_limits.h).
 *
 * A step's command buffer is recorded once per StepPlan and resubmitted (DESIGN.md §7), so
 * nothing that changes from step to step may be a push constant. Kernels read such values as
 * "dynamic scalars": a push-constant pair (base, slot) whose value is
 *     base                     if slot == kDynFixed,
 *     base + state[slot]       otherwise,
 * (shaders/dyn.glsl; C++ side: vkspec::Dyn in ops.hpp). step_advance (shaders/advance.glsl)
 * moves the state on: the step's last kernel, or in a greedy tree step the acceptance's last
 * workgroup (the commit after it reads the old t from kStatePrevT); the host reads only the
 * output list, once per submission.
 *
 * Only what both languages parse may appear here: the preprocessor, comments and VKSPEC_U32.
 */
#ifndef VKSPEC_STEP_STATE_H
#define VKSPEC_STEP_STATE_H

#ifdef __cplusplus
#include <cstdint>
#define VKSPEC_U32(name, value) inline constexpr uint32_t name = value;
namespace vkspec {
#else
#define VKSPEC_U32(name, value) const uint name = value;
#endif

/* A dynamic scalar's slot meaning "no slot: the base alone". */
VKSPEC_U32(kDynFixed, 0xffffffffu)

/* Slots of the step state (u32 words, device-local). */
VKSPEC_U32(kStateWords, 16u)
VKSPEC_U32(kStateT, 0u)         /* committed verifier length t: seq_tokens[t] is the root */
VKSPEC_U32(kStatePrevT, 1u)     /* t before the last step: the heads ingest pairs from here */
VKSPEC_U32(kStateAccepted, 2u)  /* a of the last step: its ingest's root row */
VKSPEC_U32(kStateDone, 3u)      /* 1 once a stop token or the token limit was emitted */
/* The sampler's values, set by the host with the prompt's prefill, so that a recorded step serves
 * any of them (sample_probs.comp, sample_accept.comp): temperature, top-p, min-p and repetition
 * penalty as float bits, then the seed's low and high words (kStateSeed). */
VKSPEC_U32(kStateSampling, 4u)
VKSPEC_U32(kStateSeed, 8u)
VKSPEC_U32(kStateSamplingWords, 6u)

/* A token id with this bit set was taken from a logits row holding NaN or ±inf: no token can
 * be emitted from it (argmax_row.glsl, sample_accept.comp; advance.glsl ends the generation). */
VKSPEC_U32(kTokenNonFinite, 0x80000000u)

/* The output list (u32 words, host-visible): a header, then the emitted token ids. */
VKSPEC_U32(kOutCount, 0u)       /* tokens emitted so far (prefill's token included) */
VKSPEC_U32(kOutDone, 1u)        /* mirrors kStateDone for the host */
VKSPEC_U32(kOutSteps, 2u)       /* speculative steps run (not counting no-op steps) */
VKSPEC_U32(kOutLimit, 3u)       /* tokens to emit at most (set by the host) */
VKSPEC_U32(kOutStopCount, 4u)   /* number of stop tokens (set by the host) */
VKSPEC_U32(kOutFault, 5u)       /* 0, or 1 + the position whose logits row was not finite (then done) */
VKSPEC_U32(kOutWins, 8u)        /* [4] steps by winning head (0 none, 1, 2, 3 both) */
VKSPEC_U32(kOutStop, 16u)       /* [kOutMaxStop] stop token ids (set by the host) */
VKSPEC_U32(kOutMaxStop, 16u)
VKSPEC_U32(kOutHist, 32u)       /* [kOutHistWords] steps by accepted length a as emitted (last bin: a >= 63) */
VKSPEC_U32(kOutHistWords, 64u)
VKSPEC_U32(kOutTokens, 96u)     /* emitted token ids */

#ifdef __cplusplus
static_assert(kStateDone < kStateSampling && kStateSeed == kStateSampling + 4 && kStateSeed + 2 == kStateSampling + kStateSamplingWords &&
              kStateSampling + kStateSamplingWords <= kStateWords);
static_assert(kOutFault < kOutWins && kOutWins + 4 <= kOutStop && kOutStop + kOutMaxStop <= kOutHist && kOutHist + kOutHistWords <= kOutTokens);
}  // namespace vkspec
#endif
#undef VKSPEC_U32

#endif
