#!/usr/bin/python3
"""Reference EAGLE-1 chain drafting in numpy (no torch), for cross-checking the runtime.

Loads models/verifier.gguf (llama.cpp RoPE: pairs (2i, 2i+1)) and a head folder
(HF layout, rotate_half RoPE: pairs (i, i + D/2)), then for a prompt x_0..x_{n-1}:
  verifier -> features f_0..f_{n-1} and its greedy next token x_n
  head position t (t = 0..n-1) gets fc(concat(embed(x_{t+1}), f_t)); RoPE position = t
  h_{n-1} -> verifier output.weight -> draft d_1 (a guess for x_{n+1})
  head position n gets fc(concat(embed(d_1), h_{n-1})) -> h_n -> d_2, ... (depth k)
Prints the draft chain and the verifier's own greedy continuation for comparison.

Usage: /usr/bin/python3 draft_ref.py [--head models/head1] [--depth 5] "prompt"
"""
import argparse, json, os, sys
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gguf_io import NumpyLlama
from export_heads import read_safetensors


class NumpyHead:
    def __init__(self, folder):
        self.cfg = json.load(open(os.path.join(folder, "config.json")))
        self.w = {k: v.astype(np.float32) for k, v in read_safetensors(os.path.join(folder, "model.safetensors")).items()}
        c = self.cfg
        self.H, self.Hkv = c["num_attention_heads"], c["num_key_value_heads"]
        self.D = c["hidden_size"] // self.H
        self.eps, self.theta = c["rms_norm_eps"], c["rope_theta"]

    def _rope_half(self, x, pos):  # T, nh, D  ; HF rotate_half
        D = x.shape[-1]
        inv = 1.0 / (self.theta ** (np.arange(0, D, 2, dtype=np.float64) / D))
        ang = pos[:, None].astype(np.float64) * inv[None, :]
        c, s = np.cos(ang).astype(np.float32)[:, None, :], np.sin(ang).astype(np.float32)[:, None, :]
        h = D // 2
        x0, x1 = x[..., :h], x[..., h:]
        return np.concatenate((x0 * c - x1 * s, x0 * s + x1 * c), -1)

    def forward(self, emb, feat):
        """emb, feat: (T, C) for head positions 0..T-1 -> hidden h (T, C)."""
        w, p = self.w, "layers.0."
        T = emb.shape[0]
        x = np.concatenate((emb, feat), -1) @ w["fc.weight"].T + w["fc.bias"]
        q = (x @ w[p + "self_attn.q_proj.weight"].T).reshape(T, self.H, self.D)
        k = (x @ w[p + "self_attn.k_proj.weight"].T).reshape(T, self.Hkv, self.D)
        v = (x @ w[p + "self_attn.v_proj.weight"].T).reshape(T, self.Hkv, self.D)
        pos = np.arange(T)
        q, k = self._rope_half(q, pos), self._rope_half(k, pos)
        rep = self.H // self.Hkv
        k, v = np.repeat(k, rep, 1), np.repeat(v, rep, 1)
        att = np.einsum("thd,shd->hts", q, k) / np.sqrt(self.D) + np.triu(np.full((T, T), -np.inf, np.float32), 1)
        att = np.exp(att - att.max(-1, keepdims=True)); att /= att.sum(-1, keepdims=True)
        x = x + np.einsum("hts,shd->thd", att, v).reshape(T, -1) @ w[p + "self_attn.o_proj.weight"].T
        hn = x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w[p + "post_attention_layernorm.weight"]
        g, u = hn @ w[p + "mlp.gate_proj.weight"].T, hn @ w[p + "mlp.up_proj.weight"].T
        return x + ((g / (1 + np.exp(-g))) * u) @ w[p + "mlp.down_proj.weight"].T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prompt")
    ap.add_argument("--model", default=os.path.join(HERE, "..", "..", "models", "verifier.gguf"))
    ap.add_argument("--head", default=os.path.join(HERE, "..", "..", "models", "head1"))
    ap.add_argument("--depth", type=int, default=5)
    a = ap.parse_args()
    v, hd = NumpyLlama(a.model), NumpyHead(a.head)
    E = v.t["token_embd.weight"]
    ids = list(a.prompt.encode("utf-8"))
    logits, f = v.forward(ids, return_features=True)
    nxt = int(logits[-1].argmax())
    toks = ids[1:] + [nxt]                  # token_{t+1} for head positions t = 0..n-1
    feats = list(f)
    drafts = []
    for _ in range(a.depth):
        h = hd.forward(E[np.array(toks)], np.stack(feats))[-1]
        d = int((h @ v.out.T).argmax())
        drafts.append(d)
        toks.append(d); feats.append(h)     # next head position: (h, draft token)
    ref = []
    cur = ids + [nxt]
    for _ in range(a.depth):
        ref.append(int(v.forward(cur)[-1].argmax())); cur.append(ref[-1])
    print("verifier next token:", nxt, repr(chr(nxt)))
    print("head draft chain   :", drafts, repr(bytes(drafts).decode("utf-8", "replace")))
    print("verifier greedy    :", ref, repr(bytes(ref).decode("utf-8", "replace")))


if __name__ == "__main__":
    main()
