// Two draft heads in shared dispatches (Sequence::begin_pair, shaders/pair.glsl): a pair section
// must compute exactly what its two lists compute one after the other, on every kernel variant
// that has a PAIR build, and the engine's paired drafts must be the unpaired ones.
#include <doctest/doctest.h>

#include <cstring>
#include <optional>
#include <random>

#include "matmul_reference.hpp"
#include "spec_fixtures.hpp"
#include "vk_fixture.hpp"
#include "vkspec/engine.hpp"
#include "vkspec/ops.hpp"
#include "vkspec/pair_pack.hpp"

using namespace vkspec;
using namespace vkspec::test;

namespace {

// One head's worth of buffers for the randomized pair test.
struct Side {
  DeviceWeight w;
  Buffer x, y, ids, logp, tok, emb, copy;
  Side(Context& ctx, WeightType t, uint32_t N, uint32_t K, uint32_t B, uint32_t seed)
      : w(upload_weight(ctx, t, N, K, make_weight(t, N, K, seed).data())),
        x(ctx, uint64_t(B) * round4(K) * 4),
        y(ctx, uint64_t(B) * N * 4),
        ids(ctx, uint64_t(B) * 32 * 4),
        logp(ctx, uint64_t(B) * 32 * 4),
        tok(ctx, uint64_t(B) * 4),
        emb(ctx, uint64_t(B) * round4(K) * 4),
        copy(ctx, uint64_t(B) * N * 4) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> xs(size_t(B) * round4(K));
    for (auto& v : xs) v = u(rng);
    x.upload(xs);
    std::vector<uint32_t> ts(B);
    for (auto& v : ts) v = rng() % N;
    tok.upload(ts);
    y.upload(std::vector<float>(size_t(B) * N, 0.0f));
    emb.upload(std::vector<float>(size_t(B) * round4(K), 0.0f));
    copy.upload(std::vector<float>(size_t(B) * N, 0.0f));
    ids.upload(std::vector<uint32_t>(size_t(B) * 32, 0));  // top-k writes 4 of each row's 32
    logp.upload(std::vector<float>(size_t(B) * 32, 0.0f));
  }
  // The ops a draft level runs, on this side's buffers; `extra` puts an op the other side lacks
  // in the middle, so the lists no longer line up one to one after it.
  void record(Sequence& seq, uint32_t N, uint32_t K, uint32_t B, const KernelConfig& cfg, bool extra) {
    MatmulArgs ma;
    ma.cfg = cfg;
    matmul(seq, w, Mat{&x, 0, round4(K)}, Mat{&y, 0, N}, B, ma);
    if (extra) seq.fill(ids, 7u);
    embed(seq, w, tok, 0, Mat{&emb, 0, round4(K)}, B);
    topk(seq, Mat{&y, 0, N}, B, N, 4, ids, logp, 0, 32);
    copy_rows(seq, Mat{&y, 0, N}, 0, Mat{&copy, 0, N}, B, N);
  }
  std::vector<std::vector<uint8_t>> results(uint32_t N, uint32_t K, uint32_t B) const {
    return {y.read<uint8_t>(size_t(B) * N * 4), ids.read<uint8_t>(size_t(B) * 32 * 4),
            logp.read<uint8_t>(size_t(B) * 32 * 4), emb.read<uint8_t>(size_t(B) * round4(K) * 4),
            copy.read<uint8_t>(size_t(B) * N * 4)};
  }
};

}  // namespace

