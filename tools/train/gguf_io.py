"""Minimal GGUF v3 writer/reader and a numpy reference forward of the llama verifier.

GGUF layout written here:
  "GGUF" | u32 version=3 | u64 n_tensors | u64 n_kv | kv pairs | tensor infos |
  pad to general.alignment (32) | tensor data (each tensor at an offset that is a
  multiple of 32 from the start of the data section).
  kv pair   : string key | u32 type | value
  string    : u64 length | utf-8 bytes
  array     : u32 elem type | u64 count | elems
  tensor info: string name | u32 n_dims | u64 dims[n_dims] (innermost first) | u32 ggml type | u64 offset
A numpy array of shape (out, in) is stored with dims [in, out] (rows of length `in`
contiguous), i.e. its C-order bytes are written unchanged.
"""
import struct
import numpy as np

GGUF_MAGIC = b"GGUF"
ALIGN = 32
# value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
_SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
           BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
GGML_F32, GGML_F16 = 0, 1


def bytes_to_unicode():
    """GPT-2's byte -> unicode-character table (token i = string for byte i)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _val(t, v):
    if t == STR:
        return _str(v)
    if t == ARR:
        et, items = v
        out = struct.pack("<IQ", et, len(items))
        return out + b"".join(_val(et, x) for x in items)
    return struct.pack(_SCALAR[t], v)


def write_gguf(path, kvs, tensors):
    """kvs: list of (key, type, value) ; for arrays value = (elem_type, list).
    tensors: list of (name, np.ndarray float16/float32) in file order."""
    kvs = list(kvs)
    if not any(k == "general.alignment" for k, _, _ in kvs):
        kvs.append(("general.alignment", U32, ALIGN))
    out = bytearray()
    out += GGUF_MAGIC + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += _str(k) + struct.pack("<I", t) + _val(t, v)
    off = 0
    blobs = []
    for name, a in tensors:
        a = np.ascontiguousarray(a)
        gt = {np.dtype(np.float16): GGML_F16, np.dtype(np.float32): GGML_F32}[a.dtype]
        dims = list(reversed(a.shape))
        out += _str(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", gt, off)
        blobs.append((off, a.tobytes()))
        off += len(a.tobytes())
        off = (off + ALIGN - 1) // ALIGN * ALIGN
    out += b"\0" * ((-len(out)) % ALIGN)
    base = len(out)
    for o, b in blobs:
        out += b"\0" * (base + o - len(out))
        out += b
    with open(path, "wb") as f:
        f.write(bytes(out))


class _R:
    def __init__(self, buf):
        self.b, self.p = buf, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def str(self):
        n = self.take("<Q")
        s = bytes(self.b[self.p:self.p + n]).decode("utf-8")
        self.p += n
        return s

    def val(self, t):
        if t == STR:
            return self.str()
        if t == ARR:
            et, n = self.take("<I"), self.take("<Q")
            return [self.val(et) for _ in range(n)]
        return self.take(_SCALAR[t])


def read_gguf(path):
    """Returns (kv dict, tensors dict name -> numpy array with torch-style shape)."""
    buf = open(path, "rb").read()
    r = _R(buf)
    assert buf[:4] == GGUF_MAGIC, "bad magic"
    r.p = 4
    ver = r.take("<I")
    assert ver == 3, ver
    nt, nkv = r.take("<Q"), r.take("<Q")
    kv = {}
    for _ in range(nkv):
        k = r.str()
        t = r.take("<I")
        kv[k] = r.val(t)
    infos = []
    for _ in range(nt):
        name = r.str()
        nd = r.take("<I")
        dims = [r.take("<Q") for _ in range(nd)]
        gt, off = r.take("<I"), r.take("<Q")
        infos.append((name, dims, gt, off))
    align = kv.get("general.alignment", 32)
    base = (r.p + align - 1) // align * align
    tens = {}
    for name, dims, gt, off in infos:
        dt = {GGML_F16: np.float16, GGML_F32: np.float32}[gt]
        n = int(np.prod(dims))
        a = np.frombuffer(buf, dtype=dt, count=n, offset=base + off)
        tens[name] = a.reshape(list(reversed(dims)))
    return kv, tens


class NumpyLlama:
    """Reference llama forward from GGUF tensors, llama.cpp conventions:
    RMSNorm, RoPE 'normal' mode = rotate consecutive pairs (2i, 2i+1) in each head."""

    def __init__(self, path):
        self.kv, t = read_gguf(path)
        self.t = {k: v.astype(np.float32) for k, v in t.items()}
        kv = self.kv
        self.C = kv["llama.embedding_length"]
        self.L = kv["llama.block_count"]
        self.H = kv["llama.attention.head_count"]
        self.Hkv = kv["llama.attention.head_count_kv"]
        self.eps = kv["llama.attention.layer_norm_rms_epsilon"]
        self.theta = kv["llama.rope.freq_base"]
        self.D = self.C // self.H
        self.out = self.t.get("output.weight", self.t["token_embd.weight"])

    def _norm(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w

    def _rope(self, x, pos):  # x: T, nh, D
        D = x.shape[-1]
        inv = 1.0 / (self.theta ** (np.arange(0, D, 2, dtype=np.float64) / D))
        ang = pos[:, None].astype(np.float64) * inv[None, :]
        c, s = np.cos(ang).astype(np.float32)[:, None, :], np.sin(ang).astype(np.float32)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        y = np.empty_like(x)
        y[..., 0::2] = x0 * c - x1 * s
        y[..., 1::2] = x0 * s + x1 * c
        return y

    def forward(self, ids, return_features=False):
        """Full-sequence causal forward (no cache). Returns logits (T, vocab)."""
        t = self.t
        T = len(ids)
        pos = np.arange(T)
        x = t["token_embd.weight"][np.asarray(ids)]
        mask = np.triu(np.full((T, T), -np.inf, dtype=np.float32), 1)
        rep = self.H // self.Hkv
        for l in range(self.L):
            p = f"blk.{l}."
            h = self._norm(x, t[p + "attn_norm.weight"])
            q = (h @ t[p + "attn_q.weight"].T).reshape(T, self.H, self.D)
            k = (h @ t[p + "attn_k.weight"].T).reshape(T, self.Hkv, self.D)
            v = (h @ t[p + "attn_v.weight"].T).reshape(T, self.Hkv, self.D)
            q, k = self._rope(q, pos), self._rope(k, pos)
            k = np.repeat(k, rep, axis=1)
            v = np.repeat(v, rep, axis=1)
            att = np.einsum("thd,shd->hts", q, k) / np.sqrt(self.D) + mask
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            y = np.einsum("hts,shd->thd", att, v).reshape(T, self.C)
            x = x + y @ t[p + "attn_output.weight"].T
            h = self._norm(x, t[p + "ffn_norm.weight"])
            g = h @ t[p + "ffn_gate.weight"].T
            u = h @ t[p + "ffn_up.weight"].T
            x = x + ((g / (1 + np.exp(-g))) * u) @ t[p + "ffn_down.weight"].T
        f = self._norm(x, t["output_norm.weight"])
        logits = f @ self.out.T
        return (logits, f) if return_features else logits
