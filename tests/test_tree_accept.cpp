// The acceptance and commit kernels (shaders/tree_argmax_accept.comp, tree_accept.comp,
// step_advance.comp, tree_commit.comp, tree_gather.comp) against plain CPU references: the greedy
// acceptance scan (duplicate sibling tokens across merged subtrees), the fused argmax and its
// step advance, and the overlap-safe KV commit. Every kernel runs at two workgroup sizes.
#include "matmul_reference.hpp"
#include "tree_reference.hpp"
#include "vkspec/step_state.h"

using namespace vkspec;
using namespace vkspec::test;

// ---- acceptance ---------------------------------------------------------------------------

struct AcceptRun {
  std::vector<uint32_t> info, accepted;
};
// accept_greedy over the given argmax, or (`fused`) argmax_accept_greedy over logits whose row i
// has its maximum at argmax[i] and again, a tie it must lose, 10 places later. The fused dispatch
// runs twice with the outputs wiped between: the second accepts only if the first reset its counter.
AcceptRun run_accept(Context& ctx, const HostTree& t, uint32_t max_depth, const std::vector<uint32_t>& argmax,
                     KernelConfig cfg, bool fused = false) {
  const uint32_t n = uint32_t(t.size());
  DeviceTree d(ctx, n, max_depth);
  upload_tree(d, t);
  Buffer am(ctx, argmax.size() * 4), acc(ctx, (max_depth + 1) * 4), arrivals(ctx, 16);
  am.upload(fused ? std::vector<uint32_t>(n, 0xffffffffu) : argmax);
  arrivals.upload(std::vector<uint32_t>(4, 0));
  const uint32_t V = 64 + n % 7;
  std::vector<float> x(size_t(n) * V);
  std::mt19937 rng(n);
  for (auto& v : x) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
  for (uint32_t i = 0; i < n; ++i) {
    REQUIRE(argmax[i] + 10 < V);
    x[size_t(i) * V + argmax[i]] = x[size_t(i) * V + argmax[i] + 10] = 2.0f;
  }
  Buffer logits(ctx, x.size() * 4);
  logits.upload(x);
  Sequence seq(ctx);
  seq.begin();
  tree_meta(seq, d, n, 0, cfg);
  if (fused) {
    argmax_accept_greedy(seq, Mat{&logits, 0, V}, n, V, d, am, acc, arrivals, nullptr, nullptr, cfg);
    seq.fill(acc, 0xffffffffu);
    seq.fill(am, 0xffffffffu);
    seq.fill(d.info, 0u, kInfoAccepted * 4, 4);
    argmax_accept_greedy(seq, Mat{&logits, 0, V}, n, V, d, am, acc, arrivals, nullptr, nullptr, cfg);
  } else {
    accept_greedy(seq, d, am, acc, cfg);
  }
  seq.run();
  if (fused) {
    CHECK(am.read<uint32_t>(n) == argmax);
    CHECK(arrivals.read<uint32_t>(1)[0] == 0);
  }
  AcceptRun r;
  r.info = d.info.read<uint32_t>(16);
  r.accepted = acc.read<uint32_t>(r.info[kInfoAccepted] + 1);
  return r;
}

// Merged tree: root 0 (tok 100); head 1: 1 (tok 5) → 2 (tok 7); head 2: 3 (tok 5) → 4 (tok 9) → 5 (tok 11).
HostTree duplicate_sibling_tree() {
  HostTree t;
  t.push(100, -1, 0, 0, 0);
  t.push(5, 0, 1, -0.1f, 1);
  t.push(7, 1, 2, -0.2f, 1);
  t.push(5, 0, 1, -0.1f, 2);
  t.push(9, 3, 2, -0.3f, 2);
  t.push(11, 4, 3, -0.4f, 2);
  return t;
}

