// The step recorded once (src/speculative/step_plan.hpp): chained submissions, replays across
// generations, stop tokens inside a chain — all against ar token by token — and the kernels the
// plan adds (kv_write, copy_rows, step_advance) and the dynamic scalars the others now read,
// each against a CPU reference or the same kernel given the value as a constant.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

#include "spec_fixtures.hpp"
#include "tree_order.hpp"
#include "vk_fixture.hpp"
#include "vkspec/engine.hpp"
#include "vkspec/step_state.h"
#include "vkspec/tree.hpp"

using namespace vkspec;
using namespace vkspec::test;

namespace {

const Strategy kAll[] = {Strategy::AR, Strategy::Single1, Strategy::Route, Strategy::Merge, Strategy::MergeTrie};

EngineOptions options(Strategy s, uint32_t S) {
  EngineOptions o;
  o.strategy = s;
  o.depth = 5, o.topk = 4, o.budget = 12;
  o.steps_per_submit = S;
  return o;
}

Buffer state_with(Context& ctx, std::vector<uint32_t> words) {
  words.resize(kStateWords, 0);
  Buffer b(ctx, kStateWords * 4);
  b.upload(words);
  return b;
}

}  // namespace

TEST_CASE_FIXTURE(VkTest, "step plan: S = 1, 2, 7 steps per submission give ar's tokens with one host wait per submission") {
  DemoRig demo(ctx);
  const std::vector<std::vector<uint32_t>> ps(demo.prompts.begin(), demo.prompts.begin() + 3);
  Engine ar(ctx, demo.model, nullptr, nullptr, options(Strategy::AR, 1));
  std::vector<std::vector<uint32_t>> want;
  for (auto& p : ps) want.push_back(ar.generate(p, 61).tokens);  // 61: the limit falls inside a chain
  for (Strategy s : kAll)
    for (uint32_t S : {1u, 2u, 7u}) {
      Engine e(ctx, demo.model, &demo.head1, &demo.head2, options(s, S));
      for (size_t i = 0; i < ps.size(); ++i) {
        GenerateStats st = e.generate(ps[i], 61);
        CHECK_MESSAGE(st.tokens == want[i], strategy_name(s) << " S=" << S << " prompt " << i);
        // The host waits once per submission of S steps (no-op steps after the limit included).
        const long waits = std::lround(st.host_waits_per_step * st.steps);
        CHECK_MESSAGE(waits == long((st.steps + S - 1) / S), strategy_name(s) << " S=" << S << ": " << waits
                                                                              << " waits for " << st.steps << " steps");
        CHECK(st.host_waits_per_token <= 1.0 / S + 1.0 / double(st.tokens.size() - 1) + 1e-9);
      }
    }
}

TEST_CASE_FIXTURE(VkTest, "step plan: one recording replayed across steps and generations equals fresh engines") {
  DemoRig demo(ctx);
  const auto& p0 = demo.prompts[0];
  const auto& p1 = demo.prompts[1];
  for (Strategy s : {Strategy::AR, Strategy::Merge, Strategy::MergeTrie}) {
    Engine reused(ctx, demo.model, &demo.head1, &demo.head2, options(s, 3));
    const uint32_t dispatches = reused.dispatches_per_step();
    const auto a0 = reused.generate(p0, 50).tokens;
    const auto a1 = reused.generate(p1, 70).tokens;
    const auto a2 = reused.generate(p0, 50).tokens;  // the first prompt again, after another generation
    Engine fresh0(ctx, demo.model, &demo.head1, &demo.head2, options(s, 1));
    const auto f0 = fresh0.generate(p0, 50).tokens;
    Engine fresh1(ctx, demo.model, &demo.head1, &demo.head2, options(s, 1));
    const auto f1 = fresh1.generate(p1, 70).tokens;
    CHECK_MESSAGE(a0 == f0, strategy_name(s));
    CHECK_MESSAGE(a1 == f1, strategy_name(s));
    CHECK_MESSAGE(a2 == f0, strategy_name(s));
    CHECK(reused.dispatches_per_step() == dispatches);  // nothing is recorded per step
  }
}

