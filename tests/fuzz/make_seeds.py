#!/usr/bin/env python3
"""Seed corpora for the libFuzzer harnesses in tests/fuzz/, derived at build time (nothing
binary is committed): OUT/<harness>/ for fuzz_gguf, fuzz_safetensors, fuzz_head_config,
fuzz_tokenizer, fuzz_torch, fuzz_llama2c, fuzz_bench_json and fuzz_args.

Seeds are kept small (mostly < 64 KB) so the fuzzers mutate structure rather than megabytes of
weights: tiny random models from make_random_gguf, the bundled heads' configs and safetensors
headers, and vocabularies cut from the bundled verifier and ../shared/tokenizer-vectors (a
prefix of the tokens with the scores, types and merges that still apply to it), and
pytorch_model.bin archives laid out as torch.save writes them (pickles assembled here, so no
torch is needed to build the seeds), tiny llama2.c checkpoints written here, and the suite
results kept in docs/.

usage: make_seeds.py --source REPO --out DIR --make-random-gguf PATH
"""
import argparse
import io
import json
import os
import struct
import subprocess
import zipfile

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}


class Reader:
    def __init__(self, buf):
        self.b, self.p = buf, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.b[self.p:self.p + n]
        self.p += n
        return s

    def value(self, t):
        if t == STR:
            return self.string()
        if t == ARR:
            et, n = self.take("<I"), self.take("<Q")
            return (et, [self.value(et) for _ in range(n)])
        return self.take(SCALAR[t])


def read_metadata(path):
    """[(key bytes, type, value)] of a GGUF file (values typed as in the file)."""
    r = Reader(open(path, "rb").read())
    assert r.b[:4] == b"GGUF"
    r.p = 8
    _, n_kv = r.take("<Q"), r.take("<Q")
    out = []
    for _ in range(n_kv):
        k = r.string()
        t = r.take("<I")
        out.append((k, t, r.value(t)))
    return out


def encode_value(t, v):
    if t == STR:
        return struct.pack("<Q", len(v)) + v
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(encode_value(et, x) for x in items)
    return struct.pack(SCALAR[t], v)


def write_metadata_only(kvs):
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    for k, t, v in kvs:
        out += struct.pack("<Q", len(k)) + k + struct.pack("<I", t) + encode_value(t, v)
    return out


def cut_vocab(kvs, n_tokens):
    """The tokenizer.* entries with the vocabulary cut to its first n_tokens tokens."""
    d = {k: (t, v) for k, t, v in kvs}
    toks = d[b"tokenizer.ggml.tokens"][1][1][:n_tokens]
    keep = set(toks)
    out = []
    for k, t, v in kvs:
        if not k.startswith(b"tokenizer."):
            continue
        if k in (b"tokenizer.ggml.tokens", b"tokenizer.ggml.scores", b"tokenizer.ggml.token_type"):
            v = (v[0], v[1][:len(toks)])
        elif k == b"tokenizer.ggml.merges":
            ms = []
            for m in v[1]:
                a, _, b = m.partition(b" ")
                if a in keep and b in keep and a + b in keep:
                    ms.append(m)
            v = (v[0], ms)
        elif t in (U32, I32, U64, I64) and k.endswith(b"_token_id") and v >= len(toks):
            continue
        out.append((k, t, v))
    return write_metadata_only(out)