TEST_CASE_FIXTURE(VkTest, "tree: accept_greedy (and argmax_accept_greedy) finds the longer match under the second duplicate sibling") {
  // The verifier says 5, 9, 11, 42: following the first matching child (node 1) would stop at
  // a = 1; the scan over all rows must find a = 3 on the head-2 path.
  const HostTree t = duplicate_sibling_tree();
  std::vector<uint32_t> argmax{5, 8, 0, 9, 11, 42};
  for (bool fused : {false, true})
  for (uint32_t wg : kWorkgroups) {
    CAPTURE(fused);
    AcceptRun r = run_accept(ctx, t, 4, argmax, wg_cfg(wg), fused);
    CHECK(r.info[kInfoLeaves] == 2);
    CHECK(r.info[kInfoAccepted] == 3);
    CHECK(r.info[kInfoBestRow] == 1);
    CHECK(r.info[kInfoNextRoot] == 42);
    CHECK(r.info[kInfoBestHead] == 2);
    CHECK(r.accepted == std::vector<uint32_t>{0, 3, 4, 5});
    // Equal lengths on both paths: the lower row wins.
    std::vector<uint32_t> am2{5, 7, 3, 9, 0, 42};
    r = run_accept(ctx, t, 4, am2, wg_cfg(wg), fused);
    CHECK(r.info[kInfoAccepted] == 2);
    CHECK(r.info[kInfoBestRow] == 0);
    CHECK(r.info[kInfoNextRoot] == 3);
    CHECK(r.info[kInfoBestHead] == 1);
    CHECK(r.accepted == std::vector<uint32_t>{0, 1, 2});
    // Nothing matches: a = 0, next root = argmax at the root, head 0.
    std::vector<uint32_t> am3{6, 0, 0, 0, 0, 0};
    r = run_accept(ctx, t, 4, am3, wg_cfg(wg), fused);
    CHECK(r.info[kInfoAccepted] == 0);
    CHECK(r.info[kInfoNextRoot] == 6);
    CHECK(r.info[kInfoBestHead] == 0);
    CHECK(r.accepted == std::vector<uint32_t>{0});
  }
}

TEST_CASE_FIXTURE(VkTest, "tree: accept_greedy and argmax_accept_greedy on random trees equal the CPU scan") {
  uint32_t seed = 400;
  for (bool fused : {false, true})
  for (uint32_t wg : {0u, 32u, 64u})
    for (uint32_t n : {1u, 2u, 9u, 30u, 77u, 200u, 512u})
      for (int rep = 0; rep < 3; ++rep) {
        std::mt19937 rng(seed++);
        const uint32_t D = 1 + rng() % 10;
        HostTree t = random_tree(n, D, 1 + rng() % 2, rng);
        // A small alphabet so that long matches and duplicate siblings are common.
        for (auto& tok : t.token) tok = rng() % 3;
        std::vector<uint32_t> argmax(n);
        for (auto& x : argmax) x = rng() % 3;
        const Meta m = meta_ref(t.parent, 0, (n + 31) / 32, D + 1);
        const Accept ref = accept_ref(t, m, D + 1, argmax);
        AcceptRun r = run_accept(ctx, t, D, argmax, wg_cfg(wg), fused);
        INFO("wg " << wg << " n " << n << " D " << D << (fused ? " fused" : ""));
        CHECK(r.info[kInfoAccepted] == ref.a);
        CHECK(r.info[kInfoBestRow] == ref.row);
        CHECK(r.info[kInfoNextRoot] == ref.next_root);
        CHECK(r.info[kInfoBestHead] == ref.best_head);
        CHECK(r.accepted == ref.path);
      }
}

// A random tree of n nodes, depth 1..max_depth, whose tokens come from 3 ids (long matches are
// common), and V-wide logits whose row maximum is one of those ids; t0 in t0_min .. t0_min + 4.
struct AcceptCase {
  uint32_t D, t0;
  HostTree t;
  std::vector<float> x;
};
AcceptCase random_accept_case(uint32_t n, uint32_t max_depth, uint32_t t0_min, uint32_t V, std::mt19937& rng) {
  AcceptCase k;
  k.D = 1 + rng() % max_depth;
  k.t0 = t0_min + rng() % 5;
  k.t = random_tree(n, k.D, 1 + rng() % 2, rng);
  for (auto& tok : k.t.token) tok = rng() % 3;
  k.x.resize(size_t(n) * V);
  for (auto& v : k.x) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
  for (uint32_t i = 0; i < n; ++i) k.x[size_t(i) * V + rng() % 3] = 2.0f;
  return k;
}

