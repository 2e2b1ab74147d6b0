// PAIR variants (shaders/variants.cmake, Sequence::begin_pair): one dispatch does the same op for
// two draft heads. Every binding is then an array of two descriptors, head A's and head B's, and
// gl_WorkGroupID.z says whose workgroup this is; the rest of the grid is the op's own. Without
// PAIR a binding is a plain block or texel buffer, as every other variant needs (an array of one
// made lavapipe's compiler take minutes over the K-quant kernels).
//
// Storage-buffer arrays are indexed by IPAIR, dynamically uniform (shaderStorageBufferArray-
// DynamicIndexing, DeviceCaps::pair_dispatch). Texel-buffer arrays only by constants (their
// dynamic indexing is a feature fewer drivers have): TEXEL_FETCH(t, i) picks the element by a
// branch that is uniform across the workgroup. A CPU rasterizer runs both sides of that branch
// under lane masks (lavapipe, Mesa 22.3), so every fetch is paid twice. Two constants take the
// branch away where the host knows more (Sequence::end_pair):
// - PAIR_SAME, bit b: both descriptors of texel binding b are the same view (the verifier's LM
//   head that two EAGLE-1 heads share): element 0 is read.
// - PAIR_PACKED, bit b: element 0 is a view of a buffer holding A's data and, PAIR_DELTA texels
//   on, B's (PairPack: two heads' weights copied into one buffer): one fetch at i + IPAIR·delta.
// TEXEL_BINDING(b, name) declares texel binding b, `name_` in either build.
#ifndef VKSPEC_PAIR_GLSL
#define VKSPEC_PAIR_GLSL
#ifdef PAIR
#define PAIRED(name) name[2]       // a binding's declared name
#define PAIR_AT(name) name[IPAIR]  // and its use
#define IPAIR gl_WorkGroupID.z
layout(constant_id = 40) const uint PAIR_SAME = 0;
layout(constant_id = 41) const uint PAIR_PACKED = 0;
layout(constant_id = 42) const uint PAIR_DELTA = 0;
#define TEXEL_BINDING(b, name) \
  layout(set = 0, binding = b) uniform usamplerBuffer name##_[2]; \
  const uint name##_bit = 1u << (b);
#define TEXEL_FETCH(t, i)                                                                         \
  ((PAIR_SAME & t##_bit) != 0u     ? texelFetch(t##_[0], i)                                       \
   : (PAIR_PACKED & t##_bit) != 0u ? texelFetch(t##_[0], int(i) + int(IPAIR * PAIR_DELTA))        \
   : IPAIR == 0u                   ? texelFetch(t##_[0], i)                                       \
                                   : texelFetch(t##_[1], i))
#else
#define PAIRED(name) name
#define PAIR_AT(name) name
#define TEXEL_BINDING(b, name) layout(set = 0, binding = b) uniform usamplerBuffer name##_;
#define TEXEL_FETCH(t, i) texelFetch(t##_, i)
#endif
#endif
