#!/usr/bin/python3
"""Export work/head{1,2}.pt to models/head{1,2}/{model.safetensors,config.json}.

Usage: /usr/bin/python3 export_heads.py [OUT_DIR]   (default ../../models; writes
OUT_DIR/head1 and OUT_DIR/head2)

safetensors written by hand: u64-LE header length | JSON header (sorted keys, padded
with spaces to a multiple of 8) | raw little-endian F16 data.
Tensor layout: torch (out, in); q/k rows in Hugging Face order (the heads were trained
with rotate_half RoPE). No embedding / lm_head: the runtime uses the verifier's.
"""
import json, os, struct, sys
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "..", "models")
WORK = os.environ.get("TRAIN_WORK", os.path.join(HERE, "work"))

NAMES = {
    "fc.weight": "fc.weight",
    "fc.bias": "fc.bias",
    "layer.self_attn.q_proj.weight": "layers.0.self_attn.q_proj.weight",
    "layer.self_attn.k_proj.weight": "layers.0.self_attn.k_proj.weight",
    "layer.self_attn.v_proj.weight": "layers.0.self_attn.v_proj.weight",
    "layer.self_attn.o_proj.weight": "layers.0.self_attn.o_proj.weight",
    "layer.mlp.gate_proj.weight": "layers.0.mlp.gate_proj.weight",
    "layer.mlp.up_proj.weight": "layers.0.mlp.up_proj.weight",
    "layer.mlp.down_proj.weight": "layers.0.mlp.down_proj.weight",
    "layer.post_attention_layernorm.weight": "layers.0.post_attention_layernorm.weight",
}


def write_safetensors(path, tensors, metadata=None):
    hdr, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name].astype("<f2"))
        b = a.tobytes()
        hdr[name] = {"dtype": "F16", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        hdr["__metadata__"] = metadata
    h = json.dumps(hdr, sort_keys=True, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    buf = open(path, "rb").read()
    n = struct.unpack_from("<Q", buf, 0)[0]
    hdr = json.loads(buf[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        assert v["dtype"] == "F16"
        out[k] = np.frombuffer(buf, dtype="<f2", count=(e - s) // 2, offset=8 + n + s).reshape(v["shape"])
    return out


def head_config(cfg, architecture):
    """config.json keys of a one-layer Llama draft head of the shape cfg (train_heads.py HEAD)."""
    return {
        "architectures": [architecture],
        "model_type": "llama",
        "hidden_size": cfg["dim"],
        "intermediate_size": cfg["ffn"],
        "num_attention_heads": cfg["n_head"],
        "num_key_value_heads": cfg["n_kv"],
        "head_dim": cfg["dim"] // cfg["n_head"],
        "num_hidden_layers": 1,
        "hidden_act": "silu",
        "rms_norm_eps": cfg["eps"],
        "rope_theta": cfg["theta"],
        "vocab_size": cfg["vocab"],
        "max_position_embeddings": cfg["ctx"],
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
    }


def export(k, out_dir=MODELS):
    s = torch.load(os.path.join(WORK, f"head{k}.pt"))
    cfg, sd = s["cfg"], s["model"]
    assert set(sd) == set(NAMES), set(sd) ^ set(NAMES)
    d = os.path.join(out_dir, f"head{k}")
    os.makedirs(d, exist_ok=True)
    write_safetensors(os.path.join(d, "model.safetensors"),
                      {NAMES[n]: t.float().numpy() for n, t in sd.items()}, {"format": "pt"})
    conf = head_config(cfg, "LlamaForCausalLMEagle")
    conf["bias"] = True
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(conf, f, indent=2, sort_keys=True)
        f.write("\n")
    back = read_safetensors(os.path.join(d, "model.safetensors"))
    for n, t in sd.items():
        assert np.array_equal(back[NAMES[n]], t.half().numpy()), n
    print(f"wrote {d}: {len(back)} tensors, {os.path.getsize(os.path.join(d, 'model.safetensors'))} bytes")


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else MODELS
    for k in (1, 2):
        export(k, out)
