#!/usr/bin/python3
"""Reference greedy generation from the exported GGUF using the numpy reader/forward
(no torch). Prints prompt ids, generated ids and the text.

Usage: /usr/bin/python3 generate_ref.py [--model models/verifier.gguf] [--n 64] "prompt text"
Tokenization: byte-level (token id = byte value), no BOS.
"""
import argparse, os, sys
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gguf_io import NumpyLlama

ap = argparse.ArgumentParser()
ap.add_argument("prompt")
ap.add_argument("--model", default=os.path.join(HERE, "..", "..", "models", "verifier.gguf"))
ap.add_argument("--n", type=int, default=64)
a = ap.parse_args()
m = NumpyLlama(a.model)
ctx = m.kv["llama.context_length"]
ids = list(a.prompt.encode("utf-8"))
print("prompt ids:", ids)
out = []
for _ in range(a.n):
    window = (ids + out)[-ctx:]
    logits = m.forward(window)
    out.append(int(np.argmax(logits[-1])))
print("generated ids:", out)
print("text:", repr(bytes(out).decode("utf-8", errors="replace")))
print(a.prompt + bytes(out).decode("utf-8", errors="replace"))