def put(out, harness, name, data):
    d = os.path.join(out, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors):
    """tensors: [(name, dtype, shape)] -> bytes with zero data."""
    size = {"F32": 4, "F16": 2, "BF16": 2}
    h, off = {}, 0
    for name, dt, shape in tensors:
        n = size[dt]
        for d in shape:
            n *= d
        h[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    hs = json.dumps(h).encode()
    return struct.pack("<Q", len(hs)) + hs + b"\0" * off


TORCH_STORAGE = {"F32": ("FloatStorage", 4), "F16": ("HalfStorage", 2), "BF16": ("BFloat16Storage", 2),
                 "I64": ("LongStorage", 8), "BOOL": ("BoolStorage", 1)}


def torch_seeds(tensors, protocol=2):
    """tensors: [(name, dtype, shape, transposed)] -> fuzz_torch's two input forms (see
    fuzz_torch.cpp): 0x01 + a torch.save-style zip with zero data, and 0x00 + storage sizes +
    the bare pickle. The pickle uses the opcodes torch.save emits at `protocol` (2: GLOBAL,
    BINPUT; 4: STACK_GLOBAL, MEMOIZE, SHORT_BINUNICODE, FRAME)."""
    p4 = protocol >= 4
    memo = [0]

    def put():
        if p4:
            return b"\x94"
        memo[0] += 1
        return b"q" + bytes([(memo[0] - 1) & 0xff])

    def text(s):
        s = s.encode()
        return (b"\x8c" + bytes([len(s)]) if p4 and len(s) < 256 else b"X" + struct.pack("<I", len(s))) + s + put()

    def glob(module, name):
        if p4:
            return text(module) + text(name) + b"\x93" + put()
        return b"c" + module.encode() + b"\n" + name.encode() + b"\n" + put()

    def integer(v):
        return b"\x8a\x08" + struct.pack("<q", v)

    def ints(vs):
        return b"(" + b"".join(integer(v) for v in vs) + b"t"

    body = glob("collections", "OrderedDict") + b")R" + put() + b"("
    storages = []
    for i, (name, dt, shape, transposed) in enumerate(tensors):
        storage, size = TORCH_STORAGE[dt]
        numel = 1
        for d in shape:
            numel *= d
        stride = [1] * len(shape)
        for d in range(len(shape) - 2, -1, -1):
            stride[d] = stride[d + 1] * shape[d + 1]
        if transposed and len(shape) == 2:  # a .t() view of a (cols, rows) storage
            stride = [1, shape[0]]
        body += text(name) + glob("torch._utils", "_rebuild_tensor_v2") + b"(("
        body += text("storage") + glob("torch", storage) + text(str(i)) + text("cpu") + integer(numel) + b"tQ"
        body += integer(0) + ints(shape) + ints(stride) + b"\x89" + glob("collections", "OrderedDict") + b")Rt" + b"R"
        storages.append((str(i), b"\0" * (numel * size)))
    body += b"u."
    pkl = b"\x80" + bytes([protocol]) + ((b"\x95" + struct.pack("<Q", len(body))) if p4 else b"") + body
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl)
        for key, data in storages:
            z.writestr("archive/data/" + key, data)
        z.writestr("archive/version", "3\n")
    bare = bytes([len(storages)]) + b"".join(struct.pack("<I", len(d)) for _, d in storages) + pkl
    return b"\x01" + buf.getvalue(), b"\x00" + bare


