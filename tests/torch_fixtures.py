#!/usr/bin/env python3
"""pytorch_model.bin fixtures for tests/test_torch_file.cpp, written with Debian's torch at test
time (nothing binary is committed).

usage: torch_fixtures.py OUT_DIR SOURCE_DIR

OUT/tiny.bin        a state dict of every supported dtype and view kind (pickle protocol 2, as
                    torch.save writes by default); OUT/tiny_p4.bin the same at protocol 4
                    (FRAME, MEMOIZE, SHORT_BINUNICODE, STACK_GLOBAL)
OUT/tiny.json       per tensor: dtype (SafeTensor's name), shape, and the hex of its elements in
                    row-major order, as torch holds them (every value is compared bit for bit)
OUT/legacy.bin      the same state dict in the pre-1.6 format, which the reader refuses
OUT/head1/          models/head1 re-saved as pytorch_model.bin (+ its config.json), one weight
                    stored as a transposed view so the strided path is part of a real head
OUT/head1_i64/      the same with fc.bias stored as int64 (a head must be refused with the name)
OUT/head_both/      models/head1's model.safetensors beside head2's pytorch_model.bin: a head
                    folder with both loads the safetensors
"""
import collections
import json
import os
import shutil
import struct
import sys

import numpy as np
import torch

DTYPE = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64",
         torch.bool: "BOOL"}


def raw_hex(t):
    t = t.detach().contiguous()
    if t.dtype in (torch.float16, torch.bfloat16):
        t = t.view(torch.int16)
    elif t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return t.numpy().tobytes().hex()


def tiny_state_dict():
    g = torch.Generator().manual_seed(7)
    sd = torch.nn.Linear(5, 3).state_dict()  # an OrderedDict with _metadata (pickled with BUILD)
    base = torch.randn(4, 6, generator=g)
    sd["f32"] = torch.randn(3, 5, generator=g)
    sd["f16"] = torch.randn(4, generator=g).half()
    sd["bf16"] = torch.randn(2, 3, generator=g).bfloat16()
    sd["i64"] = torch.tensor([-(2 ** 40), -1, 0, 7, 2 ** 62])
    sd["bool"] = torch.tensor([[True, False, True]])
    sd["base"] = base
    sd["transposed"] = base.t()          # stride (1, 6): copied out row-major
    sd["rows"] = base[1:3]               # storage offset 6, contiguous
    sd["cols"] = base[:, 2:5]            # offset 2, stride (6, 1)
    sd["every_other"] = base[::2, ::3]   # stride (12, 3)
    sd["tied_a"] = sd["tied_b"] = torch.randn(2, 2, generator=g)
    sd["empty"] = torch.zeros(0, 3)
    sd["scalar"] = torch.tensor(3.5)
    sd["param"] = torch.nn.Parameter(torch.randn(2, 3, generator=g))  # _rebuild_parameter
    sd["half_t"] = torch.randn(3, 2, generator=g).half().t()
    return sd


def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack_from("<Q", b)[0]
    header = json.loads(b[8:8 + n])
    data = b[8 + n:]
    out = collections.OrderedDict()
    for name, v in header.items():
        if name == "__metadata__":
            continue
        lo, hi = v["data_offsets"]
        np_type = {"F32": np.float32, "F16": np.float16, "BF16": np.int16}[v["dtype"]]
        t = torch.from_numpy(np.frombuffer(data[lo:hi], np_type).reshape(v["shape"]).copy())
        out[name] = t.view(torch.bfloat16) if v["dtype"] == "BF16" else t
    return out


def head_dir(out, name, tensors, config):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    torch.save(tensors, os.path.join(d, "pytorch_model.bin"))
    shutil.copy(config, os.path.join(d, "config.json"))
    return d


def main():
    out, src = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    sd = tiny_state_dict()
    torch.save(sd, os.path.join(out, "tiny.bin"))
    torch.save(sd, os.path.join(out, "tiny_p4.bin"), pickle_protocol=4)
    torch.save(sd, os.path.join(out, "legacy.bin"), _use_new_zipfile_serialization=False)
    expect = {k: {"dtype": DTYPE[v.dtype], "shape": list(v.shape), "hex": raw_hex(v)} for k, v in sd.items()}
    with open(os.path.join(out, "tiny.json"), "w") as f:
        json.dump(expect, f)

    models = os.path.join(src, "models")
    head1 = read_safetensors(os.path.join(models, "head1", "model.safetensors"))
    config1 = os.path.join(models, "head1", "config.json")
    converted = collections.OrderedDict(head1)
    w = converted["layers.0.self_attn.o_proj.weight"]
    converted["layers.0.self_attn.o_proj.weight"] = w.t().contiguous().t()  # same values, stride (1, rows)
    assert not converted["layers.0.self_attn.o_proj.weight"].is_contiguous()
    head_dir(out, "head1", converted, config1)
    wrong = collections.OrderedDict(head1)
    wrong["fc.bias"] = wrong["fc.bias"].to(torch.int64)
    head_dir(out, "head1_i64", wrong, config1)
    both = head_dir(out, "head_both", read_safetensors(os.path.join(models, "head2", "model.safetensors")), config1)
    shutil.copy(os.path.join(models, "head1", "model.safetensors"), os.path.join(both, "model.safetensors"))


if __name__ == "__main__":
    main()
