#!/usr/bin/python3
"""Train an EAGLE-3 draft head (head 3) by distillation from the frozen verifier.

Verifier: work/verifier.pt with its 2-D weights rounded to f16 (= what the GGUF holds).
  tap rows  = residual stream before verifier decoder layers POINTS (concatenated, 3C);
              config ids k mean "output of layer k" = before layer k+1, so the config
              written by export_head3.py says eagle_aux_hidden_state_layer_ids = POINTS - 1
  level 0   : hidden_t = fc(taps_t)                   (fc: 3C -> C, no bias)
  level k>0 : hidden_t = h_{t-1} of level k-1          (the head's own pre-norm output)
  h_t       = Eagle3Layer(embed(tok_{t+1}), hidden_t)  (embedding = verifier token_embd)
  logits    = lm_head(norm(h_t)) over the draft vocabulary -> distribution of tok_{t+2}
Draft vocabulary: the DRAFT_VOCAB most frequent bytes of work/train.bin, sorted by id;
  draft id i is verifier id i + d2t[i].
Loss per level: soft cross-entropy to the verifier's next-token distribution restricted to
  the draft vocabulary (renormalized there), weighted LW**level, LEVELS levels (the EAGLE-3
  "training-time test" unrolled, fed-back outputs detached as in train_heads.py).
Data: work/train.bin (both domains), data stream seed 303, init seed 303.

Usage: OMP_NUM_THREADS=1 /usr/bin/python3 train_head3.py {train|eval}
Outputs: work/head3.pt (+ resumable work/head3_ckpt.pt), work/head3_eval.json
"""
import json, os, sys, time
import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model import Eagle3Head, EagleHead, optimize, resume, save_checkpoint, verifier_taps
from export_heads import NAMES, read_safetensors
import train_heads
from train_heads import WORK, load_verifier, batch_at, head_cfg, HP as HP1

POINTS = (2, 4, 6)   # before layers 2 and 4, and after the last layer (before output_norm)
# smaller batches and fewer steps than heads 1/2 (3600 x 8 x 256): this head was trained on
# a machine shared with several builds, where a step cost ~10x what it costs on a quiet core
HP = dict(HP1, steps=int(os.environ.get("HEAD_STEPS", 500)), batch=4, seq=128, warmup=30,
          seed=303, LEVELS=2, LW=0.6, DRAFT_VOCAB=128)


def lr_at(step):
    """train_heads.py's warm-up + cosine schedule over this head's step count."""
    saved = dict(train_heads.HP)
    train_heads.HP.update(steps=HP["steps"], warmup=HP["warmup"])
    try:
        return train_heads.lr_at(step)
    finally:
        train_heads.HP.clear(); train_heads.HP.update(saved)


def draft_vocab():
    data = np.memmap(os.path.join(WORK, "train.bin"), dtype=np.uint8, mode="r")
    counts = np.bincount(data, minlength=256)
    top = np.argsort(-counts, kind="stable")[:HP["DRAFT_VOCAB"]]
    return torch.from_numpy(np.sort(top).astype(np.int64))


def level_passes(head, v, x, taps, ids, levels):
    """Logits (draft vocab) and pre-norm outputs of each unrolled level over x."""
    e = v.embed(x[:, 1:])
    base = head.fc(taps[:, :-1])
    out, hidden = [], base
    for k in range(levels):
        h, lg = head(e, hidden)
        out.append((h, lg))
        hidden = torch.cat((base[:, :1], h[:, :-1].detach()), 1)
    return out


