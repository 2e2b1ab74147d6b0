#!/usr/bin/python3
"""Export work/head3.pt (train_head3.py) to models/head3/{pytorch_model.bin,config.json}, in the
layout published EAGLE-3 heads use: torch.save of a state dict with F16 weights named fc.weight
[C, 3C], midlayer.{input_layernorm,hidden_norm,post_attention_layernorm}.weight [C],
midlayer.self_attn.{q,k,v}_proj.weight [*, 2C], midlayer.self_attn.o_proj.weight,
midlayer.mlp.{gate,up,down}_proj.weight, norm.weight, lm_head.weight [draft_vocab, C], and the
vocabulary maps d2t (int64 [draft_vocab]: verifier id = i + d2t[i]) and t2d (bool [vocab]).
No embed_tokens: the runtime uses the verifier's token embedding.

Usage: /usr/bin/python3 export_head3.py [OUT_DIR]   (default ../../models; writes OUT_DIR/head3)
"""
import collections, json, os, sys
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_heads import head_config  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.environ.get("TRAIN_WORK", os.path.join(HERE, "work"))


def main():
    out = os.path.join(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "models"), "head3")
    s = torch.load(os.path.join(WORK, "head3.pt"))
    cfg, ids, points = s["cfg"], s["draft_ids"], s["points"]
    V, Vd = cfg["vocab"], len(ids)
    sd = collections.OrderedDict((k, t.half().contiguous()) for k, t in s["model"].items())
    sd["d2t"] = ids - torch.arange(Vd)
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[ids] = True
    sd["t2d"] = t2d
    os.makedirs(out, exist_ok=True)
    torch.save(sd, os.path.join(out, "pytorch_model.bin"))
    conf = head_config(cfg, "LlamaForCausalLMEagle3")
    conf["target_hidden_size"] = cfg["dim"]
    conf["draft_vocab_size"] = Vd
    # config id k = the output of verifier layer k = the input of layer k + 1
    conf["eagle_aux_hidden_state_layer_ids"] = [p - 1 for p in points]
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(conf, f, indent=2, sort_keys=True)
        f.write("\n")
    back = torch.load(os.path.join(out, "pytorch_model.bin"))
    assert list(back) == list(sd) and all(torch.equal(back[k], sd[k]) for k in sd)
    print(f"wrote {out}: {len(sd)} tensors, {os.path.getsize(os.path.join(out, 'pytorch_model.bin'))} bytes")


if __name__ == "__main__":
    main()
