#!/bin/sh
# Rebuild models/verifier.gguf, models/head{1,2,3}/, models/prompts.txt from Debian packages.
# Deterministic: fixed seeds, 1 thread, step-indexed data sampling. Bit-for-bit identical
# on the same torch (Debian python3-torch 1.13) / OpenBLAS build and CPU class.
# Intermediate files go to tools/train/work/ (gitignored). Set RESUME=1 to keep the
# checkpoints of an interrupted run (training resumes exactly where it stopped).
# VERIFIER_FROM_GGUF=1 skips the verifier training: work/verifier.pt is rebuilt from the
# shipped models/verifier.gguf instead (exact for the heads, which train against the f16
# weights; export_gguf.py then writes the same verifier.gguf back byte for byte).
set -eu
cd "$(dirname "$0")"
PY=/usr/bin/python3
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then
  apt-get install -y linux-doc-6.1=6.1.192-2 python3.11-doc=3.11.2-6+deb12u9 \
    python3-torch python3-numpy libopenblas0-openmp
fi
mkdir -p work
[ "${RESUME:-0}" = 1 ] || rm -f work/*_ckpt.pt work/*.pt work/*_log.txt
$PY corpus.py                 # -> work/{train,heldout}.bin, work/{train,heldout}_{linux,python}.bin,
                              #    work/manifest.json
if [ "${VERIFIER_FROM_GGUF:-0}" = 1 ]; then
  $PY gguf_to_pt.py           # -> work/verifier.pt from ../../models/verifier.gguf
else
  $PY train_verifier.py       # -> work/verifier.pt   (~55 min on one core)
fi
HEAD_DATA=linux $PY train_heads.py 1   # -> work/head1.pt: linux-doc-6.1 specialist
HEAD_DATA=python $PY train_heads.py 2  # -> work/head2.pt: python3.11-doc specialist (boosted on head-1 misses)
$PY train_head3.py train      # -> work/head3.pt: EAGLE-3 head (tap rows in, draft vocabulary of 128)
$PY train_heads.py eval       # -> work/heads_eval.json (held-out: both domains, and each one)
$PY export_gguf.py            # -> ../../models/verifier.gguf
$PY check_gguf.py             # numpy GGUF forward == torch forward
$PY export_heads.py           # -> ../../models/head{1,2}/
$PY check_heads.py            # numpy head (rotate_half, HF layout) == torch head
$PY export_head3.py           # -> ../../models/head3/ (pytorch_model.bin, config.json)
$PY train_head3.py eval       # -> work/head3_eval.json (held-out agreement, vs the shipped head 1)
$PY make_prompts.py           # -> ../../models/prompts.txt
$PY eval_verifier.py          # held-out loss of the exported GGUF weights
sha256sum ../../models/verifier.gguf ../../models/head1/* ../../models/head2/* ../../models/head3/* ../../models/prompts.txt
