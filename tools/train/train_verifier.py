#!/usr/bin/python3
"""Train the byte-level Llama verifier on work/train.bin (deterministic, resumable).

Usage: OMP_NUM_THREADS=1 /usr/bin/python3 train_verifier.py
Checkpoints: work/verifier_ckpt.pt (every CKPT_EVERY steps; resumed automatically).
Final weights: work/verifier.pt ; log: work/verifier_log.txt
"""
import json, math, os, sys, time
import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import Verifier, optimize, resume, save_checkpoint

WORK = os.environ.get("TRAIN_WORK", os.path.join(os.path.dirname(os.path.abspath(__file__)), "work"))
CFG = dict(vocab=256, dim=192, n_layer=6, n_head=6, n_kv=3, ffn=512, eps=1e-5,
           theta=10000.0, ctx=256, tied=False)
HP = dict(seed=1234, steps=int(os.environ.get("VERIFIER_STEPS", 2800)), batch=16, seq=256, lr=3e-3, min_lr=2e-4, warmup=100,
          wd=0.1, beta1=0.9, beta2=0.95, clip=1.0, eval_every=200, ckpt_every=200,
          eval_windows=64)


def lr_at(step):
    if step < HP["warmup"]:
        return HP["lr"] * (step + 1) / HP["warmup"]
    p = (step - HP["warmup"]) / max(1, HP["steps"] - HP["warmup"])
    return HP["min_lr"] + 0.5 * (HP["lr"] - HP["min_lr"]) * (1 + math.cos(math.pi * p))


def batch_at(data, step, B, T):
    rng = np.random.default_rng([HP["seed"], step])
    offs = rng.integers(0, len(data) - T - 1, size=B)
    x = np.stack([data[o:o + T + 1] for o in offs]).astype(np.int64)
    return torch.from_numpy(x)


def heldout_windows(held, n, T):
    # deterministic evenly spaced windows over the held-out text
    stride = (len(held) - T - 1) // n
    return torch.from_numpy(np.stack([held[i * stride:i * stride + T + 1] for i in range(n)]).astype(np.int64))


@torch.no_grad()
def evaluate(model, xs, bs=16):
    model.eval()
    tot, cnt = 0.0, 0
    for i in range(0, len(xs), bs):
        x = xs[i:i + bs]
        logits = model(x[:, :-1])
        tot += F.cross_entropy(logits.reshape(-1, 256), x[:, 1:].reshape(-1), reduction="sum").item()
        cnt += x[:, 1:].numel()
    model.train()
    return tot / cnt


def main():
    train = np.memmap(os.path.join(WORK, "train.bin"), dtype=np.uint8, mode="r")
    held = np.fromfile(os.path.join(WORK, "heldout.bin"), dtype=np.uint8)
    evx = heldout_windows(held, HP["eval_windows"], HP["seq"])
    torch.manual_seed(HP["seed"])
    model = Verifier(CFG)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    nodecay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": HP["wd"]},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=HP["lr"], betas=(HP["beta1"], HP["beta2"]))
    ck = os.path.join(WORK, "verifier_ckpt.pt")
    logf = os.path.join(WORK, "verifier_log.txt")
    step, elapsed = resume(ck, model, opt, "verifier")
    if step == 0:
        with open(logf, "w") as f:
            f.write(json.dumps({"cfg": CFG, "hp": HP,
                                "params": sum(p.numel() for p in model.parameters())}) + "\n")
    t0 = time.time()
    log = open(logf, "a")
    while step < HP["steps"]:
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        x = batch_at(train, step, HP["batch"], HP["seq"])
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 256), x[:, 1:].reshape(-1))
        optimize(model, opt, loss, HP["clip"])
        step += 1
        if step % 20 == 0:
            el = elapsed + time.time() - t0
            msg = f"step {step} loss {loss.item():.4f} lr {lr_at(step-1):.2e} time {el:.0f}s"
            if step % HP["eval_every"] == 0 or step == HP["steps"]:
                msg += f" heldout {evaluate(model, evx):.4f}"
            print(msg, flush=True); log.write(msg + "\n"); log.flush()
        if step % HP["ckpt_every"] == 0 or step == HP["steps"]:
            el = elapsed + time.time() - t0
            save_checkpoint(ck, model, opt, step, el)
    torch.save({"cfg": CFG, "model": model.state_dict(), "steps": step,
                "train_seconds": elapsed + time.time() - t0}, os.path.join(WORK, "verifier.pt"))
    print("done", flush=True)


if __name__ == "__main__":
    main()
