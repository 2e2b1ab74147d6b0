// The tree kernels under hostile scores: NaN, +inf, -inf and -0 (a broken head or verifier)
// rank in one total order (shaders/order.glsl: NaN last, ties to the lower index), so ranks are
// a permutation and every tree stays well-formed; checked against the same CPU references.
#include "tree_reference.hpp"

using namespace vkspec;
using namespace vkspec::test;


TEST_CASE_FIXTURE(VkTest, "tree: NaN and ±Inf scores rank in one total order in draft_expand and draft_select") {
  uint32_t seed = 900;
  for (uint32_t wg : kWorkgroups)
    for (auto [F, k] : {std::pair{1u, 1u}, {3u, 5u}, {7u, 13u}, {16u, kTopkMax}}) {
      const KernelConfig cfg = wg_cfg(wg);
      std::mt19937 rng(seed++);
      std::uniform_real_distribution<float> lp(-5.0f, -0.001f);
      // Pool prefix: the root and 3 level-1 nodes with hostile scores; the frontier draws from
      // them (repeats allowed), its F*k children start at base = 4 (F*k up to kTreeMaxNodes).
      HostTree ref;
      ref.push(rng() % 1000, -1, 0, 0.0f, 0);
      for (int i = 0; i < 3; ++i) ref.push(rng() % 1000, 0, 1, hostile(rng, lp(rng)), 1);
      const uint32_t base = 4, n = F * k, cap = base + n, stride = kTopkMax;
      std::vector<uint32_t> frontier(F), ids(size_t(F) * stride, 0xdead);
      std::vector<float> logp(size_t(F) * stride, 1e9f);
      for (auto& f : frontier) f = rng() % base;
      for (uint32_t f = 0; f < F; ++f)
        for (uint32_t j = 0; j < k; ++j) {
          ids[f * stride + j] = rng() % 5000;
          logp[f * stride + j] = hostile(rng, -0.25f * float(1 + rng() % 6));  // ties too
        }
      DeviceTree pool(ctx, cap, 4);
      upload_tree(pool, ref);
      Buffer fb(ctx, F * 4), ib(ctx, ids.size() * 4), lb(ctx, logp.size() * 4), nb(ctx, n * 4);
      fb.upload(frontier);
      ib.upload(ids);
      lb.upload(logp);
      nb.upload(std::vector<uint32_t>(n, 0xdeadbeefu));  // a slot the kernel skips stays visible
      const uint32_t count = std::min(cap, kTreeMaxNodes);
      std::vector<uint32_t> Bs{1, count - 1, 1 + uint32_t(rng() % (count - 1))};
      std::vector<std::unique_ptr<DeviceTree>> sel;
      Sequence seq(ctx);
      seq.begin();
      Buffer head1(ctx, 16);
      head1.upload(std::vector<uint32_t>{1, 0, 0, 0});
      draft_expand(seq, pool, base, fb, 0, F, ib, lb, 0, stride, k, head1, nb, 0, n, cfg);
      for (uint32_t B : Bs) {
        sel.push_back(std::make_unique<DeviceTree>(ctx, B + 1, 4));
        draft_select(seq, pool, count, B, *sel.back(), cfg);
      }
      seq.run();

      const std::string what = "wg " + std::to_string(wg) + " F " + std::to_string(F) + " k " + std::to_string(k);
      const std::vector<uint32_t> ref_next = expand_ref(ref, base, frontier, ids, logp, 0, stride, k, 1, n);
      check_same(download_tree(pool, cap), ref, what + " pool");
      const std::vector<uint32_t> got_next = nb.read<uint32_t>(n);
      {
        INFO(what << " frontier");
        CHECK(got_next == ref_next);
        // Ranks are a permutation: every pool index of the level exactly once, all in bounds.
        std::vector<uint32_t> sorted = got_next;
        std::sort(sorted.begin(), sorted.end());
        for (uint32_t i = 0; i < n; ++i) CHECK(sorted[i] == base + i);
      }
      for (size_t b = 0; b < Bs.size(); ++b) {
        const uint32_t B = Bs[b];
        const std::string w = what + " select B=" + std::to_string(B);
        HostTree got = download_tree(*sel[b], B + 1);
        check_same(got, select_ref(ref, count, B, true), w);
        check_well_formed(got, B + 1, w);
        CHECK(sel[b]->info.read<uint32_t>(1)[0] == B + 1);
      }
    }
}