// argmax_accept_greedy with the step's advance folded in: the state, the sequence, the output
// list (tokens, limit, stop token, histogram, winner) and the acceptance equal
// argmax_accept_greedy followed by step_advance — one dispatch on this device, the two on one
// that allows 10 storage buffers a stage.
TEST_CASE_FIXTURE(VkTest, "tree: argmax_accept_greedy with the advance equals it then step_advance") {
  Context small(test_context_options(10));
  struct Outcome {
    std::vector<uint32_t> state, seq, out, info, accepted;
  };
  uint32_t seed = 450, checked = 0;
  for (Context* cp : {&ctx, &small}) {
    Context& c = *cp;
    for (uint32_t n : {1u, 6u, 40u, 200u})
      for (int rep = 0; rep < 4; ++rep) {
        std::mt19937 rng(seed++);
        const uint32_t V = 70;
        const auto [D, t0, t, x] = random_accept_case(n, 8, 3, V, rng);
        // rep 0: room for everything; 1: the limit inside the step; 2: a stop token; 3: done already.
        const uint32_t limit = rep == 1 ? 2 : 64, stop = rep == 2 ? 1 : 0, done0 = rep == 3 ? 1 : 0;
        auto run = [&](bool fused) {
          DeviceTree d(c, n, D);
          upload_tree(d, t);
          d.info.upload(std::vector<uint32_t>(kTreeInfoWords, 0));  // words no kernel here writes compare too
          Buffer logits(c, x.size() * 4), am(c, n * 4), acc(c, (D + 1) * 4), arrivals(c, 16);
          logits.upload(x);
          arrivals.upload(std::vector<uint32_t>(4, 0));
          acc.upload(std::vector<uint32_t>(D + 1, 0xffffffffu));
          Buffer state(c, kStateWords * 4), sb(c, 64 * 4), out(c, (kOutTokens + 64) * 4);
          std::vector<uint32_t> st(kStateWords, 0), seqv(64), o(kOutTokens + 64, 0);
          st[kStateT] = t0, st[kStatePrevT] = 1, st[kStateDone] = done0;
          for (uint32_t i = 0; i < 64; ++i) seqv[i] = 100 + i;
          o[kOutLimit] = limit, o[kOutStopCount] = stop, o[kOutStop] = 1;
          state.upload(st);
          sb.upload(seqv);
          out.upload(o);
          Sequence seq(c);
          seq.begin();
          tree_meta(seq, d, n, 0, {});
          const StepAdvanceArgs adv{&state, &sb, &out, kInfoBestHead};
          argmax_accept_greedy(seq, Mat{&logits, 0, V}, n, V, d, am, acc, arrivals, fused ? &adv : nullptr);
          if (!fused) step_advance(seq, state, &d, &acc, sb, out, true, kInfoBestHead);
          CHECK(seq.dispatch_count() == (fused && c.caps().max_stage_storage_buffers >= 11 ? 2u : 3u));
          seq.run();
          Outcome r{state.read<uint32_t>(kStateWords), sb.read<uint32_t>(64), out.read<uint32_t>(kOutTokens + 64),
                    d.info.read<uint32_t>(kTreeInfoWords), acc.read<uint32_t>(D + 1)};
          CHECK(arrivals.read<uint32_t>(1)[0] == 0);
          return r;
        };
        const Outcome a = run(false), b = run(true);
        INFO("n " << n << " D " << D << " rep " << rep << " storage buffers " << c.caps().max_stage_storage_buffers);
        CHECK(b.state == a.state);
        CHECK(b.seq == a.seq);
        CHECK(b.out == a.out);
        CHECK(b.info == a.info);
        CHECK(b.accepted == a.accepted);
        // It did advance (or, done already, did not): t moved by a + 1.
        CHECK(b.state[kStateT] == (done0 ? t0 : t0 + a.info[kInfoAccepted] + 1));
        checked += b.state[kStateDone] != done0;
      }
  }
  CHECK(checked > 0);  // some runs reached the limit or the stop token
  const auto messages = small.take_validation_messages();
  CHECK_MESSAGE(messages.empty(), messages.size() << " validation messages on the 10-buffer context");
}

