#!/usr/bin/python3
"""Check that the exported head files (numpy, HF rotate_half) reproduce the torch heads
on verifier features of a prompt: hidden states and draft logits must match.
Env: MODELS_DIR (verifier.gguf and, by default, head{1,2}/), HEADS_DIR (head{1,2}/)."""
import os, sys
import numpy as np
import torch

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model import EagleHead
from gguf_io import NumpyLlama
from draft_ref import NumpyHead

WORK = os.environ.get("TRAIN_WORK", os.path.join(HERE, "work"))
MODELS = os.environ.get("MODELS_DIR", os.path.join(HERE, "..", "..", "models"))
HEADS = os.environ.get("HEADS_DIR", MODELS)
v = NumpyLlama(os.path.join(MODELS, "verifier.gguf"))
ids = list(b"Return an empty list if no rows are available. The kernel")
_, f = v.forward(ids, return_features=True)
emb = v.t["token_embd.weight"][np.array(ids[1:])]
feat = f[:-1]
for k in (1, 2):
    s = torch.load(os.path.join(WORK, f"head{k}.pt"))
    th = EagleHead(s["cfg"])
    # the head files hold every tensor in F16
    th.load_state_dict({n: t.half().float() for n, t in s["model"].items()})
    th.eval()
    with torch.no_grad():
        ht = th(torch.from_numpy(emb)[None], torch.from_numpy(feat)[None])[0].numpy()
    hn = NumpyHead(os.path.join(HEADS, f"head{k}")).forward(emb, feat)
    lt, ln = ht @ v.out.T, hn @ v.out.T
    d = np.abs(lt - ln).max()
    print(f"head{k}: max|h diff| {np.abs(ht - hn).max():.2e}, max|logit diff| {d:.2e}, "
          f"argmax equal {np.mean(lt.argmax(-1) == ln.argmax(-1)):.3f}")
    assert d < 2e-3
print("OK")