TEST_CASE_FIXTURE(VkTest, "tree: NaN and ±Inf scores rank in one total order in merge_trie and route_trees") {
  uint32_t seed = 950;
  for (uint32_t wg : kWorkgroups) {
    const KernelConfig cfg = wg_cfg(wg);
    for (auto [c1, c2, alphabet] : {std::tuple{2u, 2u, 2u}, {37u, 23u, 3u}, {200u, 150u, 4u}, {512u, 512u, 5u}}) {
      std::mt19937 rng(seed++);
      auto [p1, p2] = overlapping_pools(c1, c2, alphabet, rng);
      for (HostTree* p : {&p1, &p2})
        for (size_t i = 1; i < p->size(); ++i) p->score[i] = hostile(rng, std::floor(p->score[i] * 4.0f) / 4.0f);
      DeviceTree d1(ctx, c1, 8), d2(ctx, c2, 8);
      upload_tree(d1, p1);
      upload_tree(d2, p2);
      for (uint32_t n_out : {1u, 2u, 17u, 300u, 512u}) {
        uint32_t distinct = 0;
        const HostTree ref = trie_ref(p1, p2, n_out, &distinct, true);
        DeviceTree dout(ctx, n_out, 8);
        Sequence seq(ctx);
        seq.begin();
        merge_trie(seq, d1, c1, d2, c2, n_out, dout, cfg);
        seq.run();
        const std::string what = "trie wg " + std::to_string(wg) + " pools " + std::to_string(c1) + "+" +
                                 std::to_string(c2) + " n_out " + std::to_string(n_out);
        const HostTree got = download_tree(dout, n_out);
        check_same(got, ref, what);
        check_well_formed(got, n_out, what);
        CHECK(dout.info.read<uint32_t>(1)[0] == n_out);
      }
    }
    for (uint32_t n : {1u, 7u, 100u})
      for (int variant = 0; variant < 6; ++variant) {
        std::mt19937 rng(seed++);
        HostTree a = random_tree(n + 1, 6, 1, rng), b = random_tree(n + 1, 6, 2, rng);
        // 0: scattered hostile values; 1/2: head 1/2 all NaN (a broken head); 3: both all NaN;
        // 4: +inf in head 2; 5: -inf everywhere in head 1 (μ = 0).
        for (uint32_t i = 1; i <= n; ++i) {
          if (variant == 0) a.score[i] = hostile(rng, a.score[i]), b.score[i] = hostile(rng, b.score[i]);
          if (variant == 1 || variant == 3) a.score[i] = kNaN;
          if (variant == 2 || variant == 3) b.score[i] = kNaN;
          if (variant == 5) a.score[i] = -kInf;
        }
        if (variant == 4) b.score[n] = kInf;
        DeviceTree d1(ctx, n + 1, 6), d2(ctx, n + 1, 6), dr(ctx, n + 1, 6);
        upload_tree(d1, a);
        upload_tree(d2, b);
        Sequence seq(ctx);
        seq.begin();
        route_trees(seq, d1, n, d2, n, dr, cfg);
        seq.run();
        double mu[2] = {0, 0};
        for (uint32_t i = 1; i <= n; ++i) {
          mu[0] += std::exp(double(a.score[i])) / n;
          mu[1] += std::exp(double(b.score[i])) / n;
        }
        auto info = dr.info.read<uint32_t>(kTreeInfoWords);
        float g[2];
        std::memcpy(&g[0], &info[kInfoMu1], 4);
        std::memcpy(&g[1], &info[kInfoMu2], 4);
        INFO("route wg " << wg << " n " << n << " variant " << variant << " mu " << g[0] << " " << g[1]);
        for (int h = 0; h < 2; ++h) {
          CHECK(std::isnan(g[h]) == std::isnan(mu[h]));
          CHECK(std::isinf(g[h]) == std::isinf(mu[h]));
          if (std::isfinite(mu[h])) CHECK(std::fabs(g[h] - mu[h]) <= 1e-6 + 1e-5 * mu[h]);
        }
        const uint32_t chosen = info[kInfoChosen];
        CHECK(chosen == (order_key(g[0]) >= order_key(g[1]) ? 1u : 2u));
        if (variant == 1 || variant == 5) CHECK(chosen == 2u);
        if (variant == 2 || variant == 3) CHECK(chosen == 1u);
        if (variant == 4) CHECK(chosen == 2u);
        CHECK(info[kInfoNodes] == n + 1);
        check_same(download_tree(dr, n + 1), chosen == 1 ? a : b, "routed copy");
      }
  }
}
