#!/usr/bin/env bats
# hb-replay plant, train and predict, and eval's Gate 3 report on them
# (hb-replay(1) PLANTED CONTROL, FEATURES, PREDICTOR CHECKPOINTS).  The
# evidence of issue 20: on routes planted as a known low-rank function of
# the features plus noise, training recovers recall within a stated distance
# of the oracle's and every history baseline lands on its closed form;
# training is bit-for-bit reproducible for a seed, whatever the thread
# count; a checkpoint is refused, field by field, against features of
# another artifact, projection or split, and a thread in two splits is
# refused.  Feature shards and checkpoints are read back in Python's
# standard library from the safetensors layout, as numpy or PyTorch users
# would, and the projection is recomputed there from its documented seed.
# Nothing here says anything about a real checkpoint's routes.
#
# Needs python3 (standard library); the plot test needs chromium.

bats_require_minimum_version 1.5.0

setup_file() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	rp=$build/bin/hb-replay
	cd "$BATS_FILE_TMPDIR"
	"$rp" plant --seed 1 -o pl >pl.json
	"$rp" train --seed 3 --threads 2 -o pl/p.safetensors pl/train/labels pl/train/features \
		pl/validation/labels pl/validation/features >train.json
	"$rp" predict --predictor pl/p.safetensors -o pl/learned pl/heldout/features >/dev/null
	"$rp" eval --train pl/train/labels --predictions pl/oracle --predictions pl/learned -o ev pl/heldout/labels >eval.out
	cat >st.py <<'PY'
"""safetensors and the feature manifest with the standard library only."""
import hashlib, json, os, struct

def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]

def write(path, h, data):
    j = json.dumps(h, separators=(",", ":")).encode()
    j += b" " * (-len(j) % 8)
    open(path, "wb").write(struct.pack("<Q", len(j)) + j + data)

