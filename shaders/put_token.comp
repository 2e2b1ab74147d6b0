#version 450
// seq_tokens[pos] = info[slot]: puts the next root (the verifier's bonus token) after the
// accepted tokens, without a round trip through the host. pos is a dynamic scalar (dyn.glsl).
layout(local_size_x = 1) in;
layout(set = 0, binding = 0, std430) readonly buffer Info { uint info[]; };
layout(set = 0, binding = 1, std430) writeonly buffer Seq { uint seq_tokens[]; };
#define DYN_BINDING 2
#include "dyn.glsl"
layout(push_constant) uniform Push { uint slot, pos, pos_slot; } pc;
void main() { seq_tokens[dyn(pc.pos, pc.pos_slot)] = info[pc.slot]; }
