#!/usr/bin/python3
"""Rebuild work/verifier.pt from the exported models/verifier.gguf, for training the heads
without retraining the verifier (about 56 min on one core).

The heads are trained against the verifier's f16-rounded weights (train_heads.py loads
t.half().float() for every 2-D tensor), and the GGUF holds exactly those f16 values, so
loading them as float32 gives the same frozen verifier bit for bit. The norm weights are
stored as F32 in the GGUF and come back unchanged. What is lost is only the f32 master
copy of the 2-D weights, which nothing downstream of export_gguf.py uses.

Check: export_gguf.py on the rebuilt checkpoint writes a file byte-identical to the input.
Usage: /usr/bin/python3 gguf_to_pt.py [verifier.gguf] [verifier.pt]
"""
import os, sys
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gguf_io import read_gguf
from model import Verifier

# values recorded in models/README.md for the shipped verifier (the GGUF does not hold them)
TRAIN_STEPS, TRAIN_SECONDS = 2800, 3356.0


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "models", "verifier.gguf")
    dst = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "work", "verifier.pt")
    kv, t = read_gguf(src)
    assert kv["general.architecture"] == "llama"
    C = kv["llama.embedding_length"]
    H = kv["llama.attention.head_count"]
    assert kv["llama.rope.dimension_count"] == C // H
    cfg = dict(vocab=kv["llama.vocab_size"], dim=C, n_layer=kv["llama.block_count"], n_head=H,
               n_kv=kv["llama.attention.head_count_kv"], ffn=kv["llama.feed_forward_length"],
               eps=kv["llama.attention.layer_norm_rms_epsilon"],
               theta=kv["llama.rope.freq_base"], ctx=kv["llama.context_length"],
               tied="output.weight" not in t)
    # the F32 GGUF values of eps/theta are what export_gguf.py wrote from the Python floats
    # 1e-5 and 10000.0; use those Python floats so the torch model computes as it did
    assert np.float32(cfg["eps"]) == np.float32(1e-5) and cfg["theta"] == 10000.0
    cfg["eps"], cfg["theta"] = 1e-5, 10000.0
    names = {"embed.weight": "token_embd.weight", "norm.weight": "output_norm.weight"}
    if not cfg["tied"]:
        names["lm_head.weight"] = "output.weight"
    for l in range(cfg["n_layer"]):
        p, q = f"blk.{l}.", f"layers.{l}."
        names.update({q + "input_layernorm.weight": p + "attn_norm.weight",
                      q + "self_attn.q_proj.weight": p + "attn_q.weight",
                      q + "self_attn.k_proj.weight": p + "attn_k.weight",
                      q + "self_attn.v_proj.weight": p + "attn_v.weight",
                      q + "self_attn.o_proj.weight": p + "attn_output.weight",
                      q + "post_attention_layernorm.weight": p + "ffn_norm.weight",
                      q + "mlp.gate_proj.weight": p + "ffn_gate.weight",
                      q + "mlp.up_proj.weight": p + "ffn_up.weight",
                      q + "mlp.down_proj.weight": p + "ffn_down.weight"})
    assert set(names.values()) == set(t), set(names.values()) ^ set(t)
    m = Verifier(cfg)
    sd = {k: torch.from_numpy(t[g].astype(np.float32)) for k, g in names.items()}
    if cfg["tied"]:
        sd["lm_head.weight"] = sd["embed.weight"]
    m.load_state_dict(sd)  # strict: every parameter present with the right shape
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    torch.save({"cfg": cfg, "model": m.state_dict(), "steps": TRAIN_STEPS,
                "train_seconds": TRAIN_SECONDS, "reconstructed_from": os.path.basename(src)}, dst)
    print(f"wrote {dst}: {len(sd)} tensors, {sum(v.numel() for v in sd.values())} parameters, cfg {cfg}")


if __name__ == "__main__":
    main()