// A verifier row with NaN or inf (weights that overflow): the greedy step emits the accepted path
// up to that node and ends the generation there, naming the row's position; a bad row off the
// accepted path changes nothing. Fused (the advance in the acceptance) and not, both workgroup sizes.
TEST_CASE_FIXTURE(VkTest, "tree: a verifier row with NaN or inf ends the greedy step at its node, emitting the path before it") {
  // The duplicate-sibling tree; row maxima 5, 8, 0, 9, 11, 42: clean, the path is 0, 3, 4, 5 (a = 3).
  const HostTree tr = duplicate_sibling_tree();
  const uint32_t n = 6, D = 4, V = 64, t0 = 7;
  const std::vector<uint32_t> argmax{5, 8, 0, 9, 11, 42};
  struct Case {
    int bad_row;  // -1: none
    float value;
    std::vector<uint32_t> emitted;
    uint32_t fault;  // kOutFault: 0, or 1 + the bad row's position
  };
  const float inf = std::numeric_limits<float>::infinity();
  const Case cases[] = {
      {-1, 0.0f, {5, 9, 11, 42}, 0},
      {4, kNaN, {5, 9}, t0 + 3},  // node 4 (position t0 + 2): its child 11 is not accepted, no next root
      {5, inf, {5, 9, 11}, t0 + 4},
      {0, -inf, {}, t0 + 1},      // the root's own row: nothing at all
      {2, kNaN, {5, 9, 11, 42}, 0},  // node 2 is off the accepted path
  };
  for (const Case& c : cases)
    for (bool fused : {false, true})
      for (uint32_t wg : kWorkgroups) {
        std::vector<float> x(size_t(n) * V);
        std::mt19937 rng(wg + n);
        for (auto& v : x) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
        for (uint32_t i = 0; i < n; ++i) x[size_t(i) * V + argmax[i]] = 2.0f;
        if (c.bad_row >= 0) x[size_t(c.bad_row) * V + 33 + wg % 7] = c.value;
        DeviceTree d(ctx, n, D);
        upload_tree(d, tr);
        Buffer logits(ctx, x.size() * 4), am(ctx, n * 4), acc(ctx, (D + 1) * 4), arrivals(ctx, 16);
        logits.upload(x);
        arrivals.upload(std::vector<uint32_t>(4, 0));
        Buffer state(ctx, kStateWords * 4), sb(ctx, 64 * 4), out(ctx, (kOutTokens + 64) * 4);
        std::vector<uint32_t> st(kStateWords, 0), seqv(64, 777), o(kOutTokens + 64, 0);
        st[kStateT] = t0;
        seqv[t0] = 100;
        o[kOutLimit] = 64;
        state.upload(st);
        sb.upload(seqv);
        out.upload(o);
        Sequence seq(ctx);
        seq.begin();
        tree_meta(seq, d, n, 0, wg_cfg(wg));
        const StepAdvanceArgs adv{&state, &sb, &out, kInfoBestHead};
        argmax_accept_greedy(seq, Mat{&logits, 0, V}, n, V, d, am, acc, arrivals, fused ? &adv : nullptr, nullptr,
                             wg_cfg(wg));
        if (!fused) step_advance(seq, state, &d, &acc, sb, out, true, kInfoBestHead);
        seq.run();
        INFO("bad row " << c.bad_row << (fused ? " fused" : "") << " wg " << wg);
        const auto ol = out.read<uint32_t>(kOutTokens + 64), stv = state.read<uint32_t>(kStateWords);
        const auto sq = sb.read<uint32_t>(64);
        CHECK(std::vector<uint32_t>(ol.begin() + kOutTokens, ol.begin() + kOutTokens + ol[kOutCount]) == c.emitted);
        CHECK(ol[kOutFault] == c.fault);
        CHECK(ol[kOutDone] == (c.fault ? 1u : 0u));
        CHECK(stv[kStateDone] == (c.fault ? 1u : 0u));
        // The sequence holds the path and a valid id where the next root would be, never the flag.
        const uint32_t t_new = t0 + uint32_t(c.fault ? c.fault - t0 : c.emitted.size());
        for (uint32_t i = 0; i < c.emitted.size(); ++i) CHECK(sq[t0 + 1 + i] == c.emitted[i]);
        CHECK(sq[t_new] < V);
        CHECK(sq[t_new + 1] == 777);
      }
}

