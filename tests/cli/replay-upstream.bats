#!/usr/bin/env bats
# Upstream as the oracle of replay (issue 13).  tests/cli/replay.bats shows
# that hb-replay labels equal the routes hb-run records while decoding; this
# file compares replay with upstream itself, on the sequences upstream ran
# one-shot (tests/fixtures/upstream/README.md, full/pN/*): the prompt plus
# the 12 greedy ids fed during decode.  Labels of full/pN/ids must be
#   * full/pN/route/ids/L(last), upstream's use_cache=False forward, exactly;
#   * pre/pN/route/ids/Lxx (prompt rows) and dec/pN/route/ids/Lxx (fed rows),
#     upstream's cached run, exactly at every layer, with weights within a
#     measured bound;
# and hb-run's one-shot prefill of the same ids (-n 0 --dump-logits) must
# give full/pN/logits_tail within a measured bound.
#
# Excluded, and counted: rows whose result upstream left to a tie.  The only
# tie-dependent QSA selection in either set is general pre/p0/qsa/tie/L02
# row 9 (bit 0: equal block scores straddle the cut; its 5 block scores are
# 2.51, 0, 4.25, 0, 1.15 and 4 are kept, so blocks 1 and 3 tie at exactly 0
# for the last place: upstream's torch.topk kept 3, this port keeps the
# earlier, 1, AFN-017).  Its
# output, and through attention and the recurrent state every later row of
# every later layer, is one valid answer of several: general p0 loses rows
# 9..39 of L05 (31 rows) against full/, layers L02..L05 x rows 9..39 (124
# rows) against the cached run, and all 13 logits_tail rows (T-1 = 27 >= 9).
# The one-shot forward has no tie arrays of its own; its rows are the same
# causal computation as the cached run's, whose tie rows are used (the tie
# is an exact equality of relu'd scores, which the tiny one-shot/cached
# arithmetic gap does not break: upstream's full and cached L(last) routes
# agree on every row of both sets).  Rows and values are read in Python from
# the documented layouts (hebrus-trace(5), hb-run(1)), not with our reader.
#
# Needs python3 (standard library).

bats_require_minimum_version 1.5.0

setup_file() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	fx=$root/tests/fixtures/upstream
	art=$BATS_FILE_TMPDIR
	for s in realshape general; do
		"$build/bin/hb-convert" -q "$fx/$s/checkpoint" "$art/$s.gguf"
	done
	cat >"$art/ru.py" <<'PY'
import functools, json, os, struct, zlib

FX = os.environ["HB_FX"]
LAST = {"realshape": 7, "general": 5}

@functools.lru_cache(maxsize=None)
def manifest(set_):
    return json.load(open(os.path.join(FX, set_, "oracle", "manifest.json")))

