#!/usr/bin/python3
"""CTest `bench_suite`: `vkspec bench --suite quick` end to end.

- one run writes --json and --md, taking over a lock file left by a dead process; a second run
  started meanwhile on the same device is refused, naming the first run's PID;
- the JSON has schema vkspec-bench/1, the build, device and host records, every figure's unit,
  every stat's fields, and flags exactly the figures whose spread exceeds 10%;
- the markdown holds the same numbers as the JSON (parsed back, to the printed precision), and
  `--from-json` renders the identical markdown;
- tools/compare_bench.py renders two files into one table (a column per device) and a PNG.

Usage: bench_suite_test.py VKSPEC_BINARY SOURCE_DIR
"""
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import time

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what, file=sys.stderr)


def is_stat(v):
    return isinstance(v, dict) and "mean" in v and "sd" in v


STAT_KEYS = {"mean", "sd", "n", "values", "unreliable"}
# Numbers that are counts or settings, not measured figures with a unit.
COUNTS = {"rows", "cols", "batch", "budget", "weight_copies", "prompts", "depth", "topk", "temperature", "reps",
          "warmup", "matmul_reps", "max_relative_sd", "min_timer_ticks", "kv_length", "cpus", "online_cpus", "index"}


def q4_k_m_bytes(C=512, L=8, F=1408, V=32000):
    """Bytes of tiny-512x8-q4_K_M's tensors by llama.cpp's Q4_K_M rules (llama_tensor_get_type):
    q6_K for output.weight and for attn_v / ffn_down in the "more bits" layers, q4_K elsewhere,
    and where a row is no multiple of 256, q5_0 for q4_K and q8_0 for q6_K."""
    block = {"q4_K": (256, 144), "q6_K": (256, 210), "q5_0": (32, 22), "q8_0": (32, 34)}

    def mat(k, n, t):
        if k % 256:
            t = {"q4_K": "q5_0", "q6_K": "q8_0"}[t]
        elems, size = block[t]
        return n * k // elems * size

    def more_bits(i):
        return i < L // 8 or i >= 7 * L // 8 or (i - L // 8) % 3 == 2

    total = mat(C, V, "q4_K") + mat(C, V, "q6_K") + 4 * C  # token_embd, output, output_norm
    for i in range(L):
        hi = "q6_K" if more_bits(i) else "q4_K"
        total += 3 * mat(C, C, "q4_K") + mat(C, C, hi) + 2 * mat(C, F, "q4_K") + mat(F, C, hi) + 2 * 4 * C
    return total


