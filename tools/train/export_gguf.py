#!/usr/bin/python3
"""Export the trained verifier (work/verifier.pt) to GGUF v3, f16 weights, llama arch.

Usage: /usr/bin/python3 export_gguf.py [verifier.pt] [out.gguf]
Tokenizer: byte-level "gpt2" BPE with 256 tokens (token i = GPT-2 bytes_to_unicode(i))
and zero merges, so text encodes to its raw bytes. No BOS/EOS is added.
q/k rows are written unpermuted: the model was trained with llama.cpp's RoPE
convention (consecutive pairs (2i, 2i+1) within each head).
"""
import os, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_io import write_gguf, bytes_to_unicode, STR, U32, F32, BOOL, ARR, I32

HERE = os.path.dirname(os.path.abspath(__file__))


def export(src, dst):
    s = torch.load(src)
    cfg, sd = s["cfg"], s["model"]
    sd = {k: v.float().numpy() for k, v in sd.items()}
    C, L, H = cfg["dim"], cfg["n_layer"], cfg["n_head"]
    b2u = bytes_to_unicode()
    kvs = [
        ("general.architecture", STR, "llama"),
        ("general.name", STR, "vkspec-demo-byte-llama"),
        ("general.alignment", U32, 32),
        ("general.file_type", U32, 1),
        ("llama.context_length", U32, cfg["ctx"]),
        ("llama.embedding_length", U32, C),
        ("llama.block_count", U32, L),
        ("llama.feed_forward_length", U32, cfg["ffn"]),
        ("llama.attention.head_count", U32, H),
        ("llama.attention.head_count_kv", U32, cfg["n_kv"]),
        ("llama.rope.freq_base", F32, float(cfg["theta"])),
        ("llama.attention.layer_norm_rms_epsilon", F32, float(cfg["eps"])),
        ("llama.rope.dimension_count", U32, C // H),
        ("llama.vocab_size", U32, cfg["vocab"]),
        ("tokenizer.ggml.model", STR, "gpt2"),
        ("tokenizer.ggml.pre", STR, "default"),
        ("tokenizer.ggml.tokens", ARR, (STR, [b2u[i] for i in range(256)])),
        ("tokenizer.ggml.token_type", ARR, (I32, [1] * 256)),
        ("tokenizer.ggml.merges", ARR, (STR, [])),
        ("tokenizer.ggml.add_bos_token", BOOL, False),
        ("tokenizer.ggml.add_eos_token", BOOL, False),
    ]
    f16 = lambda a: a.astype(np.float16)
    f32 = lambda a: a.astype(np.float32)
    T = [("token_embd.weight", f16(sd["embed.weight"])),
         ("output_norm.weight", f32(sd["norm.weight"]))]
    if not cfg.get("tied", False):
        T.append(("output.weight", f16(sd["lm_head.weight"])))
    for l in range(L):
        p, q = f"blk.{l}.", f"layers.{l}."
        T += [(p + "attn_norm.weight", f32(sd[q + "input_layernorm.weight"])),
              (p + "attn_q.weight", f16(sd[q + "self_attn.q_proj.weight"])),
              (p + "attn_k.weight", f16(sd[q + "self_attn.k_proj.weight"])),
              (p + "attn_v.weight", f16(sd[q + "self_attn.v_proj.weight"])),
              (p + "attn_output.weight", f16(sd[q + "self_attn.o_proj.weight"])),
              (p + "ffn_norm.weight", f32(sd[q + "post_attention_layernorm.weight"])),
              (p + "ffn_gate.weight", f16(sd[q + "mlp.gate_proj.weight"])),
              (p + "ffn_up.weight", f16(sd[q + "mlp.up_proj.weight"])),
              (p + "ffn_down.weight", f16(sd[q + "mlp.down_proj.weight"]))]
    write_gguf(dst, kvs, T)
    print(f"wrote {dst}: {len(T)} tensors, {os.path.getsize(dst)} bytes")


if __name__ == "__main__":
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "work", "verifier.pt")
    dst = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "..", "models", "verifier.gguf")
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    export(src, dst)