def llama2c(dim, hidden, layers, heads, kv_heads, vocab, seq_len, shared=True):
    """A llama2.c legacy checkpoint: 7 int32 (a negative vocab: the classifier is stored apart),
    then the f32 arrays in the order llama2.c writes them, small varied values."""
    d, kvd = dim // heads, kv_heads * (dim // heads)
    floats = (vocab * dim + layers * dim + layers * dim * dim + 2 * layers * kvd * dim + layers * dim * dim +
              layers * dim + 3 * layers * hidden * dim + dim + 2 * seq_len * (d // 2) +
              (0 if shared else vocab * dim))
    head = struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab if shared else -vocab, seq_len)
    return head + b"".join(struct.pack("<f", ((i * 37) % 17 - 8) / 16.0) for i in range(floats))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--make-random-gguf", required=True)
    a = ap.parse_args()
    src, out = a.source, a.out
    shared = os.path.join(src, "..", "shared")
    text = open(os.path.join(src, "models", "prompts.txt"), "rb").read()[:300]

    # fuzz_gguf: tiny valid models of every weight type the tool writes, and real headers.
    tmp = os.path.join(out, "tmp.gguf")
    os.makedirs(out, exist_ok=True)
    for ty, dim in (("f32", 8), ("f16", 8), ("q8_0", 32)):
        for tied in (False, True):
            cmd = [a.make_random_gguf, tmp, "--dim", str(dim), "--layers", "1", "--heads", "2",
                   "--kv-heads", "1", "--ffn", "16", "--vocab", "8", "--type", ty]
            subprocess.run(cmd + (["--tied"] if tied else []), check=True, stdout=subprocess.DEVNULL)
            put(out, "fuzz_gguf", "random-%s%s.gguf" % (ty, "-tied" if tied else ""), open(tmp, "rb").read())
    # RoPE scaling the loader computes: YaRN on a NEOX model, Phi-3's LongRoPE tables.
    for name, extra in (("qwen2-yarn", ["--arch", "qwen2", "--yarn", "4", "--orig-ctx", "16"]),
                        ("phi3-longrope", ["--arch", "phi3", "--longrope", "--orig-ctx", "16"])):
        cmd = [a.make_random_gguf, tmp, "--dim", "8", "--layers", "1", "--heads", "2", "--kv-heads", "1",
               "--ffn", "16", "--vocab", "8", "--type", "f32", "--tied"] + extra
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        put(out, "fuzz_gguf", "random-%s.gguf" % name, open(tmp, "rb").read())
    os.remove(tmp)
    verifier = os.path.join(src, "models", "verifier.gguf")
    put(out, "fuzz_gguf", "verifier-prefix.gguf", open(verifier, "rb").read()[:65536])
    vkv = read_metadata(verifier)
    put(out, "fuzz_gguf", "verifier-vocab.gguf", cut_vocab(vkv, 1 << 30))

    # fuzz_tokenizer, odd first byte: u32 length, a GGUF vocabulary, then text.
    def raw_seed(gguf, t):
        return b"\x01" + struct.pack("<I", len(gguf)) + gguf + t
    put(out, "fuzz_tokenizer", "verifier.bin", raw_seed(cut_vocab(vkv, 1 << 30), text))
    for name, n in (("ggml-vocab-llama-spm.gguf", 600), ("ggml-vocab-gpt-2.gguf", 1200)):
        p = os.path.join(shared, "tokenizer-vectors", name)
        if not os.path.exists(p):
            continue
        vocab = cut_vocab(read_metadata(p), n)
        inp = open(p + ".inp", "rb").read().split(b"\n__ggml_vocab_test__\n")
        put(out, "fuzz_gguf", name, vocab)
        for i, t in enumerate(inp[:8]):
            put(out, "fuzz_tokenizer", "%s-%d.bin" % (name, i), raw_seed(vocab, t))
    # Even first byte: a vocabulary described by the bytes (see fuzz_tokenizer.cpp).
    for i, t in enumerate((b"\x00" * 16 + text, b"\x00\x01" * 40 + text, bytes(range(256)))):
        put(out, "fuzz_tokenizer", "structured-%d.bin" % i, b"\x00" + t)

    # fuzz_safetensors: the bundled heads' tensor names and dtypes at tiny shapes, and their
    # real headers with the data cut off.
    for h in ("head1", "head2"):
        st = open(os.path.join(src, "models", h, "model.safetensors"), "rb").read()
        hlen = struct.unpack_from("<Q", st)[0]
        header = json.loads(st[8:8 + hlen])
        put(out, "fuzz_safetensors", h + "-header.safetensors", st[:8 + hlen + 64])
        tiny = [(k, v["dtype"], [2] * len(v["shape"])) for k, v in header.items() if k != "__metadata__"]
        put(out, "fuzz_safetensors", h + "-tiny.safetensors", safetensors(tiny))
        put(out, "fuzz_head_config", h + ".json", open(os.path.join(src, "models", h, "config.json"), "rb").read())
        tiny_bin = [(k, dt, s, False) for k, dt, s in tiny]
        for proto in (2, 4):
            put(out, "fuzz_torch", "%s-tiny-p%d.zip" % (h, proto), torch_seeds(tiny_bin, protocol=proto)[0])
            # The bare form: fuzz_torch zips at most 7 storages.
            put(out, "fuzz_torch", "%s-tiny-p%d.pkl" % (h, proto), torch_seeds(tiny_bin[:7], protocol=proto)[1])
    dtypes = [("a", "F32", [3, 2], True), ("b", "F16", [5], False), ("c", "BF16", [2, 2, 2], False),
              ("d", "I64", [3], False), ("e", "BOOL", [2, 2], False), ("f", "F32", [0], False)]
    for proto in (2, 4):
        zipped, bare = torch_seeds(dtypes, protocol=proto)
        put(out, "fuzz_torch", "dtypes-p%d.zip" % proto, zipped)
        put(out, "fuzz_torch", "dtypes-p%d.pkl" % proto, bare)
    put(out, "fuzz_safetensors", "dtypes.safetensors",
        safetensors([("a", "F32", [3, 1]), ("b", "F16", [5]), ("c", "BF16", [2, 2, 2]), ("d", "F32", [0])]))
    put(out, "fuzz_head_config", "minimal.json",
        json.dumps({"hidden_size": 192, "num_attention_heads": 6, "intermediate_size": 512,
                    "vocab_size": 256}).encode())
    # rope_scaling as Llama 3.1 heads ship it, and the older linear form.
    put(out, "fuzz_head_config", "rope-llama3.json",
        json.dumps({"hidden_size": 192, "num_attention_heads": 6, "intermediate_size": 512,
                    "vocab_size": 256, "rope_theta": 500000.0,
                    "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                     "original_max_position_embeddings": 8192,
                                     "rope_type": "llama3"}}).encode())
    put(out, "fuzz_head_config", "rope-linear.json",
        json.dumps({"hidden_size": 192, "num_attention_heads": 6, "intermediate_size": 512,
                    "vocab_size": 256, "rope_scaling": {"type": "linear", "factor": 2.0}}).encode())
    # a GELU head with both bias switches
    put(out, "fuzz_head_config", "gelu-bias.json",
        json.dumps({"hidden_size": 192, "num_attention_heads": 6, "intermediate_size": 512,
                    "vocab_size": 256, "hidden_act": "gelu_pytorch_tanh", "attention_bias": True,
                    "mlp_bias": False}).encode())

    # fuzz_llama2c: valid checkpoints (shared and separate classifier, grouped KV heads, a dim
    # that q8_0 blocks divide and one they do not), a bare header, and the versioned magic.
    put(out, "fuzz_llama2c", "shared.bin", llama2c(8, 16, 1, 2, 1, 10, 4))
    put(out, "fuzz_llama2c", "classifier.bin", llama2c(8, 12, 2, 4, 2, 6, 3, shared=False))
    put(out, "fuzz_llama2c", "q8-rows.bin", llama2c(32, 64, 1, 4, 4, 5, 2))
    put(out, "fuzz_llama2c", "header-only.bin", struct.pack("<7i", 8, 16, 1, 2, 1, 10, 4))
    put(out, "fuzz_llama2c", "ak42.bin", struct.pack("<I6i", 0x616b3432, 1, 0, 0, 0, 0, 0))

    # Saved `bench --suite` results as the repo keeps them, and the same trimmed to a few entries
    # per list (short inputs let the fuzzer mutate structure rather than wade through figures).
    def trimmed(v):
        if isinstance(v, list):
            return [trimmed(e) for e in v[:2]]
        if isinstance(v, dict):
            return {k: trimmed(e) for k, e in v.items()}
        return v
    for name in sorted(os.listdir(os.path.join(src, "docs"))):
        if name.startswith("bench-suite-") and name.endswith(".json"):
            raw = open(os.path.join(src, "docs", name), "rb").read()
            put(out, "fuzz_bench_json", name, raw)
            put(out, "fuzz_bench_json", "trimmed-" + name, json.dumps(trimmed(json.loads(raw))).encode())

    # Command lines as people type them, words separated by NUL bytes (fuzz_args.cpp).
    for i, argv in enumerate((
            ["-m", "models/verifier.gguf", "-p", "The kernel", "-n", "64", "--json"],
            ["--model=m.gguf", "--tokens", "1 2 3", "--budget", "8", "--temp", "0.7", "--time-kernels"],
            ["-m", "m", "-p", "two", "words", "-n", "-5", "--temp", "-.5", "-p", "again"],
            ["--prompt", "x", "-p", "y", "--", "-", "--=v", "--n=4294967296", "--budget", "0"],
            ["-m", "m", "--topk", "1,2,4", "--tokens", "1"],
            ["-m", "m", "--topk", "1,,2,2,", "--topk=,"],
            ["-m", "m", "--budget", "", "--json=", "--md", "--tokens", "1"],
            ["-m", "m", "--md=out.md", "--json", "--tokens="],
            ["-m", "m", "--top-p", "0.9", "--temp", "1e-40"],
            ["-m", "m", "--top-p=1e-46", "--top-p", "3.5e38"])):
        put(out, "fuzz_args", "argv-%d.bin" % i, b"\0".join(w.encode() for w in argv))


if __name__ == "__main__":
    main()
