#!/usr/bin/python3
"""Train two EAGLE-1 draft heads by distillation from the frozen verifier (DESIGN.md §5).

Verifier: work/verifier.pt with its 2-D weights rounded to f16 (= what the GGUF holds).
  f_t     = verifier hidden state at t after the final norm
  head input at t = fc(concat(embed(tok_{t+1}), f_t))          (embedding first)
  h_t     = one Llama decoder layer (no input_layernorm, HF rotate_half RoPE,
            post_attention_layernorm before the SwiGLU MLP)
  logits  = verifier lm_head(h_t)   (no extra norm) -> distribution of tok_{t+2}
Loss per position t (targets from the verifier at position t+1):
  soft cross-entropy to softmax(lm_head(f_{t+1}))  +  VW * SmoothL1(h_t, f_{t+1})
plus the same loss on an "unrolled" second pass whose input features are the head's own
(detached) predictions (feature at s = h_{s-1}), weighted UW, so that drafting deeper
(feeding h back as the next feature) stays accurate.

Head 1: uniform weights, data stream seed 101.
Head 2: different data stream (seed 202), different init seed, and positions where
        head 1's top-1 differs from the verifier's top-1 are up-weighted by BOOST.

Training data: env HEAD_DATA selects the stream a head is trained on:
  all    (default) work/train.bin, both packages;
  linux  work/train_linux.bin  (linux-doc-6.1 part of train.bin, written by corpus.py);
  python work/train_python.bin (python3.11-doc part).
The held-out evaluation always uses work/heldout.bin (both domains), and also reports
agreement per domain on work/heldout_{linux,python}.bin when they exist.

Usage: OMP_NUM_THREADS=1 [HEAD_DATA=all|linux|python] /usr/bin/python3 train_heads.py {1|2}
       OMP_NUM_THREADS=1 /usr/bin/python3 train_heads.py eval
Outputs: work/head{1,2}.pt (+ resumable work/head{N}_ckpt.pt), work/heads_eval.json
"""
import json, math, os, sys, time
import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model import Verifier, EagleHead, optimize, resume, save_checkpoint

WORK = os.environ.get("TRAIN_WORK", os.path.join(HERE, "work"))
HP = dict(steps=int(os.environ.get("HEAD_STEPS", 3600)), batch=8, seq=256, lr=2e-3, min_lr=1e-4,
          warmup=50, wd=0.0, VW=0.5, UW=0.5, BOOST=3.0, ckpt_every=100, eval_windows=64,
          seeds={1: 101, 2: 202})
DATA_FILES = {"all": "train.bin", "linux": "train_linux.bin", "python": "train_python.bin"}
DOMAINS = ("linux", "python")


def load_verifier():
    s = torch.load(os.path.join(WORK, "verifier.pt"))
    v = Verifier(s["cfg"])
    v.load_state_dict({k: (t.half().float() if t.dim() >= 2 else t) for k, t in s["model"].items()})
    v.eval()
    for p in v.parameters():
        p.requires_grad_(False)
    return v, s["cfg"]


def head_cfg(vcfg):
    return dict(vcfg)  # same dim / heads / kv heads / ffn / eps / theta as the verifier


def lr_at(step):
    if step < HP["warmup"]:
        return HP["lr"] * (step + 1) / HP["warmup"]
    p = (step - HP["warmup"]) / max(1, HP["steps"] - HP["warmup"])
    return HP["min_lr"] + 0.5 * (HP["lr"] - HP["min_lr"]) * (1 + math.cos(math.pi * p))


def batch_at(data, seed, step, B, T):
    rng = np.random.default_rng([seed, step])
    offs = rng.integers(0, len(data) - T - 1, size=B)
    return torch.from_numpy(np.stack([data[o:o + T] for o in offs]).astype(np.int64))


@torch.no_grad()
def verifier_targets(v, x):
    f = v.features(x)                       # B,T,C
    return f, v.lm_head(f)                  # features, logits


def head_pass(head, v, x, f_in):
    """x: tokens B,T ; f_in: features B,T-1 used at head positions 0..T-2."""
    e = v.embed(x[:, 1:])                   # embed(tok_{t+1})
    h = head(e, f_in)                       # B,T-1,C
    return h, v.lm_head(h)


def losses(h, lg, f, vlogits, w):
    tgt = F.softmax(vlogits[:, 1:], -1)     # verifier distribution at t+1 (for tok_{t+2})
    ce = -(tgt * F.log_softmax(lg, -1)).sum(-1)            # B,T-1
    reg = F.smooth_l1_loss(h, f[:, 1:], reduction="none").mean(-1)
    return ((ce + HP["VW"] * reg) * w).sum() / w.sum(), (ce * w).sum() / w.sum()