TEST_CASE_FIXTURE(VkTest, "step plan: a stop token inside a chained submission ends the output exactly there") {
  DemoRig demo(ctx);
  const auto& p = demo.prompts[2];
  Engine ar(ctx, demo.model, nullptr, nullptr, options(Strategy::AR, 1));
  const auto want = ar.generate(p, 80).tokens;
  // A token first emitted well inside the run (not the prefill's), so several speculative steps
  // commit before it and the chain of 7 steps reaches past it.
  size_t k = 20;
  while (k < want.size() && std::find(want.begin(), want.begin() + k, want[k]) != want.begin() + k) ++k;
  REQUIRE(k < want.size());
  const std::vector<uint32_t> expect(want.begin(), want.begin() + k + 1);
  for (Strategy s : kAll) {
    EngineOptions o = options(s, 7);
    o.stop_tokens = {want[k]};
    Engine e(ctx, demo.model, &demo.head1, &demo.head2, o);
    GenerateStats st = e.generate(p, 80);
    CHECK_MESSAGE(st.tokens == expect, strategy_name(s) << ": " << st.tokens.size() << " tokens, want " << expect.size());
    CHECK(st.stopped);
    CHECK(e.generate(p, 80).tokens == expect);  // the plan replays cleanly after a stopped generation
  }
  // A stop token that is the prefill's own token: one token, no step.
  EngineOptions o = options(Strategy::Merge, 7);
  o.stop_tokens = {want[0]};
  Engine e(ctx, demo.model, &demo.head1, &demo.head2, o);
  GenerateStats st = e.generate(p, 80);
  CHECK(st.tokens == std::vector<uint32_t>{want[0]});
  CHECK(st.steps == 0);
}

TEST_CASE_FIXTURE(VkTest, "step plan: a prompt past the old 2048-token limit runs, every strategy equal to ar") {
  // Positions, KV slots and the heads' ingest all come from the step state: the prompt length is
  // bounded by the context alone. (The demo verifier was trained on 256 positions; past them its
  // text is poor, but every strategy must still emit exactly ar's tokens.)
  ModelOptions mo;
  mo.context = 2600, mo.max_rows = 64;
  LlamaModel model(ctx, GgufFile::open(DemoRig::dir() + "verifier.gguf"), mo);
  EagleHead h1(ctx, DemoRig::dir() + "head1", model, model.capacity(), 64);
  EagleHead h2(ctx, DemoRig::dir() + "head2", model, model.capacity(), 64);
  std::ifstream in(DemoRig::dir() + "prompts.txt");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line + "\n");
  REQUIRE(!lines.empty());
  std::vector<uint32_t> prompt;
  for (size_t i = 0; prompt.size() < 2300; ++i) prompt.insert(prompt.end(), lines[i % lines.size()].begin(), lines[i % lines.size()].end());
  prompt.resize(2300);
  Engine ar(ctx, model, nullptr, nullptr, options(Strategy::AR, 1));
  const auto want = ar.generate(prompt, 24).tokens;
  for (Strategy s : {Strategy::Route, Strategy::MergeTrie}) {
    Engine e(ctx, model, &h1, &h2, options(s, 4));
    CHECK_MESSAGE(e.generate(prompt, 24).tokens == want, strategy_name(s));
  }
}

TEST_CASE_FIXTURE(VkTest, "kv_write and copy_rows match the CPU reference, slot and row read from the step state") {
  const uint32_t N = 5, kv = 67, stride = 300, k_col = 11, v_col = 11 + kv + 3, cap = 40, slot = 23;
  const auto src = random_floats(size_t(N) * stride, 7);
  Buffer sb(ctx, src.size() * 4), kb(ctx, size_t(cap) * kv * 4), vb(ctx, size_t(cap) * kv * 4);
  sb.upload(src);
  const std::vector<float> zeros(size_t(cap) * kv, 0.0f);
  kb.upload(zeros), vb.upload(zeros);
  const Buffer state = state_with(ctx, {slot - 3});  // slot = 3 + state[kStateT]
  const uint32_t rows = 3, cols = 45, row0 = 1;
  Buffer db(ctx, size_t(rows) * 64 * 4);
  db.upload(std::vector<float>(size_t(rows) * 64, 0.0f));
  Sequence seq(ctx);
  seq.begin();
  kv_write(seq, Mat{&sb, 0, stride}, k_col, v_col, N, kv, kb, vb, Dyn(state, kStateT, 3));
  copy_rows(seq, Mat{&sb, 4, stride}, Dyn(state, kStateT, row0 - (slot - 3)), Mat{&db, 2, 64}, rows, cols);
  seq.run();
  std::vector<float> k_ref = zeros, v_ref = zeros, d_ref(size_t(rows) * 64, 0.0f);
  for (uint32_t r = 0; r < N; ++r)
    for (uint32_t c = 0; c < kv; ++c) {
      k_ref[(slot + r) * kv + c] = src[r * stride + k_col + c];
      v_ref[(slot + r) * kv + c] = src[r * stride + v_col + c];
    }
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < cols; ++c) d_ref[2 + r * 64 + c] = src[4 + (row0 + r) * stride + c];
  CHECK(kb.read<float>(zeros.size()) == k_ref);
  CHECK(vb.read<float>(zeros.size()) == v_ref);
  CHECK(db.read<float>(d_ref.size()) == d_ref);
}