def tensor(h, data, name):
    t = h[name]
    a, b = t["data_offsets"]
    fmt = {"F32": "f", "U64": "Q"}[t["dtype"]]
    return t["shape"], list(struct.unpack("<%d%s" % ((b - a) // struct.calcsize(fmt), fmt), data[a:b]))

def put(h, data, name, values):
    t = h[name]
    a, b = t["data_offsets"]
    fmt = {"F32": "f", "U64": "Q"}[t["dtype"]]
    return data[:a] + struct.pack("<%d%s" % (len(values), fmt), *values) + data[b:]

def shards(d):
    m = json.load(open(os.path.join(d, "features.json")))
    return m, [os.path.join(d, s["file"]) for s in m["shards"]]

def reseal(d, manifest=None):
    """the manifest's sizes and digests made those of the shards again"""
    m, files = shards(d)
    if manifest:
        manifest(m)
    for s, f in zip(m["shards"], files):
        b = open(f, "rb").read()
        s["bytes"], s["sha256"] = len(b), hashlib.sha256(b).hexdigest()
    json.dump(m, open(os.path.join(d, "features.json"), "w"))

def set_meta(d, key, value, manifest=None):
    for f in shards(d)[1]:
        h, data = read(f)
        h["__metadata__"][key] = value
        write(f, h, data)
    reseal(d, manifest)

def set_thread(d, row, thread):
    """row `row` of the first shard of d made one of thread `thread`"""
    f = shards(d)[1][0]
    h, data = read(f)
    t = tensor(h, data, "thread")[1]
    t[row] = thread
    write(f, h, put(h, data, "thread", t))
    reseal(d)

def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & (2 ** 64 - 1)
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & (2 ** 64 - 1)
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & (2 ** 64 - 1)
    return x ^ (x >> 31)

def projection(seed, source, width):
    """hb-replay(1) FEATURES: entry i is -+1/sqrt(width), bit i % 64 of
    splitmix64(seed + i // 64); the digest over the domain, NUL, the
    three u64 and the floats"""
    v = struct.unpack("<f", struct.pack("<f", 1 / width ** 0.5))[0]
    bits, P = 0, []
    for i in range(source * width):
        if i % 64 == 0:
            bits = splitmix64(seed + i // 64)
        P.append(-v if bits >> (i % 64) & 1 else v)
    d = hashlib.sha256(b"hebrus-projection/1\0" + struct.pack("<3Q", seed, source, width) +
                       struct.pack("<%df" % len(P), *P)).hexdigest()
    return P, d
PY
}

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	rp=$build/bin/hb-replay
	cd "$BATS_TEST_TMPDIR"
	ln -s "$BATS_FILE_TMPDIR/pl" pl
	export PYTHONPATH=$BATS_FILE_TMPDIR
}

@test "predict: on the planted control training comes within 0.03 of the oracle's recall; the baselines land on their theory" {
	f=$BATS_FILE_TMPDIR
	[ "$(cat "$f/eval.out")" = "$(cat "$f/ev/eval.json")" ]
	python3 - "$f/eval.out" "$f/pl.json" "$f/train.json" <<'PY'
import json, sys
j, pl, tr = (json.load(open(p)) for p in sys.argv[1:])
P = j["predictors"]
rec = lambda n, k: P[n]["overall"]["budgets"][str(k)]["recall"]
learned, oracle = "pl/learned", "pl/oracle"
for k in (10, 16, 20, 32):
    # the stated distance: the learned predictor within 0.03 of the optimum
    assert oracle in P and 0 <= rec(oracle, k) - rec(learned, k) <= 0.03, (k, rec(oracle, k), rec(learned, k))
    for n in ("random", "frequency"):
        assert abs(rec(n, k) - pl["theory"][n][str(k)]) <= 0.01, (n, k, rec(n, k), pl["theory"][n])
for n in ("previous-token", "lru", "adjacent-layer"):
    assert abs(rec(n, 10) - pl["theory"][n]["10"]) <= 0.01, (n, rec(n, 10), pl["theory"][n])
best_history = max(rec(n, 10) for n in ("random", "frequency", "lru", "previous-token", "adjacent-layer"))
assert rec(learned, 10) > 3 * best_history, (rec(learned, 10), best_history)
# calibration: confidences where a predictor has them, null where not
assert P["lru"]["ece"] is None and P["previous-token"]["ece"] is None
assert 0 <= P[learned]["ece"] < 0.1 and 0 <= P["random"]["ece"] < 0.01, (P[learned]["ece"], P["random"]["ece"])
# route union: one token's route is top_k experts; blocks of 8 grow it
assert j["route_union_labels"]["1"] == 10 and 10 < j["route_union_labels"]["8"] <= 80
assert P["frequency"]["route_union"]["8"] == 10
assert len(P[learned]["layers"]) == 4 and j["heldout_records"] == 12 * 64 * 4
# early stopping kept the best validation epoch
assert 1 <= tr["best_epoch"] < tr["epochs_run"] <= 40 and tr["train_threads"] == 48, tr
print("\n".join("%s recall@10 %.4f" % (n, rec(n, 10)) for n in P))
PY
	grep -q '^<svg xmlns="http://www.w3.org/2000/svg"' "$f/ev/eval.svg"
	[ "$(grep -c '<polyline' "$f/ev/eval.svg")" -eq 7 ]
}

@test "predict: Gate 4 on the planted control: replay-validation, runtime and timely recall; timely recall is recall at the schedule's cutoff" {
	f=$BATS_FILE_TMPDIR
	"$rp" predict --predictor pl/p.safetensors -o vl pl/validation/features >/dev/null
	"$rp" predict --predictor pl/p.safetensors -o rl pl/runtime/features >/dev/null
	k=(--k 9,10,12,15,16,20,32)
	"$rp" eval --train pl/train/labels "${k[@]}" --predictions learned=vl -o ve pl/validation/labels >/dev/null
	run --separate-stderr "$rp" eval --train pl/train/labels "${k[@]}" --predictions oracle=pl/runtime/oracle \
		--predictions learned=rl --predictions oracle-ahead=pl/runtime/oracle --available router-ahead \
		--deadlines pl/runtime/deadlines --validation-eval ve/eval.json -o re pl/runtime/labels
	[ "$status" -eq 0 ]
	python3 - "$f/pl.json" <<'PY'
import json, sys
pl = json.load(open(sys.argv[1]))
j = json.load(open("re/eval.json"))
cut = pl["deadlines"]["timely_candidates"]
assert cut == {"pre-attention": 9, "router-ahead": 15, "adjacent-layer": 12}, cut
P = j["predictors"]
rec = lambda n, k: P[n]["overall"]["budgets"][str(k)]["recall"]
tim = lambda n, k: P[n]["decode"]["budgets"][str(k)]["timely_recall"]
assert P["learned"]["decode"]["records"] == 12 * 64 * 4 == j["heldout_records"]
for K in (9, 10, 12, 15, 16, 20, 32):
    # candidates i < cutoff are ready in time (D per read of R): timely recall is recall at min(K, cutoff)
    for n, c in (("learned", 9), ("oracle", 9), ("oracle-ahead", 15)):
        want = rec(n, min(K, c)) if n != "oracle-ahead" else None
        if n == "oracle-ahead":
            # layer 0 has no previous layer: its candidates are static, in time at any K
            L = P[n]["layers"]
            want = (L[0]["budgets"][str(K)]["recall"] + sum(L[l]["budgets"][str(min(K, c))]["recall"] for l in (1, 2, 3))) / 4
        assert abs(tim(n, K) - want) < 1e-12, (n, K, tim(n, K), want)
    L = P["adjacent-layer"]["layers"]
    want = (L[0]["budgets"][str(K)]["recall"] + sum(L[l]["budgets"][str(min(K, 12))]["recall"] for l in (1, 2, 3))) / 4
    assert abs(tim("adjacent-layer", K) - want) < 1e-12, ("adjacent-layer", K)
    # the previous token's route is known a whole token (16 reads' time) earlier: always in time
    assert abs(tim("previous-token", K) - rec("previous-token", K)) < 1e-12
    for n in ("random", "frequency"):
        assert tim(n, K) == P[n]["decode"]["budgets"][str(K)]["recall"]
g = j["gate4"]["learned"]
for K in ("10", "32"):
    # replay validation and the runtime holdout come from one planted distribution: within 0.03
    assert abs(g[K]["replay_validation_recall"] - g[K]["decode_recall"]) < 0.03, g[K]
print("learned K=10: validation %.3f runtime %.3f timely %.3f; K=32 timely %.3f" % (
    g["10"]["replay_validation_recall"], g["10"]["decode_recall"], g["10"]["decode_timely_recall"],
    g["32"]["decode_timely_recall"]))
PY
}

@test "predict: Gate 5 on the planted control: the oracle's and the checkpoint's hints through the streaming engine, against none" {
	"$rp" predict --predictor pl/p.safetensors -o rl pl/runtime/features >/dev/null
	run --separate-stderr "$rp" shadow --expert-cache 10% --predictions oracle=pl/runtime/oracle \
		--predictions learned=rl -o sh pl/runtime/labels
	[ "$status" -eq 0 ]
	[ "$output" = "$(cat sh/shadow.json)" ]
	[ ! -e sh/.shadow-store ]
	python3 - <<'PY'
import json
j = json.load(open("sh/shadow.json"))
P = j["predictors"]
assert list(P) == ["none", "oracle", "learned"] and j["records"] == 12 * 64 * 4, list(P)
for n, p in P.items():
    assert p["p0_starvation_attempts"] == 0, n
    assert p["wants"] == P["none"]["wants"] == p["hits"] + p["joined"] + p["misses"], n
    assert p["bytes_useful"] + p["bytes_rejected"] <= p["bytes_predicted"], n
    assert p["misses_avoided"] == P["none"]["misses"] - p["misses"], n
assert P["none"]["bytes_predicted"] == 0 and P["none"]["tickets_p1"] == 0
for n in ("oracle", "learned"):
    p = P[n]
    assert p["hints"] == 12 * 64 * 4 * 10 and p["tickets_p1"] > 0, p
    # planted routes are predictable: hints avoid exact misses, at a cost in evictions
    assert p["misses_avoided"] > 0.2 * P["none"]["misses"] and p["evictions_caused"] > 0, p
print("misses avoided: oracle %d, learned %d of %d; evictions caused %d, %d" % (
    P["oracle"]["misses_avoided"], P["learned"]["misses_avoided"], P["none"]["misses"],
    P["oracle"]["evictions_caused"], P["learned"]["evictions_caused"]))
PY
	run --separate-stderr "$rp" shadow -o sh pl/runtime/labels
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-replay: shadow needs --expert-cache SIZE (not all), -o DIR and one LABELS"* ]]
}

@test "predict: training is bit-for-bit reproducible for a seed, on one thread or two; another seed differs" {
	args=(--epochs 2 pl/train/labels pl/train/features pl/validation/labels pl/validation/features)
	run --separate-stderr "$rp" train --seed 5 --threads 1 -o a.safetensors "${args[@]}"
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	"$rp" train --seed 5 --threads 2 -o b.safetensors "${args[@]}" >/dev/null
	"$rp" train --seed 6 --threads 2 -o c.safetensors "${args[@]}" >/dev/null
	cmp a.safetensors b.safetensors
	run cmp -s a.safetensors c.safetensors
	[ "$status" -eq 1 ]
}

@test "predict: feature shards and the checkpoint load with a standard-library safetensors reader; the projection is the documented one" {
	python3 - <<'PY'
import hashlib, json, math, struct
import st
m, files = st.shards("pl/heldout/features")
assert m["format"] == "hebrus-features/1" and m["rows"] == 12 * 64 and m["layers"] == 4, m
rows = 0
for s, f in zip(m["shards"], files):
    b = open(f, "rb").read()
    assert (len(b), hashlib.sha256(b).hexdigest()) == (s["bytes"], s["sha256"])
    h, data = st.read(f)
    meta = h["__metadata__"]
    assert meta["format"] == "hebrus-features/1" and meta["split"] == "heldout" and meta["tap"] == "planted"
    shape, x = st.tensor(h, data, "features")
    assert shape == [s["rows"], 4, 64] and len(x) == s["rows"] * 4 * 64
    assert st.tensor(h, data, "thread")[1] == st.tensor(h, data, "sequence")[1]
    rows += s["rows"]
assert rows == m["rows"] and m["row_bytes"] == 4 * 64 * 4 + 32
pr = m["projection"]
P, digest = st.projection(int(pr["seed"]), pr["source_width"], pr["width"])
assert digest == pr["digest"] == meta["projection_digest"], (digest, pr)
# the checkpoint: its identities, and its scores in plain Python rank the
# first row's experts as predict did
h, data = st.read("pl/p.safetensors")
meta = h["__metadata__"]
assert meta["format"] == "hebrus-predictor/1" and meta["projection_digest"] == digest and meta["split"] == "train"
assert json.loads(meta["training"])["seed"] == 3
(R, W), U = st.tensor(h, data, "trunk")
_, T = st.tensor(h, data, "layer_embedding")
(E, _), V = st.tensor(h, data, "expert_embedding")
_, bias = st.tensor(h, data, "expert_bias")
assert st.tensor(h, data, "train_threads")[1] == list(range(48))
h0, d0 = st.read(files[0])
x = st.tensor(h0, d0, "features")[1][:W]          # row 0, layer 0
z = [T[r] + sum(U[r * W + j] * x[j] for j in range(W)) for r in range(R)]
s = [bias[e] + sum(V[e * R + r] * z[r] for r in range(R)) for e in range(E)]
want = sorted(range(E), key=lambda e: (-s[e], e))[:10]
b = open("pl/learned/predictions.hbtrace", "rb").read()
k = struct.unpack("<I", b[16:20])[0]
rec = b[128 + 24:128 + 24 + 40 + 8 * k]
seq, pos, layer = struct.unpack("<QQI", rec[:20])
assert (seq, pos, layer, k) == (2000000, 0, 0, 64), (seq, pos, layer, k)
assert list(struct.unpack("<10I", rec[40:80])) == want, want
PY
}

@test "predict: a checkpoint is refused against features of another artifact, projection or split, its own train split, or a train thread" {
	cp -r pl/heldout/features h
	python3 -c "import st; st.set_meta('h', 'artifact', '00' * 32, lambda m: m.update(artifact='00' * 32))"
	run --separate-stderr "$rp" predict --predictor pl/p.safetensors -o o h
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[[ $stderr == "hb-replay: predictor-artifact: artifact: h: artifact 0000000000000000..., the predictor's is "* ]]
	rm -r h
	cp -r pl/heldout/features h
	python3 -c "import st; st.set_meta('h', 'projection_seed', '7', lambda m: m['projection'].update(seed='7'))"
	run --separate-stderr "$rp" predict --predictor pl/p.safetensors -o o h
	[ "$status" -eq 1 ]
	[[ $stderr == "hb-replay: predictor-projection: projection: h: projection seed 7 (or its digest, widths or tap) differs from the predictor's seed "* ]]
	rm -r h
	cp -r pl/heldout/features h
	python3 -c "import st; st.set_meta('h', 'split_id', '11' * 32, lambda m: m['split'].update(id='11' * 32))"
	run --separate-stderr "$rp" predict --predictor pl/p.safetensors -o o h
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-replay: predictor-split: split_id: h: cut by another split than the predictor's train split" ]
	run --separate-stderr "$rp" predict --predictor pl/p.safetensors -o o pl/train/features
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-replay: predictor-split: split: pl/train/features: the 'train' split is the one the predictor was trained on" ]
	# a heldout row that belongs to a train thread
	rm -r h
	cp -r pl/heldout/features h
	python3 -c "import st; st.set_thread('h', 0, 7)"
	run --separate-stderr "$rp" predict --predictor pl/p.safetensors -o o h
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-replay: predictor-leak: thread: h: row 0 is of thread 7, which the predictor trained on" ]
	# the control: the untouched heldout features are accepted
	run --separate-stderr "$rp" predict --predictor pl/p.safetensors -o o pl/heldout/features
	[ "$status" -eq 0 ]
	[ "$output" = '{"predictions":"o/predictions.hbtrace","rows":768,"records":3072,"candidates":64}' ]
}

@test "predict: feature shards are checked against their manifest; a thread in two splits is refused before training" {
	cp -r pl/heldout/features h
	f=$(ls h/*.safetensors | head -n 1)
	printf '\001' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") - 1)) conv=notrunc status=none
	run --separate-stderr "$rp" predict --predictor pl/p.safetensors -o o h
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-replay: feature-digest: $f: size or SHA-256 differ from the manifest's" ]
	# the digest made right again, the shard's identity no longer its manifest's
	rm -r h
	cp -r pl/heldout/features h
	python3 -c "
import st
for f in st.shards('h')[1]:
    h, d = st.read(f); h['__metadata__']['tap'] = 'other'; st.write(f, h, d)
st.reseal('h')"
	run --separate-stderr "$rp" predict --predictor pl/p.safetensors -o o h
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-replay: feature-identity: $f: the shard's identity differs from its manifest's" ]
	# validation features sharing a thread with train
	rm -r h
	cp -r pl/heldout/features h
	python3 -c "import st; st.set_thread('h', 5, 3)"
	run --separate-stderr "$rp" train --epochs 1 -o x.safetensors pl/train/labels pl/train/features pl/heldout/labels h
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-replay: feature-leak: thread: thread 3 is in both the train and the heldout split" ]
	[ ! -e x.safetensors ]
	run --separate-stderr "$rp" train --epochs 1 -o x.safetensors pl/train/labels pl/train/features pl/train/labels pl/train/features
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-replay: feature-leak: thread: thread 0 is in both the train and the train split" ]
}

@test "predict: usage errors of plant, train and predict" {
	run --separate-stderr "$rp" train -o x pl/train/labels pl/train/features pl/validation/labels
	[ "$status" -eq 2 ]
	[ "$stderr" = $'hb-replay: train needs -o CHECKPOINT and LABELS FEATURES VALIDATION_LABELS VALIDATION_FEATURES\ntry \'hb-replay --help\'' ]
	run --separate-stderr "$rp" train --rank 0 -o x a b c d
	[ "$status" -eq 2 ]
	[ "$stderr" = $'hb-replay: --rank takes 1..256, not \'0\'\ntry \'hb-replay --help\'' ]
	run --separate-stderr "$rp" train --deadline-weight 1,2 -o x pl/train/labels pl/train/features pl/validation/labels pl/validation/features
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-replay: deadline-weight: 2 weights for 4 layers" ]
	run --separate-stderr "$rp" predict -o x pl/heldout/features
	[ "$status" -eq 2 ]
	[ "$stderr" = $'hb-replay: predict needs --predictor CHECKPOINT, -o DIR and one FEATURES\ntry \'hb-replay --help\'' ]
	run --separate-stderr "$rp" plant -o x extra
	[ "$status" -eq 2 ]
	[ "$stderr" = $'hb-replay: plant needs -o DIR and no operand\ntry \'hb-replay --help\'' ]
}

@test "predict: the Gate 3 plot renders in headless Chromium" {
	if ! command -v chromium >/dev/null; then
		[ "${HB_REQUIRE_CHROMIUM:-0}" != 1 ] || { echo "chromium is required (Debian package chromium)" >&2; return 1; }
		skip "chromium not installed (scripts/bootstrap installs it)"
	fi
	timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars --window-size=640,340 \
		--screenshot="$PWD/eval.png" "file://$BATS_FILE_TMPDIR/ev/eval.svg" >/dev/null 2>&1
	read -r w h ink < <(python3 "$root/tests/tools/png_ink.py" eval.png)
	echo "eval: ${w}x$h, $ink non-white pixels" >&3
	[ "$w" -eq 640 ]
	[ "$h" -eq 340 ]
	# seven curves, axes and labels: thousands of pixels; a blank page has none
	[ "$ink" -gt 3000 ]
	[ "$ink" -lt $((640 * 340 / 2)) ]
}

@test "predict: label --features and --router-ahead on an upstream fixture, the same at any chunk size; train, predict and eval run on them" {
	"$build/bin/hb-convert" -q "$root/tests/fixtures/upstream/realshape/checkpoint" r.gguf
	python3 - <<'PY' >in.jsonl
import json, random
r = random.Random(3)
for o in range(10):
    print(json.dumps({"owner": o, "thread": "t%d" % o, "turn": 0, "tokens": [r.randrange(1000) for _ in range(r.randint(12, 30))]}))
PY
	"$rp" split --seed 2 --validation 0.4 --temporal 0 -o S in.jsonl >/dev/null
	run --separate-stderr "$rp" label -m r.gguf -o TR --features TRF --feature-width 16 --feature-seed 9 --split-file S/split.json --split-name train S/train.jsonl
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	[ "$output" = "labelled 8 sequences, 181 positions, 1448 records: 8 shards written, 0 kept, 0 partial discarded
captured features of 181 positions: 99296 bytes in TRF" ]
	"$rp" label -m r.gguf -o VA --features VAF --feature-width 16 --feature-seed 9 --split-file S/split.json --split-name validation --router-ahead RA S/validation.jsonl >/dev/null
	# a chunk of 7 and one thread give the same bytes: per token, prefill's arithmetic is decode's
	"$rp" label -m r.gguf -o VA7 --chunk 7 --threads 1 --features VAF7 --feature-width 16 --feature-seed 9 --split-file S/split.json --split-name validation --router-ahead RA7 S/validation.jsonl >/dev/null
	cmp VAF/features-000000.safetensors VAF7/features-000000.safetensors
	cmp RA/predictions.hbtrace RA7/predictions.hbtrace
	python3 - <<'PY'
import hashlib, json, struct
import st
m, files = st.shards("TRF")
assert (m["tap"], m["layers"], m["projection"]["source_width"], m["projection"]["width"]) == ("pre-attention-mix", 8, 64, 16), m
assert m["split"] == {"name": "train", "id": hashlib.sha256(open("S/split.json", "rb").read()).hexdigest()}, m["split"]
assert st.projection(9, 64, 16)[1] == m["projection"]["digest"]
h, data = st.read(files[0])
owners = st.tensor(h, data, "owner")[1]
threads = st.tensor(h, data, "thread")[1]
train = [json.loads(l) for l in open("S/train.jsonl")]
# lineage: each row's owner and thread are its transcript's (a thread name's id has bit 63 set)
assert sorted(set(owners)) == sorted({t["owner"] for t in train}) and all(t >> 63 for t in threads)
assert len(owners) == sum(len(t["tokens"]) for t in train) == m["rows"]
# router-ahead predicts layers 1..7 of every position, 32 candidates (all experts) each
b = open("RA/predictions.hbtrace", "rb").read()
assert struct.unpack("<4I", b[16:32])[:3] == (32, 8, 32)
PY
	# refused: a checkpoint of the train split on its own features; a resumed OUTDIR
	"$rp" train --seed 1 --rank 4 --epochs 3 -o p.safetensors TR TRF VA VAF >/dev/null
	run --separate-stderr "$rp" predict --predictor p.safetensors -o LP TRF
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-replay: predictor-split: split: TRF: the 'train' split is the one the predictor was trained on" ]
	"$rp" predict --predictor p.safetensors -o LP VAF >/dev/null
	run --separate-stderr "$rp" eval --train TR --predictions RA --predictions LP -o E VA
	[ "$status" -eq 0 ]
	python3 - "$output" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
assert list(j["predictors"])[5:] == ["RA", "LP"]
for n in ("RA", "LP"):
    p = j["predictors"][n]
    assert p["overall"]["records"] == 304 and p["ece"] is not None
    assert abs(p["overall"]["budgets"]["32"]["recall"] - 1) < 1e-12
PY
	run --separate-stderr "$rp" label -m r.gguf -o VA --features X S/validation.jsonl
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-replay: VA: --features and --router-ahead need an OUTDIR without label shards (they do not resume)" ]
	run --separate-stderr "$rp" label -m r.gguf -o Y --feature-width 8 S/validation.jsonl
	[ "$status" -eq 2 ]
	[ "$stderr" = $'hb-replay: --feature-width, --feature-seed and --split-* need --features\ntry \'hb-replay --help\'' ]
}
