// The tree kernels (shaders/tree_*.comp) against plain CPU references: EAGLE-2 expansion and
// best-B selection with planted score ties, mask/positions/retrieve, seed 000's merge invariants,
// seed 001's routing rule, and a draft level's fused tail. Acceptance and commit:
// test_tree_accept.cpp. Every kernel runs at two workgroup sizes.
#include <algorithm>

#include "matmul_reference.hpp"
#include "tree_reference.hpp"
#include "vkspec/step_state.h"

using namespace vkspec;
using namespace vkspec::test;


// ---- drafting -----------------------------------------------------------------------------

TEST_CASE_FIXTURE(VkTest, "tree: draft_expand + draft_select equal the CPU EAGLE-2 expansion and best-B selection") {
  uint32_t seed = 1;
  for (uint32_t wg : kWorkgroups)
    for (uint32_t k : {1u, 3u, 4u, 8u})
      for (uint32_t D : {1u, 2u, 5u})
        for (bool ties : {false, true}) {
          const KernelConfig cfg = wg_cfg(wg);
          std::mt19937 rng(seed++);
          const uint32_t stride = k + 2, off = 3;  // the topk rows live at an offset with padding
          const uint32_t count = 1 + k + (D - 1) * k * k;
          DeviceTree pool(ctx, count + 5, D), sel(ctx, count + 5, D);
          Buffer root_tok(ctx, 16), front(ctx, (D + 1) * k * 4 + 4);
          const uint32_t root_token = rng() % 1000;
          root_tok.upload(std::vector<uint32_t>{7, 7, root_token, 7});
          front.upload(std::vector<uint32_t>{0});
          // Per level: F rows of top-k ids and log-probs. With `ties`, log-probs are multiples of
          // 1/4 so cumulative scores collide exactly and the index tie-break decides.
          std::vector<Buffer> ids_b, logp_b;
          HostTree ref;
          ref.push(root_token, -1, 0, 0.0f, 0);
          std::vector<uint32_t> frontier{0};
          std::vector<std::vector<uint32_t>> ref_fronts;
          const uint32_t head_id = 1 + seed % 2;
          Sequence seq(ctx);
          std::vector<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>> levels;  // base, F, front off, next off
          uint32_t base = 1;
          for (uint32_t l = 1; l <= D; ++l) {
            const uint32_t F = uint32_t(frontier.size());
            std::vector<uint32_t> ids(off + F * stride, 0xdead);
            std::vector<float> logp(off + F * stride, 1e9f);
            for (uint32_t f = 0; f < F; ++f)
              for (uint32_t j = 0; j < k; ++j) {
                ids[off + f * stride + j] = rng() % 5000;
                logp[off + f * stride + j] =
                    ties ? -0.25f * float(1 + rng() % 6) : -std::uniform_real_distribution<float>(0.001f, 5.0f)(rng);
              }
            ids_b.emplace_back(ctx, ids.size() * 4);
            ids_b.back().upload(ids);
            logp_b.emplace_back(ctx, logp.size() * 4);
            logp_b.back().upload(logp);
            const uint32_t next_F = std::min(k, F * k);
            frontier = expand_ref(ref, base, frontier, ids, logp, off, stride, k, head_id, next_F);
            ref_fronts.push_back(frontier);
            levels.emplace_back(base, F, (l - 1) * k, l * k);
            base += F * k;
          }
          REQUIRE(base == count);
          Buffer hid(ctx, 16);
          hid.upload(std::vector<uint32_t>{head_id, 0, 0, 0});
          seq.begin();
          pool_init(seq, pool, root_tok, 2, cfg);
          for (uint32_t l = 0; l < D; ++l) {
            auto [b, F, fo, no] = levels[l];
            draft_expand(seq, pool, b, front, fo, F, ids_b[l], logp_b[l], off, stride, k, hid, front, no,
                         std::min(k, F * k), cfg);
          }
          const uint32_t B = std::min<uint32_t>(count - 1, 1 + rng() % (2 * k + 3));
          draft_select(seq, pool, count, B, sel, cfg);
          seq.run();

          const std::string what = "wg " + std::to_string(wg) + " k " + std::to_string(k) + " D " +
                                   std::to_string(D) + (ties ? " ties" : "");
          check_same(download_tree(pool, count), ref, what + " pool");
          auto fr = front.read<uint32_t>((D + 1) * k);
          for (uint32_t l = 0; l < D; ++l) {
            std::vector<uint32_t> got(fr.begin() + (l + 1) * k, fr.begin() + (l + 1) * k + ref_fronts[l].size());
            INFO(what << " frontier of level " << l + 1);
            CHECK(got == ref_fronts[l]);
          }
          check_same(download_tree(sel, B + 1), select_ref(ref, count, B), what + " selected B=" + std::to_string(B));
          CHECK(sel.info.read<uint32_t>(1)[0] == B + 1);
        }
}