TEST_CASE_FIXTURE(VkTest, "dynamic scalars: embed, rope, attention, argmax, tree_meta read from the state equal constants") {
  // Each op twice: the value as a constant, and as base + state word; outputs must be bit-identical.
  const uint32_t T = 4, H = 2, D = 16, V = 37, t = 9, cap = 32;
  const uint32_t kvw = H * D;
  std::vector<uint8_t> raw(size_t(V) * kvw * 4);
  const auto table = random_floats(size_t(V) * kvw, 3);
  std::memcpy(raw.data(), table.data(), raw.size());
  const DeviceWeight emb = upload_weight(ctx, WeightType::F32, V, kvw, raw.data());
  std::vector<uint32_t> toks(40);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint32_t(i * 7) % V;
  Buffer tb(ctx, toks.size() * 4);
  tb.upload(toks);
  const auto kc = random_floats(size_t(cap) * kvw, 4), vc = random_floats(size_t(cap) * kvw, 5);
  Buffer kb(ctx, kc.size() * 4), vb(ctx, vc.size() * 4);
  kb.upload(kc), vb.upload(vc);
  const Buffer state = state_with(ctx, {t - 2, 0, 0, 0});
  const Dyn dyn_t(state, kStateT, 2);
  auto run = [&](bool dynamic) {
    Buffer x(ctx, size_t(T) * kvw * 4), o(ctx, size_t(T) * kvw * 4), am(ctx, 64 * 4);
    am.upload(std::vector<uint32_t>(64, 999));  // a sentinel no argmax over kvw columns gives
    DeviceTree tree(ctx, 6, 3);
    tree.parent.upload(std::vector<int32_t>{-1, 0, 0, 1, 3, 2});
    const Dyn tt = dynamic ? dyn_t : Dyn(t);
    Sequence seq(ctx);
    seq.begin();
    embed(seq, emb, tb, tt, Mat{&x, 0, kvw}, T);
    rope(seq, Mat{&x, 0, kvw}, RopePositions::run(tt), T, H, D, D, RopeArgs{});
    AttentionArgs a;
    a.N = T, a.H = H, a.Hkv = H, a.D = D, a.t = tt, a.q = Mat{&x, 0, kvw}, a.o = Mat{&o, 0, kvw};
    a.k_cache = &kb, a.v_cache = &vb;
    attention(seq, a);
    argmax(seq, Mat{&o, 0, kvw}, am, tt + 1, T, kvw);
    tree_meta(seq, tree, 6, tt);
    seq.run();
    auto out = o.read<float>(size_t(T) * kvw);
    auto xs = x.read<float>(size_t(T) * kvw);
    out.insert(out.end(), xs.begin(), xs.end());
    for (uint32_t v : am.read<uint32_t>(64)) out.push_back(float(v));
    for (int32_t p : tree.pos.read<int32_t>(6)) out.push_back(float(p));
    return out;
  };
  const auto fixed = run(false), dynamic = run(true);
  CHECK(std::memcmp(fixed.data(), dynamic.data(), fixed.size() * 4) == 0);
  // And the values really were used: argmax landed at t+1 .. t+T, positions are t + depth.
  const size_t am0 = 2 * size_t(T) * kvw;
  CHECK(fixed[am0 + t] == 999.0f);
  CHECK(fixed[am0 + t + 1] != 999.0f);
  CHECK(fixed[am0 + t + T] != 999.0f);
  CHECK(fixed[am0 + t + T + 1] == 999.0f);
  CHECK(fixed[am0 + 64 + 4] == float(t + 3));
}