def check_schema(j):
    check(j.get("schema") == "vkspec-bench/1", "schema is vkspec-bench/1")
    check(j.get("suite") == "quick", "suite recorded")
    b = j.get("build", {})
    check(re.fullmatch(r"\d+\.\d+\.\d+", b.get("vkspec_version", "")) is not None, "vkspec version x.y.z")
    check(re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?|unknown", b.get("git_commit", "")) is not None,
          f"git commit recorded ({b.get('git_commit')})")
    d = j.get("device", {})
    for k in ("name", "type", "driver", "driver_info", "api_version", "fp16_arithmetic", "int8_arithmetic",
              "subgroup_size", "min_subgroup_size", "max_subgroup_size", "max_shared_memory", "timestamp_period_ns"):
        check(k in d, f"device.{k} present")
    h = j.get("host", {})
    for k in ("cpu_governor", "energy_performance_preference", "LP_NUM_THREADS", "loadavg"):
        check(k in h, f"host.{k} present")
    # How idle CPUs wait, read from the same files the host has (the runs' speed depends on it).
    idle = h.get("cpuidle", {})
    def sysfs(path):
        try:
            return open(path).readline().strip() or "unavailable"
        except OSError:
            return "unavailable"
    check(idle.get("driver") == sysfs("/sys/devices/system/cpu/cpuidle/current_driver"), f"host.cpuidle.driver ({idle})")
    check(idle.get("halt_poll_ns") == sysfs("/sys/module/haltpoll/parameters/guest_halt_poll_ns"),
          f"host.cpuidle.halt_poll_ns ({idle})")
    flags = [l for l in open("/proc/cpuinfo") if l.startswith("flags")]
    check(idle.get("virtualized") == bool(flags and " hypervisor" in flags[0]), "host.cpuidle.virtualized")
    units = j.get("units", {})

    # Every stat complete, with the spread flag where (and only where) sd/mean > 10%; every number
    # outside a stat either a count/setting or a unit-named figure.
    def walk(v, key, path):
        if is_stat(v):
            check(set(v) == STAT_KEYS, f"{path}: stat fields {sorted(v)}")
            check(key in units, f"{path}: unit of '{key}' named in units")
            vals = v["values"]
            check(len(vals) == v["n"] == j["settings"]["reps" if not path.startswith(".matmul") else "matmul_reps"],
                  f"{path}: n equals the repetitions")
            if vals:
                mean = sum(vals) / len(vals)
                check(abs(mean - v["mean"]) <= 1e-9 * max(1, abs(mean)), f"{path}: mean of values")
                spread = any("spread" in w for w in v["unreliable"])
                if mean and len(vals) > 1:
                    check(spread == (v["sd"] / abs(mean) > 0.10), f"{path}: flagged iff sd/mean > 10%")
            return
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ("units", "device", "host", "host_after", "build", "settings"):
                    continue
                walk(x, k, f"{path}.{k}")
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, key, f"{path}[{i}]")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            check(key in units or key in COUNTS, f"{path}: number '{key}' has a named unit")

    walk(j, "", "")
    # The summary names every flagged figure once, each apart from its siblings (top-k included),
    # and no key twice in one name.
    reasons = []
    def flagged(v, key):
        if is_stat(v):
            reasons.extend(f"{key}: {w}" for w in v["unreliable"])
        elif isinstance(v, dict):
            for k, x in v.items():
                flagged(x, k)
        elif isinstance(v, list):
            for x in v:
                flagged(x, key)
    for part in ("matmul", "models", "verify_cost", "speculative"):
        flagged(j.get(part), part)
    summary = j.get("unreliable", [])
    check(len(summary) == len(reasons), f"unreliable summary has one line per flag ({len(summary)} vs {len(reasons)})")
    check(len(set(summary)) == len(summary), "unreliable summary lines are distinct")
    for line in summary:
        keys = re.findall(r" (\w+)=", line.split(":")[0])
        check(len(keys) == len(set(keys)), f"no key named twice in '{line}'")
        if line.startswith("speculative"):
            check(" topk=" in line, f"a speculative flag names its top-k: '{line}'")
    mm = j["matmul"]["results"]
    types = {r["dtype"] for r in mm}
    check({"f16", "q8_0", "q4_0", "q4_k", "q6_k"} <= types, f"matmul types {sorted(types)}")
    for t in types:
        check(sorted(r["batch"] for r in mm if r["dtype"] == t) == [1, 2, 4, 8, 16, 32, 64], f"matmul {t} batches")
    tests = [t["test"] for m in j["models"] for t in m["tests"]]
    check(tests == ["pp128", "tg32"] * 2, f"quick: pp128 and tg32 on each built-in model ({tests})")
    check([m["model"] for m in j["models"]] == ["tiny-512x8", "tiny-512x8-q4_K_M"], "the shape names are in the output")
    check(j["models"][1]["size_bytes"] == q4_k_m_bytes(), f"tiny-512x8-q4_K_M is llama.cpp's Q4_K_M mix "
          f"({j['models'][1]['size_bytes']} bytes, the mix is {q4_k_m_bytes()})")
    for m in j["models"]:
        for t in m["tests"]:
            check("tokens_per_s" in t and t["tokens_per_s"]["mean"] > 0, f"{t['test']} measured")
        # Weights stay at their file types on the device: within 10% of the file's tensor bytes,
        # and weights + KV within 10% of file + KV (the Q4_K_M mix included, nothing expanded).
        dm = m.get("device_memory", {})
        w, kv = dm.get("weight_bytes", 0), dm.get("kv_bytes", 0)
        check(w > 0 and kv > 0 and dm.get("scratch_bytes", 0) > 0 and dm.get("kv_context", 0) > 0,
              f"{m['model']}: device memory reported ({dm})")
        check(0.9 * m["size_bytes"] <= w <= 1.1 * m["size_bytes"] and w + kv <= 1.1 * (m["size_bytes"] + kv),
              f"{m['model']}: device weights {w} B against {m['size_bytes']} B in the file, KV {kv} B")
    # The models run interleaved, and each test past the first model's carries its ratio to the
    # first model's figure of the same repetition.
    first = {t["test"]: t["tokens_per_s"]["values"] for t in j["models"][0]["tests"]}
    check(all("relative" not in t for t in j["models"][0]["tests"]), "the first model has no ratio to itself")
    for m in j["models"][1:]:
        for t in m["tests"]:
            rel = t.get("relative")
            check(rel is not None and rel["to"] == j["models"][0]["model"], f"{m['model']} {t['test']}: relative to the first model")
            if rel:
                want = [a / b for a, b in zip(t["tokens_per_s"]["values"], first[t["test"]])]
                got = rel["ratio"]["values"]
                check(len(got) == len(want) == j["settings"]["reps"] and
                      all(abs(g - w) <= 1e-9 * max(1.0, abs(w)) for g, w in zip(got, want)),
                      f"{m['model']} {t['test']}: ratio per repetition {got} vs {want}")
    strategies = [r["strategy"] for r in j["speculative"]["results"]]
    check(sorted(set(strategies)) == sorted(["ar", "single1", "single2", "route", "merge", "merge-trie"]),
          f"every strategy ({strategies})")
    # Every strategy at top-k 4 and budget 8 and at top-k 1, whose chain of `depth` nodes holds
    # at most that many per head: budget 8 lowered to the depth, each configuration once.
    depth = j["speculative"]["depth"]
    configs = [(r["strategy"], r["budget"], r["topk"]) for r in j["speculative"]["results"]]
    spec = ["single1", "single2", "route", "merge", "merge-trie"]
    check(configs == [("ar", 0, 0)] + [(s, 8, 4) for s in spec] + [(s, depth, 1) for s in spec],
          f"ar, then each strategy at top-k 4 budget 8 and top-k 1 budget {depth} ({configs})")
    for r in j["speculative"]["results"]:
        check("error" not in r, f"{r['strategy']} ran ({r.get('error')})")
        if "error" in r:
            continue
        check(r["tau"]["mean"] >= 1.0, f"{r['strategy']} τ >= 1")
        check(r["dispatches_per_step"] > 0 and r["host_waits_per_step"] > 0, f"{r['strategy']} dispatches, waits")
        if r["strategy"] == "ar":
            check(all(abs(x - 1.0) < 1e-12 for x in r["speedup"]["values"]), "ar's speedup is 1 in every repetition")
            check(r["tau"]["mean"] == 1.0 and r["nodes_per_step"] == 1, "ar verifies one node, τ 1")
    vc = j["verify_cost"]["results"]
    check([r["rows"] for r in vc] == [1, 2, 4, 8, 16, 32, 64], "c(N) at N = 1..64")
    check(all(abs(x - 1.0) < 1e-12 for x in vc[0]["cost_ratio"]["values"]), "c(1) = 1")