TEST_CASE_FIXTURE(VkTest, "tree: draft_select keeps all nodes when B = count - 1 and resolves all-equal scores") {
  for (uint32_t wg : kWorkgroups) {
    std::mt19937 rng(wg);
    HostTree pool = random_tree(40, 6, 1, rng);
    for (size_t i = 1; i < pool.size(); ++i) pool.score[i] = -1.0f;  // every node ties
    DeviceTree dp(ctx, 64, 6), ds(ctx, 64, 6);
    upload_tree(dp, pool);
    for (uint32_t B : {1u, 17u, 39u}) {
      Sequence seq(ctx);
      seq.begin();
      draft_select(seq, dp, 40, B, ds, wg_cfg(wg));
      seq.run();
      check_same(download_tree(ds, B + 1), select_ref(pool, 40, B), "B " + std::to_string(B));
    }
    // With B = count - 1 the selected tree is the pool itself, node for node, whatever the scores:
    // a drafter whose pool holds just B candidates (top-k 1 over B levels) verifies its pool and
    // records no draft_select (eagle_drafter.cpp).
    HostTree scored = random_tree(40, 6, 2, rng);
    upload_tree(dp, scored);
    Sequence seq(ctx);
    seq.begin();
    draft_select(seq, dp, 40, 39, ds, wg_cfg(wg));
    seq.run();
    check_same(download_tree(ds, 40), scored, "B = count - 1 over random scores");
  }
}

// ---- mask, positions, retrieve ------------------------------------------------------------

TEST_CASE_FIXTURE(VkTest, "tree: tree_meta mask, positions and retrieve equal the CPU ones") {
  uint32_t seed = 100;
  for (uint32_t wg : kWorkgroups) {
    const KernelConfig cfg = wg_cfg(wg);
    // n = 1, chains, stars, random trees of odd sizes, up to the 512-node cap.
    std::vector<std::pair<std::string, std::vector<int>>> cases;
    cases.push_back({"n=1", {-1}});
    for (uint32_t n : {2u, 33u, 64u}) {
      std::vector<int> chain{-1}, star{-1};
      for (uint32_t i = 1; i < n; ++i) {
        chain.push_back(int(i) - 1);
        star.push_back(0);
      }
      cases.push_back({"chain " + std::to_string(n), chain});
      cases.push_back({"star " + std::to_string(n), star});
    }
    for (uint32_t n : {5u, 23u, 37u, 100u, 257u, 512u}) {
      std::mt19937 rng(seed++);
      cases.push_back({"random " + std::to_string(n), random_tree(n, 63, 1, rng).parent});
    }
    for (auto& [name, parent] : cases) {
      const uint32_t n = uint32_t(parent.size()), t = 17 + n;
      DeviceTree d(ctx, std::min(kTreeMaxNodes, std::max(n, 3u) + (n % 7)), 63);
      d.parent.upload(parent);
      run_meta(ctx, d, n, t, cfg);
      check_meta(d, parent, t, name + " wg " + std::to_string(wg));
    }
  }
}

// ---- merge (seed 000 §4.1) ----------------------------------------------------------------


