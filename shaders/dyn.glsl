// Dynamic scalars (vkspec/step_state.h): a push-constant (base, slot) pair whose value is the base
// alone, or the base plus a word of the step state the previous step left on the GPU. Define
// DYN_BINDING to the binding of the state buffer before including.
#include "vkspec/step_state.h"
#include "pair.glsl"
layout(set = 0, binding = DYN_BINDING, std430) readonly buffer DynState { uint dyn_state[]; } PAIRED(DynState_);
#define dyn_state PAIR_AT(DynState_).dyn_state
uint dyn(uint base, uint slot) { return slot == kDynFixed ? base : base + dyn_state[slot]; }
