#!/usr/bin/python3
"""Plot `vkspec bench --json` output: tau vs budget and tokens/s vs budget, one line per strategy.

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
    rows = data["results"]
    strategies = []
    for r in rows:
        if r["strategy"] not in strategies:
            strategies.append(r["strategy"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, label in ((axes[0], "tau", "tau (tokens per verifier pass)"), (axes[1], "tokens_per_s", "tokens/s")):
        for s in strategies:
            pts = sorted((r["budget"], r[key]) for r in rows if r["strategy"] == s)
            if s == "ar":
                ax.axhline(pts[0][1], color="black", linestyle="--", linewidth=1, label="ar")
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=s)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("draft budget per head (B)")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"vkspec bench on {data['device']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
