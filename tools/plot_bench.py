#!/usr/bin/python3
"""Plot `vkspec bench --json` output, one line per strategy (and per top-k when the run measured
several, solid for the first, dashed for the next): tau vs budget per head, and tau and
tokens/s vs nodes verified per step (DESIGN.md §9: merge with B/2 per head verifies as many nodes
as a single head with B, so strategies are compared at equal verify cost on that axis).

Usage: /usr/bin/python3 tools/plot_bench.py bench.json out.png
(Debian's python3-matplotlib; `ar` has no budget and is drawn as a horizontal reference line.)
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        data = json.load(f)
    rows = [r for r in data["results"] if "error" not in r]  # configurations that could not run
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
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