TEST_CASE_FIXTURE(VkTest, "tree: merge_trees output satisfies seed 000's invariants and equals the CPU merge") {
  uint32_t seed = 200;
  for (uint32_t wg : kWorkgroups)
    for (auto [n1, n2] : {std::pair{1u, 1u}, {8u, 8u}, {5u, 23u}, {60u, 3u}, {100u, 100u}}) {
      const KernelConfig cfg = wg_cfg(wg);
      std::mt19937 rng(seed++);
      const uint32_t D = 6;
      HostTree a = random_tree(n1 + 1, D, 1, rng), b = random_tree(n2 + 1, D, 2, rng);
      b.token[0] = a.token[0];  // both heads draft from the same root
      DeviceTree d1(ctx, n1 + 4, D), d2(ctx, n2 + 1, D), dm(ctx, n1 + n2 + 1, D);
      upload_tree(d1, a);
      upload_tree(d2, b);
      // merge_trees then tree_meta, or both in merge_trees_meta's one dispatch (alternating);
      // every other pair with the root's token taken from a sequence at t (as a step does).
      const bool folded = seed % 2 == 0, root = (seed / 2) % 2 == 0;
      CAPTURE(folded);
      CAPTURE(root);
      std::vector<uint32_t> seq_tokens(64);
      for (auto& x : seq_tokens) x = 100000 + rng() % 1000;
      Buffer sb(ctx, seq_tokens.size() * 4);
      sb.upload(seq_tokens);
      Sequence seq(ctx);
      seq.begin();
      if (folded) {
        merge_trees_meta(seq, d1, n1, d2, n2, dm, 50, cfg, root ? &sb : nullptr);
      } else {
        merge_trees(seq, d1, n1, d2, n2, dm, cfg);
        tree_meta(seq, dm, 1 + n1 + n2, 50, cfg, root ? &sb : nullptr);
      }
      CHECK(seq.dispatch_count() == (folded ? 1u : 2u));
      seq.run();
      const uint32_t N = 1 + n1 + n2, W = D + 1;
      const std::string what = "wg " + std::to_string(wg) + " n1 " + std::to_string(n1) + " n2 " + std::to_string(n2);
      INFO(what);
      HostTree m = download_tree(dm, N), ref = merge_ref(a, n1, b, n2);
      if (root) ref.token[0] = seq_tokens[50];
      check_same(m, ref, what);
      CHECK(dm.info.read<uint32_t>(1)[0] == N);
      // One root: only node 0 has no parent; parents first.
      CHECK(m.parent[0] == -1);
      for (uint32_t i = 1; i < N; ++i) CHECK((m.parent[i] >= 0 && m.parent[i] < int(i)));
      // φ remap and disjoint subtrees: a head-2 node's ancestors are head-2 nodes or the root.
      for (uint32_t i = 1; i <= n2; ++i) CHECK(m.parent[n1 + i] == (b.parent[i] == 0 ? 0 : int(n1) + b.parent[i]));
      for (uint32_t i = 1; i < N; ++i)
        for (int j = m.parent[i]; j > 0; j = m.parent[j]) CHECK((i <= n1) == (uint32_t(j) <= n1));
      // Block-structured mask: no bit of the other head's block, the root bit always set.
      auto mask = dm.mask.read<uint32_t>(size_t(N) * dm.mask_words);
      for (uint32_t i = 0; i < N; ++i) {
        CHECK((mask[i * dm.mask_words] & 1u) == 1u);
        for (uint32_t j = 1; j < N; ++j) {
          const bool bit = (mask[i * dm.mask_words + j / 32] >> (j % 32)) & 1u;
          if (i >= 1 && ((i <= n1) != (j <= n1))) CHECK_FALSE(bit);
          if (i == 0) CHECK_FALSE(bit);
        }
      }
      // Depth positions: t + depth, depth unchanged by the merge.
      auto pos = dm.pos.read<int>(N);
      for (uint32_t i = 0; i < N; ++i) CHECK(pos[i] == int(50 + ref.depth[i]));
      // Retrieve rows start at the root and are -1 padded; every leaf appears once.
      const uint32_t L = dm.info.read<uint32_t>(2)[kInfoLeaves];
      auto R = dm.retrieve.read<int>(size_t(L) * W);
      for (uint32_t r = 0; r < L; ++r) {
        CHECK(R[r * W] == 0);
        bool pad = false;
        for (uint32_t c = 1; c < W; ++c) {
          if (R[r * W + c] < 0) pad = true;
          if (pad) CHECK(R[r * W + c] == -1);
          else CHECK(m.parent[R[r * W + c]] == R[r * W + c - 1]);
        }
      }
      check_meta(dm, ref.parent, 50, what);
    }
}

// ---- merge-trie (DESIGN.md §9) -----------------------------------------------------------


TEST_CASE_FIXTURE(VkTest, "tree: merge_trie folds identical paths of both pools and keeps the best distinct nodes") {
  uint32_t seed = 600;
  for (uint32_t wg : kWorkgroups)
    for (auto [c1, c2, alphabet] : {std::tuple{1u, 1u, 3u}, {9u, 9u, 2u}, {40u, 33u, 3u}, {53u, 53u, 4u},
                                    {200u, 150u, 6u}, {512u, 512u, 5u}, {300u, 20u, 1000u}}) {
      std::mt19937 rng(seed++);
      auto [p1, p2] = overlapping_pools(c1, c2, alphabet, rng);  // equal scores test the index tie-break
      // Scores rounded down to quarters: still monotone along paths, and ties are frequent.
      for (HostTree* p : {&p1, &p2})
        for (auto& s : p->score) s = std::floor(s * 4.0f) / 4.0f;
      DeviceTree d1(ctx, c1, 8), d2(ctx, c2, 8);
      upload_tree(d1, p1);
      upload_tree(d2, p2);
      for (uint32_t n_out : {1u, 2u, 17u, 64u, 200u, 512u}) {
        uint32_t distinct = 0;
        HostTree ref = trie_ref(p1, p2, n_out, &distinct);
        DeviceTree dout(ctx, n_out, 8);
        Sequence seq(ctx);
        seq.begin();
        // Every other output size with the root's token from a sequence at t: the root's and the
        // padding leaves' tokens are then that one, not pool 1's node 0.
        const bool root = n_out % 2 == 1;
        std::vector<uint32_t> seq_tokens(16, 0);
        seq_tokens[9] = 424242;
        Buffer sb(ctx, seq_tokens.size() * 4);
        sb.upload(seq_tokens);
        merge_trie(seq, d1, c1, d2, c2, n_out, dout, wg_cfg(wg), root ? &sb : nullptr, 9);
        tree_meta(seq, dout, n_out, 9, wg_cfg(wg));
        seq.run();
        if (root) {
          ref.token[0] = 424242;
          for (uint32_t i = 1 + distinct; i < n_out; ++i) ref.token[i] = 424242;
        }
        const std::string what = "wg " + std::to_string(wg) + " pools " + std::to_string(c1) + "+" +
                                 std::to_string(c2) + " n_out " + std::to_string(n_out) + " root " + std::to_string(root);
        INFO(what << " distinct " << distinct);
        HostTree got = download_tree(dout, n_out);
        check_same(got, ref, what);
        CHECK(dout.info.read<uint32_t>(1)[0] == n_out);
        // Invariants: parents first, depth = parent depth + 1, heads 1/2/3, no two drafted
        // children of one parent with the same token (so every path is distinct).
        std::set<std::pair<int, uint32_t>> children;
        for (uint32_t i = 1; i < n_out; ++i) {
          CHECK((got.parent[i] >= 0 && got.parent[i] < int(i)));
          CHECK(got.depth[i] == got.depth[got.parent[i]] + 1);
          if (got.head[i] == 0) continue;  // padding (only when distinct < n_out - 1)
          CHECK(i <= distinct);
          CHECK((got.head[i] >= 1 && got.head[i] <= 3));
          CHECK(children.insert({got.parent[i], got.token[i]}).second);
        }
        check_meta(dout, ref.parent, 9, what);
      }
    }
}