def train(n):
    data = os.environ.get("HEAD_DATA", "all")
    if data not in DATA_FILES:
        sys.exit(f"HEAD_DATA must be one of {sorted(DATA_FILES)}, not {data!r}")
    v, vcfg = load_verifier()
    train_data = np.memmap(os.path.join(WORK, DATA_FILES[data]), dtype=np.uint8, mode="r")
    print(f"head{n}: data {data} ({DATA_FILES[data]}, {len(train_data)} bytes)", flush=True)
    seed = HP["seeds"][n]
    torch.manual_seed(seed)
    head = EagleHead(head_cfg(vcfg))
    h1 = None
    if n == 2:
        h1 = EagleHead(head_cfg(vcfg))
        h1.load_state_dict(torch.load(os.path.join(WORK, "head1.pt"))["model"])
        h1.eval()
    opt = torch.optim.AdamW(head.parameters(), lr=HP["lr"], betas=(0.9, 0.95), weight_decay=HP["wd"])
    ck = os.path.join(WORK, f"head{n}_ckpt.pt")
    logf = open(os.path.join(WORK, f"head{n}_log.txt"), "a")
    def same_data(s):
        if s.get("data", "all") != data:
            sys.exit(f"{ck} was trained on HEAD_DATA={s.get('data', 'all')}, not {data}: remove it")
    step, elapsed = resume(ck, head, opt, f"head{n}", same_data)
    t0 = time.time()
    while step < HP["steps"]:
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        x = batch_at(train_data, seed, step, HP["batch"], HP["seq"])
        f, vl = verifier_targets(v, x)
        w = torch.ones(x.shape[0], x.shape[1] - 1)
        if h1 is not None:
            with torch.no_grad():
                _, l1 = head_pass(h1, v, x, f[:, :-1])
                wrong = (l1.argmax(-1) != vl[:, 1:].argmax(-1)).float()
            w = 1.0 + HP["BOOST"] * wrong
        h, lg = head_pass(head, v, x, f[:, :-1])
        loss1, ce1 = losses(h, lg, f, vl, w)
        # unrolled pass: features replaced by the head's own predictions (h_{s-1} ~ f_s)
        f2 = torch.cat((f[:, :1], h[:, :-1].detach()), 1)
        h2, lg2 = head_pass(head, v, x, f2)
        loss2, ce2 = losses(h2, lg2, f, vl, w)
        loss = loss1 + HP["UW"] * loss2
        optimize(head, opt, loss, 1.0)
        step += 1
        if step % 20 == 0:
            acc = (lg.argmax(-1) == vl[:, 1:].argmax(-1)).float().mean().item()
            msg = (f"head{n} step {step} loss {loss.item():.4f} ce1 {ce1.item():.4f} ce2 {ce2.item():.4f} "
                   f"acc1 {acc:.3f} time {elapsed + time.time() - t0:.0f}s")
            print(msg, flush=True); logf.write(msg + "\n"); logf.flush()
        if step % HP["ckpt_every"] == 0 or step == HP["steps"]:
            save_checkpoint(ck, head, opt, step, elapsed + time.time() - t0, data=data)
    torch.save({"cfg": head_cfg(vcfg), "model": head.state_dict(), "steps": step, "hp": HP,
                "data": data, "train_seconds": elapsed + time.time() - t0},
               os.path.join(WORK, f"head{n}.pt"))
    print(f"head{n} done", flush=True)


@torch.no_grad()
def agreement(v, heads, path):
    """Top-1 agreement of each head with the verifier on evenly spaced windows of `path`."""
    held = np.fromfile(path, dtype=np.uint8)
    T, n = HP["seq"], HP["eval_windows"] * 4
    stride = (len(held) - T) // n
    xs = torch.from_numpy(np.stack([held[i * stride:i * stride + T] for i in range(n)]).astype(np.int64))
    right = {1: [], 2: []}
    right2 = {1: [], 2: []}
    for i in range(0, n, 16):
        x = xs[i:i + 16]
        f, vl = verifier_targets(v, x)
        vt = vl[:, 1:].argmax(-1)
        for k, h in heads.items():
            hh, lg = head_pass(h, v, x, f[:, :-1])
            right[k].append((lg.argmax(-1) == vt).flatten())
            # depth 2: at position t+1 the feature is h_t (head's own) and the token is
            # the verifier's tok_{t+2}; agreement counted only where depth 1 was right
            f2 = torch.cat((f[:, :1], hh[:, :-1]), 1)
            _, lg2 = head_pass(h, v, x, f2)
            r1 = (lg.argmax(-1) == vt)[:, :-1]
            r2 = (lg2.argmax(-1) == vt)[:, 1:]
            right2[k].append((r1 & r2).flatten())
    r = {k: torch.cat(right[k]) for k in right}
    r2 = {k: torch.cat(right2[k]) for k in right2}
    res = {"positions": int(r[1].numel()),
           "head1_top1_agreement": r[1].float().mean().item(),
           "head2_top1_agreement": r[2].float().mean().item(),
           "head1_depth2_chain_agreement": r2[1].float().mean().item(),
           "head2_depth2_chain_agreement": r2[2].float().mean().item(),
           "head2_right_when_head1_wrong": (r[2] & ~r[1]).sum().item() / max(1, (~r[1]).sum().item()),
           "head1_right_when_head2_wrong": (r[1] & ~r[2]).sum().item() / max(1, (~r[2]).sum().item()),
           "either_right": (r[1] | r[2]).float().mean().item()}
    return res


@torch.no_grad()
def evaluate():
    """Held-out top-1 agreement of each head with the verifier (depth 1 = true features;
    depth 2 = feature replaced by the head's own previous output), plus complementarity."""
    v, vcfg = load_verifier()
    heads = {}
    for k in (1, 2):
        h = EagleHead(head_cfg(vcfg))
        h.load_state_dict(torch.load(os.path.join(WORK, f"head{k}.pt"))["model"])
        h.eval()
        heads[k] = h
    res = agreement(v, heads, os.path.join(WORK, "heldout.bin"))
    for d in DOMAINS:
        p = os.path.join(WORK, f"heldout_{d}.bin")
        if os.path.exists(p):
            res[f"heldout_{d}"] = agreement(v, heads, p)
    for k in (1, 2):
        s = torch.load(os.path.join(WORK, f"head{k}.pt"))
        res[f"head{k}_steps"] = s["steps"]
        res[f"head{k}_data"] = s.get("data", "all")
        res[f"head{k}_train_seconds"] = round(s["train_seconds"], 1)
    print(json.dumps(res, indent=1))
    with open(os.path.join(WORK, "heads_eval.json"), "w") as fo:
        json.dump(res, fo, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "eval":
        evaluate()
    else:
        train(int(sys.argv[1]))
