#!/usr/bin/python3
"""Pick 24 deterministic benchmark prompts from the held-out split -> models/prompts.txt.

Candidates: held-out lines of 40-80 bytes, printable ASCII only (no tabs), starting
with an uppercase letter, at least 6 spaces, no reST markup characters (` * | = _ : ..),
deduplicated in order of appearance; then 24 evenly spaced picks.
"""
import os, re

HERE = os.path.dirname(os.path.abspath(__file__))
held = open(os.path.join(HERE, "work", "heldout.bin"), "rb").read()
seen, cands = set(), []
for line in held.split(b"\n"):
    s = line.strip()
    if not (40 <= len(s) <= 80) or s in seen:
        continue
    if not all(32 <= c < 127 for c in s) or not (65 <= s[0] <= 90):
        continue
    if s.count(b" ") < 6 or re.search(rb"[`*|=_:<>\[\]{}\\#]|\.\.", s):
        continue
    seen.add(s)
    cands.append(s)
N = 24
step = len(cands) / N
picks = [cands[int(i * step + step / 2)] for i in range(N)]
out = os.path.join(HERE, "..", "..", "models", "prompts.txt")
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "wb") as f:
    f.write(b"\n".join(picks) + b"\n")
print(f"{len(cands)} candidates; wrote {out}")