// ---- route (seed 001 §5) ------------------------------------------------------------------

TEST_CASE_FIXTURE(VkTest, "tree: route_trees μ_h and the chosen head equal the CPU rule, ties to head 1") {
  // On this device (decision and copy in one dispatch where it allows 16 storage buffers) and on
  // one that allows 12 (the decision, then a copy per array).
  Context small(test_context_options(12));
  for (Context* c : {&ctx, &small}) {
    Context& ctx = *c;
    const uint32_t dispatches = ctx.caps().max_stage_storage_buffers >= 16 ? 1 : 6;
    CAPTURE(dispatches);
    uint32_t seed = 300;
    for (uint32_t wg : kWorkgroups)
      for (uint32_t n : {1u, 7u, 8u, 40u, 100u}) {
        // random, equal trees (tie), head 2 clearly better, a NaN score in head 1's tree (it
        // loses), NaN in both (a tie: head 1)
        for (int variant = 0; variant < 5; ++variant) {
          std::mt19937 rng(seed++);
          HostTree a = random_tree(n + 1, 6, 1, rng), b = random_tree(n + 1, 6, 2, rng);
          if (variant == 1) b = a;
          if (variant == 2)
            for (uint32_t i = 1; i <= n; ++i) b.score[i] = a.score[i] + 0.5f;
          if (variant >= 3) a.score[1 + n / 2] = std::nanf("");
          if (variant == 4) b.score[n] = std::nanf("");
          DeviceTree d1(ctx, n + 1, 6), d2(ctx, n + 1, 6), dr(ctx, n + 3, 6);
          upload_tree(d1, a);
          upload_tree(d2, b);
          Sequence seq(ctx);
          seq.begin();
          route_trees(seq, d1, n, d2, n, dr, wg_cfg(wg));
          CHECK(seq.dispatch_count() == dispatches);
          seq.run();
          double mu[2] = {0, 0};
          for (uint32_t i = 1; i <= n; ++i) {
            mu[0] += std::exp(double(a.score[i])) / n;
            mu[1] += std::exp(double(b.score[i])) / n;
          }
          auto info = dr.info.read<uint32_t>(16);
          float g1, g2;
          std::memcpy(&g1, &info[kInfoMu1], 4);
          std::memcpy(&g2, &info[kInfoMu2], 4);
          INFO("wg " << wg << " n " << n << " variant " << variant);
          CHECK(std::isnan(g1) == (variant >= 3));
          CHECK(std::isnan(g2) == (variant == 4));
          if (variant < 3) CHECK(std::fabs(g1 - mu[0]) <= 1e-6 + 1e-5 * mu[0]);
          if (variant < 4) CHECK(std::fabs(g2 - mu[1]) <= 1e-6 + 1e-5 * mu[1]);
          const uint32_t chosen = info[kInfoChosen];
          if (variant < 3) CHECK(chosen == (g1 >= g2 ? 1u : 2u));
          if (std::fabs(mu[0] - mu[1]) > 1e-4 * mu[0]) CHECK(chosen == (mu[0] >= mu[1] ? 1u : 2u));
          if (variant == 1) CHECK(chosen == 1u);
          if (variant == 2 || variant == 3) CHECK(chosen == 2u);
          if (variant == 4) CHECK(chosen == 1u);
          CHECK(info[kInfoNodes] == n + 1);
          check_same(download_tree(dr, n + 1), chosen == 1 ? a : b, "routed copy");
          // route_trees_meta: the same decision bits and copy, then tree_meta's outputs at t,
          // the root's token from a sequence — one dispatch where 19 storage buffers fit.
          std::vector<uint32_t> seq_tokens(16, 0);
          seq_tokens[11] = 31337;
          Buffer sb(ctx, seq_tokens.size() * 4);
          sb.upload(seq_tokens);
          DeviceTree dm(ctx, n + 3, 6);
          Sequence seq2(ctx);
          seq2.begin();
          route_trees_meta(seq2, d1, n, d2, n, dm, 11, wg_cfg(wg), &sb);
          CHECK(seq2.dispatch_count() == (ctx.caps().max_stage_storage_buffers >= 19 ? 1u : dispatches + 1));
          seq2.run();
          auto info2 = dm.info.read<uint32_t>(16);
          for (uint32_t w : {kInfoNodes, kInfoChosen, kInfoMu1, kInfoMu2}) CHECK(info2[w] == info[w]);
          HostTree want = chosen == 1 ? a : b;
          want.token[0] = 31337;
          check_same(download_tree(dm, n + 1), want, "routed and meta");
          check_meta(dm, want.parent, 11, "route_trees_meta");
        }
      }
  }
  const auto messages = small.take_validation_messages();
  CHECK_MESSAGE(messages.empty(), messages.size() << " validation messages on the 12-buffer context");
}

