# bench/run-model.sh: sourced by bench/run.sh and bench/replay.sh, which
# measure the same synthetic model: 8 layers (3 linear : 1 sparse), hidden
# 512, 128 routed experts of width 256 per layer, top-10 (the released
# model's k): 1024 expert records of 768 KiB = 768 MiB of experts, plus
# ~40 MiB dense and a PLE table.  Contract-control weights
# (scripts/make-synthetic-checkpoint.py), generated once and cached.
#
# Needs: root, bench (the cache directory).  Sets: geometry, tag, ck;
# defines run_model_checkpoint, which generates $ck when it is missing.

geometry=(--layers 8 --hidden 512 --experts 128 --top-k 10 --moe-intermediate 256
	--shared-intermediate 256 --vocab 8192 --heads 8 --kv-heads 2 --head-dim 64
	--indexer-heads 4 --indexer-head-dim 32 --indexer-budget 64 --indexer-compress-ratio 4
	--linear-key-heads 4 --linear-value-heads 8 --linear-key-head-dim 64
	--linear-value-head-dim 64 --hc-lowrank 32 --ple-layers 2 --heads-per-ngram 4
	--ple-embed-dim 256 --ngram-base 5000 --shards 4 --seed 11)
tag=h512-e128-l8-k10-v1
ck=$bench/ck-run-$tag

run_model_checkpoint() {
	[[ -e $ck/.complete ]] && return 0
	rm -rf "$ck"
	echo "generating $ck (once; cached) ..."
	python3 "$root/scripts/make-synthetic-checkpoint.py" --out "$ck" \
		--summary "$bench/ck-run-$tag.summary.json" "${geometry[@]}"
	touch "$ck/.complete"
}