TEST_CASE_FIXTURE(VkTest, "pair: a pair section computes bit for bit what its two lists compute one after the other") {
  const bool can = ctx.caps().pair_dispatch;
  MESSAGE("device pair_dispatch: " << std::string(can ? "yes" : "no (every command runs unpaired)"));
  std::mt19937 rng(21);
  // Every matmul variant has a PAIR build: 0 split-K, 1 rows, 2 subgroup split-K, 3 lanes.
  for (int variant : {0, 1, 2, 3})
    for (WeightType t : {WeightType::F16, WeightType::Q8_0, WeightType::Q4_K}) {
      if (variant == 2 && !ctx.caps().subgroup_arithmetic) continue;
      const uint32_t N = 256 + 32 * (rng() % 3), K = 256, B = 1 + rng() % 6;
      KernelConfig cfg;
      cfg.matmul_rows = variant;
      // packed: the two weights copied into one buffer (PairPack), read at i + head·delta.
      for (auto [extra, packed] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
        CAPTURE(variant);
        const std::string type = weight_type_name(t);
        CAPTURE(type);
        CAPTURE(extra);
        CAPTURE(packed);
        Side a1(ctx, t, N, K, B, 1), b1(ctx, t, N, K, B, 2), a2(ctx, t, N, K, B, 1), b2(ctx, t, N, K, B, 2);
        const std::vector<const DeviceWeight*> wa{&a2.w}, wb{&b2.w};
        std::optional<PairPack> pack;
        if (packed) pack.emplace(ctx, wa, wb);
        Sequence apart(ctx);
        apart.begin();
        a1.record(apart, N, K, B, cfg, extra);
        b1.record(apart, N, K, B, cfg, false);
        apart.run();
        Sequence paired(ctx);
        paired.begin();
        paired.begin_pair(pack ? &*pack : nullptr);
        a2.record(paired, N, K, B, cfg, extra);
        paired.next_pair();
        b2.record(paired, N, K, B, cfg, false);
        paired.end_pair();
        paired.run();
        const auto ra1 = a1.results(N, K, B), ra2 = a2.results(N, K, B), rb1 = b1.results(N, K, B),
                   rb2 = b2.results(N, K, B);
        for (size_t r = 0; r < ra1.size(); ++r) {
          CAPTURE(r);  // 0 matmul, 1 top-k ids, 2 top-k log-probs, 3 embedding rows, 4 copied rows
          CHECK(ra2[r] == ra1[r]);
          CHECK(rb2[r] == rb1[r]);
        }
        // Weights differ per side, so a pair that read one side's descriptors twice would fail above.
        CHECK(ra1[0] != rb1[0]);
        // Four ops per side; the fill shifts the first list by one after the matmul.
        const uint32_t want = !can ? 0 : extra ? 1 : 4;
        CHECK(paired.paired_count() == want);
        CHECK(paired.dispatch_count() + paired.paired_count() == apart.dispatch_count());
        // Packed, a texel-path weight's data and scales (a 16-byte dummy but for q8_0) are buffer
        // pairs of the pack, each read once by the paired matmul and embedding — and by the lanes
        // matmul's norm-weight binding, which holds the scales when there is no norm to fold.
        // Unpacked, no texel binding of these ops is one buffer for both sides.
        const bool texel = a2.w.texel && can;
        if (packed) CHECK(pack->packed() == 2u);
        const uint32_t matmul_reads = variant == 3 ? 3 : 2;
        CHECK(paired.single_fetch_bindings() == (packed && texel ? matmul_reads + (extra ? 0u : 2u) : 0u));
      }
    }
}

