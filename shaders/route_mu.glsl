// Routing decision (seed 001 §5), shared by tree_route.comp and tree_meta.comp's ROUTE variant:
// μ_h = mean of exp(score_h) over a tree's n retained non-root nodes (indices 1..n), summed in
// reduce.glsl's fixed order, so one workgroup size gives the same bits wherever it runs. Head 1
// is chosen if μ_1 >= μ_2 in order.glsl's ranking: a NaN μ (a head that produced NaN scores)
// loses to any number, two NaNs tie, ties go to head 1. Needs the buffers score1[] / score2[]
// and reduce.glsl; every invocation of the workgroup must call it (it has barriers).
bool route_first(uint n, out float mu1, out float mu2) {
  float a = 0.0, b = 0.0;
  for (uint i = 1 + gl_LocalInvocationID.x; i <= n; i += WG) {
    a += exp(score1[i]);
    b += exp(score2[i]);
  }
  mu1 = wg_sum(a) / float(n);
  mu2 = wg_sum(b) / float(n);
  return order_key(mu1) >= order_key(mu2);
}