TEST_CASE_FIXTURE(VkTest, "step_advance appends the accepted path, emits tokens up to the limit or a stop token, then is done") {
  struct Case {
    bool tree;
    uint32_t a, t, limit, count;
    std::vector<uint32_t> stops;
    std::vector<uint32_t> emitted;  // expected new tokens
    bool done;
  };
  // seq_tokens[i] = 100 + i; tree node n carries token 500 + n, the accepted path is nodes
  // 0, 2, 5, 7 (its first a + 1), the next root 999.
  const Case cases[] = {
      {false, 0, 10, 100, 3, {}, {111}, false},                // ar: y[t+1]
      {true, 3, 10, 100, 3, {}, {502, 505, 507, 999}, false},  // tree: y[t+1 .. t+a], then the next root
      {true, 3, 10, 5, 3, {}, {502, 505}, true},               // the limit inside the step
      {true, 3, 10, 100, 3, {505, 7}, {502, 505}, true},       // a stop token inside the step
      {true, 0, 10, 4, 3, {}, {999}, true},                    // the limit exactly at the step's end
  };
  const std::vector<uint32_t> path{0, 2, 5, 7};
  for (const Case& c : cases) {
    Buffer state = state_with(ctx, {c.t, 0, 0, 0});
    DeviceTree tree(ctx, 8, 4);
    std::vector<uint32_t> info(kTreeInfoWords, 0), tokens(8);
    info[kInfoAccepted] = c.a, info[kInfoBestHead] = 2, info[kInfoNextRoot] = 999;
    tree.info.upload(info);
    for (uint32_t n = 0; n < 8; ++n) tokens[n] = 500 + n;
    tree.token.upload(tokens);
    Buffer acc(ctx, 64 * 4);
    acc.upload(path);
    std::vector<uint32_t> seqv(64);
    for (uint32_t i = 0; i < 64; ++i) seqv[i] = 100 + i;
    Buffer sb(ctx, 64 * 4);
    sb.upload(seqv);
    Buffer out(ctx, (kOutTokens + 64) * 4, MemoryKind::Host);
    auto* o = static_cast<uint32_t*>(out.mapped());
    std::memset(o, 0, (kOutTokens + 64) * 4);
    o[kOutLimit] = c.limit, o[kOutCount] = c.count, o[kOutStopCount] = uint32_t(c.stops.size());
    std::copy(c.stops.begin(), c.stops.end(), o + kOutStop);
    for (int rep = 0; rep < 2; ++rep) {  // the second run must be a no-op once done
      Sequence seq(ctx);
      seq.begin();
      step_advance(seq, state, c.tree ? &tree : nullptr, c.tree ? &acc : nullptr, sb, out, true, kInfoBestHead);
      seq.run();
      if (rep == 0 || c.done) {
        CHECK(o[kOutCount] == c.count + c.emitted.size());
        CHECK(std::vector<uint32_t>(o + kOutTokens + c.count, o + kOutTokens + o[kOutCount]) == c.emitted);
        CHECK(o[kOutDone] == (c.done ? 1u : 0u));
        CHECK(o[kOutSteps] == 1);
        CHECK(o[kOutHist + c.emitted.size() - 1] == 1);  // the path as far as it was emitted
        CHECK(o[kOutWins + 2] == (c.tree ? 1u : 0u));
      }
      if (!c.done) break;
    }
    const uint32_t t_new = c.tree ? c.t + c.a + 1 : c.t + 1, t_old = c.t;
    // The sequence: the accepted path from y[t] on and the next root after it; nothing else moved.
    auto want = seqv;
    if (c.tree) {
      for (uint32_t e = 0; e <= c.a; ++e) want[t_old + e] = tokens[path[e]];
      want[t_new] = 999;
    }
    CHECK(sb.read<uint32_t>(64) == want);
    const auto st = state.read<uint32_t>(kStateWords);
    CHECK(st[kStateT] == t_new);
    CHECK(st[kStatePrevT] == t_old);
    CHECK(st[kStateAccepted] == c.a);
    CHECK(st[kStateDone] == (c.done ? 1u : 0u));
  }
}

