#!/usr/bin/python3
"""Plot `vkspec bench --json` output, one line per strategy (and per top-k when the run measured
several, solid for the first, dashed for the next): tau vs budget per head, and tau and
tokens/s vs nodes verified per step (DESIGN.md §9: merge with B/2 per head verifies as many nodes
as a single head with B, so strategies are compared at equal verify cost on that axis).

Usage: /usr/bin/python3 tools/plot_bench.py bench.json out.png
(Debian's python3-matplotlib; `ar` has no budget and is drawn as a horizontal reference line.)
"""
import os
import sys

from compare_bench import read_json  # tools/, beside this script

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    # The output first: matplotlib adds .png to a name without a known extension (a folder given as
    # the output became FOLDER.png), and an input given twice would be overwritten.
    if os.path.isdir(out):
        sys.exit(f"{out} is a directory; give an output file name ending in .png, .svg or .pdf")
    if not out.lower().endswith((".png", ".svg", ".pdf")):
        sys.exit(f"{out}: give an output file name ending in .png, .svg or .pdf")
    if not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        sys.exit(f"{out}: no such folder")
    data = read_json(src)
    if isinstance(data, dict) and data.get("schema") == "vkspec-bench/1":
        sys.exit(f"{src} is a `bench --suite` result: plot it with tools/compare_bench.py --png")
    if not isinstance(data, dict) or not isinstance(data.get("results"), list) or "device" not in data:
        sys.exit(f"{src}: not `vkspec bench --json` output (an object with device and results)")
    try:
        plot(data, out)
    except (KeyError, TypeError, ValueError) as e:
        sys.exit(f"{src}: lacks a field of `vkspec bench --json` output ({type(e).__name__}: {e})")
    except OSError as e:
        sys.exit(f"{out}: cannot write: {e}")


def plot(data, out):
    rows = [r for r in data["results"] if "error" not in r]  # configurations that could not run
    if not rows:
        raise ValueError("no configuration in it measured anything")
    strategies = []
    for r in rows:
        if r["strategy"] not in strategies:
            strategies.append(r["strategy"])
    topks = sorted({r.get("topk", 0) for r in rows if r["strategy"] != "ar"})
    styles = ("-", "--", ":", "-.")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    panels = ((axes[0], "budget", "draft budget per head (B)", "tau", "tau (tokens per verifier pass)"),
              (axes[1], "nodes_per_step", "nodes verified per step", "tau", "tau (tokens per verifier pass)"),
              (axes[2], "nodes_per_step", "nodes verified per step", "tokens_per_s", "tokens/s"))
    for ax, xkey, xlabel, key, label in panels:
        for i, s in enumerate(strategies):
            if s == "ar":
                ar = [r[key] for r in rows if r["strategy"] == s]
                ax.axhline(ar[0], color="black", linestyle="--", linewidth=1, label="ar")
                continue
            for j, k in enumerate(topks):
                pts = sorted((r[xkey], r[key]) for r in rows if r["strategy"] == s and r.get("topk", 0) == k)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=f"C{i}",
                            linestyle=styles[j % len(styles)], label=s if len(topks) == 1 else f"{s} top-k {k}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"vkspec bench on {data['device']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
