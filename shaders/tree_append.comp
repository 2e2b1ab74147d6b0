#version 450
// append_tokens: out_tokens[count + e] = token[accepted[e]] for e = 0..a, then count += a + 1.
// Everyone reads count before the barrier; only then does invocation 0 bump it.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "vkspec/tree_limits.h"
layout(set = 0, binding = 0, std430) readonly buffer Info { uint info[]; };
layout(set = 0, binding = 1, std430) readonly buffer Acc { uint accepted[]; };
layout(set = 0, binding = 2, std430) readonly buffer Tok { uint token[]; };
layout(set = 0, binding = 3, std430) writeonly buffer Out { uint out_tokens[]; };
layout(set = 0, binding = 4, std430) buffer Count { uint out_count[]; };
void main() {
  const uint lid = gl_LocalInvocationID.x, a = info[kInfoAccepted], base = out_count[0];
  for (uint e = lid; e <= a; e += WG) out_tokens[base + e] = token[accepted[e]];
  barrier();
  if (lid == 0) out_count[0] = base + a + 1;
}