TEST_CASE_FIXTURE(VkTest, "pair: a pack places each side's state at one distance, usable, and refuses a state past its share") {
  const std::vector<uint64_t> sizes{1000, 4096, 70000, 16};
  const uint64_t share = 256 * 1024;
  std::vector<Buffer> side[2];
  std::vector<Buffer> host;
  const uint64_t before = ctx.allocated_bytes();
  PairPack pack(ctx, {}, {}, share, [&](int s) {
    for (uint64_t n : sizes) side[s].emplace_back(ctx, n);
    host.emplace_back(ctx, 64, MemoryKind::Host);  // host memory is never placed
  });
  // The placed buffers allocate nothing of their own: only the pack (and the two host buffers).
  CHECK(ctx.allocated_bytes() - before == pack.bytes() + host[0].size() + host[1].size());
  CHECK(pack.bytes() >= 2 * share);
  CHECK(host[0].memory() != VK_NULL_HANDLE);
  const uint64_t distance = uint64_t(pack.delta()) * 16;
  CHECK(distance * 2 == pack.bytes());
  for (size_t i = 0; i < sizes.size(); ++i) {
    CAPTURE(i);
    const Context::Placement a = ctx.placed_in(side[0][i].handle()), b = ctx.placed_in(side[1][i].handle());
    CHECK(side[0][i].memory() == VK_NULL_HANDLE);
    CHECK(a.in == pack.buffer().handle());
    CHECK(b.in == pack.buffer().handle());
    CHECK(b.offset == a.offset + distance);
    if (i) CHECK(a.offset >= ctx.placed_in(side[0][i - 1].handle()).offset + side[0][i - 1].size());  // no overlap
    CHECK(pack.view(side[0][i].handle(), side[1][i].handle()) != VK_NULL_HANDLE);
    CHECK(pack.view(side[1][i].handle(), side[0][i].handle()) == VK_NULL_HANDLE);  // B first: not a pair
    CHECK(pack.view(side[0][i].handle(), side[1][(i + 1) % sizes.size()].handle()) == VK_NULL_HANDLE);
  }
  CHECK(pack.packed() == sizes.size());
  // Data written through a placed buffer is the pack's at its placement, and the other side's is
  // untouched.
  std::vector<uint32_t> xa(70000 / 4), xb(70000 / 4);
  for (size_t k = 0; k < xa.size(); ++k) xa[k] = uint32_t(k * 2654435761u), xb[k] = ~xa[k];
  side[0][2].upload(xa);
  side[1][2].upload(xb);
  CHECK(side[0][2].read<uint32_t>(xa.size()) == xa);
  CHECK(side[1][2].read<uint32_t>(xb.size()) == xb);
  const uint64_t at = ctx.placed_in(side[0][2].handle()).offset;
  CHECK(pack.buffer().read<uint32_t>(xa.size(), at) == xa);
  CHECK(pack.buffer().read<uint32_t>(xb.size(), at + distance) == xb);
  // Past the share (a side is rounded up to whole kMaxPlacedAlignment): refused naming the bytes
  // set aside, and the placer is gone afterwards.
  std::vector<Buffer> big;
  CHECK_THROWS_WITH_AS(PairPack(ctx, {}, {}, 4096, [&](int) { big.emplace_back(ctx, 2 * PairPack::kMaxPlacedAlignment); }),
                       doctest::Contains("does not fit the 4096 bytes the pair pack sets aside"), Error);
  Buffer after(ctx, 8192);
  CHECK(after.memory() != VK_NULL_HANDLE);
  CHECK(ctx.placed_in(after.handle()).in == VK_NULL_HANDLE);
}

TEST_CASE_FIXTURE(VkTest, "pair: a section out of order is refused") {
  Sequence seq(ctx);
  seq.begin();
  CHECK_THROWS_WITH_AS(seq.next_pair(), doctest::Contains("not capturing the first list"), Error);
  CHECK_THROWS_WITH_AS(seq.end_pair(), doctest::Contains("not capturing the second list"), Error);
  seq.begin_pair();
  CHECK_THROWS_WITH_AS(seq.begin_pair(), doctest::Contains("already in a pair section"), Error);
  CHECK_THROWS_WITH_AS(seq.end(), doctest::Contains("pair section is still open"), Error);
  seq.next_pair();
  seq.end_pair();
  seq.run();
}