// argmax_accept_greedy with the advance and the commit folded in: the cache streams, the gathered
// features (copied, and RMS-normalized) and the step equal argmax_accept_greedy with the advance
// followed by commit_rows at the old t — one dispatch where the commit is small, and where it is
// not (past kFoldCommitMaxWords, or a device with 14 storage buffers a stage) the two.
TEST_CASE_FIXTURE(VkTest, "tree: argmax_accept_greedy with the advance and the commit equals it then commit_rows") {
  Context small(test_context_options(14));
  struct Outcome {
    std::vector<uint32_t> state, out, info, accepted;
    std::vector<float> cache, feat;
  };
  uint32_t seed = 900, folded_runs = 0, moved_runs = 0;
  for (Context* cp : {&ctx, &small})
    for (uint32_t n : {1u, 5u, 30u})
      for (int rep = 0; rep < 6; ++rep) {
        Context& c = *cp;
        std::mt19937 rng(seed++);
        const uint32_t V = 70;
        const auto [D, t0, t, x] = random_accept_case(n, 6, 2, V, rng);
        // rep 0..1: a small cache (folded where allowed); 2: one past the fold's limit; 3..5 small,
        // the gather copying (3), normalizing (4), absent (5).
        const bool big = rep == 2, norm = rep != 3 && rep != 5, gather = rep != 5;
        const uint32_t streams = 1 + rng() % 4, row_words = big ? kFoldCommitMaxWords / (D + 1) + 1 : 1 + rng() % 40;
        const uint32_t rows = t0 + n + 2, stream_words = rows * row_words + 3, cols = 5 + rng() % 30;
        const auto cache = random_floats(size_t(streams) * stream_words, seed);
        const uint32_t s_stride = cols + 2, d_stride = cols + 1;
        const auto feat = random_floats(size_t(n) * s_stride + 3, seed + 1), gamma = random_floats(cols, seed + 2);
        const std::vector<float> dst0(size_t(D + 1) * d_stride + 1, -7.0f);
        auto run = [&](bool fold) {
          DeviceTree d(c, n, D);
          upload_tree(d, t);
          d.info.upload(std::vector<uint32_t>(kTreeInfoWords, 0));
          Buffer logits(c, x.size() * 4), am(c, n * 4), acc(c, (D + 1) * 4), arrivals(c, 16);
          logits.upload(x);
          arrivals.upload(std::vector<uint32_t>(4, 0));
          acc.upload(std::vector<uint32_t>(D + 1, 0xffffffffu));
          Buffer state(c, kStateWords * 4), sb(c, 64 * 4), out(c, (kOutTokens + 64) * 4);
          std::vector<uint32_t> st(kStateWords, 0), o(kOutTokens + 64, 0);
          st[kStateT] = t0, st[kStatePrevT] = 1;
          o[kOutLimit] = 64;
          state.upload(st);
          sb.upload(std::vector<uint32_t>(64, 5));
          out.upload(o);
          Buffer cb(c, cache.size() * 4), fs(c, feat.size() * 4), fd(c, dst0.size() * 4), gb(c, cols * 4);
          cb.upload(cache), fs.upload(feat), fd.upload(dst0), gb.upload(gamma);
          RowGather g{Mat{&fs, 3, s_stride}, Mat{&fd, 1, d_stride}, cols};
          if (norm) g.norm = &gb, g.eps = 1e-5f;
          const KvCommit kc{&cb, row_words, streams, stream_words, gather ? &g : nullptr};
          Sequence seq(c);
          seq.begin();
          tree_meta(seq, d, n, 0, {});
          const StepAdvanceArgs adv{&state, &sb, &out, kDynFixed};
          const bool did = argmax_accept_greedy(seq, Mat{&logits, 0, V}, n, V, d, am, acc, arrivals, &adv, fold ? &kc : nullptr);
          CHECK(did == (fold && !big && c.caps().max_stage_storage_buffers >= 15));
          folded_runs += did;
          if (!did) commit_rows(seq, d, acc, Dyn{state, kStatePrevT}, cb, row_words, streams, stream_words, kc.gather);
          CHECK(seq.dispatch_count() == (did ? 2u : 3u));
          seq.run();
          CHECK(arrivals.read<uint32_t>(1)[0] == 0);
          return Outcome{state.read<uint32_t>(kStateWords), out.read<uint32_t>(kOutTokens + 64),
                         d.info.read<uint32_t>(kTreeInfoWords), acc.read<uint32_t>(D + 1), cb.read<float>(cache.size()),
                         fd.read<float>(dst0.size())};
        };
        const Outcome a = run(false), b = run(true);
        INFO("n " << n << " D " << D << " rep " << rep << " storage buffers " << c.caps().max_stage_storage_buffers);
        CHECK(b.state == a.state);
        CHECK(b.out == a.out);
        CHECK(b.info == a.info);
        CHECK(b.accepted == a.accepted);
        CHECK(b.cache == a.cache);
        CHECK(b.feat == a.feat);
        // The commit moved something wherever a path node is not already in its slot.
        bool moves = false;
        for (uint32_t e = 0; e <= a.info[kInfoAccepted]; ++e) moves = moves || a.accepted[e] != e;
        if (moves) CHECK(a.cache != cache);
        moved_runs += moves;
        if (gather) CHECK(a.feat != dst0);
      }
  CHECK(folded_runs > 0);
  CHECK(moved_runs > 0);
  const auto messages = small.take_validation_messages();
  CHECK_MESSAGE(messages.empty(), messages.size() << " validation messages on the 14-buffer context");
}

