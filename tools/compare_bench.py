#!/usr/bin/python3
"""Compare `vkspec bench --suite ... --json` results across devices.

Usage: /usr/bin/python3 tools/compare_bench.py A.json B.json ... [--png OUT.png] [--md OUT.md]

Prints (or writes with --md) one markdown table with a column per device: pp/tg tokens/s per
model, τ / tokens/s / speedup per strategy, budget and top-k, matmul GB/s per type at B = 1, 16, 64,
and c(16). With --png (Debian's python3-matplotlib) draws τ and speedup per strategy and matmul
GB/s by batch, one series per device. Figures flagged unreliable in a file carry a †.
"""
import json
import math
import os
import sys

SCHEMA = "vkspec-bench/1"


def read_json(path):
    """The JSON in `path`, or an exit naming the file and what is wrong (also for tools/plot_bench.py)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError) as e:
        sys.exit(f"{path}: cannot read: {e}")
    except json.JSONDecodeError as e:
        sys.exit(f"{path}: not JSON: {e}")


def load(path):
    data = read_json(path)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        sys.exit(f"{path}: not a `vkspec bench --suite` result (schema {SCHEMA})")
    try:
        rows_of(data)
        data["device"]["name"], data["build"]["git_commit"], data["suite"]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        sys.exit(f"{path}: lacks a field of schema {SCHEMA} ({type(e).__name__}: {e})")
    return data


def label(data, path, seen):
    """Device name, made unique when two files come from the same device (the path, then a count)."""
    name = data["device"]["name"]
    if name in seen:
        name = f"{name} ({path})"
    base, k = name, 2
    while name in seen:
        name, k = f"{base} #{k}", k + 1
    seen.add(name)
    return name


def finite_stat(stat):
    """A {mean, sd} stat with finite numbers, else None (shown as –, left out of plots)."""
    try:
        ok = stat is not None and all(math.isfinite(float(stat[k])) for k in ("mean", "sd"))
    except (KeyError, TypeError, ValueError):
        ok = False
    return stat if ok else None


def cell(stat, digits=2):
    stat = finite_stat(stat)
    if stat is None:
        return "–"
    mark = " †" if stat.get("unreliable") else ""
    return f"{stat['mean']:.{digits}f} ± {stat['sd']:.{digits}f}{mark}"


def config_of(data, r, sep=" "):
    """A speculative row's label: strategy, budget and top-k (files from before the suite ran
    several top-ks give one top-k for the whole table)."""
    k = r.get("topk", data["speculative"].get("topk", 0))
    return f"{r['strategy']}{sep}B={r['budget']} k={k}"


def rows_of(data):
    """(row label, stat) for every figure the comparison table shows, in order."""
    out = []
    for m in data["models"]:
        for t in m["tests"]:
            out.append((f"{m['model']} {m['type']} {t['test']} t/s", t.get("tokens_per_s")))
            if "relative" in t:  # files from 2026-12-03 on: the ratio to the first model, side by side
                out.append((f"{m['model']} {m['type']} {t['test']} / {t['relative']['to']}", t["relative"].get("ratio")))
    for r in data["speculative"]["results"]:
        name = r["strategy"] if r["strategy"] == "ar" else config_of(data, r)
        for key, unit in (("tau", "τ"), ("tokens_per_s", "t/s"), ("speedup", "speedup")):
            if key == "speedup" and r["strategy"] == "ar":
                continue
            out.append((f"{name} {unit}", r.get(key)))
    mm = data["matmul"]
    for r in mm["results"]:
        if r["batch"] in (1, 16, 64):
            out.append((f"matmul {r['dtype']} {mm['rows']}×{mm['cols']} B={r['batch']} GB/s", r["gb_per_s"]))
    for r in data["verify_cost"]["results"]:
        if r["rows"] == 16:
            out.append((f"c(16) {data['verify_cost']['model']}", r["cost_ratio"]))
    return out


def table(files):
    names = [n for n, _ in files]
    order, by_dev = [], []
    for _, data in files:
        rows = dict(rows_of(data))
        by_dev.append(rows)
        for k, _ in rows_of(data):
            if k not in order:
                order.append(k)
    lines = ["| figure | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names)]
    for k in order:
        lines.append(f"| {k} | " + " | ".join(cell(rows.get(k)) for rows in by_dev) + " |")
    lines.append("")
    for name, data in files:
        b = data["build"]
        lines.append(f"- {name}: {data['device']['driver']} ({data['device']['driver_info']}), Vulkan "
                     f"{data['device']['api_version']}, vkspec {b['vkspec_version']} ({b['git_commit']}), "
                     f"suite {data['suite']}")
    return "\n".join(lines) + "\n"


def plot(files, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    types = []
    for _, data in files:
        for r in data["matmul"]["results"]:
            if r["dtype"] not in types:
                types.append(r["dtype"])
    ncols = max(2, min(4, len(types)))
    nrows = 1 + (len(types) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.4 * nrows), squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)
    width = 0.8 / len(files)
    configs = []
    for _, data in files:
        for r in data["speculative"]["results"]:
            if "error" in r or r["strategy"] == "ar":
                continue
            key = config_of(data, r, "\n")
            if key not in configs:
                configs.append(key)
    for ax, key, ylabel in ((axes[0][0], "tau", "τ (tokens per verifier pass)"),
                            (axes[0][1], "speedup", "speedup over ar")):
        ax.set_visible(True)
        for i, (name, data) in enumerate(files):
            vals = {config_of(data, r, "\n"): r[key] for r in data["speculative"]["results"]
                    if "error" not in r and r["strategy"] != "ar"}
            xs = [j + (i - (len(files) - 1) / 2) * width for j in range(len(configs))]
            got = [finite_stat(vals.get(c)) for c in configs]
            ax.bar(xs, [v["mean"] if v else 0 for v in got], width,
                   yerr=[v["sd"] if v else 0 for v in got], label=name, capsize=2)
        if key == "speedup":
            ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
        ax.set_xticks(range(len(configs)))
        ax.set_xticklabels(configs, fontsize=6)
        ax.set_ylabel(ylabel)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    for k, t in enumerate(types):
        ax = axes[1 + k // ncols][k % ncols]
        ax.set_visible(True)
        for name, data in files:
            pts = sorted((r["batch"], finite_stat(r["gb_per_s"])["mean"]) for r in data["matmul"]["results"]
                         if r["dtype"] == t and finite_stat(r["gb_per_s"]))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch (rows)")
        ax.set_ylabel("GB/s")
        ax.set_title(f"matmul {t}", fontsize=9)
        ax.grid(True, alpha=0.3)
    fig.suptitle("vkspec bench --suite: " + " vs ".join(n for n, _ in files), fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def main(argv):
    paths, png, md = [], None, None
    i = 0
    while i < len(argv):
        if argv[i] in ("--png", "--md"):
            if i + 1 >= len(argv):
                sys.exit(f"{argv[i]} needs a file name")
            if argv[i] == "--png":
                png = argv[i + 1]
            else:
                md = argv[i + 1]
            i += 2
        elif argv[i] in ("-h", "--help"):
            print(__doc__)
            return
        elif argv[i].startswith("-") and not os.path.exists(argv[i]):
            sys.exit(f"unknown option {argv[i]} (--png OUT.png, --md OUT.md)")
        else:
            paths.append(argv[i])
            i += 1
    if not paths:
        sys.exit(__doc__)
    # The outputs are checked before any work: never one of the inputs, never a folder, and a
    # --png that names its format (matplotlib would add .png to a name without one).
    for opt, out in (("--md", md), ("--png", png)):
        if out is None:
            continue
        if os.path.isdir(out):
            sys.exit(f"{opt} {out} is a directory; give a file name")
        if not os.path.isdir(os.path.dirname(os.path.abspath(out))):
            sys.exit(f"{opt} {out}: no such folder")
        for p in paths:
            if os.path.exists(out) and os.path.exists(p) and os.path.samefile(out, p):
                sys.exit(f"{opt} {out} is one of the inputs: writing it would destroy it")
    if png and not png.lower().endswith(".png"):
        sys.exit(f"--png {png}: give a file name ending in .png")
    seen = set()
    files = []
    for p in paths:
        data = load(p)
        files.append((label(data, p, seen), data))
    suites = sorted({data["suite"] for _, data in files})
    if len(suites) > 1:
        print(f"warning: the files come from different suites ({', '.join(suites)}): their prompts, token counts "
              "and matmul shapes differ, so a row's figures are not comparable across them", file=sys.stderr)
    text = table(files)
    if md:
        try:
            with open(md, "w") as f:
                f.write(text)
        except OSError as e:
            sys.exit(f"--md {md}: cannot write: {e}")
    else:
        sys.stdout.write(text)
    if png:
        try:
            plot(files, png)
        except OSError as e:
            sys.exit(f"--png {png}: cannot write: {e}")


if __name__ == "__main__":
    main(sys.argv[1:])
