// PAIR variants (shaders/variants.cmake, Sequence::begin_pair): one dispatch does the same op for
// two draft heads. Every binding is then an array of two descriptors, head A's and head B's, and
// gl_WorkGroupID.z says whose workgroup this is; the rest of the grid is the op's own. Without
// PAIR a binding is a plain block or texel buffer, as every other variant needs (an array of one
// made lavapipe's compiler take minutes over the K-quant kernels).
//
// Storage-buffer arrays are indexed by IPAIR, dynamically uniform (shaderStorageBufferArray-
// DynamicIndexing, DeviceCaps::pair_dispatch). Texel-buffer arrays only by constants (their
// dynamic indexing is a feature fewer drivers have): TEXEL_FETCH(t, i) picks the element by a
// branch that is uniform across the workgroup.
#ifndef VKSPEC_PAIR_GLSL
#define VKSPEC_PAIR_GLSL
#ifdef PAIR
#define PAIRED(name) name[2]       // a binding's declared name
#define PAIR_AT(name) name[IPAIR]  // and its use
#define IPAIR gl_WorkGroupID.z
#define TEXEL_FETCH(t, i) (IPAIR == 0u ? texelFetch(t##_[0], i) : texelFetch(t##_[1], i))
#else
#define PAIRED(name) name
#define PAIR_AT(name) name
#define TEXEL_FETCH(t, i) texelFetch(t##_, i)
#endif
#endif
