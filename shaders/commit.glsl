// The body of tree_commit.comp (commit_rows), shared with tree_argmax_accept.comp's COMMIT variant,
// whose last workgroup commits the step it accepted. Needs the buffers cache, accepted, src, dst,
// norm_w, the push fields row_words, stream_words, cols, s_offset, s_stride, d_offset, d_stride,
// norm and eps, MAXROWS, and reduce.glsl / rms_row.glsl.
#ifndef VKSPEC_COMMIT_GLSL
#define VKSPEC_COMMIT_GLSL
// Columns [c0, c1) of stream y: cache rows t + accepted[e] → t + e, e < rows. Each invocation
// owns its columns and reads all `rows` source values of one before it writes any: the ranges
// overlap, and no other invocation touches that column, so no barrier is needed and the result
// does not depend on the order of accepted[].
void commit_stream(uint y, uint t, uint rows, uint c0, uint c1) {
  for (uint c = c0 + gl_LocalInvocationID.x; c < min(c1, pc.row_words); c += WG) {
    const uint base = y * pc.stream_words + c;
    uint v[MAXROWS];
    for (uint e = 0; e < rows; ++e) v[e] = cache[base + (t + accepted[e]) * pc.row_words];
    for (uint e = 0; e < rows; ++e) cache[base + (t + e) * pc.row_words] = v[e];
  }
}
// Columns [c0, c1) of gathered row e: dst row e = src row accepted[e].
void gather_copy(uint e, uint c0, uint c1) {
  const uint so = pc.s_offset + accepted[e] * pc.s_stride, d = pc.d_offset + e * pc.d_stride;
  for (uint c = c0 + gl_LocalInvocationID.x; c < min(c1, pc.cols); c += WG) dst[d + c] = src[so + c];
}
// The whole of gathered row e, RMS-normalized (rms_row.glsl; every invocation must reach it).
void gather_norm(uint e) {
  const uint so = pc.s_offset + accepted[e] * pc.s_stride, d = pc.d_offset + e * pc.d_stride;
  RMS_ROW(dst, d, src, so, norm_w, 0, pc.cols, pc.eps)
}
#endif
