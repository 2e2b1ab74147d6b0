#!/usr/bin/python3
"""Assemble the byte-level training corpus from Debian packages' English text.

Sources (exact package versions are pinned in rebuild.sh and recorded in
work/manifest.json):
  linux-doc-6.1   /usr/share/doc/linux-doc-6.1/Documentation/**/*.rst.gz
                  /usr/share/doc/linux-doc-6.1/Documentation/**/*.txt.gz
  python3.11-doc  /usr/share/doc/python3.11/html/_sources/**/*.rst.txt
Both are reStructuredText / plain-text sources (no HTML), so cleaning is light:
decode UTF-8 (invalid bytes dropped), CRLF->LF, tabs -> 8 spaces, strip trailing
whitespace, collapse runs of >2 blank lines.

Split rule: a file goes to held-out iff int(sha256(relpath)[:16], 16) % 20 == 0,
where relpath is "<package>/<path relative to the package root>".
Files are processed in sorted order of relpath; documents are joined with "\n\n".

Outputs (tools/train/work/): train.bin, heldout.bin (raw bytes = token ids),
manifest.json (packages, versions, globs, file lists with split and sizes).
Per-domain streams, built from the same cleaned files with the same joining rule (so
train.bin / heldout.bin are unchanged by them): train_<domain>.bin and
heldout_<domain>.bin for domain "linux" (linux-doc-6.1) and "python" (python3.11-doc).
train_heads.py uses them for HEAD_DATA=linux|python.
"""
import gzip, hashlib, json, os, re, subprocess, sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / "work"

SOURCES = [
    ("linux-doc-6.1", "/usr/share/doc/linux-doc-6.1/Documentation", ["*.rst.gz", "*.txt.gz"]),
    ("python3.11-doc", "/usr/share/doc/python3.11/html/_sources", ["*.rst.txt"]),
]
DOMAINS = {"linux": "linux-doc-6.1", "python": "python3.11-doc"}  # domain -> package


def join(docs):
    return b"\n\n".join(docs) + b"\n"


def pkg_version(pkg):
    return subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], check=True,
                          capture_output=True, text=True).stdout.strip()


def clean(raw: bytes) -> bytes:
    t = raw.decode("utf-8", errors="ignore")
    t = t.replace("\r\n", "\n").replace("\r", "\n").replace("\t", "        ")
    t = "\n".join(l.rstrip() for l in t.split("\n"))
    t = re.sub(r"\n{4,}", "\n\n\n", t).strip("\n")
    return t.encode("utf-8")


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    files = []
    pkgs = {}
    for pkg, root, globs in SOURCES:
        pkgs[pkg] = {"version": pkg_version(pkg), "root": root,
                     "globs": [root + "/**/" + g for g in globs]}
        r = Path(root)
        for g in globs:
            for p in r.rglob(g):
                if p.is_file():
                    files.append((pkg + "/" + str(p.relative_to(r)), p))
    files.sort(key=lambda x: x[0])
    train, held = [], []
    dom = {d: {"train": [], "heldout": []} for d in DOMAINS}
    pkg_dom = {p: d for d, p in DOMAINS.items()}
    listing = []
    for rel, p in files:
        raw = p.read_bytes()
        if p.name.endswith(".gz"):
            raw = gzip.decompress(raw)
        txt = clean(raw)
        if not txt:
            continue
        h = int(hashlib.sha256(rel.encode()).hexdigest()[:16], 16)
        split = "heldout" if h % 20 == 0 else "train"
        (held if split == "heldout" else train).append(txt)
        dom[pkg_dom[rel.split("/", 1)[0]]][split].append(txt)
        listing.append([rel, split, len(txt)])
    tr = join(train)
    he = join(held)
    (WORK / "train.bin").write_bytes(tr)
    (WORK / "heldout.bin").write_bytes(he)
    domains = {}
    for d, parts in dom.items():
        domains[d] = {"package": DOMAINS[d]}
        for split, docs in parts.items():
            b = join(docs)
            (WORK / f"{split}_{d}.bin").write_bytes(b)
            domains[d].update({f"{split}_files": len(docs), f"{split}_bytes": len(b),
                               f"{split}_sha256": hashlib.sha256(b).hexdigest()})
    man = {"packages": pkgs, "split_rule": "sha256(relpath) first 16 hex digits as int % 20 == 0 -> heldout",
           "train_bytes": len(tr), "heldout_bytes": len(he),
           "train_sha256": hashlib.sha256(tr).hexdigest(),
           "heldout_sha256": hashlib.sha256(he).hexdigest(),
           "n_files": len(listing),
           "n_heldout_files": sum(1 for l in listing if l[1] == "heldout"),
           "domains": domains,
           "files": listing}
    (WORK / "manifest.json").write_text(json.dumps(man, indent=1))
    print(json.dumps({k: v for k, v in man.items() if k != "files"}, indent=1))


if __name__ == "__main__":
    main()