def train():
    v, vcfg = load_verifier()
    ids = draft_vocab()
    data = np.memmap(os.path.join(WORK, "train.bin"), dtype=np.uint8, mode="r")
    torch.manual_seed(HP["seed"])
    head = Eagle3Head(head_cfg(vcfg), len(ids))
    opt = torch.optim.AdamW(head.parameters(), lr=HP["lr"], betas=(0.9, 0.95), weight_decay=0.0)
    ck = os.path.join(WORK, "head3_ckpt.pt")
    logf = open(os.path.join(WORK, "head3_log.txt"), "a")
    step, elapsed = resume(ck, head, opt, "head3")
    t0 = time.time()
    while step < HP["steps"]:
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        x = batch_at(data, HP["seed"], step, HP["batch"], HP["seq"])
        with torch.no_grad():
            taps, vl = verifier_taps(v, x, POINTS)
            tgt = F.softmax(vl[:, 1:, ids], -1)
        loss, ces = 0.0, []
        for k, (h, lg) in enumerate(level_passes(head, v, x, taps, ids, HP["LEVELS"])):
            ce = -(tgt * F.log_softmax(lg, -1)).sum(-1).mean()
            loss = loss + HP["LW"] ** k * ce
            ces.append(ce.item())
            if k == 0:
                acc = (ids[lg.argmax(-1)] == vl[:, 1:].argmax(-1)).float().mean().item()
        optimize(head, opt, loss, 1.0)
        step += 1
        if step % 20 == 0:
            msg = (f"head3 step {step} loss {loss.item():.4f} ce " + " ".join(f"{c:.4f}" for c in ces)
                   + f" acc1 {acc:.3f} time {elapsed + time.time() - t0:.0f}s")
            print(msg, flush=True); logf.write(msg + "\n"); logf.flush()
        if step % HP["ckpt_every"] == 0 or step == HP["steps"]:
            save_checkpoint(ck, head, opt, step, elapsed + time.time() - t0)
    torch.save({"cfg": head_cfg(vcfg), "model": head.state_dict(), "steps": step, "hp": HP,
                "points": POINTS, "draft_ids": ids, "train_seconds": elapsed + time.time() - t0},
               os.path.join(WORK, "head3.pt"))
    print("head3 done", flush=True)


@torch.no_grad()
def evaluate():
    """Held-out top-1 agreement with the verifier: depth 1 (true tap rows), the depth-2
    chain (own output fed back), and how often head 3 is right where head 1 is wrong."""
    v, vcfg = load_verifier()
    s = torch.load(os.path.join(WORK, "head3.pt"))
    ids = s["draft_ids"]
    h3 = Eagle3Head(s["cfg"], len(ids)); h3.load_state_dict(s["model"]); h3.eval()
    h1 = EagleHead(head_cfg(vcfg))   # the shipped head 1 (its f16 weights), not work/head1.pt
    st = read_safetensors(os.path.join(HERE, "..", "..", "models", "head1", "model.safetensors"))
    h1.load_state_dict({k: torch.from_numpy(st[n].astype(np.float32)) for k, n in NAMES.items()})
    h1.eval()
    res = {}
    for name in ("heldout", "heldout_linux", "heldout_python"):
        T = 256
        path = os.path.join(WORK, name + ".bin")
        held = np.fromfile(path, dtype=np.uint8)
        n = HP["eval_windows"] * 4
        stride = (len(held) - T) // n
        xs = torch.from_numpy(np.stack([held[i * stride:i * stride + T] for i in range(n)]).astype(np.int64))
        r1, r2, r3 = [], [], []
        for i in range(0, n, 16):
            x = xs[i:i + 16]
            taps, vl = verifier_taps(v, x, POINTS)
            vt = vl[:, 1:].argmax(-1)
            (h, lg), (_, lg2) = level_passes(h3, v, x, taps, ids, 2)
            a = ids[lg.argmax(-1)] == vt
            b = ids[lg2.argmax(-1)] == vt
            r3.append(a.flatten()); r2.append((a[:, :-1] & b[:, 1:]).flatten())
            f = v.norm(taps[..., -vcfg["dim"]:])          # last tap = pre-norm final hidden
            l1 = v.lm_head(h1(v.embed(x[:, 1:]), f[:, :-1]))
            r1.append((l1.argmax(-1) == vt).flatten())
        a3, a1, c2 = torch.cat(r3), torch.cat(r1), torch.cat(r2)
        res[name] = {"positions": int(a3.numel()),
                     "head3_top1_agreement": a3.float().mean().item(),
                     "head3_depth2_chain_agreement": c2.float().mean().item(),
                     "head1_top1_agreement": a1.float().mean().item(),
                     "head3_right_when_head1_wrong": (a3 & ~a1).sum().item() / max(1, (~a1).sum().item()),
                     "either_head1_or_head3_right": (a1 | a3).float().mean().item()}
    res["head3_steps"] = s["steps"]
    res["head3_train_seconds"] = round(s["train_seconds"], 1)
    print(json.dumps(res, indent=1))
    with open(os.path.join(WORK, "head3_eval.json"), "w") as fo:
        json.dump(res, fo, indent=1)


if __name__ == "__main__":
    {"train": train, "eval": evaluate}[sys.argv[1]]()
