// Host side of the tree kernels (shaders/tree_*.comp): draft pools, best-B selection, merge and
// route, mask/positions/retrieve, greedy acceptance and commit. Every function only records
// dispatches; nothing about individual nodes is read back.
#include "vkspec/tree.hpp"

#include <cassert>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ops/common.hpp"

namespace vkspec {

using namespace ops;

// A path of the tree is what the attention kernel walks, what a commit moves and what the
// sampling window climbs: one limit for all three.
static_assert(kTreeMaxPath == kAttentionMaxDepth);

DeviceTree::DeviceTree(Context& ctx, uint32_t cap_, uint32_t max_depth_)
    : cap(cap_), max_depth(max_depth_), mask_words((cap_ + 31) / 32) {
  assert(cap_ >= 1);
  const VkDeviceSize n = cap_;
  token = Buffer(ctx, n * 4);
  parent = Buffer(ctx, n * 4);
  depth = Buffer(ctx, n * 4);
  score = Buffer(ctx, n * 4);
  head = Buffer(ctx, n * 4);
  mask = Buffer(ctx, n * mask_words * 4);
  pos = Buffer(ctx, n * 4);
  retrieve = Buffer(ctx, n * (max_depth_ + 1) * 4);
  info = Buffer(ctx, kTreeInfoWords * 4);
  nonfinite = Buffer(ctx, n * 4);
  nonfinite.upload(std::vector<uint32_t>(cap_, 0u));
}

namespace {

struct InitPush {
  uint32_t root_offset, root_slot;
};
static_assert(sizeof(InitPush) == 8);

struct ExpandPush {
  uint32_t base, frontier_offset, F, topk_offset, topk_stride, k, next_offset, next_F;
};
static_assert(sizeof(ExpandPush) == 32);

struct SelectPush {
  uint32_t count, B;
};
static_assert(sizeof(SelectPush) == 8);

struct MetaPush {
  uint32_t n, t, max_depth, words, t_slot, n1;  // n1: the MERGE variant's
  uint32_t root;                                // token[0] = root_tokens[t]
  uint32_t e_rows = 0, C = 0, x_offset = 0, x_stride = 0;  // the EMBED variants' (MetaEmbed)
};
static_assert(sizeof(MetaPush) == 44);

struct MergePush {
  uint32_t n1, n2;
};
static_assert(sizeof(MergePush) == 8);

struct TriePush {
  uint32_t count1, count2, n_out, root, t, t_slot;
};
static_assert(sizeof(TriePush) == 24);

struct CountPush {  // tree_route, tree_pick
  uint32_t n;
};
static_assert(sizeof(CountPush) == 4);

struct AcceptPush {
  uint32_t W;  // retrieve row width = max_depth + 1
};
static_assert(sizeof(AcceptPush) == 4);

struct CommitPush {
  uint32_t t, row_words, t_slot, stream_words;
  uint32_t streams, cols, s_offset, s_stride, d_offset, d_stride;  // the folded gather (cols 0: none)
  uint32_t norm;
  float eps;
  uint32_t slice;  // columns per workgroup
};
static_assert(sizeof(CommitPush) == 52);

struct GatherPush {
  uint32_t cols, s_offset, s_stride, d_offset, d_stride;
};
static_assert(sizeof(GatherPush) == 20);

}  // namespace

void pool_init(Sequence& seq, DeviceTree& pool, const Buffer& root_token, Dyn root_offset, KernelConfig cfg) {
  InitPush push{root_offset.base, root_offset.slot};
  const Pipeline& p = simple_pipeline(seq.context(), "tree_init", 7, sizeof(push), cfg);
  seq.dispatch(p,
               {in(root_token), out(pool.token), out(pool.parent), out(pool.depth), out(pool.score), out(pool.head),
                root_offset.binding(root_token)},
               push, 1, 1, 1, "pool_init");
}

void draft_expand(Sequence& seq, DeviceTree& pool, uint32_t base, const Buffer& frontier, uint32_t frontier_offset,
                  uint32_t F, const Buffer& ids, const Buffer& logp, uint32_t topk_offset, uint32_t topk_stride,
                  uint32_t k, const Buffer& head_id, const Buffer& next_frontier, uint32_t next_offset,
                  uint32_t next_F, KernelConfig cfg) {
  assert(F * k <= kTreeMaxNodes && base + F * k <= pool.cap && next_F <= F * k && base >= 1);
  ExpandPush push{base, frontier_offset, F, topk_offset, topk_stride, k, next_offset, next_F};
  const Pipeline& p = simple_pipeline(seq.context(), "tree_expand", 10, sizeof(push), cfg);
  seq.dispatch(p,
               {out(pool.token), out(pool.parent), out(pool.depth), out(pool.score), out(pool.head), in(frontier),
                in(ids), in(logp), out(next_frontier), in(head_id)},
               push, 1, 1, 1, "draft_expand");
}

namespace {
// An embedding fold's variant (shaders/variants.cmake: <kernel>_embed_<type>_<path>) and the
// table's two bindings after the kernel's own, texel or storage as the table is laid out.
void add_embed_table(const DeviceWeight& table, std::string& name, std::vector<VkDescriptorType>& bindings) {
  const VkDescriptorType wt = table.texel ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  bindings.insert(bindings.end(), {wt, wt});
  name += std::string("_embed_") + weight_type_name(table.chunks[0].type) + (table.texel ? "_texel" : "_storage");
}

// draft_topk_expand's pipeline: the plain kernel's 16 storage buffers, or with the embedding fold
// (EMBED) the table's two bindings after them, texel or storage as the table is laid out.
PipelineDesc topk_expand_desc(const Context& ctx, const DeviceWeight* embed, uint32_t push_size, uint32_t V,
                              uint32_t k, const KernelConfig& cfg) {
  std::vector<VkDescriptorType> bindings(16, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER);
  std::string name = "tree_topk_expand";
  if (embed) add_embed_table(*embed, name, bindings);
  // The workgroup of a topk row (the rest runs in whichever one finishes last).
  const WorkgroupSpec spec{pick_workgroup(ctx, cfg, row_reduction_workgroup(ctx, V, k + 2))};
  return make_pipeline_desc(name, std::move(bindings), push_size, spec, cfg.required_subgroup_size);
}

struct TopkExpandPush {
  ExpandPush expand;
  uint32_t V, x_offset, x_stride, gather;
  uint32_t K, level, base, frontier_offset, root_row, C, h_offset, h_stride, feat_offset, feat_stride, words;
  uint32_t embed, e_rows, e_offset;
};
static_assert(sizeof(TopkExpandPush) == 26 * 4);
}  // namespace

bool draft_gather_embeds(const Context& ctx, const DeviceWeight& table) {
  if (table.chunks.size() != 1) return false;
  PipelineDesc fold = topk_expand_desc(ctx, &table, sizeof(TopkExpandPush), 1, 1, {});
  PipelineDesc plain = topk_expand_desc(ctx, nullptr, sizeof(TopkExpandPush), 1, 1, {});
  if (!fits_stage_limits(ctx.caps(), fold)) return false;
  if (!ctx.caps().pair_dispatch) return true;
  // Nor where it would split a pair that pairs without it (two heads' levels: one dispatch of
  // two, then the embeds paired, is as many as two unpaired ones).
  fold.array = plain.array = 2;
  return fits_stage_limits(ctx.caps(), fold) || !fits_stage_limits(ctx.caps(), plain);
}

void draft_topk_expand(Sequence& seq, Mat logits, uint32_t V, DeviceTree& pool, uint32_t base, const Buffer& frontier,
                       uint32_t frontier_offset, uint32_t F, const Buffer& ids, const Buffer& logp, uint32_t topk_offset,
                       uint32_t topk_stride, uint32_t k, const Buffer& head_id, const Buffer& next_frontier,
                       uint32_t next_offset, uint32_t next_F, const Buffer& arrivals, const DraftGather* gather,
                       KernelConfig cfg) {
  assert(F >= 1 && F * k <= kTreeMaxNodes && base + F * k <= pool.cap && next_F <= F * k && base >= 1);
  assert(k >= 1 && k <= kTopkMax && k <= V && k <= topk_stride);
  assert(!gather || (gather->level >= 1 && next_F == k));
  TopkExpandPush push{{base, frontier_offset, F, topk_offset, topk_stride, k, next_offset, next_F},
                      V, logits.offset, logits.stride, gather ? 1u : 0u,
                      k, 0, base, next_offset, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  // Without a gather its four bindings are never touched: any buffer of the dispatch stands in.
  Binding g[4] = {in(ids), in(ids), in(ids), in(ids)};
  const DeviceWeight* embed = gather ? gather->embed : nullptr;
  if (gather) {
    const DraftGather& d = *gather;
    push.level = d.level, push.root_row = d.root_row, push.C = d.C, push.h_offset = d.h.offset;
    push.h_stride = d.h.stride, push.feat_offset = d.feat.offset, push.feat_stride = d.feat.stride;
    push.words = d.words;
    g[0] = d.h.in(), g[1] = out(*d.tokens), g[2] = d.feat.out(), g[3] = out(*d.mask);
    if (embed) {
      // Written through feat's binding (the whole buffer): the two share it and a row stride.
      assert(embed->chunks.size() == 1 && embed->K == d.C && d.emb.buf == d.feat.buf && d.emb.stride == d.feat.stride);
      push.embed = 1, push.e_rows = embed->chunks[0].rows, push.e_offset = d.emb.offset;
    }
  }
  const Pipeline& p = seq.context().pipelines().get(topk_expand_desc(seq.context(), embed, sizeof(push), V, k, cfg));
  std::vector<Binding> b{logits.in(), out(pool.token), out(pool.parent), out(pool.depth), out(pool.score), out(pool.head),
                         in(frontier), out(ids), out(logp), out(next_frontier), in(head_id), out(arrivals), g[0], g[1], g[2],
                         g[3]};
  if (embed) b.insert(b.end(), {in(embed->chunks[0].data), in(embed->chunks[0].scales)});  // the EMBED variant's table
  seq.dispatch(p, std::span<const Binding>(b), push, F, 1, 1, "topk_expand");
}

void draft_select(Sequence& seq, const DeviceTree& pool, uint32_t count, uint32_t B, DeviceTree& out_tree,
                  KernelConfig cfg) {
  assert(count >= 1 && count <= pool.cap && count <= kTreeMaxNodes);
  assert(B <= count - 1 && B + 1 <= out_tree.cap);
  SelectPush push{count, B};
  const Pipeline& p = simple_pipeline(seq.context(), "tree_select", 11, sizeof(push), cfg);
  seq.dispatch(p,
               {in(pool.token), in(pool.parent), in(pool.depth), in(pool.score), in(pool.head), out(out_tree.token),
                out(out_tree.parent), out(out_tree.depth), out(out_tree.score), out(out_tree.head),
                out(out_tree.info)},
               push, 1, 1, 1, "draft_select");
}

namespace {
// A meta kernel's pipeline: its n_storage storage buffers, and with the embedding fold (EMBED)
// the table's two bindings, texel or storage as the table is laid out, then x.
PipelineDesc meta_desc(const Context& ctx, const char* shader, uint32_t n_storage, const DeviceWeight* embed,
                       const KernelConfig& cfg) {
  std::vector<VkDescriptorType> bindings(n_storage, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER);
  std::string name = shader;
  if (embed) {
    add_embed_table(*embed, name, bindings);
    bindings.push_back(VK_DESCRIPTOR_TYPE_STORAGE_BUFFER);  // x
  }
  return make_pipeline_desc(name, std::move(bindings), sizeof(MetaPush), WorkgroupSpec{pick_workgroup(ctx, cfg, 64)},
                            cfg.required_subgroup_size);
}

// Records a meta kernel with its bindings, and with `embed` the fold's push fields and bindings —
// or, where the folded kernel's bindings pass the device's per-stage limits, the plain kernel and
// embed() over the tree's tokens after it (`tokens`): the same rows either way.
void dispatch_meta(Sequence& seq, const char* shader, std::vector<Binding> b, MetaPush push, const MetaEmbed* embed,
                   const Buffer& tokens, const KernelConfig& cfg, const char* label) {
  const uint32_t n_storage = uint32_t(b.size());
  Context& ctx = seq.context();
  if (embed && !fits_stage_limits(ctx.caps(), meta_desc(ctx, shader, n_storage, embed->table, cfg))) {
    dispatch_meta(seq, shader, std::move(b), push, nullptr, tokens, cfg, label);
    return vkspec::embed(seq, *embed->table, tokens, 0, embed->x, push.n, cfg);
  }
  if (embed) {
    const DeviceWeight::Chunk& c = embed->table->chunks[0];
    push.e_rows = c.rows, push.C = embed->table->K, push.x_offset = embed->x.offset, push.x_stride = embed->x.stride;
    b.insert(b.end(), {in(c.data), in(c.scales), embed->x.out()});
  }
  const Pipeline& p = ctx.pipelines().get(meta_desc(ctx, shader, n_storage, embed ? embed->table : nullptr, cfg));
  seq.dispatch(p, std::span<const Binding>(b), push, 1, 1, 1, label);
}
}  // namespace

bool meta_embeds(const DeviceWeight& table, uint32_t n) {
  return table.chunks.size() == 1 && uint64_t(n) * table.K <= kMetaEmbedMaxValues;
}

void tree_meta(Sequence& seq, DeviceTree& tree, uint32_t n, Dyn t, KernelConfig cfg, const Buffer* root_tokens,
               const MetaEmbed* embed) {
  assert(n >= 1 && n <= tree.cap && tree.cap <= kTreeMaxNodes);  // mask row fits tree_meta's registers
  assert(tree.max_depth < kAttentionMaxDepth);  // the attention kernel's path-length limit
  MetaPush push{n, t.base, tree.max_depth, tree.mask_words, t.slot, 0, root_tokens ? 1u : 0u};
  // Without root_tokens the two root bindings are never touched: the parents stand in (the
  // embedding fold reads the tokens, so with it the token binding is the tree's own).
  dispatch_meta(seq, "tree_meta",
                {in(tree.parent), out(tree.depth), out(tree.mask), out(tree.pos), out(tree.retrieve), out(tree.info),
                 t.binding(tree.parent), in(root_tokens ? *root_tokens : tree.parent),
                 root_tokens || embed ? out(tree.token) : in(tree.parent)},
                push, embed, tree.token, cfg, "tree_meta");
}

namespace {
// The merge's per-node fields, moved unchanged: t1's root and nodes to 0..n1, t2's nodes 1..n2
// after them (seed 000 §4.1): token, score, head and, unless tree_meta computes it, depth.
void splice_fields(Sequence& seq, const DeviceTree& t1, uint32_t n1, const DeviceTree& t2, uint32_t n2,
                   DeviceTree& out_tree, bool depth) {
  const VkDeviceSize b1 = VkDeviceSize(n1 + 1) * 4, b2 = VkDeviceSize(n2) * 4;
  for (auto m : {&DeviceTree::token, &DeviceTree::score, &DeviceTree::head, &DeviceTree::depth}) {
    if (m == &DeviceTree::depth && !depth) continue;
    seq.copy(t1.*m, 0, out_tree.*m, 0, b1);
    if (n2) seq.copy(t2.*m, 4, out_tree.*m, b1, b2);
  }
}
}  // namespace

void merge_trees(Sequence& seq, const DeviceTree& t1, uint32_t n1, const DeviceTree& t2, uint32_t n2,
                 DeviceTree& out_tree, KernelConfig cfg) {
  assert(n1 + 1 <= t1.cap && n2 + 1 <= t2.cap && 1 + n1 + n2 <= out_tree.cap);
  splice_fields(seq, t1, n1, t2, n2, out_tree, /*depth=*/true);
  MergePush push{n1, n2};
  const Pipeline& p = simple_pipeline(seq.context(), "tree_merge", 4, sizeof(push), cfg);
  seq.dispatch(p, {in(t1.parent), in(t2.parent), out(out_tree.parent), out(out_tree.info)}, push,
               groups(1 + n1 + n2, wg_of(p)), 1, 1, "merge_trees");
}

void merge_trees_meta(Sequence& seq, const DeviceTree& t1, uint32_t n1, const DeviceTree& t2, uint32_t n2,
                      DeviceTree& out_tree, Dyn t, KernelConfig cfg, const Buffer* root_tokens, const MetaEmbed* embed) {
  const uint32_t n = 1 + n1 + n2;
  assert(n1 + 1 <= t1.cap && n2 + 1 <= t2.cap && n <= out_tree.cap && out_tree.cap <= kTreeMaxNodes);
  assert(out_tree.max_depth < kAttentionMaxDepth);
  splice_fields(seq, t1, n1, t2, n2, out_tree, /*depth=*/false);  // depth: tree_meta writes it
  MetaPush push{n, t.base, out_tree.max_depth, out_tree.mask_words, t.slot, n1, root_tokens ? 1u : 0u};
  dispatch_meta(seq, "tree_meta_merge",
                {out(out_tree.parent), out(out_tree.depth), out(out_tree.mask), out(out_tree.pos), out(out_tree.retrieve),
                 out(out_tree.info), t.binding(t1.parent), in(t1.parent), in(t2.parent),
                 in(root_tokens ? *root_tokens : t1.parent), root_tokens || embed ? out(out_tree.token) : in(t1.parent)},
                push, embed, out_tree.token, cfg, "merge_meta");
}

void merge_trie(Sequence& seq, const DeviceTree& pool1, uint32_t count1, const DeviceTree& pool2, uint32_t count2,
                uint32_t n_out, DeviceTree& out_tree, KernelConfig cfg, const Buffer* root_tokens, Dyn t) {
  assert(count1 >= 1 && count2 >= 1 && count1 <= pool1.cap && count2 <= pool2.cap);
  assert(count1 + count2 - 1 <= kTrieMaxNodes && n_out >= 1 && n_out <= out_tree.cap);
  TriePush push{count1, count2, n_out, root_tokens ? 1u : 0u, t.base, t.slot};
  // Loop iterations one invocation runs at most (shaders/tree_trie.comp, phase by phase), with
  // n nodes per invocation, L levels and scans of K chunks of 16 nodes: depths n(L + 1), depth
  // order n(K + 1), folding (n + L)(K + 3) over all levels, then fold, rank and index 3n(K + 1).
  // Where the driver ends loops past a budget (DeviceCaps::Quirks::loop_iteration_limit), the
  // group is widened until the bound fits — only groups narrower than 16 need it.
  const uint32_t M = count1 + count2 - 1;
  const Context& ctx = seq.context();
  uint32_t wg = pick_workgroup(ctx, cfg, 64);
  auto bound = [&](uint64_t w) {
    const uint64_t n = (M + w - 1) / w, K = (M + 15) / 16, L = kTreeMaxPath;
    return n * (L + 1) + n * (K + 1) + (n + L) * (K + 3) + 3 * n * (K + 1) + 4 * (L + 2);
  };
  const uint32_t wg_max = std::min(ctx.caps().max_workgroup_invocations, ctx.caps().max_workgroup_size[0]);
  if (const uint32_t limit = ctx.caps().quirks.loop_iteration_limit)
    while (bound(wg) > limit && wg * 2 <= wg_max) wg *= 2;
  KernelConfig c = cfg;
  c.workgroup_size = wg;
  const Pipeline& p = simple_pipeline(seq.context(), "tree_trie", 14, sizeof(push), c);
  const Buffer& rt = root_tokens ? *root_tokens : pool1.token;  // untouched without root_tokens
  seq.dispatch(p,
               {in(pool1.token), in(pool1.parent), in(pool1.score), in(pool2.token), in(pool2.parent), in(pool2.score),
                out(out_tree.token), out(out_tree.parent), out(out_tree.depth), out(out_tree.score),
                out(out_tree.head), out(out_tree.info), in(rt), t.binding(rt)},
               push, 1, 1, 1, "merge_trie");
}

void route_trees(Sequence& seq, const DeviceTree& t1, uint32_t n1, const DeviceTree& t2, uint32_t n2,
                 DeviceTree& out_tree, KernelConfig cfg) {
  assert(n1 == n2 && n1 >= 1 && n1 + 1 <= t1.cap && n2 + 1 <= t2.cap && n1 + 1 <= out_tree.cap);
  Context& ctx = seq.context();
  CountPush push{n1};
  // Decision and copy in one dispatch where the device allows its 16 storage buffers.
  const PipelineDesc copy =
      make_pipeline_desc("tree_route_copy", std::vector<VkDescriptorType>(16, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER),
                         sizeof(push), WorkgroupSpec{pick_workgroup(ctx, cfg, 64)}, cfg.required_subgroup_size);
  if (fits_stage_limits(ctx.caps(), copy)) {
    seq.dispatch(ctx.pipelines().get(copy),
                 {in(t1.score), in(t2.score), out(out_tree.info), in(t1.token), in(t1.parent), in(t1.depth),
                  in(t1.head), in(t2.token), in(t2.parent), in(t2.depth), in(t2.head), out(out_tree.token),
                  out(out_tree.parent), out(out_tree.depth), out(out_tree.score), out(out_tree.head)},
                 push, 1, 1, 1, "route_trees");
    return;
  }
  const Pipeline& p = simple_pipeline(ctx, "tree_route", 3, sizeof(push), cfg);
  seq.dispatch(p, {in(t1.score), in(t2.score), out(out_tree.info)}, push, 1, 1, 1, "route_trees");
  // Otherwise the copy of the chosen tree stays on the GPU as one select-copy per array.
  CountPush pick{n1 + 1};
  const Pipeline& pp = simple_pipeline(ctx, "tree_pick", 4, sizeof(pick), cfg);
  for (auto m : {&DeviceTree::token, &DeviceTree::parent, &DeviceTree::depth, &DeviceTree::score, &DeviceTree::head})
    seq.dispatch(pp, {in(out_tree.info), in(t1.*m), in(t2.*m), out(out_tree.*m)}, pick, groups(n1 + 1, wg_of(pp)), 1,
                 1, "route_pick");
}

void route_trees_meta(Sequence& seq, const DeviceTree& t1, uint32_t n1, const DeviceTree& t2, uint32_t n2,
                      DeviceTree& out_tree, Dyn t, KernelConfig cfg, const Buffer* root_tokens, const MetaEmbed* embed) {
  assert(n1 == n2 && n1 >= 1 && n1 + 1 <= t1.cap && n2 + 1 <= t2.cap && n1 + 1 <= out_tree.cap);
  assert(out_tree.cap <= kTreeMaxNodes && out_tree.max_depth < kAttentionMaxDepth);
  Context& ctx = seq.context();
  const uint32_t n = n1 + 1;
  MetaPush push{n, t.base, out_tree.max_depth, out_tree.mask_words, t.slot, n1, root_tokens ? 1u : 0u};
  // tree_route's workgroup (simple_pipeline's default), so μ is summed in the same order.
  if (!fits_stage_limits(ctx.caps(), meta_desc(ctx, "tree_meta_route", 19, nullptr, cfg))) {
    route_trees(seq, t1, n1, t2, n2, out_tree, cfg);
    return tree_meta(seq, out_tree, n, t, cfg, root_tokens, embed);
  }
  dispatch_meta(seq, "tree_meta_route",
                {out(out_tree.parent), out(out_tree.depth), out(out_tree.mask), out(out_tree.pos), out(out_tree.retrieve),
                 out(out_tree.info), t.binding(t1.parent), in(t1.parent), in(t2.parent),
                 in(root_tokens ? *root_tokens : t1.parent), out(out_tree.token), in(t1.score), in(t2.score),
                 in(t1.token), in(t2.token), in(t1.head), in(t2.head), out(out_tree.score), out(out_tree.head)},
                push, embed, out_tree.token, cfg, "route_meta");
}

void accept_greedy(Sequence& seq, DeviceTree& tree, const Buffer& verifier_argmax, const Buffer& accepted,
                   KernelConfig cfg) {
  assert(tree.cap <= 0xffff);  // the row index lives in 16 bits of the reduction key
  AcceptPush push{tree.max_depth + 1};
  const Pipeline& p = simple_pipeline(seq.context(), "tree_accept", 6, sizeof(push), cfg);
  seq.dispatch(p,
               {in(tree.token), in(tree.head), in(tree.retrieve), out(tree.info), in(verifier_argmax), out(accepted)},
               push, 1, 1, 1, "accept_greedy");
}

// The folded gather's push words and bindings, as tree_commit.comp and tree_argmax_accept.comp's
// COMMIT variant read them. Without a gather its bindings are never touched: the tree's info and
// the cache stand in (the latter as written: the shaders declare their destination writable).
struct GatherFold {
  uint32_t cols = 0, s_offset = 0, s_stride = 0, d_offset = 0, d_stride = 0, norm = 0;
  float eps = 0.0f;
  Binding src, dst, norm_w;
};
GatherFold gather_fold(const DeviceTree& tree, const Buffer& cache, const RowGather* g) {
  GatherFold f;
  f.src = in(tree.info), f.dst = out(cache), f.norm_w = in(tree.info);
  if (!g) return f;
  f.cols = g->cols, f.s_offset = g->src.offset, f.s_stride = g->src.stride;
  f.d_offset = g->dst.offset, f.d_stride = g->dst.stride;
  f.src = g->src.in(), f.dst = g->dst.out();
  if (g->norm) f.norm = 1, f.eps = g->eps, f.norm_w = in(*g->norm);
  return f;
}

bool argmax_accept_greedy(Sequence& seq, Mat logits, uint32_t n, uint32_t V, DeviceTree& tree,
                          const Buffer& verifier_argmax, const Buffer& accepted, const Buffer& arrivals,
                          const StepAdvanceArgs* advance, const KvCommit* commit, KernelConfig cfg) {
  assert(tree.cap <= 0xffff && n >= 1 && n <= tree.cap);
  struct Push {
    uint32_t W, N, V, x_offset, x_stride, win_slot;
    uint32_t row_words, stream_words, streams, cols, s_offset, s_stride, d_offset, d_stride, norm;
    float eps;
  } push{tree.max_depth + 1, n, V, logits.offset, logits.stride, advance ? advance->win_slot : kDynFixed};
  Context& ctx = seq.context();
  const uint32_t wg = pick_workgroup(ctx, cfg, row_reduction_workgroup(ctx, V, 1));
  const bool fused = advance && ctx.caps().max_stage_storage_buffers >= 11;
  std::vector<Binding> b{logits.in(),   in(tree.token),       in(tree.head),     in(tree.retrieve),
                         out(tree.info), out(verifier_argmax), out(accepted),     out(arrivals)};
  if (fused)
    b.insert(b.end(), {out(*advance->state), out(*advance->seq_tokens), out(*advance->out_list)});
  // The commit too: one workgroup's moves, so only a small one (and the gather's norm reduced at
  // this kernel's workgroup size, so that the features keep rmsnorm's bits).
  bool folds_commit = false;
  if (fused && commit && ctx.caps().max_stage_storage_buffers >= 15) {
    const RowGather* g = commit->gather;
    const uint64_t rows = tree.max_depth + 1,
                   words = rows * (uint64_t(commit->streams) * commit->row_words + (g ? g->cols : 0));
    folds_commit = words <= kFoldCommitMaxWords && tree.max_depth + 1 <= kTreeMaxPath &&
                   (!g || !g->norm || row_reduction_workgroup(ctx, g->cols, 2) == wg);
  }
  if (folds_commit) {
    const GatherFold f = gather_fold(tree, *commit->cache, commit->gather);
    push.row_words = commit->row_words, push.stream_words = commit->stream_words, push.streams = commit->streams;
    push.cols = f.cols, push.s_offset = f.s_offset, push.s_stride = f.s_stride, push.d_offset = f.d_offset;
    push.d_stride = f.d_stride, push.norm = f.norm, push.eps = f.eps;
    b.insert(b.end(), {out(*commit->cache), f.src, f.dst, f.norm_w});
  }
  // The workgroup of an argmax row (the acceptance runs in whichever one finishes last).
  const char* name = folds_commit ? "tree_argmax_accept_commit" : fused ? "tree_argmax_accept_advance" : "tree_argmax_accept";
  const Pipeline& p = simple_pipeline(ctx, name, uint32_t(b.size()), sizeof(push), cfg, wg);
  assert(wg_of(p) == wg);
  seq.dispatch(p, b, push, n, 1, 1, "argmax_accept");
  if (advance && !fused)
    step_advance(seq, *advance->state, &tree, &accepted, *advance->seq_tokens, *advance->out_list,
                 /*count_step=*/true, advance->win_slot);
  return folds_commit;
}

void commit_rows(Sequence& seq, const DeviceTree& tree, const Buffer& accepted, Dyn t, const Buffer& cache,
                 uint32_t row_words, uint32_t streams, uint32_t stream_words, const RowGather* gather, KernelConfig cfg) {
  assert(tree.max_depth + 1 <= kTreeMaxPath);  // rows held per invocation (tree_commit.comp MAXROWS)
  assert(streams >= 1 && (streams == 1 || stream_words >= row_words));
  assert(!gather || (gather->src.buf != &cache && gather->dst.buf != &cache && gather->src.buf != gather->dst.buf));
  const GatherFold f = gather_fold(tree, cache, gather);
  CommitPush push{t.base, row_words, t.slot, stream_words, streams, f.cols, f.s_offset, f.s_stride, f.d_offset,
                  f.d_stride, f.norm, f.eps, 0};
  const Binding src = f.src, dst = f.dst, norm = f.norm_w;
  uint32_t width = row_words, rows = streams, wg = 64;
  if (gather) {
    width = std::max(width, gather->cols), rows += tree.max_depth + 1;  // a workgroup row per possible accepted row
    if (gather->norm) {
      assert(gather->norm != &cache && gather->norm != gather->dst.buf);
      wg = row_reduction_workgroup(seq.context(), gather->cols, 2);  // rmsnorm's, for its bits
    }
  }
  const Pipeline& p = simple_pipeline(seq.context(), "tree_commit", 7, sizeof(push), cfg, wg);
  // Each workgroup moves up to kCommitPasses columns a lane: a narrow grid (on CPU rasterizers a
  // workgroup is a job: the demo's ~430 workgroups of 8 lanes, one column each, cost 150-200 us a
  // step single-threaded, 2 x 17 of them ~50 us), and a lane's loops stay far inside a driver's
  // loop budget (DeviceCaps::Quirks::loop_iteration_limit: passes x (2 x kTreeMaxPath + 1)).
  constexpr uint32_t kCommitPasses = 16;
  push.slice = wg_of(p) * kCommitPasses;
  seq.dispatch(p, {in(tree.info), in(accepted), out(cache), t.binding(accepted), src, dst, norm}, push,
               groups(width, push.slice), rows, 1, "commit_rows");
}

void gather_rows(Sequence& seq, const DeviceTree& tree, const Buffer& accepted, Mat src, Mat dst, uint32_t cols,
                 KernelConfig cfg) {
  GatherPush push{cols, src.offset, src.stride, dst.offset, dst.stride};
  const Pipeline& p = simple_pipeline(seq.context(), "tree_gather", 4, sizeof(push), cfg);
  // a is on the device: one workgroup row per possible accepted row, the ones past a return.
  seq.dispatch(p, {in(tree.info), in(accepted), src.in(), dst.out()}, push, groups(cols, wg_of(p)),
               tree.max_depth + 1, 1, "gather_rows");
}

void put_token(Sequence& seq, const Buffer& info, uint32_t slot, const Buffer& seq_tokens, Dyn pos) {
  struct Push {
    uint32_t slot, pos, pos_slot;
  } push{slot, pos.base, pos.slot};
  const Pipeline& p = simple_pipeline(seq.context(), "put_token", 3, sizeof(Push), {});
  seq.dispatch(p, {in(info), out(seq_tokens), pos.binding(info)}, push, 1, 1, 1, "put_token");
}

void step_advance(Sequence& seq, const Buffer& state, const DeviceTree* tree, const Buffer* accepted,
                  const Buffer& seq_tokens, const Buffer& out_list, bool count_step, uint32_t win_slot,
                  const StepArgmax* argmax) {
  assert((tree == nullptr) == (accepted == nullptr));
  assert(!(tree && argmax));
  struct Push {
    uint32_t tree_mode, count_step, win_slot, argmax_V, x_offset;
  } push{tree ? 1u : 0u, count_step ? 1u : 0u, tree ? win_slot : kDynFixed, argmax ? argmax->V : 0u,
         argmax ? argmax->logits.offset : 0u};
  // With the argmax, the workgroup argmax() takes for such a row (one subgroup on CPU rasterizers).
  const uint32_t wg = argmax ? row_reduction_workgroup(seq.context(), argmax->V, 1) : 1;
  const Pipeline& p = simple_pipeline(seq.context(), "step_advance", 7, sizeof(Push), {}, wg);
  // Without a tree, `state` stands in for the bindings ar mode never reads; likewise without an argmax.
  seq.dispatch(p,
               {out(state), in(tree ? tree->info : state), out(seq_tokens), out(out_list), in(accepted ? *accepted : state),
                in(tree ? tree->token : state), argmax ? argmax->logits.in() : in(state)},
               push, 1, 1, 1, "step_advance");
}

}  // namespace vkspec
