// Soak: many generations back to back on one engine per strategy, each refilling the context
// from t = 0, checked against ar token for token, with device and host memory measured after a
// warm-up round and at the end. The suite runs VKSPEC_SOAK_TOKENS (default 1,000) generated
// tokens per strategy as its own CTest entry; `bash tools/dev.sh soak` runs 10,000.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <unistd.h>

#include "spec_fixtures.hpp"
#include "vk_fixture.hpp"
#include "vkspec/eagle_head.hpp"
#include "vkspec/engine.hpp"

using namespace vkspec;
using namespace vkspec::test;

namespace {
uint64_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * uint64_t(sysconf(_SC_PAGESIZE));
}

uint64_t soak_tokens() {
  const char* e = std::getenv("VKSPEC_SOAK_TOKENS");
  return e ? std::strtoull(e, nullptr, 10) : 1000;
}
}  // namespace

TEST_CASE("soak: every strategy equals ar over refilled contexts; device and host memory stay flat") {
  // Its own context without validation layers: this measures what a user's process does over
  // a long run (the layers' own bookkeeping would dominate the memory figures and the time).
  ContextOptions co;
  co.pipeline_cache_dir = "-";
  Context ctx(co);
  DemoRig demo(ctx);
  LlamaModel& model = demo.model;
  const auto& prompts = demo.prompts;
  REQUIRE(prompts.size() >= 4);
  const uint64_t target = soak_tokens();

  // ar's continuation of each prompt, as long as the context allows for the largest tree below
  // (generate() refuses a length whose last step could overrun the KV cache).
  EngineOptions ao;
  Engine ar(ctx, model, nullptr, nullptr, ao);
  std::map<size_t, std::vector<uint32_t>> want;
  auto fill_length = [&](const Engine& e, const std::vector<uint32_t>& p) {
    uint32_t n = model.capacity() - uint32_t(p.size());
    for (;; --n) {
      try {
        e.check_fits(p, n);
        return n;
      } catch (const Error&) {
        REQUIRE(n > 1);
      }
    }
  };

  for (Strategy s : {Strategy::AR, Strategy::Single1, Strategy::Single2, Strategy::Route, Strategy::Merge,
                     Strategy::MergeTrie}) {
    EngineOptions o;
    o.strategy = s;
    o.depth = 5, o.topk = 4, o.budget = 12;
    Engine e(ctx, model, &demo.head1, &demo.head2, o);
    // Warm-up: a short run of every prompt, so that the driver has compiled every pipeline
    // variant the prompts' prefill shapes need before the baseline (a CPU driver's compiled
    // code and its threads' allocator arenas land in this process's RSS, once).
    for (const auto& p : prompts) (void)e.generate(p, 2);
    uint64_t generated = 0, steps = 0, rounds = 0, device0 = 0, host0 = 0;
    for (size_t i = 0; generated < target; i = (i + 1) % prompts.size(), ++rounds) {
      const auto& p = prompts[i];
      const uint32_t n = std::min(fill_length(e, p), fill_length(ar, p));
      if (!want.count(i) || want[i].size() < n) want[i] = ar.generate(p, n).tokens;
      GenerateStats st = e.generate(p, n);
      const std::vector<uint32_t> expect(want[i].begin(), want[i].begin() + n);
      REQUIRE_MESSAGE(st.tokens == expect, std::string(strategy_name(s)) << ": prompt " << i << " in round " << rounds);
      generated += st.tokens.size(), steps += st.steps;
      if (rounds == 0) device0 = ctx.allocated_bytes(), host0 = resident_bytes();
    }
    const uint64_t device1 = ctx.allocated_bytes(), host1 = resident_bytes();
    MESSAGE(std::string(strategy_name(s)) << ": " << generated << " tokens in " << rounds << " context fills, tau "
                             << double(generated - rounds) / double(std::max<uint64_t>(1, steps)) << "; device memory "
                             << device0 << " -> " << device1 << " bytes, host RSS " << (host0 >> 10) << " -> "
                             << (host1 >> 10) << " KiB");
    CHECK(device1 == device0);
    // Host RSS may move by allocator noise; a leak per step would be visible at this length
    // (steps per soak >= 1,000 at the default size).
    CHECK(host1 < host0 + (8u << 20));
  }
}