// ---- commit -------------------------------------------------------------------------------

TEST_CASE_FIXTURE(VkTest, "tree: commit_rows and gather_rows equal the CPU moves") {
  uint32_t seed = 500;
  std::vector<std::vector<uint32_t>> paths{{0}, {0, 1}, {0, 3, 4, 9}, {0, 1, 2, 3}, {0, 5, 6, 7, 8, 20, 21}};
  {
    std::mt19937 rng(77);  // a long random path: strictly increasing node indices
    std::vector<uint32_t> p{0};
    for (int i = 0; i < 40; ++i) p.push_back(p.back() + 1 + rng() % 4);
    paths.push_back(p);
  }
  for (uint32_t wg : kWorkgroups)
    for (const auto& path : paths)
      for (uint32_t row_floats : {1u, 37u, 130u, 600u}) {  // 600: past a workgroup's slice of 16 columns a lane
        std::mt19937 rng(seed++);
        const uint32_t a = uint32_t(path.size()) - 1, t = 3 + rng() % 5, N = path.back() + 1;
        const uint32_t max_depth = 63;
        DeviceTree d(ctx, N + 2, max_depth);
        std::vector<uint32_t> info(16, 0);
        info[kInfoAccepted] = a;
        d.info.upload(info);
        std::vector<uint32_t> tokens(N);
        for (auto& x : tokens) x = rng() % 32000;
        d.token.upload(tokens);
        Buffer acc(ctx, 64 * 4);
        acc.upload(path);
        // Three streams (a model's layers' K and V in one buffer) a few words apart: one
        // dispatch must move the rows of each and touch nothing between them.
        const uint32_t rows = t + N + 2, streams = 3, stream_words = rows * row_floats + 5;
        auto cache = random_floats(size_t(streams) * stream_words, seed);
        Buffer cb(ctx, cache.size() * 4);
        cb.upload(cache);
        // Features: src (N, cols) at an offset with a padded stride, dst likewise.
        const uint32_t cols = row_floats + 3, s_stride = cols + 5, d_stride = cols + 1;
        auto feat = random_floats(size_t(N) * s_stride + 7, seed + 1);
        Buffer fs(ctx, feat.size() * 4), fd(ctx, (size_t(64) * d_stride + 2) * 4);
        fs.upload(feat);
        std::vector<float> dst0(size_t(64) * d_stride + 2, -7.0f);
        fd.upload(dst0);

        // The two moves apart, or the gather folded into the commit's dispatch, or folded and
        // RMS-normalizing the rows it gathers (in turn).
        const uint32_t mode = seed % 3;
        const bool folded = mode != 1, norm = mode == 2;
        CAPTURE(mode);
        const float eps = 1e-5f;
        auto gamma = random_floats(cols, seed + 2);
        Buffer gb(ctx, cols * 4), normed(ctx, size_t(N) * s_stride * 4 + 28);
        gb.upload(gamma);
        Sequence seq(ctx);
        seq.begin();
        RowGather g{Mat{&fs, 7, s_stride}, Mat{&fd, 2, d_stride}, cols};
        if (norm) g.norm = &gb, g.eps = eps;
        commit_rows(seq, d, acc, t, cb, row_floats, streams, stream_words, folded ? &g : nullptr, wg_cfg(wg));
        if (!folded) gather_rows(seq, d, acc, g.src, g.dst, cols, wg_cfg(wg));
        CHECK(seq.dispatch_count() == (folded ? 1u : 2u));
        // What the gather must equal bit for bit: rmsnorm over every source row.
        if (norm) rmsnorm(seq, g.src, gb, Mat{&normed, 7, s_stride}, N, cols, eps, wg_cfg(wg));
        seq.run();

        auto ref = cache;  // read all, then write
        for (uint32_t st = 0; st < streams; ++st) {
          const auto s0 = cache.begin() + size_t(st) * stream_words;
          std::vector<float> moved;
          for (uint32_t e = 0; e <= a; ++e)
            moved.insert(moved.end(), s0 + size_t(t + path[e]) * row_floats, s0 + size_t(t + path[e] + 1) * row_floats);
          std::copy(moved.begin(), moved.end(), ref.begin() + size_t(st) * stream_words + size_t(t) * row_floats);
        }
        INFO("wg " << wg << " a " << a << " row_floats " << row_floats);
        CHECK(cb.read<float>(cache.size()) == ref);

        auto dref = dst0;
        const auto nrows = norm ? normed.read<float>(size_t(N) * s_stride + 7) : std::vector<float>{};
        for (uint32_t e = 0; e <= a; ++e) {
          double ss = 0.0;
          for (uint32_t c = 0; c < cols; ++c) ss += double(feat[7 + path[e] * s_stride + c]) * feat[7 + path[e] * s_stride + c];
          const double scale = 1.0 / std::sqrt(ss / cols + eps);
          for (uint32_t c = 0; c < cols; ++c) {
            const size_t i = 7 + path[e] * s_stride + c;
            dref[2 + e * d_stride + c] = norm ? nrows[i] : feat[i];
            if (norm) CHECK(std::abs(nrows[i] - feat[i] * scale * gamma[c]) <= 1e-5 * (1.0 + std::abs(feat[i] * scale * gamma[c])));
          }
        }
        CHECK(fd.read<float>(dst0.size()) == dref);

      }
}
