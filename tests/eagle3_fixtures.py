#!/usr/bin/env python3
"""EAGLE-3 draft heads for tests/test_eagle3.cpp, built with Debian's torch at test time in the
published layout (fc, midlayer.*, norm, lm_head, d2t, t2d; optionally embed_tokens).

usage: eagle3_fixtures.py DIR [IDS]  (DIR holds verifier.gguf, written by the test; C/V/H/Hkv/L from
       it; IDS, e.g. "0,0,0": eagle_aux_hidden_state_layer_ids of e3_bin / e3_st, default none)

DIR/e3_bin/      random head, pytorch_model.bin (torch.save), draft vocab min(64, 2V/3) of V
DIR/e3_st/       the same tensors as model.safetensors (written by hand: F32, I64, BOOL)
DIR/e3_ids/      (verifiers of 4 layers) another random head with eagle_aux_hidden_state_layer_ids [1, 1, 0] (the
                 default taps of 4 layers, named by id) and its own
                 embed_tokens.weight; DIR/ref.json: its PyTorch forward over a chain whose first
                 rows read tap rows (through fc) and last rows fed-back C-wide hidden rows
DIR/e3_bias/     the same with attention_bias and mlp_bias (random biases on all seven
                 projections); DIR/ref_bias.json its forward over the same kind of chain
DIR/bad_*/       malformed heads: fc of the wrong width, a d2t entry past the vocabulary, two
                 draft ids on one verifier id, t2d disagreeing with d2t, reduced vocab without
                 d2t, d2t stored as float
"""
import collections, json, os, struct, sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "train"))
from gguf_io import read_gguf  # noqa: E402
from model import Eagle3Head  # noqa: E402

F = 64


def save_safetensors(path, sd):
    names = {torch.float32: "F32", torch.int64: "I64", torch.bool: "BOOL"}
    hdr, blobs, off = {}, [], 0
    for k, t in sd.items():
        b = t.contiguous().numpy().tobytes()
        hdr[k] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(hdr).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def make_head(cfg, V, seed, ids=None, bias=False):
    DRAFT_V = min(64, 2 * V // 3)
    torch.manual_seed(seed)
    cfg = dict(cfg, attention_bias=bias, mlp_bias=bias)
    head = Eagle3Head(cfg, DRAFT_V)
    with torch.no_grad():
        for n, p in head.named_parameters():
            if n.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
            elif n.endswith(".bias"):  # nn.Linear's uniform init is small; make them matter
                p.copy_(0.5 * torch.randn_like(p))
    draft_ids = torch.sort(torch.randperm(V)[:DRAFT_V]).values
    sd = collections.OrderedDict(head.state_dict())
    sd["d2t"] = draft_ids - torch.arange(DRAFT_V)
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[draft_ids] = True
    sd["t2d"] = t2d
    conf = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": cfg["dim"],
            "intermediate_size": F, "num_attention_heads": cfg["n_head"], "num_key_value_heads": cfg["n_kv"],
            "num_hidden_layers": 1, "rms_norm_eps": cfg["eps"], "rope_theta": cfg["theta"], "vocab_size": V,
            "draft_vocab_size": DRAFT_V, "target_hidden_size": cfg["dim"], "max_position_embeddings": 512}
    if ids is not None:
        conf["eagle_aux_hidden_state_layer_ids"] = ids
    if bias:
        conf["attention_bias"] = conf["mlp_bias"] = True
    return head, sd, conf, draft_ids


def write(d, sd, conf, fmt="bin"):
    os.makedirs(d, exist_ok=True)
    if fmt == "bin":
        torch.save(sd, os.path.join(d, "pytorch_model.bin"))
    else:
        save_safetensors(os.path.join(d, "model.safetensors"), sd)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(conf, f, indent=1)


def main():
    out = sys.argv[1]
    kv, t = read_gguf(os.path.join(out, "verifier.gguf"))
    C, H = kv["llama.embedding_length"], kv["llama.attention.head_count"]
    V = kv["llama.vocab_size"] if "llama.vocab_size" in kv else t["token_embd.weight"].shape[0]
    cfg = dict(dim=C, n_head=H, n_kv=kv["llama.attention.head_count_kv"], ffn=F, eps=1e-5, theta=10000.0)

    L = kv["llama.block_count"]
    ids = [int(x) for x in sys.argv[2].split(",")] if len(sys.argv) > 2 else None
    head, sd, conf, _ = make_head(cfg, V, 5, ids)
    DRAFT_V = conf["draft_vocab_size"]
    write(os.path.join(out, "e3_bin"), sd, conf, "bin")
    write(os.path.join(out, "e3_st"), sd, conf, "st")

    # malformed variants of that head, each refused naming the tensor
    def bad(name, **change):
        s = collections.OrderedDict(sd)
        for k, v in change.items():
            s[k] = v
        write(os.path.join(out, "bad_" + name), s, conf)
    bad("fc", **{"fc.weight": sd["fc.weight"][:, :2 * C].clone()})
    d2t = sd["d2t"].clone(); d2t[DRAFT_V - 1] = V  # draft id 63 -> 63 + V, past the vocabulary
    bad("d2t_range", d2t=d2t)
    d2t = sd["d2t"].clone(); d2t[1] = d2t[0] - 1  # draft id 1 lands on draft id 0's verifier id
    bad("d2t_dup", d2t=d2t)
    t2d = sd["t2d"].clone(); t2d[int(sd["d2t"][0])] = not bool(t2d[int(sd["d2t"][0])])
    bad("t2d", t2d=t2d)
    bad("d2t_float", d2t=sd["d2t"].float())
    s = collections.OrderedDict(sd); del s["d2t"]
    write(os.path.join(out, "bad_no_d2t"), s, conf)

    # a head with explicit tap ids and its own embedding, and its PyTorch forward; and one whose
    # seven projections carry biases (attention_bias, mlp_bias)
    if L != 4:
        return
    reference(out, cfg, V, C, "e3_ids", "ref.json", 9, False)
    reference(out, cfg, V, C, "e3_bias", "ref_bias.json", 11, True)


def reference(out, cfg, V, C, name, ref_name, seed, bias):
    head, sd, conf, draft_ids = make_head(cfg, V, seed, ids=[1, 1, 0], bias=bias)
    emb = torch.nn.Embedding(V, C)
    sd["embed_tokens.weight"] = emb.weight.detach().clone()
    write(os.path.join(out, name), sd, conf)
    g = torch.Generator().manual_seed(3)
    n_taps, n_fed = 7, 4
    toks = torch.randint(0, V, (n_taps + n_fed,), generator=g)
    taps = torch.randn(n_taps, 3 * C, generator=g)
    fed = torch.randn(n_fed, C, generator=g)
    with torch.no_grad():
        hidden = torch.cat((head.fc(taps), fed))[None]
        h, lg = head(emb(toks)[None], hidden)
        if bias:  # the biases must matter, or the test could not tell them from none
            for n, p in head.named_parameters():
                if n.endswith(".bias"):
                    p.zero_()
            assert (head(emb(toks)[None], hidden)[0] - h).abs().max() > 0.1
    ref = {"tokens": toks.tolist(), "taps": taps.flatten().tolist(), "fed": fed.flatten().tolist(),
           "h": h[0].flatten().tolist(), "draft_logits": lg[0].flatten().tolist(), "draft_ids": draft_ids.tolist()}
    with open(os.path.join(out, ref_name), "w") as f:
        json.dump(ref, f)


if __name__ == "__main__":
    main()
