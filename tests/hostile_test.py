#!/usr/bin/python3
"""Hostile-input suite: mutants of the bundled demo files run through the command line.

    hostile_test.py VKSPEC_BINARY [--quick]

Every mutant is a file (or option) a user could be handed: truncations at every structure
boundary of the GGUF and safetensors files, lying counts, lengths and offsets, byte flips, NaN
and Inf weights, negative, huge, fractional and mistyped config values, non-UTF-8 prompts.

What each run must do:
  - never die by a signal or hang (a timeout is a failure);
  - a structurally broken file: exit 1 with a message naming the file;
  - NaN/Inf weights: exit 1 naming the file and the tensor;
  - a mutated draft head that still loads: emit exactly `ar`'s tokens (speculation is
    lossless, so a head can change speed, never the output) — "exit 0 with a corrupted
    result" is therefore detectable for every head mutant;
  - a verifier mutant that still loads (a flip inside weight data or token text): exit 0 is
    fine, its output is that of a different but valid model.
"""
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

VK = sys.argv[1]
QUICK = "--quick" in sys.argv
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "verifier.gguf")
HEAD1 = os.path.join(ROOT, "models", "head1")
HEAD2 = os.path.join(ROOT, "models", "head2")
PROMPT = "84 104 101 32 107 101 114"  # "The ker"
N_NEW = 12
TIMEOUT = 120

failures = []
runs = 0


