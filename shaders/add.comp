#version 450
// out(T, C) = a(T, C) + b(T, C)   (residual add; out may alias a)
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(set = 0, binding = 0, std430) readonly buffer A { float a[]; };
layout(set = 0, binding = 1, std430) readonly buffer B { float b[]; };
layout(set = 0, binding = 2, std430) writeonly buffer O { float o[]; };
layout(push_constant) uniform Push { uint T, C, a_offset, a_stride, b_offset, b_stride, o_offset, o_stride; } pc;
void main() {
  const uint idx = gl_GlobalInvocationID.x;
  if (idx >= pc.T * pc.C) return;
  const uint t = idx / pc.C, c = idx % pc.C;
  o[pc.o_offset + t * pc.o_stride + c] = a[pc.a_offset + t * pc.a_stride + c] + b[pc.b_offset + t * pc.b_stride + c];
}