@functools.lru_cache(maxsize=None)
def _oracle(set_, name):
    """(flat list, shape) of an oracle array (README: raw little-endian)."""
    a = next(x for x in manifest(set_)["arrays"] if x["name"] == name)
    raw = open(os.path.join(FX, set_, "oracle", a["file"]), "rb").read()
    fmt = {"f32": "f", "i32": "i", "i64": "q"}[a["dtype"]]
    return tuple(struct.unpack("<%d%s" % (len(raw) // struct.calcsize(fmt), fmt), raw)), tuple(a["shape"])

def oracle(set_, name):
    v, shape = _oracle(set_, name)
    return list(v), list(shape)

def maxerr(d):
    """max of the differences; NaN when any is NaN (max() alone skips one)"""
    d = list(d)
    return float("nan") if any(x != x for x in d) else max(d, default=0.0)

def full_ids(set_, p):
    ids, _ = oracle(set_, "full/p%d/ids" % p)
    pre, _ = oracle(set_, "pre/p%d/ids" % p)
    fed, _ = oracle(set_, "dec/p%d/in_ids" % p)
    assert ids == pre + fed, (set_, p)   # the README's definition
    return ids, len(pre)

@functools.lru_cache(maxsize=None)
def tie(set_, p):
    """(layer, row) of the first tie-dependent selection (qsa/tie bit 0) of
    prompt p over its prefill then decode rows, or None.  The count of such
    rows over the whole set is checked against the manifest's stats."""
    L = len(manifest(set_)["config_resolved"]["layer_types"])
    T = full_ids(set_, p)[1]
    first, count = None, 0
    for phase, base in (("pre", 0), ("dec", T)):
        for l in range(L):
            name = "%s/p%d/qsa/tie/L%02d" % (phase, p, l)
            if not any(a["name"] == name for a in manifest(set_)["arrays"]):
                continue
            bits, _ = oracle(set_, name)
            for t, b in enumerate(bits):
                if b & 1:
                    count += 1
                    if first is None or base + t < first[1]:
                        first = (l, base + t)
    st = manifest(set_)["stats"]["p%d" % p]
    assert count == sum(st["prefill"]["qsa_rows_with_tie_dependent_set"]) + \
        sum(st["decode"]["qsa_rows_with_tie_dependent_set"]), (set_, p, count)
    return first

def tainted(set_, p, layer, row):
    t = tie(set_, p)
    return t is not None and layer >= t[0] and row >= t[1]

def transcripts(set_, out):
    with open(out, "w") as f:
        for p in range(3):
            f.write(json.dumps({"owner": 0, "thread": p, "turn": 0, "sequence": p,
                                "tokens": full_ids(set_, p)[0]}) + "\n")

def shard(path):
    """{(sequence, position, layer): (ids, weights)} of a hebrus-trace(5)
    shard, every CRC and size checked."""
    b = open(path, "rb").read()
    assert b[0:8] == b"HBTRACE1"
    version, hbytes, top_k, layers, experts, rb = struct.unpack_from("<6I", b, 8)
    assert (version, hbytes, rb) == (1, 128, 40 + 8 * top_k)
    assert struct.unpack_from("<I", b, 124)[0] == zlib.crc32(b[0:124])
    recs, pos = {}, 128
    while pos < len(b):
        assert b[pos:pos + 8] == b"HBCHUNK1"
        count, crc = struct.unpack_from("<II", b, pos + 8)
        nbytes = struct.unpack_from("<Q", b, pos + 16)[0]
        payload = b[pos + 24:pos + 24 + nbytes]
        assert nbytes == count * rb and len(payload) == nbytes and zlib.crc32(payload) == crc
        for i in range(count):
            seq, ordinal, layer = struct.unpack_from("<QQI", payload, i * rb)
            ids = list(struct.unpack_from("<%dI" % top_k, payload, i * rb + 40))
            w = list(struct.unpack_from("<%df" % top_k, payload, i * rb + 40 + 4 * top_k))
            assert (seq, ordinal, layer) not in recs
            recs[(seq, ordinal, layer)] = (ids, w)
        pos += 24 + nbytes
    return dict(top_k=top_k, layers=layers, experts=experts), recs
PY
	export HB_FX=$fx
}

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	rp=$build/bin/hb-replay
	run_=$build/bin/hb-run
	art=$BATS_FILE_TMPDIR
	export HB_FX=$root/tests/fixtures/upstream PYTHONPATH=$art
	cd "$BATS_TEST_TMPDIR"
}

@test "replay-upstream: labels of prompt + fed ids are upstream's one-shot last-layer routes and its cached routes at every layer" {
	for set_ in realshape general; do
		python3 -c "import ru; ru.transcripts('$set_', 't.jsonl')"
		rm -rf L
		run --separate-stderr "$rp" label -m "$art/$set_.gguf" -o L --chunk 7 t.jsonl
		[ "$status" -eq 0 ]
		[ "$stderr" = "" ]
		want=$(python3 -c "
import ru
n = sum(len(ru.full_ids('$set_', p)[0]) for p in range(3))
print('labelled 3 sequences, %d positions, %d records: 1 shards written, 0 kept, 0 partial discarded' % (n, n * (ru.LAST['$set_'] + 1)))")
		[ "$output" = "$want" ]
		python3 - "$set_" <<'PY' >&3
import ru, sys
s = sys.argv[1]
head, recs = ru.shard("L/labels-0000-of-0001-000000.hbtrace")
k, L, last = head["top_k"], head["layers"], ru.LAST[s]
assert (k, L) == (10, last + 1), head
full_rows = full_skip = full_skip_differ = 0
rows = skip = skip_differ = 0
werr = []
for p in range(3):
    ids, T = ru.full_ids(s, p)
    N = len(ids)
    assert sum(1 for key in recs if key[0] == p) == N * L
    # upstream one-shot, last layer
    want, shape = ru.oracle(s, "full/p%d/route/ids/L%02d" % (p, last))
    assert shape == [N, k], shape
    for r in range(N):
        got = recs[(p, r, last)][0]
        if ru.tainted(s, p, last, r):
            full_skip += 1
            full_skip_differ += got != want[r * k:(r + 1) * k]
            continue
        full_rows += 1
        assert got == want[r * k:(r + 1) * k], (s, p, r, got, want[r * k:(r + 1) * k])
    # upstream cached run, every layer: prompt rows from pre/, fed rows from dec/
    for l in range(L):
        pi, _ = ru.oracle(s, "pre/p%d/route/ids/L%02d" % (p, l))
        pw, _ = ru.oracle(s, "pre/p%d/route/w/L%02d" % (p, l))
        di, _ = ru.oracle(s, "dec/p%d/route/ids/L%02d" % (p, l))
        dw, _ = ru.oracle(s, "dec/p%d/route/w/L%02d" % (p, l))
        wi, ww = pi + di, pw + dw
        assert len(wi) == N * k
        for r in range(N):
            got, gw = recs[(p, r, l)]
            if ru.tainted(s, p, l, r):
                skip += 1
                skip_differ += got != wi[r * k:(r + 1) * k]
                continue
            rows += 1
            assert got == wi[r * k:(r + 1) * k], (s, p, l, r, got, wi[r * k:(r + 1) * k])
            werr += [abs(a - b) for a, b in zip(gw, ww[r * k:(r + 1) * k])]
e = ru.maxerr(werr)
print("# %s: last layer %d/%d rows = upstream one-shot (%d tie rows excluded, %d of them differ); "
      "all layers %d/%d rows = upstream cached (%d excluded, %d differ); max |weight - upstream| %.3e"
      % (s, full_rows, full_rows + full_skip, full_skip, full_skip_differ, rows, rows + skip, skip,
         skip_differ, e))
# the exclusions, exactly (header comment): general p0 rows 9..39
assert [ru.tie(s, p) for p in range(3)] == {"realshape": [None] * 3, "general": [(2, 9), None, None]}[s]
assert (full_skip, skip) == {"realshape": (0, 0), "general": (31, 124)}[s], (full_skip, skip)
# measured by this case (bats tests/cli/replay-upstream.bats): realshape
# 1.922e-6, general 8.047e-7 (replay's weights are bit-identical to hb-run's,
# replay.bats; these are test_run_oracle's maxima); bound = 4 x the
# measurement rounded up to two digits
bound = {"realshape": 4 * 2.0e-6, "general": 4 * 8.1e-7}[s]
assert len(werr) == rows * k and e <= bound, (e, bound)
PY
	done
}

@test "replay-upstream: hb-run's one-shot prefill of prompt + fed ids gives upstream's full/pN/logits_tail" {
	for set_ in realshape general; do
		for p in 0 1 2; do
			ids=$(python3 -c "import ru; print(','.join(map(str, ru.full_ids('$set_', $p)[0])))")
			rm -f l.bin
			run --separate-stderr "$run_" -q -m "$art/$set_.gguf" --tokens "$ids" -n 0 --dump-logits l.bin
			[ "$status" -eq 0 ]
			[ "$output" = "" ]
			[ "$stderr" = "" ]
			python3 - "$set_" "$p" <<'PY' >&3
import os, ru, struct, sys
s, p = sys.argv[1], int(sys.argv[2])
ids, T = ru.full_ids(s, p)
N = len(ids)
tail, (R, V) = ru.oracle(s, "full/p%d/logits_tail" % p)
assert R == N - T + 1
raw = open("l.bin", "rb").read()
assert len(raw) == N * V * 4, (len(raw), N, V)   # -n 0: one row per prompt id
got = struct.unpack("<%df" % (N * V), raw)
errs, skipped, skipped_err = [], 0, []
for i in range(R):
    row = T - 1 + i                                # logits_tail holds rows T-1 .. N-1
    d = [abs(got[row * V + v] - tail[i * V + v]) for v in range(V)]
    # logits follow every layer: tainted from the tie row on
    if ru.tie(s, p) is not None and row >= ru.tie(s, p)[1]:
        skipped += 1
        skipped_err += d
        continue
    errs += d
e = ru.maxerr(errs)
print("# %s p%d: %d logits_tail rows, max |logit - upstream one-shot| %.3e; %d tie rows excluded%s"
      % (s, p, R - skipped, e, skipped, " (max |err| there %.3g)" % ru.maxerr(skipped_err) if skipped else ""))
assert skipped == (13 if (s, p) == ("general", 0) else 0), skipped
# measured by this case (bats tests/cli/replay-upstream.bats -f logits_tail):
# realshape p0 2.384e-6, p1 6.139e-6, p2 2.444e-6; general p1 9.388e-7,
# p2 2.116e-6 (p0 excluded); bound = 4 x the measurement rounded up to two
# digits
bound = 4 * {("realshape", 0): 2.4e-6, ("realshape", 1): 6.2e-6, ("realshape", 2): 2.5e-6,
             ("general", 0): 0.0, ("general", 1): 9.4e-7, ("general", 2): 2.2e-6}[(s, p)]
if skipped < R:
    assert len(errs) == (R - skipped) * V and e <= bound, (e, bound)
PY
		done
	done
}