TEST_CASE_FIXTURE(VkTest, "tree: the meta kernels' embedding fold writes embed()'s rows bit for bit and the same tree") {
  // Each meta kernel (tree_meta as merge-trie runs it, merge_trees_meta with the root's token from
  // a sequence, route_trees_meta likewise) with MetaEmbed against the same kernel without it and
  // embed() over the tree's tokens afterwards: every tree output and every byte of x equal.
  // Widths off a block (f32 80, f16 72), x rows strided past C, both weight paths.
  struct Table {
    WeightType t;
    uint32_t C;
  };
  const uint32_t V = 50, D = 6, n1 = 8, T = 5;
  std::mt19937 rng(4242);
  for (const Table tb : {Table{WeightType::F32, 80}, {WeightType::F16, 72}, {WeightType::Q8_0, 64}, {WeightType::Q4_K, 256}})
    for (auto path : {WeightPath::Texel, WeightPath::Storage})
      for (uint32_t kind = 0; kind < 3; ++kind) {
        const uint32_t wg = kWorkgroups[kind % 2], n = kind == 1 ? 1 + 2 * n1 : 1 + n1, stride = tb.C + 12;
        const std::string what = std::string(weight_type_name(tb.t)) + (path == WeightPath::Texel ? " texel" : " storage") +
                                 " kernel " + std::to_string(kind);
        INFO(what);
        const DeviceWeight table = upload_weight(ctx, tb.t, V, tb.C, make_weight(tb.t, V, tb.C, 9).data(), path);
        REQUIRE(meta_embeds(table, n));
        CHECK_FALSE(meta_embeds(table, uint32_t(kMetaEmbedMaxValues / tb.C) + 1));  // too wide for one workgroup
        HostTree a = random_tree(n1 + 1, D, 1, rng), b = random_tree(n1 + 1, D, 2, rng);
        for (HostTree* h : {&a, &b})
          for (auto& tok : h->token) tok = rng() % V;
        std::vector<uint32_t> seq_tokens(16);
        for (auto& tok : seq_tokens) tok = rng() % V;
        Buffer sb(ctx, seq_tokens.size() * 4);
        sb.upload(seq_tokens);
        DeviceTree d1(ctx, n1 + 1, D), d2(ctx, n1 + 1, D);
        upload_tree(d1, a);
        upload_tree(d2, b);
        std::vector<float> x0(size_t(n) * stride, -7.5f);  // untouched past C in every row
        struct Run {
          std::unique_ptr<DeviceTree> tree;
          std::unique_ptr<Buffer> x;
          uint32_t dispatches = 0;
        } runs[2];
        for (int folded = 0; folded < 2; ++folded) {
          Run& r = runs[folded];
          r.tree = std::make_unique<DeviceTree>(ctx, n + 2, D);
          r.x = std::make_unique<Buffer>(ctx, x0.size() * 4);
          r.x->upload(x0);
          if (kind == 0) upload_tree(*r.tree, a);  // merge-trie's tree_meta: the tokens are in place
          const MetaEmbed e{&table, Mat{r.x.get(), 0, stride}};
          const MetaEmbed* ep = folded ? &e : nullptr;
          Sequence seq(ctx);
          seq.begin();
          if (kind == 0) tree_meta(seq, *r.tree, n, T, wg_cfg(wg), nullptr, ep);
          if (kind == 1) merge_trees_meta(seq, d1, n1, d2, n1, *r.tree, T, wg_cfg(wg), &sb, ep);
          if (kind == 2) route_trees_meta(seq, d1, n1, d2, n1, *r.tree, T, wg_cfg(wg), &sb, ep);
          if (!folded) embed(seq, table, r.tree->token, 0, e.x, n);
          r.dispatches = seq.dispatch_count();
          seq.run();
        }
        CHECK(runs[1].dispatches + 1 == runs[0].dispatches);
        const DeviceTree &f = *runs[1].tree, &u = *runs[0].tree;
        check_same(download_tree(f, n), download_tree(u, n), "folded vs unfolded");
        CHECK(f.mask.read<uint32_t>(size_t(n) * f.mask_words) == u.mask.read<uint32_t>(size_t(n) * u.mask_words));
        CHECK(f.pos.read<int>(n) == u.pos.read<int>(n));
        const auto fi = f.info.read<uint32_t>(16), ui = u.info.read<uint32_t>(16);
        CHECK(fi[kInfoLeaves] == ui[kInfoLeaves]);
        if (kind > 0) CHECK(fi[kInfoNodes] == ui[kInfoNodes]);
        if (kind == 2)  // the route decision
          for (uint32_t w : {kInfoChosen, kInfoMu1, kInfoMu2}) CHECK(fi[w] == ui[w]);
        const size_t rows = size_t(ui[kInfoLeaves]) * (D + 1);  // one retrieve row per leaf
        CHECK(f.retrieve.read<int>(rows) == u.retrieve.read<int>(rows));
        // x: the same bytes, and row i really is the table row of node i's token.
        const auto xf = runs[1].x->read<uint32_t>(x0.size()), xu = runs[0].x->read<uint32_t>(x0.size());
        CHECK(xf == xu);
        const std::vector<float> ref = dequantize(tb.t, make_weight(tb.t, V, tb.C, 9), V, tb.C);
        const auto tok = f.token.read<uint32_t>(n);
        const auto xv = runs[1].x->read<float>(x0.size());
        for (uint32_t i = 0; i < n; ++i)
          for (uint32_t c = 0; c < stride; ++c) {
            const float want = c < tb.C ? ref[size_t(tok[i]) * tb.C + c] : -7.5f;
            if (!same_float(xv[size_t(i) * stride + c], want)) {
              FAIL_CHECK("x row " << i << " col " << c << ": " << xv[size_t(i) * stride + c] << " want " << want);
              break;
            }
          }
      }
}