TEST_CASE_FIXTURE(VkTest, "pair: two heads drafting in shared dispatches give the unpaired drafts and tokens") {
  DemoRig rig(ctx);
  for (Strategy s : {Strategy::Route, Strategy::Merge, Strategy::MergeTrie}) {
    EngineOptions o;
    o.strategy = s;
    // The demo lossless case's tree (test_spec.cpp): the paired engine reuses its pipelines, so a
    // cold run compiles only the unpaired ones here (this case took 445 s cold at budget 8).
    o.depth = 5, o.topk = 4, o.budget = 12;
    Engine paired(ctx, rig.model, &rig.head1, &rig.head2, o);
    o.pack_pairs = false;
    Engine unpacked(ctx, rig.model, &rig.head1, &rig.head2, o);
    o.pair_heads = false;
    Engine apart(ctx, rig.model, &rig.head1, &rig.head2, o);
    // Two prompts of 48 tokens: dozens of steps with multi-token commits per strategy. Four of
    // 64 took 231 s of a cold suite (2-vCPU VM, 2026-12-04); soak and the demo lossless case
    // run these strategies on this rig at length.
    for (size_t i = 0; i < 2; ++i) {
      const std::string name = strategy_name(s);
      CAPTURE(name);
      CAPTURE(i);
      const GenerateStats p = paired.generate(rig.prompts[i], 48), a = apart.generate(rig.prompts[i], 48),
                          u = unpacked.generate(rig.prompts[i], 48);
      CHECK(p.tokens == a.tokens);
      CHECK(p.accept_hist == a.accept_hist);  // the same drafts: the same accepted lengths, step by step
      CHECK(p.head_wins == a.head_wins);
      CHECK(u.tokens == a.tokens);
      CHECK(u.accept_hist == a.accept_hist);
      CHECK(u.dispatches_per_step == p.dispatches_per_step);
      // Where weights are texels, the packed engine reads each paired weight once: more bindings
      // of one descriptor than the unpacked one, whose only such bindings are the verifier's
      // weights both heads read (the LM head).
      const bool texel = ctx.caps().quirks.weights_via_texel_buffer && ctx.caps().pair_dispatch;
      CHECK((p.pair_pack_bytes > 0) == texel);
      CHECK(u.pair_pack_bytes == 0);
      if (texel) CHECK(p.single_fetch_per_step > u.single_fetch_per_step);
      CHECK(a.paired_per_step == 0);
      CHECK(p.dispatches_per_step + p.paired_per_step == a.dispatches_per_step);
      if (ctx.caps().pair_dispatch) {
        // Every op of every draft level pairs: embed, the head's 7 matmuls and passes, and the
        // top-k/expand/gather — 9 per level, 8 where attention carries the head's W_o (the demo
        // head's 288 x 288 f16 folds wherever the subgroup kernel reads weights as texels), one
        // fewer in the levels after the ingest where the gather carries the embedding.
        const DeviceCaps& caps = ctx.caps();
        const bool folds = caps.quirks.single_subgroup_kernels && caps.subgroup_arithmetic && caps.quirks.weights_via_texel_buffer;
        const bool embeds = draft_gather_embeds(ctx, rig.model.embedding());
        CHECK(p.paired_per_step >= (folds ? 8 : 9) * o.depth - (embeds ? o.depth - 1 : 0));
        MESSAGE(name << ": " << a.dispatches_per_step << " dispatches per step unpaired, "
                                 << p.dispatches_per_step << " paired");
      }
    }
  }
}

// The demo's statistics for held-out prompt `prompt`, n tokens: with both heads under options o,
// and plain ar.
static std::pair<GenerateStats, GenerateStats> with_and_without_heads(Context& ctx, const EngineOptions& o, size_t prompt,
                                                                      uint32_t n) {
  DemoRig rig(ctx);
  EngineOptions a;
  a.strategy = Strategy::AR;
  return {Engine(ctx, rig.model, &rig.head1, &rig.head2, o).generate(rig.prompts[prompt], n),
          Engine(ctx, rig.model, nullptr, nullptr, a).generate(rig.prompts[prompt], n)};
}

