#!/bin/bash
# bench/gpu-cli.sh: the fronts on the GPU against the CPU reference, on the
# upstream fixtures (GPU machine only; bench/gpu-session.sh cli runs it).
#
# For each fixture (realshape, general): convert the checkpoint; three
# seeded prompts, each decoded greedily for 13 tokens by hb-run --backend
# cpu and --backend cuda (every logit row and route dumped); the generated
# ids must be identical and the largest |logit difference| within 1e-3;
# then the prompts with their generations replayed by hb-replay label
# --backend cuda (chunks of 5) and checked by hb-replay parity against the
# CPU's decode traces (every decode record must equal its label), and
# labelled by --backend cpu too, the two shard sets compared record by
# record by parity's own count; and once more with --backend cuda
# --together 3 (the three prompts as one batch).  HB_CUDA_GRAPH is whatever the caller
# sets (unset: the device graph, --backend cuda's default).
#
# Prints one line per check and "cli: ok" or "cli: FAILED"; exit status 0
# only when every check passed.  HB_BUILD names the binaries' folder
# (bin/hb-convert, bin/hb-run, bin/hb-replay).  DRY=1 runs the "cuda"
# side on the CPU too (the script's own check on a machine with no GPU).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-cli.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 2
failed=0
gpu=cuda
[[ ${DRY:-0} == 1 ]] && gpu=cpu
say() { echo "$*"; }
bad() { echo "FAILED: $*"; failed=1; }

for set in realshape general; do
	"$build/bin/hb-convert" -q "$root/tests/fixtures/upstream/$set/checkpoint" "$set.gguf" || { bad "$set: convert"; continue; }
	mkdir -p "$set.dec" && : >"$set.jsonl"
	for p in 0 1 2; do
		ids=$(python3 -c "import random; r = random.Random($p * 7 + ${#set}); print(','.join(str(r.randrange(700)) for _ in range(5 + 4 * $p)))")
		for b in cpu cuda; do
			be=$b && [[ $b == cuda ]] && be=$gpu
			"$build/bin/hb-run" -q -m "$set.gguf" --tokens "$ids" -n 13 --backend $be --sequence "$p" --owner "$p" --thread "t$p" \
				--dump-logits "$set.$p.$b.logits" --dump-routes "$set.$p.$b.hbtrace" --json >"$set.$p.$b.json" ||
				bad "$set p$p: hb-run --backend $b rc=$?"
		done
		python3 - "$set" "$p" "$ids" <<'PY' || failed=1
import array, json, sys
s, p, ids = sys.argv[1], sys.argv[2], sys.argv[3]
out = {b: json.load(open("%s.%s.%s.json" % (s, p, b)))["ids"] for b in ("cpu", "cuda")}
lg = {}
for b in ("cpu", "cuda"):
    a = array.array("f")
    a.frombytes(open("%s.%s.%s.logits" % (s, p, b), "rb").read())
    lg[b] = a
d = max(abs(x - y) for x, y in zip(lg["cpu"], lg["cuda"])) if len(lg["cpu"]) == len(lg["cuda"]) else float("inf")
same = out["cpu"] == out["cuda"]
print("%s p%s: generated ids %s; logits %d values, max |cuda - cpu| = %.3e" % (
    s, p, "identical" if same else "DIFFER %s / %s" % (out["cpu"], out["cuda"]), len(lg["cpu"]), d))
with open(s + ".jsonl", "a") as f:
    toks = [int(x) for x in ids.split(",")] + out["cpu"][:-1]
    f.write(json.dumps({"owner": int(p), "thread": "t%s" % p, "turn": 0, "sequence": int(p), "tokens": toks}) + "\n")
sys.exit(0 if same and d <= 1e-3 else 1)
PY
		cp "$set.$p.cpu.hbtrace" "$set.dec/$p.hbtrace"
	done
	for b in cpu cuda; do
		be=$b && [[ $b == cuda ]] && be=$gpu
		"$build/bin/hb-replay" label -m "$set.gguf" -o "$set.L$b" --chunk 5 --backend $be "$set.jsonl" >"$set.label.$b.txt" 2>&1 ||
			bad "$set: label --backend $b: $(tail -1 "$set.label.$b.txt")"
		say "$set label --backend $b: $(tail -1 "$set.label.$b.txt")"
	done
	if out=$("$build/bin/hb-replay" parity "$set.Lcuda" "$set.dec"/*.hbtrace 2>&1); then
		say "$set parity of cuda labels against cpu decode traces: $out"
	else
		bad "$set parity of cuda labels against cpu decode traces: $out"
	fi
	# three transcripts as one batch (one device-graph pass a chunk)
	"$build/bin/hb-replay" label -m "$set.gguf" -o "$set.Ltog" --chunk 5 --together 3 --backend $gpu "$set.jsonl" \
		>"$set.label.tog.txt" 2>&1 || bad "$set: label --together 3: $(tail -1 "$set.label.tog.txt")"
	if out=$("$build/bin/hb-replay" parity "$set.Ltog" "$set.dec"/*.hbtrace 2>&1); then
		say "$set parity of cuda --together 3 labels against cpu decode traces: $out"
	else
		bad "$set parity of cuda --together 3 labels: $out"
	fi
	if out=$("$build/bin/hb-replay" parity "$set.Lcpu" "$set.dec"/*.hbtrace 2>&1); then
		say "$set parity of cpu labels against cpu decode traces: $out"
	else
		bad "$set parity of cpu labels: $out"
	fi
done
if [[ $failed == 0 ]]; then echo "cli: ok"; else echo "cli: FAILED"; fi
exit $failed