TEST_CASE_FIXTURE(VkTest, "tree: where the folded meta kernel passes the descriptor limit, embed() runs after it") {
  // route_trees_meta binds 19 storage buffers; with the fold's x, 20. On a device allowing 19 it
  // stays one route dispatch and gathers x in a second, the same rows as the fold's.
  const uint32_t V = 40, C = 64, D = 6, n1 = 6, n = n1 + 1;
  std::mt19937 rng(99);
  HostTree a = random_tree(n, D, 1, rng), b = random_tree(n, D, 2, rng);
  for (HostTree* h : {&a, &b})
    for (auto& tok : h->token) tok = rng() % V;
  std::vector<uint32_t> seq_tokens(8, 17);
  std::vector<float> got[2];
  uint32_t dispatches[2] = {0, 0};
  for (uint32_t limit : {0u, 19u}) {
    Context small(test_context_options(limit));
    const DeviceWeight table = upload_weight(small, WeightType::F16, V, C, make_weight(WeightType::F16, V, C, 3).data(),
                                             WeightPath::Storage);
    DeviceTree d1(small, n, D), d2(small, n, D), dm(small, n + 1, D);
    upload_tree(d1, a);
    upload_tree(d2, b);
    Buffer sb(small, seq_tokens.size() * 4), x(small, size_t(n) * C * 4);
    sb.upload(seq_tokens);
    x.upload(std::vector<float>(size_t(n) * C, 0.0f));
    const MetaEmbed e{&table, Mat{&x, 0, C}};
    Sequence seq(small);
    seq.begin();
    route_trees_meta(seq, d1, n1, d2, n1, dm, 3, {}, &sb, &e);
    dispatches[limit != 0] = seq.dispatch_count();
    seq.run();
    got[limit != 0] = x.read<float>(size_t(n) * C);
    CHECK(small.take_validation_messages().empty());
  }
  CHECK(dispatches[0] == 1);
  CHECK(dispatches[1] == 2);
  CHECK(got[0] == got[1]);
  CHECK(std::any_of(got[0].begin(), got[0].end(), [](float v) { return v != 0.0f; }));
}

// ---- one dispatch per draft level's tail ----------------------------------------------------

