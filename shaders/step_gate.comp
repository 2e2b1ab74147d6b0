#version 450
// The first dispatch of a recorded step: the step's indirect dispatch arguments are its recorded
// grid sizes, or all zero once the generation is done (a stop token or the token limit was
// emitted), so the rest of a chained submission costs nothing and changes nothing.
// recorded[0] = number of argument words, which start at word `header` in both buffers.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "vkspec/step_state.h"
layout(set = 0, binding = 0, std430) readonly buffer State { uint state[]; };
layout(set = 0, binding = 1, std430) readonly buffer Recorded { uint recorded[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Live { uint live[]; };
layout(push_constant) uniform Push { uint header; } pc;
void main() {
  const bool done = state[kStateDone] != 0;
  const uint n = recorded[0], stride = WG * gl_NumWorkGroups.x;
  for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) live[pc.header + i] = done ? 0u : recorded[pc.header + i];
}
