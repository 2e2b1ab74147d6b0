#version 450
// route_trees, copy (seed 001 §5), where the device cannot bind tree_route.comp's COPY variant:
// dst[i] = (info[kInfoChosen] == 1 ? a : b)[i] for i < n, one 32-bit array per dispatch (4
// storage bindings each).
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "vkspec/tree_limits.h"
layout(set = 0, binding = 0, std430) readonly buffer Info { uint info[]; };
layout(set = 0, binding = 1, std430) readonly buffer A { uint a[]; };
layout(set = 0, binding = 2, std430) readonly buffer B { uint b[]; };
layout(set = 0, binding = 3, std430) writeonly buffer D { uint dst[]; };
layout(push_constant) uniform Push { uint n; } pc;
void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= pc.n) return;
  dst[i] = info[kInfoChosen] == 1u ? a[i] : b[i];
}