namespace {

// One drafter's worth of a randomized draft: per level F rows of V logits (NaN and exact ties
// planted), recorded either as topk + draft_expand or as draft_topk_expand, which also gathers
// each next level's inputs from h (C wide, the root at row k) into tok, feat and mask.
struct DraftRun {
  static constexpr uint32_t C = 5, kFeatStride = 8, kFeatOffset = 3, kHOffset = 2;
  uint32_t V, k, D, count, words;
  DeviceTree pool;
  Buffer root_tok, front, ids, logp, hid, arrivals, h, tok, feat, mask;
  std::vector<float> hv;
  std::vector<Buffer> logits;
  // With `table` (V x C), the gathers also write each node's embedding row into feat's buffer
  // from kEmbOffset on (the embedding fold); `tw` is the table's values.
  const DeviceWeight* table = nullptr;
  std::vector<float> tw;
  uint32_t kEmbOffset = 0;
  DraftRun(Context& ctx, uint32_t V_, uint32_t k_, uint32_t D_, uint32_t seed, const DeviceWeight* table_ = nullptr,
           std::vector<float> tw_ = {})
      : table(table_), tw(std::move(tw_)), kEmbOffset(kFeatOffset + k_ * kFeatStride),
        V(V_), k(k_), D(D_), count(1 + k_ + (D_ - 1) * k_ * k_), words(((D_ - 1) * k_ + 31) / 32 + 1),
        pool(ctx, count + 3, D_), root_tok(ctx, 16), front(ctx, (D_ + 1) * k_ * 4 + 4),
        ids(ctx, k_ * kTopkMax * 4 + 16), logp(ctx, k_ * kTopkMax * 4 + 16), hid(ctx, 16), arrivals(ctx, 16),
        h(ctx, (kHOffset + (k_ + 1) * C) * 4), tok(ctx, k_ * 4), feat(ctx, (kFeatOffset + 2 * k_ * kFeatStride) * 4),
        mask(ctx, (D_ - 1) * k_ * words * 4 + 4) {
    std::mt19937 rng(seed);
    hv.resize(kHOffset + (k + 1) * C);
    for (auto& v : hv) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
    h.upload(hv);
    tok.upload(std::vector<uint32_t>(k, 0xdead));
    feat.upload(std::vector<float>(kFeatOffset + 2 * k * kFeatStride, -7.0f));
    mask.upload(std::vector<uint32_t>((D - 1) * k * words + 1, 0xabcdef01u));
    root_tok.upload(std::vector<uint32_t>{uint32_t(rng() % V), 0, 0, 0});
    front.upload(std::vector<uint32_t>((D + 1) * k + 1, 0));
    ids.upload(std::vector<uint32_t>(k * kTopkMax + 4, 0));
    logp.upload(std::vector<float>(k * kTopkMax + 4, 0.0f));
    hid.upload(std::vector<uint32_t>{1 + seed % 2, 0, 0, 0});
    arrivals.upload(std::vector<uint32_t>(4, 0));
    for (uint32_t l = 0; l < D; ++l) {
      const uint32_t F = l == 0 ? 1 : k;
      std::vector<float> x(size_t(F) * V);
      for (auto& v : x) {
        const uint32_t r = rng() % 64;
        v = r == 0 ? std::nanf("") : r < 8 ? 2.0f : std::uniform_real_distribution<float>(-6.0f, 6.0f)(rng);
      }
      logits.emplace_back(ctx, x.size() * 4);
      logits.back().upload(x);
    }
  }
  void record(Sequence& seq, bool fused, const KernelConfig& cfg) {
    pool_init(seq, pool, root_tok, 0, cfg);
    uint32_t base = 1;
    for (uint32_t l = 0; l < D; ++l) {
      const uint32_t F = l == 0 ? 1 : k, fo = l == 0 ? 0 : (l - 1) * k + 1;  // front[0]: the root
      const Mat x{&logits[l], 0, V};
      if (fused) {
        const DraftGather g{.level = l + 1, .root_row = k, .h = {&h, kHOffset, C}, .C = C, .tokens = &tok,
                            .feat = {&feat, kFeatOffset, kFeatStride}, .mask = &mask, .words = words,
                            .embed = table, .emb = {&feat, kEmbOffset, kFeatStride}};
        draft_topk_expand(seq, x, V, pool, base, front, fo, F, ids, logp, 2, kTopkMax, k, hid, front, l * k + 1, k,
                          arrivals, l + 1 < D ? &g : nullptr, cfg);
      } else {
        topk(seq, x, F, V, k, ids, logp, 2, kTopkMax, cfg);
        draft_expand(seq, pool, base, front, fo, F, ids, logp, 2, kTopkMax, k, hid, front, l * k + 1, k, cfg);
      }
      base += F * k;
    }
  }
  // The root's frontier of one, then each level's next frontier of k.
  std::vector<uint32_t> frontiers() const { return front.read<uint32_t>(D * k + 1); }
  // What the gathers must have written, from the pool and frontiers: every level's mask rows, and
  // the last level's tokens and features.
  void check_gathers(const std::string& what) const {
    const std::vector<uint32_t> fr = frontiers(), pt = pool.token.read<uint32_t>(count);
    const std::vector<uint32_t> got_mask = mask.read<uint32_t>((D - 1) * k * words);
    const std::vector<uint32_t> got_tok = tok.read<uint32_t>(k);
    const std::vector<float> got_feat = feat.read<float>(kFeatOffset + 2 * k * kFeatStride);
    std::vector<uint32_t> ref_mask((D - 1) * k * words, 0);
    uint32_t base = 1;  // of the expansion whose frontier level L gathers
    for (uint32_t L = 1; L < D; ++L) {
      for (uint32_t f = 0; f < k; ++f) {
        INFO(what << " gather of level " << L << " node " << f);
        const uint32_t node = fr[(L - 1) * k + 1 + f];
        REQUIRE(node < count);
        const uint32_t prow = L == 1 ? k : (node - base) / k, row = (L - 1) * k + f;
        for (uint32_t w = 0; w < words; ++w)
          ref_mask[row * words + w] = (L == 1 ? 0u : ref_mask[((L - 2) * k + prow) * words + w]) |
                                      (w == row / 32 ? 1u << (row % 32) : 0u);
        if (L == D - 1) {
          CHECK(got_tok[f] == pt[node]);
          for (uint32_t c = 0; c < C; ++c) CHECK(same_float(got_feat[kFeatOffset + f * kFeatStride + c], hv[kHOffset + prow * C + c]));
          CHECK(got_feat[kFeatOffset + f * kFeatStride + C] == -7.0f);  // nothing past C
          // The embedding fold: the token's table row exactly, nothing past C; without it, untouched.
          for (uint32_t c = 0; c < C; ++c)
            CHECK(same_float(got_feat[kEmbOffset + f * kFeatStride + c], table ? tw[size_t(pt[node]) * C + c] : -7.0f));
          CHECK(got_feat[kEmbOffset + f * kFeatStride + C] == -7.0f);
        }
      }
      base += L == 1 ? 1 * k : k * k;
    }
    INFO(what);
    CHECK(got_mask == ref_mask);
  }
};

}  // namespace

