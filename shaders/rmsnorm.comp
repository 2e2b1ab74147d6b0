#version 450
// y = x * rsqrt(mean(x^2) + eps) * w over rows of C values. One workgroup per row.
// Row g is sub-row (g % sub) of row (g / sub): x[x_offset + (g / sub) * x_stride + (g % sub) * sub_stride],
// normalized with w[(g % sub) * w_stride ..]. sub = 1 is the plain y(T, C) = rmsnorm(x(T, C)) * w(C);
// sub = H + Hkv, C = sub_stride = w_stride = D normalizes every q and k head of a qkv row with its
// own weight row (Qwen3's q/k norm), in place (X and Y bound to the same buffer: each element
// is read by the invocation that writes it, before it writes it).
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
#include "reduce.glsl"
#include "rms_row.glsl"

layout(set = 0, binding = 0, std430) readonly buffer X { float x[]; };
layout(set = 0, binding = 1, std430) readonly buffer W { float w[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push {
  uint C, x_offset, x_stride, y_offset, y_stride;
  float eps;
  uint sub, sub_stride, w_stride;
} pc;

void main() {
  const uint g = gl_WorkGroupID.x;
  const uint row = g / pc.sub, part = g % pc.sub;
  const uint xo = pc.x_offset + row * pc.x_stride + part * pc.sub_stride;
  const uint yo = pc.y_offset + row * pc.y_stride + part * pc.sub_stride;
  const uint wo = part * pc.w_stride;
  RMS_ROW(y, yo, x, xo, w, wo, pc.C, pc.eps)
}
