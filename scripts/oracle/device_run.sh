#!/usr/bin/env bash
# Regenerates tests/fixtures/upstream on a machine with the pinned stack
# (torch 2.11, transformers 5.17.0, safetensors 0.8, Python 3.12), offline, CPU float32.
# Packs everything into $OUT/fixtures.tar and the full log into $OUT/log.txt.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)/upstream
mkdir -p "$work" "${OUT:?set OUT}"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=""
export PYTHONHASHSEED=0
rc=0
{
python3 "$here/make_checkpoints.py" --out "$work" || rc=1
if [ $rc = 0 ]; then
  python3 "$here/capture.py" --root "$work" realshape general || rc=2
  python3 "$here/derive.py" --root "$work" || rc=3
fi
rm -f "$work"/*/build.json
du -sh "$work"/*
echo "device_run rc=$rc"
} 2>&1 | tee "$OUT/log.txt"
# one archive per checkpoint keeps every returned file far below the transfer limit
for d in "$work"/*/; do
  n=$(basename "$d")
  tar -C "$(dirname "$work")" -czf "$OUT/$n.tar.gz" "upstream/$n"
done
ls -l "$OUT"
grep -q "device_run rc=0" "$OUT/log.txt"