TEST_CASE_FIXTURE(VkTest, "pair: a pair past the device's descriptor limit runs unpaired; a kernel past it is refused by name") {
  // draft_topk_expand binds 16 storage buffers: paired 32. With a limit of 16 it runs once per
  // head, every other draft op still pairs, and the tokens stay ar's.
  EngineOptions o;
  o.strategy = Strategy::Merge;
  o.depth = 4, o.budget = 8;
  const auto [full, ar] = with_and_without_heads(ctx, o, 1, 48);
  for (uint32_t limit : {16u, 12u}) {
    CAPTURE(limit);
    Context small(test_context_options(limit));
    REQUIRE(small.caps().max_stage_storage_buffers == limit);
    DemoRig rig(small);
    if (limit == 16) {
      const GenerateStats g = Engine(small, rig.model, &rig.head1, &rig.head2, o).generate(rig.prompts[1], 48);
      CHECK(g.tokens == ar.tokens);
      CHECK(g.tokens == full.tokens);
      if (ctx.caps().pair_dispatch) {
        // topk_expand (16 bindings) and draft_select (11) now run once per head; the matmuls,
        // attention and embed (at most 8 each) still pair. The same work either way.
        CHECK(g.paired_per_step + o.depth + 1 == full.paired_per_step);
        CHECK(g.dispatches_per_step + g.paired_per_step == full.dispatches_per_step + full.paired_per_step);
      }
    } else {
      CHECK_THROWS_WITH_AS(Engine(small, rig.model, &rig.head1, &rig.head2, o).generate(rig.prompts[1], 48),
                           doctest::Contains("'tree_topk_expand' needs 16 storage-buffer descriptors"), Error);
    }
    const std::vector<std::string> msgs = small.take_validation_messages();
    CHECK(msgs.empty());
  }
}

TEST_CASE_FIXTURE(VkTest, "pair: a pack past the device's largest allocation is refused by name and the heads run unpacked") {
  // Merge at a small tree: the pack holds both heads' weight copies and states. On a device whose
  // maxMemoryAllocationSize is one byte short of it, the engine must still run, paired but
  // unpacked, with ar's tokens, and say why; a buffer past the limit is refused by name.
  EngineOptions o;
  o.strategy = Strategy::Merge;
  o.depth = 3, o.topk = 1, o.budget = 3;
  const auto [full, ar] = with_and_without_heads(ctx, o, 2, 40);
  CHECK(full.tokens == ar.tokens);
  CHECK(full.pair_pack_refused.empty());
  const bool packs = ctx.caps().quirks.weights_via_texel_buffer && ctx.caps().pair_dispatch;
  if (!packs) {
    CHECK(full.pair_pack_bytes == 0);
    MESSAGE("not run: this device reads weights through storage buffers, so no pack is made to refuse");
    return;
  }
  REQUIRE(full.pair_pack_bytes > 0);
  ContextOptions co = test_context_options();
  co.allocation_limit = full.pair_pack_bytes - 1;
  Context small(co);
  REQUIRE(small.caps().max_allocation_bytes == full.pair_pack_bytes - 1);
  CHECK_THROWS_WITH_AS(Buffer(small, full.pair_pack_bytes), doctest::Contains("maxMemoryAllocationSize"), Error);
  {
    DemoRig rig(small);
    const GenerateStats g = Engine(small, rig.model, &rig.head1, &rig.head2, o).generate(rig.prompts[2], 40);
    CHECK(g.tokens == ar.tokens);
    CHECK(g.accept_hist == full.accept_hist);
    CHECK(g.pair_pack_bytes == 0);
    CHECK(g.pair_pack_refused.find("maxMemoryAllocationSize") != std::string::npos);
    CHECK(g.paired_per_step == full.paired_per_step);  // still paired
    CHECK(g.single_fetch_per_step < full.single_fetch_per_step);  // but each head's weights fetched apart
  }
  const std::vector<std::string> msgs = small.take_validation_messages();
  CHECK(msgs.empty());
}
