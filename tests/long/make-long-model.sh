#!/usr/bin/env bash
# make-long-model.sh OUT_DIR: write the tiny development checkpoint of the
# long sparse-context model test (tests/unit/test_qsa_model_long.c).
#
# The QSA parameters are the released checkpoint's (indexer budget 2048,
# compress ratio 4); everything else is as small as the converter accepts,
# so that a 262,144-token prefill costs about what its group scoring costs:
# one decoder layer, and it is the sparse one (no Gated DeltaNet, no PLE),
# hidden 16, two hyper-connection streams, two experts, vocabulary 64, one
# query head and one KV head of 16, one index head of 8.  The config's
# max_position_embeddings is raised from the generator's 4096 to the
# released profile's context, 262,144 (the dev profile takes the geometry
# from config.json; nothing in conversion, admission or the session bounds
# the context by it, but the artifact should state the context it is run
# at).  Weights are the generator's keyed pseudo-random values (--seed 7).
set -euo pipefail

out=${1:?usage: make-long-model.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)

python3 "$root/scripts/make-synthetic-checkpoint.py" --out "$out" --force --seed 7 \
	--summary "$out.summary.json" \
	--layers 1 --sparse-every 1 --ple-layers '' \
	--hidden 16 --vocab 64 --experts 2 --top-k 1 \
	--moe-intermediate 8 --shared-intermediate 8 \
	--heads 1 --kv-heads 1 --head-dim 16 --hc-count 2 --hc-lowrank 2 \
	--indexer-heads 1 --indexer-head-dim 8 \
	--indexer-budget 2048 --indexer-compress-ratio 4

python3 - "$out/config.json" <<'PY'
import json, sys
path = sys.argv[1]
with open(path) as f:
    cfg = json.load(f)
cfg["text_config"]["max_position_embeddings"] = 262144
with open(path + ".tmp", "w") as f:
    json.dump(cfg, f, indent=2)
    f.write("\n")
PY
mv "$out/config.json.tmp" "$out/config.json"
