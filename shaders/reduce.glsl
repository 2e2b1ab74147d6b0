// Workgroup reductions in a fixed order (pairwise tree over invocations), so a row's result is
// the same whatever else the dispatch computes. Requires `WG` (workgroup size, constant_id 0).
#include "order.glsl"
shared float red_f[WG];
shared uint red_u[WG];

// NAME(v): OP folded over every invocation's v through the shared array ARR, pairwise: in each
// round the first n - h invocations take in the value h places on.
#define VKSPEC_WG_REDUCE(NAME, T, ARR, OP)            \
  T NAME(T v) {                                        \
    const uint lid = gl_LocalInvocationID.x;           \
    barrier();                                         \
    ARR[lid] = v;                                      \
    barrier();                                         \
    for (uint n = WG; n > 1;) {                        \
      const uint h = (n + 1) / 2;                      \
      if (lid < n - h) ARR[lid] = OP(ARR[lid], ARR[lid + h]); \
      n = h;                                           \
      barrier();                                       \
    }                                                  \
    return ARR[0];                                     \
  }
float reduce_add(float a, float b) { return a + b; }
VKSPEC_WG_REDUCE(wg_sum, float, red_f, reduce_add)
VKSPEC_WG_REDUCE(wg_max, float, red_f, max)
VKSPEC_WG_REDUCE(wg_max_u, uint, red_u, max)

// Arg-max in the ranking order of order.glsl (NaN last, ties to the lower index): returns the
// winning index, its value in `best`. An invocation with nothing to offer passes idx 0xffffffff;
// it loses to every real candidate, NaN included, so the result is a real index whenever one
// invocation had one.
uint wg_argmax(float v, uint idx, out float best) {
  const uint lid = gl_LocalInvocationID.x;
  barrier();
  red_f[lid] = v;
  red_u[lid] = idx;
  barrier();
  for (uint n = WG; n > 1;) {
    const uint h = (n + 1) / 2;
    if (lid < n - h) {
      const float o = red_f[lid + h];
      const uint oi = red_u[lid + h], ci = red_u[lid];
      if (oi != 0xffffffffu && (ci == 0xffffffffu || ranks_before(o, oi, red_f[lid], ci))) {
        red_f[lid] = o;
        red_u[lid] = oi;
      }
    }
    n = h;
    barrier();
  }
  best = red_f[0];
  return red_u[0];
}
