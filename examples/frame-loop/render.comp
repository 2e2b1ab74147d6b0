#version 450
// The application's own rendering in examples/frame-loop: an animated Julia set written into the
// frame buffer (RGBA8 packed in a u32 per pixel). `iters` iterations per pixel set the load.
layout(local_size_x = 8, local_size_y = 8) in;
layout(std430, binding = 0) writeonly buffer Frame { uint px[]; };
layout(push_constant) uniform Push { uint w, h, frame, iters; } p;

void main() {
  const uvec2 g = gl_GlobalInvocationID.xy;
  if (g.x >= p.w || g.y >= p.h) return;
  const vec2 uv = (vec2(g) + 0.5) / vec2(p.w, p.h) * 2.0 - 1.0;
  const float t = float(p.frame) * 0.03;
  const vec2 c = vec2(0.7885 * cos(t), 0.7885 * sin(t));
  vec2 z = uv * 1.4;
  uint i = 0;
  for (; i < p.iters && dot(z, z) < 4.0; ++i) z = vec2(z.x * z.x - z.y * z.y, 2.0 * z.x * z.y) + c;
  const float v = float(i) / float(p.iters);
  const vec3 col = 0.5 + 0.5 * cos(6.2831853 * (vec3(v) + vec3(0.0, 0.33, 0.67)));
  const uvec3 c8 = uvec3(clamp(col * v * 1.2, 0.0, 1.0) * 255.0);
  px[g.y * p.w + g.x] = c8.r | (c8.g << 8) | (c8.b << 16) | (255u << 24);
}
