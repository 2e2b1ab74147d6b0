#!/usr/bin/python3
"""How much does seed 001's routing score know about which head the verifier will accept?

On evenly spaced held-out windows of each domain (work/heldout_{linux,python}.bin), with the
verifier's true features at depth 1 and the head's own feature at depth 2 (as train_heads.py's
`agreement`; the depth-2 input token is the text's, not the head's depth-1 draft, so r2 is the
teacher-forced approximation that function uses), every position t gives, per head h:
  c1, c2  the head's top-1 probabilities at depths 1 and 2,
  a_h     accepted draft tokens of its 2-chain against the verifier's argmax: r1 + r1·r2,
  mu_h    seed 001's score for that chain, mean(c1, c1·c2).
Printed per domain: each head's mean confidence against its accuracy (calibration), the mean
accepted length of head 1 alone, head 2 alone, routing by mu (seed 001), routing by mu times an
online estimate of each head's depth-1 agreement (an exponential average, alpha, of r1 — what
a runtime can observe every step, since the verifier's depth-1 token is always known), and the
oracle max(a_1, a_2).

Usage: OMP_NUM_THREADS=1 /usr/bin/python3 route_signal.py [windows per domain, default 128]
Needs work/verifier.pt, work/head{1,2}.pt and the held-out files (rebuild.sh writes them).
"""
import os, sys
import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_heads as th
from model import EagleHead

torch.set_num_threads(1)


@torch.no_grad()
def chains(v, heads, path, n, T=256):
    """Per head: (c1, c2, r1, r2) on n windows of `path`, each [n, T - 2]."""
    held = np.fromfile(path, dtype=np.uint8)
    stride = (len(held) - T) // n
    xs = torch.from_numpy(np.stack([held[i * stride:i * stride + T] for i in range(n)]).astype(np.int64))
    out = {k: [] for k in heads}
    for i in range(0, n, 16):
        x = xs[i:i + 16]
        f, vl = th.verifier_targets(v, x)
        vt = vl[:, 1:].argmax(-1)                      # the verifier's token after t + 1
        for k, h in heads.items():
            hh, lg = th.head_pass(h, v, x, f[:, :-1])
            _, lg2 = th.head_pass(h, v, x, torch.cat((f[:, :1], hh[:, :-1]), 1))
            c1, t1 = F.softmax(lg, -1).max(-1)
            c2, t2 = F.softmax(lg2, -1).max(-1)
            out[k].append(torch.stack((c1[:, :-1], c2[:, 1:], (t1 == vt)[:, :-1].float(),
                                       (t2 == vt)[:, 1:].float())))
    return {k: torch.cat(v_, 1) for k, v_ in out.items()}


def routed(a, s1, s2):
    return torch.where(s1 >= s2, a[1], a[2])


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    v, vcfg = th.load_verifier()
    heads = {}
    for k in (1, 2):
        h = EagleHead(th.head_cfg(vcfg))
        h.load_state_dict(torch.load(os.path.join(th.WORK, f"head{k}.pt"))["model"])
        h.eval()
        heads[k] = h
    for d in th.DOMAINS:
        ch = chains(v, heads, os.path.join(th.WORK, f"heldout_{d}.bin"), n)
        a, mu = {}, {}
        for k, (c1, c2, r1, r2) in ch.items():
            a[k] = r1 + r1 * r2
            mu[k] = (c1 + c1 * c2) / 2
            print(f"{d} head{k}: depth-1 confidence {c1.mean():.3f}, accuracy {r1.mean():.3f}; "
                  f"2-chain confidence {(c1 * c2).mean():.3f}, accepted {(r1 * r2).mean():.3f}")
        line = f"{d}: accepted per step  head1 {a[1].mean():.4f}  head2 {a[2].mean():.4f}  " \
               f"route(mu) {routed(a, mu[1], mu[2]).mean():.4f}"
        for alpha in (0.05, 0.25):
            q = {k: torch.full((a[1].shape[0],), 0.5) for k in heads}
            got = torch.empty_like(a[1])
            for t in range(a[1].shape[1]):
                got[:, t] = routed({k: a[k][:, t] for k in heads}, mu[1][:, t] * q[1], mu[2][:, t] * q[2])
                for k in heads:
                    q[k] = (1 - alpha) * q[k] + alpha * ch[k][2][:, t]
            line += f"  route(mu*q, alpha {alpha}) {got.mean():.4f}"
        print(line + f"  oracle {torch.maximum(a[1], a[2]).mean():.4f}")


if __name__ == "__main__":
    main()