def run(args, timeout=TIMEOUT):
    global runs
    runs += 1
    try:
        p = subprocess.run([VK] + args, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", ""
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def fail(what, rc, err):
    failures.append(f"{what}: rc={rc} stderr={err.strip()[-400:]!r}")


def gen_args(model, heads=None, strategy="ar", extra=()):
    a = ["generate", "-m", model, "--tokens", PROMPT, "-n", str(N_NEW), "--json"]
    if heads:
        a += ["--heads", heads, "--strategy", strategy]
    return a + list(extra)


def tokens_of(out):
    return json.loads(out)["tokens"]


# ---- GGUF structure ----------------------------------------------------------------------------
# Walks the file as the spec lays it out and records every field boundary, plus where each count,
# length, type and offset lives, so mutants can cut or lie at exactly those places.
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Gguf:
    def __init__(self, data):
        self.d = data
        self.bounds = []     # offsets where a field ends
        self.lengths = []    # offsets of u64 string lengths
        self.counts = []     # offsets of u64 array counts
        self.vtypes = []     # offsets of u32 value types
        self.ndims = []      # offsets of u32 n_dims
        self.dims = []       # offsets of u64 dims
        self.ttypes = []     # offsets of u32 tensor types
        self.toffsets = []   # offsets of u64 tensor data offsets
        self.tensors = {}    # name -> (type, dims, offset)
        self.kv = {}         # key -> (value type, value offset)
        p = 0
        self.magic_end = 4
        p = self._mark(p, 4)
        p = self._mark(p, 4)
        self.n_tensors_at = p
        n_tensors = struct.unpack_from("<Q", data, p)[0]
        p = self._mark(p, 8)
        self.n_kv_at = p
        n_kv = struct.unpack_from("<Q", data, p)[0]
        p = self._mark(p, 8)
        for _ in range(n_kv):
            key, p = self._string(p)
            self.vtypes.append(p)
            t = struct.unpack_from("<I", data, p)[0]
            p = self._mark(p, 4)
            self.kv[key] = (t, p)
            p = self._value(p, t)
        for _ in range(n_tensors):
            name, p = self._string(p)
            self.ndims.append(p)
            nd = struct.unpack_from("<I", data, p)[0]
            p = self._mark(p, 4)
            dims = []
            for _ in range(nd):
                self.dims.append(p)
                dims.append(struct.unpack_from("<Q", data, p)[0])
                p = self._mark(p, 8)
            self.ttypes.append(p)
            tt = struct.unpack_from("<I", data, p)[0]
            p = self._mark(p, 4)
            self.toffsets.append(p)
            off = struct.unpack_from("<Q", data, p)[0]
            p = self._mark(p, 8)
            self.tensors[name] = (tt, dims, off)
        align = 32
        if "general.alignment" in self.kv:
            align = struct.unpack_from("<I", data, self.kv["general.alignment"][1])[0]
        self.data_start = (p + align - 1) // align * align
        self.bounds.append(self.data_start)

    def _mark(self, p, n):
        self.bounds.append(p + n)
        return p + n

    def _string(self, p):
        self.lengths.append(p)
        n = struct.unpack_from("<Q", self.d, p)[0]
        p = self._mark(p, 8)
        s = self.d[p:p + n].decode("utf-8", "replace")
        return s, self._mark(p, n)

    def _value(self, p, t):
        if t in SCALAR:
            return self._mark(p, SCALAR[t])
        if t == 8:
            return self._string(p)[1]
        if t == 9:
            et = struct.unpack_from("<I", self.d, p)[0]
            p = self._mark(p, 4)
            self.counts.append(p)
            n = struct.unpack_from("<Q", self.d, p)[0]
            p = self._mark(p, 8)
            for _ in range(n):
                p = self._value(p, et)
            return p
        raise ValueError(f"unknown GGUF value type {t}")

    def tensor_data(self, name):
        tt, dims, off = self.tensors[name]
        return self.data_start + off, tt


def put(data, at, fmt, value):
    b = bytearray(data)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


def check_refused(what, args, path, must_name=()):
    """A broken file: exit 1, a message naming the file (and `must_name`), no signal, no hang."""
    rc, _, err = run(args)
    if rc != 1 or path not in err or any(m not in err for m in must_name):
        fail(what, rc, err)


def check_survived(what, args, path):
    """A file that may or may not load: exit 0, or exit 1 naming the file. Never a signal."""
    rc, out, err = run(args)
    if rc == 0:
        try:
            tokens_of(out)
        except Exception:
            fail(what + " (exit 0 without valid JSON)", rc, err)
    elif rc != 1 or path not in err:
        fail(what, rc, err)


def gguf_mutants(tmp, rng):
    data = open(MODEL, "rb").read()
    g = Gguf(data)
    path = os.path.join(tmp, "m.gguf")

    def write(b):
        with open(path, "wb") as f:
            f.write(b)

    # Truncation at every boundary of the header, KV section and tensor table (and a few data
    # cuts). The tokenizer arrays have hundreds of elements: keep every 7th of those.
    # The tokenizer arrays give hundreds of boundaries: keep the header's, the tensor table's
    # and an even sample of the rest.
    bounds = sorted(set(b for b in g.bounds if b < len(data)))
    table = bounds[-len(g.tensors) * 6:]
    limit = 40 if QUICK else 160
    bounds = sorted(set(bounds[:24] + bounds[:: max(1, len(bounds) // limit)] + (table[::5] if QUICK else table)))
    cuts = bounds + [0, 1, 3, g.data_start + 1, (g.data_start + len(data)) // 2, len(data) - 1]
    for cut in sorted(set(cuts)):
        write(data[:cut])
        check_refused(f"gguf truncated at {cut} of {len(data)}", gen_args(path), path)

    lies = []
    lies.append(("bad magic", data[:0] + b"GGUG" + data[4:]))
    lies.append(("bad magic 0x80 byte", b"\x80GUF" + data[4:]))
    lies.append(("version 99", put(data, 4, "<I", 99)))
    lies.append(("n_tensors 2^63", put(data, g.n_tensors_at, "<Q", 1 << 63)))
    lies.append(("n_tensors +1", put(data, g.n_tensors_at, "<Q", len(g.tensors) + 1)))
    lies.append(("n_kv 2^40", put(data, g.n_kv_at, "<Q", 1 << 40)))
    lies.append(("n_kv +1", put(data, g.n_kv_at, "<Q", len(g.kv) + 1)))
    for i, at in enumerate(g.lengths[:: max(1, len(g.lengths) // 12)]):
        for v in (1 << 62, (1 << 64) - 1, len(data)):
            lies.append((f"string length {v} at {at}", put(data, at, "<Q", v)))
    for at in g.counts:
        for v in (1 << 40, (1 << 64) - 1, 1 << 27):
            lies.append((f"array count {v} at {at}", put(data, at, "<Q", v)))
    for at in g.vtypes[:: max(1, len(g.vtypes) // 8)]:
        for v in (13, 0xFFFFFFFF):
            lies.append((f"value type {v} at {at}", put(data, at, "<I", v)))
    for at in g.ndims[:4]:
        for v in (0, 5, 1000, 0xFFFFFFFF):
            lies.append((f"n_dims {v} at {at}", put(data, at, "<I", v)))
    for at in g.dims[:6]:
        for v in (0, 1 << 40, (1 << 64) - 1, 1 << 33):
            lies.append((f"dim {v} at {at}", put(data, at, "<Q", v)))
    for at in g.ttypes[:4]:
        for v in (3, 99, 0xFFFFFFFF, 12):
            lies.append((f"tensor type {v} at {at}", put(data, at, "<I", v)))
    for at in g.toffsets[:6]:
        for v in (len(data), (1 << 64) - 32, 1, 1 << 40):
            lies.append((f"tensor offset {v} at {at}", put(data, at, "<Q", v)))
    # Two tensors with the same offset is legal-but-odd aliasing; a duplicate name is not.
    for what, b in lies:
        write(b)
        check_refused("gguf " + what, gen_args(path), path)
    # A value re-typed as an array reads its bytes as one: refused, or (an unused key) loaded.
    for at in g.vtypes[:: max(1, len(g.vtypes) // 8)]:
        write(put(data, at, "<I", 9))
        check_survived(f"gguf value type 9 at {at}", gen_args(path), path)

    # Metadata values of the architecture: zero, negative, huge, non-finite.
    def kv_mutants():
        for key, (t, at) in g.kv.items():
            if not key.startswith("llama."):
                continue
            if t == 4:  # u32
                for v in (0, 0xFFFFFFFF, 1 << 31):
                    yield key, v, put(data, at, "<I", v)
            elif t == 6:  # f32
                for v in (-1.0, 0.0, float("nan"), float("inf"), -float("inf")):
                    yield key, v, put(data, at, "<f", v)

    for key, v, b in kv_mutants():
        write(b)
        if key.endswith("context_length") and v != 0:
            check_survived(f"gguf {key} = {v}", gen_args(path), path)  # a long trained context is fine
        else:
            check_refused(f"gguf {key} = {v}", gen_args(path), path, must_name=(key,))

    # NaN/Inf weights: refused naming the tensor.
    for name in ("output.weight", "token_embd.weight", "blk.0.attn_q.weight", "blk.1.ffn_down.weight",
                 "output_norm.weight", "blk.0.attn_norm.weight"):
        if name not in g.tensors:
            continue
        at, tt = g.tensor_data(name)
        for bits in ((0x7e00, 0x7fc00000), (0x7c00, 0x7f800000), (0xfc00, 0xff800000)):
            b = put(data, at + 8, "<H", bits[0]) if tt == 1 else put(data, at + 16, "<I", bits[1])
            write(b)
            check_refused(f"gguf {name} with {bits[0]:#x}", gen_args(path), path, must_name=(name,))

    # Random flips anywhere in the metadata and tensor table: a clean error or a loadable model.
    n_flips = 40 if QUICK else 150
    for i in range(n_flips):
        at = rng.randrange(0, g.data_start)
        b = bytearray(data)
        b[at] ^= 1 << rng.randrange(8)
        write(bytes(b))
        check_survived(f"gguf flip at {at}", gen_args(path), path)


# ---- draft heads ---------------------------------------------------------------------------------
def head_mutants(tmp, rng, ar_tokens):
    st_data = open(os.path.join(HEAD1, "model.safetensors"), "rb").read()
    cfg = json.load(open(os.path.join(HEAD1, "config.json")))
    hdir = os.path.join(tmp, "head")
    os.makedirs(hdir, exist_ok=True)
    st_path = os.path.join(hdir, "model.safetensors")
    cfg_path = os.path.join(hdir, "config.json")
    heads = f"{hdir},{HEAD2}"  # errors name the head folder or a file in it

    def write(st=st_data, conf=None, conf_text=None):
        with open(st_path, "wb") as f:
            f.write(st)
        with open(cfg_path, "w") as f:
            f.write(conf_text if conf_text is not None else json.dumps(conf if conf is not None else cfg))

    def check_lossless_or_refused(what, path, strategy="merge"):
        rc, out, err = run(gen_args(MODEL, heads, strategy))
        if rc == 0:
            try:
                toks = tokens_of(out)
            except Exception:
                toks = None
            if toks != ar_tokens:
                fail(what + f" (exit 0 with tokens {toks} != ar {ar_tokens})", rc, err)
        elif rc != 1 or hdir not in err:
            fail(what, rc, err)

    # config.json: every key set to hostile values; the head either refuses naming the file, or
    # loads and changes nothing in the output.
    values = [-1, 0, 4294967488, 192.5, "192", None, 1e300, -10000.0, [], {}]
    for key in cfg:
        for v in (values if not QUICK else values[:5] + values[6:8]):
            c = dict(cfg)
            c[key] = v
            write(conf=c)
            check_lossless_or_refused(f"head config {key} = {v!r}", cfg_path)
        c = dict(cfg)
        del c[key]
        write(conf=c)
        check_lossless_or_refused(f"head config without {key}", cfg_path)
    # Bias switches the file has no tensors for: refused naming the first missing bias.
    for key, tensor in (("attention_bias", "q_proj.bias"), ("mlp_bias", "gate_proj.bias")):
        write(conf={**cfg, key: True})
        rc, _, err = run(gen_args(MODEL, heads, "merge"))
        if rc != 1 or tensor not in err or st_path not in err:
            fail(f"head config {key} = true without its tensors", rc, err)
    for text in ("", "{", "[1,2]", "null", '{"hidden_size": NaN}', "\xff\xfe", json.dumps(cfg)[:-7]):
        write(conf_text=text)
        check_lossless_or_refused(f"head config text {text[:20]!r}", cfg_path)

    # safetensors: the header length, the header JSON, the data.
    n = struct.unpack_from("<Q", st_data, 0)[0]
    header = json.loads(st_data[8:8 + n])
    for cut in sorted(set([0, 4, 8, 9, 8 + n // 2, 8 + n - 1, 8 + n, 8 + n + 1, len(st_data) // 2, len(st_data) - 1])):
        write(st=st_data[:cut])
        check_lossless_or_refused(f"safetensors truncated at {cut}", st_path)
    for v in (0, 1, n + 1, len(st_data), 1 << 40, (1 << 64) - 1):
        write(st=put(st_data, 0, "<Q", v))
        check_lossless_or_refused(f"safetensors header length {v}", st_path)

    def with_header(h):
        hb = json.dumps(h).encode()
        hb += b" " * ((8 - len(hb) % 8) % 8)
        return struct.pack("<Q", len(hb)) + hb + st_data[8 + n:]

    names = [k for k in header if k != "__metadata__"]
    for name in names[:: max(1, len(names) // 4)] if QUICK else names:
        t = header[name]
        lo, hi = t["data_offsets"]
        shape = t["shape"]
        for what, new in (
            ("offsets past the end", {"data_offsets": [lo, len(st_data)]}),
            ("offsets reversed", {"data_offsets": [hi, lo]}),
            ("offsets negative", {"data_offsets": [-8, hi]}),
            ("offsets huge", {"data_offsets": [lo, (1 << 64) - 1]}),
            ("offsets fractional", {"data_offsets": [lo + 0.5, hi]}),
            ("float shape", {"shape": [shape[0] + 0.5] + shape[1:]}),
            ("negative shape", {"shape": [-shape[0]] + shape[1:]}),
            ("shape overflowing", {"shape": [1 << 62, 1 << 62] + shape[1:]}),
            ("shape too small", {"shape": [1] + shape[1:]}),
            ("shape string", {"shape": ["x"]}),
            ("dtype unknown", {"dtype": "F8"}),
            ("dtype int", {"dtype": "I64"}),
            ("dtype missing", {"dtype": None}),
        ):
            h = json.loads(json.dumps(header))
            h[name] = {**h[name], **new}
            if new.get("dtype", 1) is None:
                del h[name]["dtype"]
            write(st=with_header(h))
            check_lossless_or_refused(f"safetensors {name}: {what}", st_path)
        h = json.loads(json.dumps(header))
        del h[name]
        write(st=with_header(h))
        check_lossless_or_refused(f"safetensors without {name}", st_path)

    # NaN/Inf in a head weight: refused naming the tensor.
    for name in names:
        lo, _ = header[name]["data_offsets"]
        for bits in (0x7e00, 0x7c00, 0xfc00):
            write(st=put(st_data, 8 + n + lo + 2, "<H", bits))
            rc, out, err = run(gen_args(MODEL, heads, "merge"))
            if rc != 1 or name not in err or st_path not in err:
                fail(f"head {name} with {bits:#x}", rc, err)
        if QUICK:
            break

    # Flips in the header and in the data: a clean refusal, or ar's tokens.
    for i in range(25 if QUICK else 80):
        at = rng.randrange(0, len(st_data)) if i % 2 else rng.randrange(0, 8 + n)
        b = bytearray(st_data)
        b[at] ^= 1 << rng.randrange(8)
        write(st=bytes(b))
        check_lossless_or_refused(f"safetensors flip at {at}", st_path,
                                  ("merge", "merge-trie", "route", "single1")[i % 4])


# ---- prompts and ids -----------------------------------------------------------------------------
def numeric_mutants(tmp):
    """Files whose weights are finite but whose arithmetic would not be: the run must give finite
    logits (computed as the file says) or refuse naming the file, never NaN logits with exit 0."""
    data = open(MODEL, "rb").read()
    g = Gguf(data)
    path = os.path.join(tmp, "bf16.gguf")
    # blk.0.attn_q.weight as bf16 (same two bytes an element), one element 1e5: past f16's 65504,
    # which a bf16 -> f16 conversion at load turned into inf and every logit into NaN.
    at, tt = g.tensor_data("blk.0.attn_q.weight")
    assert tt == 1, "the demo's attn_q is f16"
    n = 192 * 192
    b = bytearray(data)
    halves = struct.unpack_from(f"<{n}e", data, at)
    bf16 = [struct.unpack("<I", struct.pack("<f", x))[0] >> 16 for x in halves]
    bf16[7] = struct.unpack("<I", struct.pack("<f", 1e5))[0] >> 16
    struct.pack_into(f"<{n}H", b, at, *bf16)
    ttype_at = g.ttypes[list(g.tensors).index("blk.0.attn_q.weight")]
    struct.pack_into("<I", b, ttype_at, 30)  # GGML_TYPE_BF16
    with open(path, "wb") as f:
        f.write(b)
    out = os.path.join(tmp, "bf16.f32")
    rc, _, err = run(["logits", "-m", path, "--tokens", "1 72 101 108", "--out", out])
    if rc != 0:
        fail("a bf16 weight of 1e5 (past f16's range) runs", rc, err)
        return
    raw = open(out, "rb").read()
    vals = struct.unpack(f"<{len(raw) // 4}f", raw)
    if not vals or not all(math.isfinite(v) for v in vals):
        fail(f"a bf16 weight of 1e5 gives finite logits ({sum(not math.isfinite(v) for v in vals)} of {len(vals)} are not)", rc, err)


    # output_norm.weight all 3e38: finite, but the normed row overflows; logits and perplexity
    # refuse the row rather than write or score NaN.
    at, tt = g.tensor_data("output_norm.weight")
    assert tt == 0, "the demo's output_norm is f32"
    b = bytearray(data)
    struct.pack_into("<192f", b, at, *([3e38] * 192))
    path = os.path.join(tmp, "norm.gguf")
    with open(path, "wb") as f:
        f.write(b)
    check_refused("an output norm of 3e38: logits refused, not written as NaN",
                  ["logits", "-m", path, "--tokens", "1 72 101 108", "--out", out], path="", must_name=["are not finite"])
    check_refused("an output norm of 3e38: perplexity refused, not NaN",
                  ["perplexity", "-m", path, "--tokens", " ".join(["72"] * 16), "--ctx", "8"], path="", must_name=["are not finite"])
    # generate: the step's argmax / sampling kernels flag such a row; no token comes from it, greedy
    # or sampled, plain or speculative (the generation used to print token 0 or noise, exit 0).
    heads = ",".join(os.path.join(ROOT, "models", h) for h in ("head1", "head2"))
    for extra in ([], ["--temp", "0.8"], ["--heads", heads, "--strategy", "merge"],
                  ["--heads", heads, "--strategy", "route", "--temp", "0.8"]):
        check_refused(f"an output norm of 3e38: generate {' '.join(extra)} refused, no tokens from NaN logits",
                      ["generate", "-m", path, "--tokens", "1 72 101 108", "-n", "8"] + extra, path="",
                      must_name=["position 3 are not finite"])


def prompt_mutants():
    for text in (b"\xff\xfe\xfd", b"abc\xe2\x82", b"\xc0\xaf\xed\xa0\x80", b"\x00in the middle", b"\x80" * 200):
        p = subprocess.run([VK, "generate", "-m", MODEL, "-p", text.replace(b"\x00", b" "), "-n", "4", "--json"],
                           capture_output=True, timeout=TIMEOUT)
        global runs
        runs += 1
        if p.returncode != 0:
            fail(f"prompt {text[:10]!r}", p.returncode, p.stderr.decode("utf-8", "replace"))
            continue
        d = json.loads(p.stdout)
        if len(d["tokens"]) != 4:
            fail(f"prompt {text[:10]!r} gave {len(d['tokens'])} tokens", 0, "")
    # Every command that takes ids: generate, and the verifier-only logits and perplexity.
    for ids in ("256", "-1", "4294967296", "1 2 x", "99999999999999999999999", "0x10"):
        for cmd in (["generate", "-n", "2"], ["logits", "--out", os.devnull], ["perplexity", "--ctx", "4"]):
            rc, _, err = run([cmd[0], "-m", MODEL, "--tokens", ids] + cmd[1:])
            if rc != 1 or "--tokens" not in err and "token id" not in err:
                fail(f"{cmd[0]} --tokens {ids!r}", rc, err)


def main():
    rng = random.Random(2026)
    rc, out, err = run(gen_args(MODEL))
    assert rc == 0, err
    ar_tokens = tokens_of(out)
    rc, out, err = run(gen_args(MODEL, f"{HEAD1},{HEAD2}", "merge"))
    assert rc == 0 and tokens_of(out) == ar_tokens, err
    with tempfile.TemporaryDirectory() as tmp:
        gguf_mutants(tmp, rng)
        head_mutants(tmp, rng, ar_tokens)
        numeric_mutants(tmp)
        prompt_mutants()
    for f in failures:
        print("FAIL:", f)
    print(f"hostile inputs: {runs} runs, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
