"""Llama-architecture byte-level verifier and EAGLE-1 draft head (torch).

Verifier RoPE convention: llama.cpp / GGUF "normal" RoPE, i.e. rotation of
consecutive pairs (2i, 2i+1) within each head, angle = pos * theta^(-2i/D).
Its q/k weights are therefore exported to GGUF unpermuted.

Draft-head RoPE convention: Hugging Face rotate_half, pairs (i, i + D/2),
angle = pos * theta^(-2i/D) -- the head files are HF layout.
"""
import math
import os
import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_cos_sin(T, D, theta, offset=0):
    inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))  # D/2
    pos = torch.arange(offset, offset + T, dtype=torch.float64)
    ang = pos[:, None] * inv[None, :]  # T, D/2
    return torch.cos(ang).float(), torch.sin(ang).float()


def rope_interleaved(x, cos, sin):
    # x: B, H, T, D ; pairs (2i, 2i+1)
    x0 = x[..., 0::2]
    x1 = x[..., 1::2]
    y0 = x0 * cos - x1 * sin
    y1 = x0 * sin + x1 * cos
    return torch.stack((y0, y1), dim=-1).flatten(-2)


def rope_half(x, cos, sin):
    # HF rotate_half convention: pairs (i, i + D/2)
    h = x.shape[-1] // 2
    x0, x1 = x[..., :h], x[..., h:]
    return torch.cat((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)


class Attention(nn.Module):
    def __init__(self, dim, n_head, n_kv, theta, interleaved, bias=False):
        super().__init__()
        self.n_head, self.n_kv, self.hd = n_head, n_kv, dim // n_head
        self.theta, self.interleaved = theta, interleaved
        # bias: Hugging Face's attention_bias, on all four projections
        self.q_proj = nn.Linear(dim, n_head * self.hd, bias=bias)
        self.k_proj = nn.Linear(dim, n_kv * self.hd, bias=bias)
        self.v_proj = nn.Linear(dim, n_kv * self.hd, bias=bias)
        self.o_proj = nn.Linear(n_head * self.hd, dim, bias=bias)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_head, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv, self.hd).transpose(1, 2)
        cos, sin = rope_cos_sin(T, self.hd, self.theta)
        rope = rope_interleaved if self.interleaved else rope_half
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        rep = self.n_head // self.n_kv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, -1)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self, dim, ffn, bias=False):
        super().__init__()
        # bias: Hugging Face's mlp_bias, on all three projections
        self.gate_proj = nn.Linear(dim, ffn, bias=bias)
        self.up_proj = nn.Linear(dim, ffn, bias=bias)
        self.down_proj = nn.Linear(ffn, dim, bias=bias)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, cfg, interleaved=True, input_norm=True):
        super().__init__()
        C = cfg["dim"]
        self.input_layernorm = RMSNorm(C, cfg["eps"]) if input_norm else None
        self.self_attn = Attention(C, cfg["n_head"], cfg["n_kv"], cfg["theta"], interleaved)
        self.post_attention_layernorm = RMSNorm(C, cfg["eps"])
        self.mlp = MLP(C, cfg["ffn"])

    def forward(self, x):
        h = self.input_layernorm(x) if self.input_layernorm is not None else x
        x = x + self.self_attn(h)
        return x + self.mlp(self.post_attention_layernorm(x))


class Verifier(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg["vocab"], cfg["dim"])
        self.layers = nn.ModuleList([Block(cfg) for _ in range(cfg["n_layer"])])
        self.norm = RMSNorm(cfg["dim"], cfg["eps"])
        self.lm_head = nn.Linear(cfg["dim"], cfg["vocab"], bias=False)
        self.apply(self._init)
        for l in self.layers:  # scaled init of residual projections
            nn.init.normal_(l.self_attn.o_proj.weight, std=0.02 / math.sqrt(2 * cfg["n_layer"]))
            nn.init.normal_(l.mlp.down_proj.weight, std=0.02 / math.sqrt(2 * cfg["n_layer"]))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def features(self, idx):
        x = self.embed(idx)
        for l in self.layers:
            x = l(x)
        return self.norm(x)  # f_t: last hidden state after final norm

    def forward(self, idx):
        return self.lm_head(self.features(idx))


