#version 450
// accept_greedy: the longest accepted path of the tree (accept.glsl).
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "reduce.glsl"
#include "vkspec/tree_limits.h"
layout(set = 0, binding = 0, std430) readonly buffer Tok { uint token[]; };
layout(set = 0, binding = 1, std430) readonly buffer Head { uint head[]; };
layout(set = 0, binding = 2, std430) readonly buffer Ret { int retrieve[]; };  // (L, W)
layout(set = 0, binding = 3, std430) buffer Info { uint info[]; };
layout(set = 0, binding = 4, std430) readonly buffer Arg { uint argmax[]; };   // (N)
layout(set = 0, binding = 5, std430) writeonly buffer Acc { uint accepted[]; };
layout(push_constant) uniform Push { uint W; } pc;  // max_depth + 1
#include "accept.glsl"

void main() { accept_greedy_tree(); }
