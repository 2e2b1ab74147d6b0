#!/usr/bin/python3
"""Re-read the exported GGUF with our own reader, run the numpy llama.cpp-convention
forward on a prompt and compare with the torch model.

(a) torch model loaded with the f16-rounded weights vs numpy forward: max |dlogit| must be tiny;
(b) original f32 torch model vs numpy: top-1 agreement reported.
Usage: /usr/bin/python3 check_gguf.py [verifier.pt] [verifier.gguf]
"""
import os, sys
import numpy as np
import torch

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gguf_io import NumpyLlama, read_gguf, bytes_to_unicode
from model import Verifier

src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "work", "verifier.pt")
dst = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "..", "models", "verifier.gguf")
s = torch.load(src)
kv, _ = read_gguf(dst)
b2u = bytes_to_unicode()
assert kv["tokenizer.ggml.tokens"] == [b2u[i] for i in range(256)]
assert kv["tokenizer.ggml.merges"] == [] and kv["general.architecture"] == "llama"
npm = NumpyLlama(dst)
prompt = b"The kernel scheduler decides which task runs next on each CPU, and the Python"
ids = list(prompt)
ln = npm.forward(ids)

m = Verifier(s["cfg"]); m.load_state_dict(s["model"]); m.eval()
with torch.no_grad():
    lt32 = m(torch.tensor([ids]))[0].numpy()
    m16 = Verifier(s["cfg"])
    m16.load_state_dict({k: (v.half().float() if v.dim() >= 2 else v) for k, v in s["model"].items()})
    m16.eval()
    lt16 = m16(torch.tensor([ids]))[0].numpy()
d16 = np.abs(lt16 - ln).max()
d32 = np.abs(lt32 - ln).max()
agree = (lt32.argmax(-1) == ln.argmax(-1)).mean()
print(f"max|logit diff| numpy-vs-torch(f16 weights) = {d16:.2e}; vs torch f32 = {d32:.2e}; "
      f"top-1 agreement vs f32 torch = {agree:.3f}")
assert d16 < 2e-3, "numpy GGUF forward does not match torch"
assert agree > 0.95
print("OK")