TEST_CASE_FIXTURE(VkTest, "tree: draft_topk_expand is topk then draft_expand bit for bit and gathers the next level, paired, replayed") {
  const bool can_pair = ctx.caps().pair_dispatch;
  uint32_t seed = 40;
  for (uint32_t wg : {0u, 32u, 64u})
    for (uint32_t V : {5u, 256u, 3001u, 32000u})
      for (uint32_t k : {1u, 4u, 8u}) {
        if (k > V || (V == 32000 && k != 4)) continue;
        const uint32_t D = k == 8 ? 3 : 4;
        const KernelConfig cfg = wg_cfg(wg);
        const std::string what = "wg " + std::to_string(wg) + " V " + std::to_string(V) + " k " + std::to_string(k);
        CAPTURE(what);
        // Every other case folds the next level's embedding gather in (f16 on one path, f32 on the
        // other, as the test's seed alternates), which changes nothing else the kernel writes.
        const int fold = int(seed / 2 % 3);  // 0: none, 1: f16 texel, 2: f32 storage
        const WeightType et = fold == 1 ? WeightType::F16 : WeightType::F32;
        const auto raw = make_weight(et, V, DraftRun::C, seed);
        const DeviceWeight table = upload_weight(ctx, et, V, DraftRun::C, raw.data(), fold == 1 ? WeightPath::Texel : WeightPath::Storage);
        const DeviceWeight* tp = fold ? &table : nullptr;
        // Where two storage-path tables' bindings (2 x 18 storage buffers) exceed the device's
        // limit, the gathering levels run once per drafter (pool_init and the last level pair),
        // and the engine leaves the fold off: it would split pairs that pair without it.
        const bool gathers_pair = fold != 2 || 2 * 18 <= ctx.caps().max_stage_storage_buffers;
        if (tp) CHECK(draft_gather_embeds(ctx, table) == (gathers_pair || !can_pair));
        const std::vector<float> tw = fold ? dequantize(et, raw, V, DraftRun::C) : std::vector<float>{};
        CAPTURE(fold);
        DraftRun ref(ctx, V, k, D, seed), got(ctx, V, k, D, seed, tp, tw);
        DraftRun ref2(ctx, V, k, D, seed + 1), got2(ctx, V, k, D, seed + 1, tp, tw);
        seed += 2;
        Sequence a(ctx);
        a.begin();
        ref.record(a, false, cfg);
        ref2.record(a, false, cfg);
        a.run();
        // Two drafters in one pair section (one dispatch per level where the device pairs), run
        // twice: the counters must be back at zero after every dispatch for the replay to expand.
        Sequence b(ctx, 0, /*replayable=*/true);
        b.begin();
        b.begin_pair();
        got.record(b, true, cfg);
        b.next_pair();
        got2.record(b, true, cfg);
        b.end_pair();
        b.end();
        for (int rep = 0; rep < 2; ++rep) {
          std::vector<uint32_t> stale((D + 1) * k + 1, 0xffffffffu);
          stale[0] = 0;  // the root's frontier of one
          got.front.upload(stale);
          got.pool.token.upload(std::vector<uint32_t>(got.count, 0xffffffffu));
          b.submit(1);
          b.wait();
          check_same(download_tree(got.pool, got.count), download_tree(ref.pool, ref.count), what + " pool");
          check_same(download_tree(got2.pool, got2.count), download_tree(ref2.pool, ref2.count), what + " pool 2");
          CHECK(got.frontiers() == ref.frontiers());
          CHECK(got2.frontiers() == ref2.frontiers());
          CHECK(got.ids.read<uint32_t>(k * kTopkMax + 4) == ref.ids.read<uint32_t>(k * kTopkMax + 4));
          CHECK(got.logp.read<uint32_t>(k * kTopkMax + 4) == ref.logp.read<uint32_t>(k * kTopkMax + 4));
          got.check_gathers(what + " rep " + std::to_string(rep));
          got2.check_gathers(what + " rep " + std::to_string(rep) + " side 2");
          CHECK(got.arrivals.read<uint32_t>(1)[0] == 0);
          CHECK(got2.arrivals.read<uint32_t>(1)[0] == 0);
        }
        // One dispatch per level and drafter instead of two; paired, one per level.
        CHECK(a.dispatch_count() == 2 * (1 + 2 * D));
        CHECK(b.dispatch_count() + b.paired_count() == 2 * (1 + D));
        CHECK(b.paired_count() == (!can_pair ? 0 : gathers_pair ? 1 + D : 2));
      }
}
