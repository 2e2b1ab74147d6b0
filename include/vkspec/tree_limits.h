/* Limits of the tree kernels and the slots of DeviceTree::info: ONE file read by both languages.
 *
 * The host includes it through vkspec/tree.hpp; the shaders include it as
 * `#include "vkspec/tree_limits.h"` (glslc gets -I include, see cmake/shaders.cmake). A limit
 * therefore cannot drift between the C++ that sizes buffers and checks options and the GLSL
 * that sizes its shared arrays: there is only one number.
 *
 * Only what both languages parse may appear here: the preprocessor, comments and VKSPEC_U32.
 */
#ifndef VKSPEC_TREE_LIMITS_H
#define VKSPEC_TREE_LIMITS_H

#ifdef __cplusplus
#include <cstdint>
#define VKSPEC_U32(name, value) inline constexpr uint32_t name = value;
namespace vkspec {
#else
#define VKSPEC_U32(name, value) const uint name = value;
#endif

/* Largest tree or candidate pool one single-workgroup tree kernel takes (tree_expand,
 * tree_select, tree_meta, sample_accept): their shared arrays hold this many nodes, 3 x 512 u32
 * = 6 KiB in tree_select, well inside the 16 KiB every Vulkan device offers. The engine derives
 * its accepted --topk / --depth / --budget from it (src/speculative/limits.cpp). */
VKSPEC_U32(kTreeMaxNodes, 512u)
/* merge_trie works on both pools at once: count1 + count2 - 1 <= kTrieMaxNodes (3 arrays of
 * 1024 u32 = 12 KiB). Two full pools of kTreeMaxNodes always fit. */
VKSPEC_U32(kTrieMaxNodes, 1024u)
/* The top-k kernel returns at most kTopkMax candidates per row; the engine lays its rows out with
 * this stride, so --topk <= kTopkMax. */
VKSPEC_U32(kTopkMax, 32u)
/* Nodes on one root-to-leaf path, root included (max depth + 1): rows a commit moves
 * (tree_commit.comp keeps a column's rows in registers), the path sample_probs walks for its
 * penalty window. Equal to the attention kernel's kAttentionMaxDepth (asserted in tree.cpp). */
VKSPEC_U32(kTreeMaxPath, 64u)

/* Slots of DeviceTree::info (kTreeInfoWords u32 per tree). */
VKSPEC_U32(kTreeInfoWords, 16u)
VKSPEC_U32(kInfoNodes, 0u)     /* number of nodes incl. root */
VKSPEC_U32(kInfoLeaves, 1u)    /* rows of retrieve in use */
VKSPEC_U32(kInfoChosen, 2u)    /* route: winning head (1 or 2) */
VKSPEC_U32(kInfoMu1, 3u)       /* route: mu_1 as f32 bits */
VKSPEC_U32(kInfoMu2, 4u)       /* route: mu_2 as f32 bits */
VKSPEC_U32(kInfoAccepted, 5u)  /* accept: a (accepted draft tokens, root excluded) */
VKSPEC_U32(kInfoBestRow, 6u)   /* accept: row of retrieve giving the accepted path */
VKSPEC_U32(kInfoNextRoot, 7u)  /* accept: next root token (verifier argmax at the last accepted node) */
VKSPEC_U32(kInfoBestHead, 8u)  /* accept: head that drafted the deepest accepted node (0 if a == 0) */

#ifdef __cplusplus
static_assert(kTreeMaxNodes % 32 == 0, "tree_meta keeps a mask row in kTreeMaxNodes / 32 registers");
static_assert(2 * kTreeMaxNodes - 1 <= kTrieMaxNodes, "merge_trie must take two full candidate pools");
static_assert(kInfoBestHead < kTreeInfoWords);
}  // namespace vkspec
#endif
#undef VKSPEC_U32

#endif
