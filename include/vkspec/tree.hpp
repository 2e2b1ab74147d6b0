// Draft trees on the GPU (DESIGN.md §2–4): candidate pools, best-B selection, merge / route,
// mask + positions + retrieve matrix, greedy acceptance scan, KV commit.
//
// Nothing about individual nodes is decided on the host: every function records dispatches
// into a Sequence; counts that depend on data stay in device buffers.
#pragma once

#include <cstdint>

#include "vkspec/buffer.hpp"
#include "vkspec/ops.hpp"
#include "vkspec/sequence.hpp"
#include "vkspec/step_state.h"
#include "vkspec/tree_limits.h"

namespace vkspec {

// A tree (or a candidate pool) as a struct of arrays of capacity `cap` nodes, node 0 = root,
// parent[i] < i. All arrays are separate device buffers:
//   token  u32 (cap)   parent i32 (cap, -1 for the root)   depth u32 (cap)
//   score  f32 (cap)   cumulative draft log-prob, root 0
//   head   u32 (cap)   which head drafted the node (1 or 2; 0 for the root)
//   mask   u32 (cap, mask_words)   row i: bit j set iff j is an ancestor of i or i itself
//   pos    i32 (cap)   t + depth (position ids for the verifier / head forward)
//   retrieve i32 (cap, max_depth + 1)   root-to-leaf paths, root index 0 first, -1 padded
//   info   u32 (kTreeInfoWords)   device-side counters, slots kInfo* (vkspec/tree_limits.h)
struct DeviceTree {
  DeviceTree() = default;
  DeviceTree(Context& ctx, uint32_t cap, uint32_t max_depth);
  uint32_t cap = 0, max_depth = 0, mask_words = 0;
  Buffer token, parent, depth, score, head, mask, pos, retrieve, info;
  // Per node: 1 where sample_probs found NaN or ±inf in its logits row (sample_accept takes no
  // token from it). Zero until a sample_probs writes it.
  Buffer nonfinite;
};

// Slots of DeviceTree::info (kInfoNodes, ...) and the kernels' node limits (kTreeMaxNodes,
// kTrieMaxNodes, kTopkMax) live in vkspec/tree_limits.h, shared with the shaders.

// ---- drafting (DESIGN.md §2, EAGLE-2) -------------------------------------------------------

// Pool node 0 = root: token root_token[root_offset], parent -1, depth 0, score 0, head 0.
void pool_init(Sequence& seq, DeviceTree& pool, const Buffer& root_token, Dyn root_offset,
               KernelConfig cfg = {});

// Appends the F*k children of the F frontier nodes (pool indices frontier[frontier_offset + f])
// at pool indices base + f*k + j: token = ids[o], parent = frontier[f], depth = depth[parent] + 1,
// score = score[parent] + logp[o], head = head_id[0] (a buffer, so two heads' expansions differ
// only in their bindings and run as one PAIR dispatch), with o = topk_offset + f*topk_stride + j (the
// `topk` op's output rows). Then writes the best next_F of the new nodes, by (score desc, pool
// index asc), in rank order, to next_frontier[next_offset..]. F*k <= kTreeMaxNodes.
void draft_expand(Sequence& seq, DeviceTree& pool, uint32_t base, const Buffer& frontier, uint32_t frontier_offset,
                  uint32_t F, const Buffer& ids, const Buffer& logp, uint32_t topk_offset, uint32_t topk_stride,
                  uint32_t k, const Buffer& head_id, const Buffer& next_frontier, uint32_t next_offset,
                  uint32_t next_F, KernelConfig cfg = {});

// The inputs of the next draft level (shaders/gather.glsl), for draft_topk_expand to write from
// the frontier it has just ranked. Node f of that frontier (pool index base + r*k + j, a child of
// row r) gets tokens[f] = its token, feature row f = row r of h (level 1: row root_row, the
// root's), and mask row (level-1)*k + f = its parent's mask row (level-1 >= 1) | bit (level-1)*k + f.
// With `embed` (a table of one chunk, K = C), also row f of `emb` = embed's row of the token —
// the embedding gather the next level would otherwise run as a dispatch of its own, the same bits
// (draft_gather_embeds says where the fold fits the device).
struct DraftGather {
  uint32_t level = 0;  // >= 1
  uint32_t root_row = 0;
  Mat h;                           // (F, C): the head's outputs of the rows just ranked
  uint32_t C = 0;
  const Buffer* tokens = nullptr;  // (k,)
  Mat feat;                        // (k, C)
  const Buffer* mask = nullptr;    // (levels * k, words) u32
  uint32_t words = 0;
  const DeviceWeight* embed = nullptr;  // (V, C) token embeddings, or none
  Mat emb;                              // (k, C) in feat's buffer, with feat's stride
};

// Whether draft_topk_expand can gather embeddings from `table` on this device: one chunk, and
// the kernel's bindings (two more for the table) within the device's per-stage limits.
bool draft_gather_embeds(const Context& ctx, const DeviceWeight& table);

// topk (ops.hpp) of the F logits rows logits.row(f), V wide, k of each into ids/logp at
// topk_offset + f*topk_stride, then draft_expand over them and, with `gather` (next_F == k), the
// next level's inputs: one dispatch instead of three, the same bits. The workgroup that finishes
// its row last does the rest; `arrivals` (4 bytes, zero before the first use) counts them and is
// zero again after each dispatch. One `arrivals` per drafter.
void draft_topk_expand(Sequence& seq, Mat logits, uint32_t V, DeviceTree& pool, uint32_t base, const Buffer& frontier,
                       uint32_t frontier_offset, uint32_t F, const Buffer& ids, const Buffer& logp, uint32_t topk_offset,
                       uint32_t topk_stride, uint32_t k, const Buffer& head_id, const Buffer& next_frontier,
                       uint32_t next_offset, uint32_t next_F, const Buffer& arrivals, const DraftGather* gather = nullptr,
                       KernelConfig cfg = {});

// Keeps the best B of pool nodes 1..count-1 by (score desc, index asc) and writes them to `out`
// renumbered in increasing pool index (parents first), root at 0; out.info[kInfoNodes] = B + 1.
// Writes token/parent/depth/score/head (not mask/pos/retrieve: see tree_meta). B <= count - 1.
void draft_select(Sequence& seq, const DeviceTree& pool, uint32_t count, uint32_t B, DeviceTree& out,
                  KernelConfig cfg = {});

// ---- verification inputs (DESIGN.md §2, seed 000 §4.2–4.3) ----------------------------------

// The verify's embedding gather folded into the tree's meta dispatch (tree_meta, merge_trees_meta,
// route_trees_meta): x row i = table row token[i] for the tree's n nodes, once every token is in
// place — embed()'s values, the same bits, one dispatch fewer a step. One workgroup gathers all
// n rows, so the fold is for small trees of narrow models (meta_embeds), where a dispatch of its
// own costs more than the rows.
struct MetaEmbed {
  const DeviceWeight* table = nullptr;  // (V, C), one chunk
  Mat x;                                // (n, C)
};
// Whether to hand the meta kernels the gather of n rows from `table`: one chunk, and n · C at
// most kMetaEmbedMaxValues. Where a folded kernel's bindings (three more: the table's two and x)
// would pass the device's per-stage limits, the meta function records the plain kernel and embed()
// after it instead: x is written either way.
inline constexpr uint64_t kMetaEmbedMaxValues = 65536;
bool meta_embeds(const DeviceWeight& table, uint32_t n);

// From parent[0..n): depth, mask rows (n, mask_words), pos = t + depth, retrieve rows (one per
// leaf, increasing leaf index, root first, -1 padded to max_depth + 1), info[kInfoLeaves].
// tree.cap <= kTreeMaxNodes.
// The caller guarantees depth <= tree.max_depth (asserted: max_depth < kAttentionMaxDepth).
// With root_tokens, also token[0] = root_tokens[t] (the root y[t]): a step's drafters then leave
// their pools' root token unwritten (pool_init's other fields never change).
// With `embed`, the verifier's input rows too (MetaEmbed): the same dispatch.
void tree_meta(Sequence& seq, DeviceTree& tree, uint32_t n, Dyn t, KernelConfig cfg = {},
               const Buffer* root_tokens = nullptr, const MetaEmbed* embed = nullptr);

// ---- combining two heads' trees -------------------------------------------------------------

// Seed 000 §4.1: n1, n2 are non-root node counts. out = t1's root, t1's nodes at 1..n1, t2's
// node i > 0 at n1 + i, parents remapped by φ (φ(0) = 0); out.info[kInfoNodes] = 1 + n1 + n2.
void merge_trees(Sequence& seq, const DeviceTree& t1, uint32_t n1, const DeviceTree& t2, uint32_t n2,
                 DeviceTree& out, KernelConfig cfg = {});
// merge_trees, then tree_meta of its 1 + n1 + n2 nodes at t (root_tokens as there): the same
// outputs, one dispatch.
void merge_trees_meta(Sequence& seq, const DeviceTree& t1, uint32_t n1, const DeviceTree& t2, uint32_t n2,
                      DeviceTree& out, Dyn t, KernelConfig cfg = {}, const Buffer* root_tokens = nullptr,
                      const MetaEmbed* embed = nullptr);

// Our extension (DESIGN.md §9): both heads' candidate pools, nodes with the same token path from
// the root folded into one (score = max, head = 1, 2 or 3 for both), then the best n_out - 1
// distinct nodes by (score desc, index asc in the order pool1 then pool2 without its root),
// written parents first. If fewer than n_out - 1 distinct nodes exist, the remaining slots are
// padding leaves under the root (token = root token, score -inf, head 0): verifying them is
// harmless (a match is the verifier's own argmax), and N stays n_out for the verifier.
// out.info[kInfoNodes] = n_out. count1 + count2 - 1 <= kTrieMaxNodes, n_out <= out.cap.
// With root_tokens the root token is root_tokens[t] rather than pool 1's node 0 (a step's pools
// leave their root token unwritten).
void merge_trie(Sequence& seq, const DeviceTree& pool1, uint32_t count1, const DeviceTree& pool2, uint32_t count2,
                uint32_t n_out, DeviceTree& out, KernelConfig cfg = {}, const Buffer* root_tokens = nullptr, Dyn t = {});

// Seed 001 §5: μ_h = mean over the n_h retained non-root nodes of exp(score); out = a copy of
// tree 1 if μ_1 >= μ_2 else tree 2 (token/parent/depth/score/head); info[kInfoChosen],
// info[kInfoMu1], info[kInfoMu2] (f32 bits), info[kInfoNodes] = 1 + n. Requires n1 == n2.
void route_trees(Sequence& seq, const DeviceTree& t1, uint32_t n1, const DeviceTree& t2, uint32_t n2,
                 DeviceTree& out, KernelConfig cfg = {});
// route_trees, then tree_meta of the chosen tree's n1 + 1 nodes at t (root_tokens as there): the
// same outputs in one dispatch where the device allows its 19 storage buffers, else those two.
void route_trees_meta(Sequence& seq, const DeviceTree& t1, uint32_t n1, const DeviceTree& t2, uint32_t n2,
                      DeviceTree& out, Dyn t, KernelConfig cfg = {}, const Buffer* root_tokens = nullptr,
                      const MetaEmbed* embed = nullptr);

// ---- acceptance and commit (DESIGN.md §3–4) -------------------------------------------------

// verifier_argmax[i] = the verifier's argmax token at node i. Longest accepted prefix over ALL
// retrieve rows (ties → lower row): info[kInfoAccepted] = a, info[kInfoBestRow],
// info[kInfoNextRoot] = argmax at the last accepted node, info[kInfoBestHead] (0 if a == 0),
// accepted[0..a] = the path's node indices, root first. Needs tree_meta's retrieve + leaves.
void accept_greedy(Sequence& seq, DeviceTree& tree, const Buffer& verifier_argmax, const Buffer& accepted,
                   KernelConfig cfg = {});
// argmax (ops.hpp) of the tree's n nodes' logits rows logits.row(i), V wide, into
// verifier_argmax[i], then accept_greedy: one dispatch instead of two, the same bits. The
// workgroup that finishes its row last accepts; `arrivals` (4 bytes, zero before the first use)
// counts them and is zero again after each dispatch.
// With `advance`, the step then advances as step_advance() does with this tree and a counted
// step (below): in the same dispatch, by the accepting workgroup, where the device allows 11
// storage buffers a stage; otherwise a step_advance dispatch follows. Either way the state has
// moved on after it: what runs later in the step reads the old t from kStatePrevT.
struct StepAdvanceArgs {
  const Buffer* state = nullptr;
  const Buffer* seq_tokens = nullptr;
  const Buffer* out_list = nullptr;
  uint32_t win_slot = kDynFixed;
};
// With `commit` as well, and the advance folded in, the accepting workgroup then also does the
// commit_rows(tree, accepted, old t, *cache, row_words, streams, stream_words, gather) that would
// follow (the same moves and bits), where that commit is small enough for one workgroup: at most
// kFoldCommitMaxWords words moved (a small model, for which a dispatch costs more than the moves)
// and the gather's norm reduced at this dispatch's workgroup size. Returns whether it did; if not,
// the caller records commit_rows.
struct RowGather;
struct KvCommit {
  const Buffer* cache = nullptr;
  uint32_t row_words = 0, streams = 1, stream_words = 0;
  const RowGather* gather = nullptr;
};
constexpr uint64_t kFoldCommitMaxWords = 8192;
bool argmax_accept_greedy(Sequence& seq, Mat logits, uint32_t n, uint32_t V, DeviceTree& tree,
                          const Buffer& verifier_argmax, const Buffer& accepted, const Buffer& arrivals,
                          const StepAdvanceArgs* advance = nullptr, const KvCommit* commit = nullptr,
                          KernelConfig cfg = {});

// Cache rows (row_words u32 words each: f32 values, or f16 pairs) at slots t + accepted[e] move to
// t + e, e = 0..a (a = tree.info[kInfoAccepted]); overlap-safe. One dispatch moves `streams`
// caches in one buffer, stream s starting at word s * stream_words (every layer's K and V).
// With `gather`, the same dispatch also does gather_rows' move (below): one dispatch fewer a step;
// with its `norm` weight (cols values) each gathered row is RMS-normalized as rmsnorm() would
// (the same bits): the rows of a forward whose final norm was left to the gather.
struct RowGather {
  Mat src, dst;
  uint32_t cols = 0;
  const Buffer* norm = nullptr;
  float eps = 0.0f;
};
void commit_rows(Sequence& seq, const DeviceTree& tree, const Buffer& accepted, Dyn t, const Buffer& cache,
                 uint32_t row_words, uint32_t streams = 1, uint32_t stream_words = 0, const RowGather* gather = nullptr,
                 KernelConfig cfg = {});
// dst row e = src row accepted[e], e = 0..a, `cols` floats per row. src and dst must not alias
// each other (nor, folded into commit_rows, the cache).
void gather_rows(Sequence& seq, const DeviceTree& tree, const Buffer& accepted, Mat src, Mat dst, uint32_t cols,
                 KernelConfig cfg = {});

// seq_tokens[pos] = info[slot] (the next root after the accepted tokens).
void put_token(Sequence& seq, const Buffer& info, uint32_t slot, const Buffer& seq_tokens, Dyn pos);

// ---- the step's state (vkspec/step_state.h) ------------------------------------------------

// The last dispatch of a step (a greedy tree step does this in argmax_accept_greedy's advance
// instead, the same code: shaders/advance.glsl): advances `state` (kStateT, kStatePrevT, kStateAccepted) and emits
// y[t_old+1 .. t_new] to the host-visible output list `out_list` until its limit or a stop token
// (then kStateDone / kOutDone). With a tree (its accept ran: a = info[kInfoAccepted]), it first
// appends the accepted path, seq_tokens[t + e] = tree.token[accepted[e]] for e = 0..a, and the
// next root, seq_tokens[t + a + 1] = info[kInfoNextRoot], and advances by a + 1; without one
// (`ar`, prefill), y[t+1] is written before it — or, given `argmax`, it is the arg-max of that
// logits row (ties to the lower id, NaN last, as argmax()), taken in this dispatch — and the
// state advances by one. count_step adds the step to the output's statistics: the
// accepted-length histogram and, if win_slot != kDynFixed, the winner info[win_slot].
struct StepArgmax {
  Mat logits;  // its row 0, V values
  uint32_t V;
};
void step_advance(Sequence& seq, const Buffer& state, const DeviceTree* tree, const Buffer* accepted,
                  const Buffer& seq_tokens, const Buffer& out_list, bool count_step, uint32_t win_slot = kDynFixed,
                  const StepArgmax* argmax = nullptr);

}  // namespace vkspec