TEST_CASE_FIXTURE(VkTest, "step_advance with the argmax: y[t+1] is the logits row's arg-max (ties low), emitted as ar's; a row with NaN or inf emits nothing and ends the generation") {
  // Rows of random values with planted ties (equal maxima, the lower id wins); V around the
  // workgroup width and well past it. Variants 2..4 plant one NaN, +inf or -inf (the whole row
  // when V == 1) at a place each lane of the workgroup may hold: such a row has no token to emit.
  uint32_t seed = 1;
  for (uint32_t V : {1u, 5u, 8u, 9u, 64u, 300u, 1027u}) {
    for (int variant = 0; variant < 5; ++variant, ++seed) {
      std::vector<float> row = random_floats(V, seed);
      if (variant >= 1 && V > 2) row[V - 1] = row[V / 3] = 2.0f;  // a tie for the max
      const float inf = std::numeric_limits<float>::infinity(), planted[] = {test::kNaN, inf, -inf};
      if (variant >= 2) row[(V / 2 + seed) % V] = planted[variant - 2];
      const bool bad = variant >= 2;
      const uint32_t x_offset = 4 * (seed % 3), t = 3 + seed % 5;
      std::vector<float> xs(x_offset + V, -9.0f);
      std::copy(row.begin(), row.end(), xs.begin() + x_offset);
      Buffer xb(ctx, xs.size() * 4);
      xb.upload(xs);
      Buffer state = state_with(ctx, {t, 0, 0, 0});
      Buffer sb(ctx, 64 * 4);
      sb.upload(std::vector<uint32_t>(64, 777));
      Buffer out(ctx, (kOutTokens + 64) * 4, MemoryKind::Host);
      auto* o = static_cast<uint32_t*>(out.mapped());
      std::memset(o, 0, (kOutTokens + 64) * 4);
      o[kOutLimit] = 100;
      Sequence seq(ctx);
      seq.begin();
      const StepArgmax am{Mat{&xb, x_offset, V}, V};
      step_advance(seq, state, nullptr, nullptr, sb, out, true, kDynFixed, &am);
      seq.run();
      const uint32_t want = test::order_argmax(row);
      CAPTURE(V);
      CAPTURE(variant);
      const auto seqv = sb.read<uint32_t>(64);
      CHECK(seqv[t + 1] == want);  // a valid id even from a bad row: the next step's gate reads past it
      CHECK(seqv[t] == 777);       // nothing else written
      CHECK(seqv[t + 2] == 777);
      CHECK(o[kOutCount] == (bad ? 0u : 1u));
      CHECK(o[kOutDone] == (bad ? 1u : 0u));
      CHECK(o[kOutFault] == (bad ? t + 1 : 0u));  // 1 + the row's position t
      if (!bad) CHECK(o[kOutTokens] == want);
      const auto st = state.read<uint32_t>(kStateWords);
      CHECK(st[kStateT] == t + 1);
      CHECK(st[kStateDone] == (bad ? 1u : 0u));
    }
  }
}

TEST_CASE_FIXTURE(VkTest, "Sequence::gate: a replayable recording does nothing once the state is done") {
  const auto src = random_floats(64, 11);
  Buffer sb(ctx, 64 * 4), db(ctx, 64 * 4);
  sb.upload(src);
  Buffer state = state_with(ctx, {0, 0, 0, 1});  // done
  Sequence seq(ctx, 0, /*replayable=*/true);
  seq.begin();
  seq.gate(state);
  copy_rows(seq, Mat{&sb, 0, 64}, 0u, Mat{&db, 0, 64}, 1, 64);
  seq.end();
  db.upload(std::vector<float>(64, 0.0f));
  seq.submit(3);
  seq.wait();
  CHECK(db.read<float>(64) == std::vector<float>(64, 0.0f));  // gated: the copy never ran
  state.upload(std::vector<uint32_t>(kStateWords, 0));        // not done: the same recording runs
  seq.submit(2);
  seq.wait();
  CHECK(db.read<float>(64) == src);
}
