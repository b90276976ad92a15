# bench/run-model.sh: sourced by bench/run.sh and bench/replay.sh, which
# measure synthetic models (contract-control weights from
# scripts/make-synthetic-checkpoint.py, generated once and cached):
#
#   small  8 layers (3 linear : 1 sparse), hidden 512, 128 routed experts of
#          width 256 per layer, top-10 (the released model's k): 1024 expert
#          records of 768 KiB = 768 MiB of experts, plus ~40 MiB dense and a
#          PLE table (the bench model since the first bench/run.sh);
#   real   the released checkpoint's widths on 4 layers (3 GDN + 1 QSA):
#          hidden 2560, 64 routed experts of width 640, top-10, shared expert
#          640, QSA 16 heads (2 KV) of head_dim 256, GDN 16 key / 48 value
#          heads of 128, indexer 16 heads of 128; vocab 8192 (the released
#          151,936 would add a 778 MiB LM head that only decode reads):
#          256 expert records of 9.4 MiB = 2.34 GiB of experts (bf16).
#
# Needs: root, bench (the cache directory).  run_model NAME sets geometry,
# tag, ck and generates $ck when it is missing.  Default model: small.

run_model() { # small | real
	case ${1:-small} in
	small)
		geometry=(--layers 8 --hidden 512 --experts 128 --top-k 10 --moe-intermediate 256
			--shared-intermediate 256 --vocab 8192 --heads 8 --kv-heads 2 --head-dim 64
			--indexer-heads 4 --indexer-head-dim 32 --indexer-budget 64 --indexer-compress-ratio 4
			--linear-key-heads 4 --linear-value-heads 8 --linear-key-head-dim 64
			--linear-value-head-dim 64 --hc-lowrank 32 --ple-layers 2 --heads-per-ngram 4
			--ple-embed-dim 256 --ngram-base 5000 --shards 4 --seed 11)
		tag=h512-e128-l8-k10-v1 ;;
	real)
		geometry=(--layers 4 --hidden 2560 --experts 64 --top-k 10 --moe-intermediate 640
			--shared-intermediate 640 --vocab 8192 --heads 16 --kv-heads 2 --head-dim 256
			--indexer-heads 16 --indexer-head-dim 128 --indexer-budget 64 --indexer-compress-ratio 4
			--linear-key-heads 16 --linear-value-heads 48 --linear-key-head-dim 128
			--linear-value-head-dim 128 --hc-lowrank 32 --ple-layers 2 --heads-per-ngram 4
			--ple-embed-dim 256 --ngram-base 5000 --shards 8 --seed 11)
		tag=h2560-e64-l4-k10-v1 ;;
	*)
		echo "bench: unknown model '$1' (small or real)" >&2
		return 2 ;;
	esac
	ck=$bench/ck-run-$tag
	[[ -e $ck/.complete ]] && return 0
	rm -rf "$ck"
	echo "generating $ck (once; cached) ..."
	python3 "$root/scripts/make-synthetic-checkpoint.py" --out "$ck" \
		--summary "$bench/ck-run-$tag.summary.json" "${geometry[@]}"
	touch "$ck/.complete"
}

# the name bench/replay.sh has always called
run_model_checkpoint() {
	run_model small
}