def md_tables(md):
    """Every markdown table: list of (header cells, rows of cells)."""
    tables, cur = [], None
    for line in md.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cur is None:
                cur = (cells, [])
                tables.append(cur)
            elif not all(re.fullmatch(r":?-+:?", c) for c in cells):
                cur[1].append(cells)
        else:
            cur = None
    return tables


def num_pair(cell):
    m = re.match(r"^(-?[0-9.]+) ± ([0-9.]+)( †\d*)?$", cell)
    return (float(m.group(1)), float(m.group(2)), bool(m.group(3))) if m else None


def same(cell, stat, digits, what):
    p = num_pair(cell)
    check(p is not None, f"md {what}: '{cell}' is 'mean ± sd'")
    if p is None:
        return
    tol = 0.5 * 10 ** -digits + 1e-9
    check(abs(p[0] - stat["mean"]) <= tol and abs(p[1] - stat["sd"]) <= tol,
          f"md {what}: {cell} vs json {stat['mean']} ± {stat['sd']}")
    check(p[2] == bool(stat["unreliable"]), f"md {what}: footnote mark iff flagged")


def check_markdown(md, j):
    check(md.startswith("**Device:** " + j["device"]["name"]), "md starts with the device line")
    check(j["build"]["git_commit"] in md, "md names the commit")
    tables = md_tables(md)
    check(len(tables) == 5, f"md has 5 tables (pp/tg, speculative, GB/s, GFLOP/s, c(N)), found {len(tables)}")
    if len(tables) != 5:
        return
    (h, rows) = tables[0]
    check(h == ["model", "size", "params", "backend", "test", "t/s"], f"llama-bench columns {h}")
    want = [(m, t) for m in j["models"] for t in m["tests"]]
    check(len(rows) == len(want), "one pp/tg row per test")
    for cells, (m, t) in zip(rows, want):
        check(cells[0] == f"{m['model']} {m['type']}" and cells[4] == t["test"], f"row {cells[:5]}")
        check(cells[1] == f"{m['size_bytes'] / 1048576:.2f} MiB" and cells[2] == f"{m['params'] / 1e6:.2f} M",
              f"size and params {cells[1:3]}")
        same(cells[5], t["tokens_per_s"], 2, f"{t['test']} t/s")
    for m in j["models"][1:]:
        for t in m["tests"]:
            what = f"{m['model']} {t['test']}"
            cell = re.search(re.escape(what) + r" ([0-9.]+ ± [0-9.]+(?: †[0-9]+)?)", md)
            check(cell is not None, f"md gives {what}'s ratio to the first model")
            if cell:
                same(cell.group(1), t["relative"]["ratio"], 2, f"{what} ratio")
    for m in j["models"]:
        dm = m.get("device_memory", {})
        want = f"{m['model']} weights {dm.get('weight_bytes', 0) / 1048576:.2f} MiB ("
        check("**Device memory:**" in md and want in md, f"md gives {m['model']}'s device memory ({want})")
    (h, rows) = tables[1]
    check(h == ["strategy", "budget", "top-k", "τ", "t/s", "speedup", "nodes/step", "dispatches/step", "waits/step"],
          f"speculative columns {h}")
    res = j["speculative"]["results"]
    check(len(rows) == len(res), "one speculative row per configuration")
    for cells, r in zip(rows, res):
        check(cells[0] == r["strategy"] and int(cells[1]) == r["budget"] and int(cells[2]) == r["topk"],
              f"speculative row {cells[:3]}")
        same(cells[3], r["tau"], 2, f"{r['strategy']} τ")
        same(cells[4], r["tokens_per_s"], 2, f"{r['strategy']} t/s")
        same(cells[5], r["speedup"], 2, f"{r['strategy']} speedup")
        check(int(cells[6]) == r["nodes_per_step"] and int(cells[7]) == r["dispatches_per_step"], "nodes, dispatches")
        check(abs(float(cells[8]) - r["host_waits_per_step"]) <= 0.005 + 1e-9, "waits/step")
    for (h, rows), key in ((tables[2], "gb_per_s"), (tables[3], "gflop_per_s")):
        batches = [int(c[2:]) for c in h[1:]]
        check(batches == [1, 2, 4, 8, 16, 32, 64], f"matmul batch columns {h}")
        for cells in rows:
            for B, c in zip(batches, cells[1:]):
                r = [x for x in j["matmul"]["results"] if x["dtype"] == cells[0] and x["batch"] == B]
                check(len(r) == 1, f"matmul {cells[0]} B={B} in json")
                if r:
                    same(c, r[0][key], 2, f"matmul {cells[0]} B={B} {key}")
        check(len(rows) == len({x["dtype"] for x in j["matmul"]["results"]}), "one matmul row per type")
    (h, rows) = tables[4]
    vc = j["verify_cost"]["results"]
    check([int(x) for x in h[1:]] == [r["rows"] for r in vc], "c(N) columns")
    check(rows[0][0] == "µs/forward" and rows[1][0] == "c(N)", "c(N) rows")
    for c, r in zip(rows[0][1:], vc):
        same(c, r["us_per_forward"], 1, f"forward N={r['rows']} µs")
    for c, r in zip(rows[1][1:], vc):
        same(c, r["cost_ratio"], 2, f"c({r['rows']})")
    marks = len(re.findall(r" †\d+(?: \||,|$)", md, re.M))  # table cells and the ratio line
    notes = len(re.findall(r"^- †\d+ ", md, re.M))
    check(marks == notes, f"every footnote mark has its note ({marks} marks, {notes} notes)")