class EagleHead(nn.Module):
    """EAGLE-1 head: fc(concat(embed(tok_{t+1}), f_t)) -> 1 decoder layer without
    input_layernorm (HF rotate_half RoPE) -> hidden h (fed to verifier lm_head)."""

    def __init__(self, cfg):
        super().__init__()
        C = cfg["dim"]
        self.fc = nn.Linear(2 * C, C, bias=True)
        self.layer = Block(cfg, interleaved=False, input_norm=False)

    def forward(self, emb_next, feat):
        return self.layer(self.fc(torch.cat((emb_next, feat), dim=-1)))


class Eagle3Layer(nn.Module):
    """The EAGLE-3 decoder layer: attention reads concat(input_layernorm(emb),
    hidden_norm(hidden)) of width 2C; the un-normalized hidden is the residual."""

    def __init__(self, cfg):
        super().__init__()
        C = cfg["dim"]
        self.input_layernorm = RMSNorm(C, cfg["eps"])
        self.hidden_norm = RMSNorm(C, cfg["eps"])
        ab, mb = cfg.get("attention_bias", False), cfg.get("mlp_bias", False)
        self.self_attn = Attention(C, cfg["n_head"], cfg["n_kv"], cfg["theta"], False, ab)
        hd = C // cfg["n_head"]
        # the q/k/v projections read the 2C-wide concatenation
        self.self_attn.q_proj = nn.Linear(2 * C, cfg["n_head"] * hd, bias=ab)
        self.self_attn.k_proj = nn.Linear(2 * C, cfg["n_kv"] * hd, bias=ab)
        self.self_attn.v_proj = nn.Linear(2 * C, cfg["n_kv"] * hd, bias=ab)
        self.post_attention_layernorm = RMSNorm(C, cfg["eps"])
        self.mlp = MLP(C, cfg["ffn"], mb)

    def forward(self, emb, hidden):
        a = torch.cat((self.input_layernorm(emb), self.hidden_norm(hidden)), dim=-1)
        x = hidden + self.self_attn(a)
        return x + self.mlp(self.post_attention_layernorm(x))


class Eagle3Head(nn.Module):
    """EAGLE-3 head: fc (3C -> C, no bias) over the verifier's three tap rows at level 0,
    the head's own pre-norm output at later levels; one Eagle3Layer; own norm and lm_head
    over a reduced draft vocabulary (draft id i = verifier id i + d2t[i])."""

    def __init__(self, cfg, draft_vocab):
        super().__init__()
        C = cfg["dim"]
        self.fc = nn.Linear(3 * C, C, bias=False)
        self.midlayer = Eagle3Layer(cfg)
        self.norm = RMSNorm(C, cfg["eps"])
        self.lm_head = nn.Linear(C, draft_vocab, bias=False)

    def forward(self, emb_next, hidden):
        """hidden: B,T,C, either fc(tap rows) or the head's own fed-back outputs.
        Returns the pre-norm output h and the draft-vocabulary logits."""
        h = self.midlayer(emb_next, hidden)
        return h, self.lm_head(self.norm(h))


def verifier_taps(v, idx, points):
    """Residual stream of the verifier before decoder layer p for each p in points
    (p == n_layer: after the last layer, before the final norm), concatenated in the
    order given, plus the logits. points default to (2, L//2, L-3), as EAGLE-3 defines."""
    x = v.embed(idx)
    rows = {}
    for i, l in enumerate(v.layers):
        if i in points:
            rows[i] = x
        x = l(x)
    rows[len(v.layers)] = x
    return torch.cat([rows[p] for p in points], dim=-1), v.lm_head(v.norm(x))


def resume(ck, model, opt, what, check=None):
    """(step, elapsed seconds) of the checkpoint ck, loaded into model and opt; (0, 0.0) without one.
    check(state) may refuse a checkpoint (sys.exit) before anything is loaded."""
    if not os.path.exists(ck):
        return 0, 0.0
    s = torch.load(ck)
    if check:
        check(s)
    model.load_state_dict(s["model"]); opt.load_state_dict(s["opt"])
    print(f"resumed {what} at step {s['step']}", flush=True)
    return s["step"], s["elapsed"]


def save_checkpoint(ck, model, opt, step, elapsed, **extra):
    """Writes ck atomically (a .tmp file renamed over it), for resume()."""
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "elapsed": elapsed, **extra},
               ck + ".tmp")
    os.replace(ck + ".tmp", ck)


def optimize(model, opt, loss, clip):
    """One optimizer step on loss, the gradient norm clipped to clip."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()

