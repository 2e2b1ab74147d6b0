#!/usr/bin/python3
"""Held-out loss (nats/byte) of the verifier with the exported (f16-rounded) weights.

1024 evenly spaced windows of 257 bytes over work/heldout.bin; reports the mean loss over
all 256 predicted positions and over positions 128..255 (>=128 bytes of context).
Writes work/verifier_eval.json.
"""
import json, os, sys
import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model import Verifier

WORK = os.environ.get("TRAIN_WORK", os.path.join(HERE, "work"))
s = torch.load(os.path.join(WORK, "verifier.pt"))
m = Verifier(s["cfg"])
m.load_state_dict({k: (t.half().float() if t.dim() >= 2 else t) for k, t in s["model"].items()})
m.eval()
held = np.fromfile(os.path.join(WORK, "heldout.bin"), dtype=np.uint8)
N, T = 1024, 256
stride = (len(held) - T - 1) // N
xs = torch.from_numpy(np.stack([held[i * stride:i * stride + T + 1] for i in range(N)]).astype(np.int64))
tot = torch.zeros(T)
with torch.no_grad():
    for i in range(0, N, 32):
        x = xs[i:i + 32]
        l = F.cross_entropy(m(x[:, :-1]).transpose(1, 2), x[:, 1:], reduction="none")
        tot += l.sum(0)
tot /= N
res = {"windows": N, "window": T, "heldout_nats_per_byte_all_positions": tot.mean().item(),
       "heldout_nats_per_byte_pos128_255": tot[128:].mean().item(),
       "params": sum(p.numel() for p in m.parameters()), "steps": s["steps"],
       "train_seconds": round(s["train_seconds"], 1)}
print(json.dumps(res, indent=1))
with open(os.path.join(WORK, "verifier_eval.json"), "w") as f:
    json.dump(res, f, indent=1)