def main():
    vkspec, src = sys.argv[1], sys.argv[2]
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, XDG_RUNTIME_DIR=tmp)  # this test's lock, apart from real runs
        jpath, mdpath, errpath = (os.path.join(tmp, n) for n in ("quick.json", "quick.md", "stderr.txt"))
        # A lock file left by a dead process (a PID that no longer runs) is taken over.
        devs = json.loads(subprocess.run([vkspec, "devices", "--json"], capture_output=True, text=True, env=env).stdout)
        dev = next(d for d in devs["devices"] if d["chosen"])
        key = "".join(c if c.isalnum() else "_" for c in dev["name"])[:48]
        lock = os.path.join(tmp, f"vkspec-bench-{key}-{dev['pipeline_cache_uuid'].replace('-', '')}.lock")
        dead = subprocess.Popen(["true"])
        dead.wait()
        with open(lock, "w") as f:
            f.write(f"{dead.pid}\n")
        with open(errpath, "w") as err:
            first = subprocess.Popen([vkspec, "bench", "--suite", "quick", "--json", jpath, "--md", mdpath],
                                     cwd=src, env=env, stdout=subprocess.DEVNULL, stderr=err)
            # The lock is taken before the first progress line.
            while first.poll() is None and "[bench" not in open(errpath).read():
                time.sleep(0.1)
            second = subprocess.run([vkspec, "bench", "--suite", "quick", "--json", os.path.join(tmp, "x.json")],
                                    cwd=src, env=env, capture_output=True, text=True, timeout=60)
            check(second.returncode == 1, f"a second concurrent run is refused (exit {second.returncode})")
            check("another benchmark is running" in second.stderr and f"pid {first.pid}" in second.stderr,
                  f"the refusal names the running PID {first.pid}: {second.stderr.strip()}")
            check(not os.path.exists(os.path.join(tmp, "x.json")), "the refused run wrote nothing")
            check(open(lock).read().strip() == str(first.pid), "the stale lock now holds the running PID")
            rc = first.wait(timeout=600)
        log = open(errpath).read()
        check(rc == 0, f"bench --suite quick exits 0 (got {rc}): {log[-2000:]}")
        if rc != 0:
            return 1
        print(f"suite ran in {time.time() - t0:.0f} s", file=sys.stderr)
        j = json.load(open(jpath))
        md = open(mdpath).read()
        check_schema(j)
        check_markdown(md, j)
        again = subprocess.run([vkspec, "bench", "--from-json", jpath, "--md"], capture_output=True, text=True)
        check(again.returncode == 0 and again.stdout == md, "--from-json renders the same markdown")
        bad = os.path.join(tmp, "bad.json")
        json.dump({"schema": "other"}, open(bad, "w"))
        r = subprocess.run([vkspec, "bench", "--from-json", bad, "--md"], capture_output=True, text=True)
        check(r.returncode == 1 and "schema vkspec-bench/1" in r.stderr, "a foreign JSON is refused by schema")
        # The idle record is on the build line; a file written before it existed renders without it.
        idle = j["host"]["cpuidle"]
        check(f" · idle: {idle['driver']}/{idle['governor']}" in md, "md names how idle CPUs wait")
        older = copy.deepcopy(j)
        del older["host"]["cpuidle"]
        json.dump(older, open(bad, "w"))
        r = subprocess.run([vkspec, "bench", "--from-json", bad, "--md"], capture_output=True, text=True)
        check(r.returncode == 0 and r.stdout == re.sub(r" · idle: [^·]*(?= · )", "", md, count=1),
              "a file without the idle record renders the rest as before")
        # Counts are shown as written, never narrowed; a count that is no integer is refused.
        for topk, ok in ((4294967296, True), ("4", False), (2.5, False)):
            edited = copy.deepcopy(j)
            edited["speculative"]["results"][1]["topk"] = topk
            json.dump(edited, open(bad, "w"))
            r = subprocess.run([vkspec, "bench", "--from-json", bad, "--md"], capture_output=True, text=True)
            if ok:
                check(r.returncode == 0 and f"| {topk} |" in r.stdout, f"top-k {topk} rendered as written")
            else:
                check(r.returncode == 1 and "a count must be an integer" in r.stderr, f"top-k {topk!r} refused")
        # Found by fuzz_bench_json: a device or matmul count too large for any integer type (read
        # as a float) was converted to unsigned, undefined behaviour; now refused like a float.
        for where, value in (("max_subgroup_size", 8.9e91), ("max_shared_memory", -1.5), ("batch", 1e30)):
            edited = copy.deepcopy(j)
            if where == "batch":
                edited["matmul"]["results"][0]["batch"] = value
            else:
                edited["device"][where] = value
            json.dump(edited, open(bad, "w"))
            r = subprocess.run([vkspec, "bench", "--from-json", bad, "--md"], capture_output=True, text=True)
            check(r.returncode == 1 and "a count must be an integer" in r.stderr, f"{where} {value!r} refused")

        # A second device (the same run under another name, its figures halved) and the comparison.
        other = copy.deepcopy(j)
        other["device"]["name"] = "Example GPU"
        for m in other["models"]:
            for t in m["tests"]:
                t["tokens_per_s"]["mean"] /= 2
        opath, png, cmp_md = (os.path.join(tmp, n) for n in ("other.json", "cmp.png", "cmp.md"))
        json.dump(other, open(opath, "w"))
        r = subprocess.run(["/usr/bin/python3", os.path.join(src, "tools", "compare_bench.py"), jpath, opath,
                            "--png", png, "--md", cmp_md], capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"compare_bench.py runs: {r.stderr[-1500:]}")
        if r.returncode == 0:
            data = open(png, "rb").read()
            check(len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n", "the PNG exists and is a PNG")
            tables = md_tables(open(cmp_md).read())
            check(len(tables) == 1, "compare renders one table")
            h, rows = tables[0]
            check(h == ["figure", j["device"]["name"], "Example GPU"], f"one column per device: {h}")
            check(all(len(c) == 3 for c in rows), "every row has a cell per device")
            pp = [c for c in rows if c[0] == "tiny-512x8 f16 pp128 t/s"]
            check(len(pp) == 1, "pp128 row in the comparison")
            if pp:
                a, b = num_pair(pp[0][1]), num_pair(pp[0][2])
                check(a and b and abs(b[0] - round(j["models"][0]["tests"][0]["tokens_per_s"]["mean"] / 2, 2)) < 0.011,
                      f"the comparison shows each file's own figure ({pp[0]})")
            for k in (4, 1):
                check(any(c[0].startswith("merge B=") and c[0].endswith(f" k={k} speedup") for c in rows),
                      f"merge speedup rows at top-k {k}")
    print(f"{len(FAILS)} failure(s), {time.time() - t0:.0f} s", file=sys.stderr)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
