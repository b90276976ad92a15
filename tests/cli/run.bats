#!/usr/bin/env bats
# hb-run from the command line, against upstream's oracle arrays
# (tests/fixtures/upstream/SET/oracle).  tests/unit/test_run_oracle.c proves
# graph parity at library level; this file tests the binary: the ids it
# prints, the logits it dumps (hb-run(1)), the route trace it writes
# (parsed here in Python from hebrus-trace(5), not with our reader), its
# refusals, usage errors and exit statuses.
#
# Needs python3 (standard library).

bats_require_minimum_version 1.5.0

setup_file() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	fx=$root/tests/fixtures/upstream
	art=$BATS_FILE_TMPDIR
	"$build/bin/hb-convert" -q "$fx/realshape/checkpoint" "$art/realshape.gguf"
	"$build/bin/hb-convert" -q "$fx/general/checkpoint" "$art/general.gguf"
	"$build/bin/hb-convert" -q --expert-codec affine4-g64 "$fx/realshape/checkpoint" "$art/realshape-a4.gguf"
	# oracle arrays, logits rows and trace shards, read from their documented layouts
	cat >"$art/hb.py" <<'PY'
import json, os, struct, sys, zlib

FX = os.environ["HB_FX"]

def oracle(set_, name):
    """An oracle array as a flat list (README: raw little-endian, '/' -> '.')."""
    m = json.load(open(os.path.join(FX, set_, "oracle", "manifest.json")))
    a = next(x for x in m["arrays"] if x["name"] == name)
    raw = open(os.path.join(FX, set_, "oracle", a["file"]), "rb").read()
    fmt = {"f32": "f", "i32": "i", "i64": "q"}[a["dtype"]]
    n = len(raw) // struct.calcsize(fmt)
    return list(struct.unpack("<%d%s" % (n, fmt), raw)), a["shape"]

def prompt(set_, p):
    return ",".join(str(x) for x in oracle(set_, "pre/%s/ids" % p)[0])

def rows(path, width):
    raw = open(path, "rb").read()
    assert len(raw) % (4 * width) == 0, (len(raw), width)
    n = len(raw) // (4 * width)
    v = struct.unpack("<%df" % (n * width), raw)
    return [v[i * width:(i + 1) * width] for i in range(n)]

def trace(path):
    """hebrus-trace(5): header, chunks, records; every CRC and size checked."""
    b = open(path, "rb").read() if path != "-" else sys.stdin.buffer.read()
    assert b[0:8] == b"HBTRACE1", b[0:8]
    version, hbytes, top_k, layers, experts, rb = struct.unpack_from("<6I", b, 8)
    assert version in (1, 2) and (hbytes, rb) == (128, 40 + 8 * top_k), (version, hbytes, rb)
    thread = None
    if version == 1:
        assert b[108:124] == bytes(16), "reserved bytes"
    else:
        # version 2: u64 thread, u32 flags (bit 0: thread present), 4 zero bytes
        t, flags = struct.unpack_from("<QI", b, 108)
        assert flags in (0, 1) and (flags or t == 0) and b[120:124] == bytes(4), (t, flags)
        thread = t if flags else None
    assert struct.unpack_from("<I", b, 124)[0] == zlib.crc32(b[0:124]), "header CRC"
    h = dict(version=version, top_k=top_k, layers=layers, experts=experts, artifact=b[32:64].hex(),
             text=b[64:96].hex(), owner=struct.unpack_from("<Q", b, 96)[0],
             generation=struct.unpack_from("<I", b, 104)[0], thread=thread, chunks=0)
    recs, pos = [], 128
    while pos < len(b):
        assert b[pos:pos + 8] == b"HBCHUNK1", pos
        count, crc = struct.unpack_from("<II", b, pos + 8)
        nbytes = struct.unpack_from("<Q", b, pos + 16)[0]
        assert nbytes == count * rb and count > 0, (pos, count, nbytes)
        payload = b[pos + 24:pos + 24 + nbytes]
        assert len(payload) == nbytes and zlib.crc32(payload) == crc, ("chunk", pos)
        for i in range(count):
            r = payload[i * rb:(i + 1) * rb]
            seq, ordinal, layer, flags, proposal, cand, acc = struct.unpack_from("<QQIIQii", r, 0)
            ids = list(struct.unpack_from("<%dI" % top_k, r, 40))
            w = list(struct.unpack_from("<%df" % top_k, r, 40 + 4 * top_k))
            recs.append(dict(seq=seq, pos=ordinal, layer=layer, flags=flags, proposal=proposal,
                             cand=cand, acc=acc, ids=ids, w=w))
        pos += 24 + nbytes
        h["chunks"] += 1
    return h, recs

def name_id(text):
    """hebrus-trace(5) OWNER AND THREAD IDS: a canonical decimal below 2^63 is
    itself; any other text, SHA-256 of b"hebrus-name-id/1\\0" + text, first 8
    bytes little-endian, bit 63 set."""
    import hashlib, re
    if re.fullmatch(r"0|[1-9][0-9]*", text) and int(text) < 2 ** 63:
        return int(text)
    d = hashlib.sha256(b"hebrus-name-id/1\0" + text.encode()).digest()
    return struct.unpack("<Q", d[:8])[0] | 1 << 63
PY
	# text prompts: a tiny Qwen-shaped byte-level tokenizer.json (ids
	# 0..255 the bytes, merges up to id 999, the chat atoms from 1000 with
	# <|im_end|> = 1000, realshape's stop id) and the Qwen3.6 template, added
	# to realshape's checkpoint; hb-convert embeds both
	cat >"$art/mktok.py" <<'PY'
import json, sys
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + list(range(ord("\u00ae"), ord("\u00ff") + 1))
cs = bs[:]
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + len(cs) - 188)
byte_char = {b: chr(c) for b, c in zip(bs, cs)}
vocab = {byte_char[b]: b for b in range(256)}
merges = []
def merge(a, b):
    merges.append([a, b]); vocab[a + b] = len(vocab)
letters = "etaoinshrdlcumwfgypbvkjxqz"
for c in letters:
    merge("\u0120", c)
for a in letters:
    for b in letters:
        merge(a, b)
for a in letters:
    for b in letters:
        if len(vocab) < 1000:
            merge("\u0120" + a, b)
atoms = ["<|im_end|>", "<|im_start|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
         "</tool_call>", "<tool_response>", "</tool_response>"][:int(sys.argv[2])]
added = [{"id": 1000 + i, "content": a, "single_word": False, "lstrip": False, "rstrip": False,
          "normalized": False, "special": a.startswith("<|")} for i, a in enumerate(atoms)]
bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
json.dump({"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": {"type": "NFC"},
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
                "behavior": "Isolated", "invert": False}, bl]},
           "post_processor": bl, "decoder": bl,
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                     "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                     "ignore_merges": False, "vocab": vocab, "merges": merges}},
          open(sys.argv[1], "w"), ensure_ascii=False)
PY
	# an independent BPE for ASCII text (the pattern with ASCII classes)
	cat >"$art/bpe.py" <<'PY'
import json, re, sys
t = json.load(open(sys.argv[1]))
vocab, ranks = t["model"]["vocab"], {tuple(m): i for i, m in enumerate(t["model"]["merges"])}
sym = {v: k for k, v in vocab.items() if v < 256}   # ids 0..255 are the bytes
pat = re.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\na-zA-Z0-9]?[a-zA-Z]+|[0-9]| ?[^\sa-zA-Z0-9]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
def bpe(parts):
    while len(parts) > 1:
        r, i = min((ranks.get((parts[i], parts[i + 1]), 1e9), i) for i in range(len(parts) - 1))
        if r == 1e9:
            break
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return parts
text = sys.argv[2]
assert text.isascii() and pat.sub("", text) == ""
print(",".join(str(vocab[p]) for w in pat.findall(text) for p in bpe([sym[b] for b in w.encode()])))
PY
	for kind in text:9:qwen36 othertmpl:9:other nothink:3:qwen36; do
		IFS=: read -r name natoms tmpl <<<"$kind"
		mkdir "$art/ck-$name"
		ln -s "$fx"/realshape/checkpoint/* "$art/ck-$name/"
		python3 "$art/mktok.py" "$art/ck-$name/tokenizer.json" "$natoms"
		if [ "$tmpl" = qwen36 ]; then
			cp "$root/tests/fixtures/chat/qwen36_chat_template.jinja" "$art/ck-$name/chat_template.jinja"
		else
			echo '{% for m in messages %}{{ m.content }}{% endfor %}' >"$art/ck-$name/chat_template.jinja"
		fi
		"$build/bin/hb-convert" -q "$art/ck-$name" "$art/$name.gguf"
	done
	export HB_FX=$fx
}

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	run_=$build/bin/hb-run
	fx=$root/tests/fixtures/upstream
	art=$BATS_FILE_TMPDIR
	export HB_FX=$fx PYTHONPATH=$art
	cd "$BATS_TEST_TMPDIR"
}

prompt() { python3 -c "import hb; print(hb.prompt('$1', '$2'))"; }

# The greedy continuation upstream computed: dec/pN/in_ids[0] (the argmax of
# the prefill's last row), then dec/pN/next_ids (12 decode steps).
continuation() {
	python3 -c "
import hb
a = hb.oracle('$1', 'dec/$2/in_ids')[0]
b = hb.oracle('$1', 'dec/$2/next_ids')[0]
assert a[1:] == b[:-1]
print(','.join(str(x) for x in [a[0]] + b))"
}

@test "run: greedy continuations of every oracle prompt are upstream's (realshape, general p1 p2)" {
	# general p0 is left out: its first sparse layer has a tie-dependent
	# QSA selection upstream (qsa/tie bit 0; torch.topk orders equal scores
	# arbitrarily, this port takes the earlier group, AFN-017), so upstream's
	# continuation there is one valid answer, not THE answer; see the taint
	# comment of tests/unit/test_run_oracle.c.
	for sp in realshape:p0 realshape:p1 realshape:p2 general:p1 general:p2; do
		set_=${sp%:*} p=${sp#*:}
		want=$(continuation "$set_" "$p")
		run --separate-stderr "$run_" -q -m "$art/$set_.gguf" --tokens "$(prompt "$set_" "$p")" -n 13
		[ "$status" -eq 0 ]
		[ "$stderr" = "" ]
		[ "$output" = "$want" ] || { echo "$set_ $p: got $output, upstream $want" >&2; return 1; }
	done
}

@test "run: without -q the profile and status go to stderr, never 'supported'" {
	run --separate-stderr "$run_" -m "$art/realshape.gguf" --tokens 1,2,3 -n 2
	[ "$status" -eq 0 ]
	[ "$stderr" = "hb-run: artifact profile dev, status correctness-fixture (runtime_supported false)" ]
	[[ $output =~ ^[0-9]+,[0-9]+$ ]]
}

@test "run: --tokens-file (commas or white space, - for stdin) is --tokens" {
	ids=$(prompt realshape p0)
	want=$("$run_" -q -m "$art/realshape.gguf" --tokens "$ids" -n 4)
	tr ',' '\n' <<<"$ids" >p.txt
	run --separate-stderr "$run_" -q -m "$art/realshape.gguf" --tokens-file p.txt -n 4
	[ "$status" -eq 0 ]
	[ "$output" = "$want" ]
	run --separate-stderr "$run_" -q -m "$art/realshape.gguf" --tokens-file - -n 4 < <(tr ',' ' ' <<<"$ids")
	[ "$status" -eq 0 ]
	[ "$output" = "$want" ]
}

@test "run: --dump-logits is T + n - 1 rows of the physical vocabulary; its rows are upstream's within 4x the measured error" {
	for sp in realshape:p0 general:p2; do
		set_=${sp%:*} p=${sp#*:}
		run --separate-stderr "$run_" -q -m "$art/$set_.gguf" --tokens "$(prompt "$set_" "$p")" -n 13 --dump-logits l.bin
		[ "$status" -eq 0 ]
		python3 - "$set_" "$p" <<'PY' >&3
import hb, os, sys
s, p = sys.argv[1], sys.argv[2]
pre, (T, V) = hb.oracle(s, "pre/%s/logits" % p)
dec, (S, V2) = hb.oracle(s, "dec/%s/logits" % p)
assert V == V2
# prefill rows, then one row per decode step evaluated: -n 13 evaluates 12
assert os.path.getsize("l.bin") == (T + 12) * V * 4, (os.path.getsize("l.bin"), T, V)
got = hb.rows("l.bin", V)
def maxerr(d):
    """max of the differences, NaN if any is NaN (max() alone skips a NaN)"""
    d = list(d)
    return float("nan") if any(x != x for x in d) else max(d)
e_pre = maxerr(abs(got[t][v] - pre[t * V + v]) for t in range(T) for v in range(V))
e_dec = maxerr(abs(got[T + s_][v] - dec[s_ * V + v]) for s_ in range(12) for v in range(V))
print("# %s %s: max |logit - upstream| prefill %.3e, decode %.3e" % (s, p, e_pre, e_dec))
# measured by this case (bats tests/cli/run.bats -f dump-logits): realshape p0
# prefill 3.81e-6, decode 2.15e-6; general p2 prefill 1.25e-6, decode 3.54e-6;
# bound = 4 x the measurement rounded up to two digits (was 1e-3 for all)
bound = {("realshape", "p0"): (4 * 3.9e-6, 4 * 2.2e-6), ("general", "p2"): (4 * 1.3e-6, 4 * 3.6e-6)}[(s, p)]
assert e_pre <= bound[0], (e_pre, bound)
assert e_dec <= bound[1], (e_dec, bound)
PY
	done
}

@test "run: --dump-routes writes a shard whose prefill routes are upstream's exactly" {
	ids=$(prompt realshape p1)
	run --separate-stderr "$run_" -q -m "$art/realshape.gguf" --tokens "$ids" -n 13 --dump-routes r.trace --sequence 77
	[ "$status" -eq 0 ]
	python3 - <<'PY' >&3
import hb
h, recs = hb.trace("r.trace")
ids, (T,) = hb.oracle("realshape", "pre/p1/ids")
assert (h["top_k"], h["layers"], h["experts"]) == (10, 8, 32), h
assert h["artifact"] != "00" * 32 and h["text"] == "00" * 32, h
assert h["owner"] == 0 and h["generation"] == 0, h
# without --thread the shard names no thread and stays version 1
assert h["version"] == 1 and h["thread"] is None, h
# every evaluated position x every layer: T prefill + 12 decode positions
assert len(recs) == (T + 12) * 8, len(recs)
# observation order: the prefill chunk layer by layer (each layer over every
# position), then each decode step's layers
order = [(t, l) for l in range(8) for t in range(T)] + [(T + s, l) for s in range(12) for l in range(8)]
assert [(r["pos"], r["layer"]) for r in recs] == order
at = {(r["pos"], r["layer"]): r for r in recs}
for r in recs:
    assert r["seq"] == 77 and r["flags"] == 0 and r["proposal"] == 0 and (r["cand"], r["acc"]) == (-1, -1), r
mism, werr = 0, 0.0
for l in range(8):
    want, (T2, k) = hb.oracle("realshape", "pre/p1/route/ids/L%02d" % l)
    w, _ = hb.oracle("realshape", "pre/p1/route/w/L%02d" % l)
    dw, (S, _k) = hb.oracle("realshape", "dec/p1/route/ids/L%02d" % l)
    for t in range(T):
        r = at[(t, l)]
        mism += r["ids"] != want[t * k:(t + 1) * k]
        for a, b in zip(r["w"], w[t * k:(t + 1) * k]):
            d = abs(a - b)
            werr = float("nan") if d != d or werr != werr else max(werr, d)  # a NaN sticks
    for s in range(S):
        mism += at[(T + s, l)]["ids"] != dw[s * k:(s + 1) * k]
print("# realshape p1: %d route records, %d mismatches, max |weight - upstream| %.3e" % (len(recs), mism, werr))
# measured by this case (bats tests/cli/run.bats -f 'dump-routes writes'):
# 1.91e-6 on realshape p1's prefill; bound = 4 x 2.0e-6 (was 1e-4)
assert mism == 0 and werr <= 4 * 2.0e-6, (mism, werr)
PY
}

@test "run: --dump-routes - streams the shard to stdout and the ids go to stderr" {
	ids=$(prompt realshape p0)
	"$run_" -q -m "$art/realshape.gguf" --tokens "$ids" -n 5 --dump-routes file.trace >ids.txt
	"$run_" -q -m "$art/realshape.gguf" --tokens "$ids" -n 5 --dump-routes - >pipe.trace 2>pipe.err
	cmp file.trace pipe.trace
	[ "$(cat pipe.err)" = "$(cat ids.txt)" ]
	[ "$(cat ids.txt)" = "$(continuation realshape p0 | cut -d, -f1-5)" ]
	# and through a real pipe, read back by the documented layout
	"$run_" -q -m "$art/realshape.gguf" --tokens "$ids" -n 5 --dump-routes - 2>/dev/null |
		python3 -c "import hb; h, r = hb.trace('-'); assert len(r) == (24 + 4) * 8, len(r)"
}

@test "run: --owner, --thread and --generation go to the trace header; names map to the documented ids" {
	ids=$(prompt realshape p0)
	"$run_" -q -m "$art/realshape.gguf" --tokens "$ids" -n 3 --dump-routes plain.trace >plain.ids
	run --separate-stderr "$run_" -q -m "$art/realshape.gguf" --tokens "$ids" -n 3 --dump-routes named.trace \
		--owner 3f2504e0-4f89-11d3-9a0c-0305e82c3301 --thread alice@example.org --generation 4294967295
	[ "$status" -eq 0 ]
	[ "$output" = "$(cat plain.ids)" ]
	"$run_" -q -m "$art/realshape.gguf" --tokens "$ids" -n 3 --dump-routes one.trace --owner 1 --thread 0 --generation 7 >/dev/null
	"$run_" -q -m "$art/realshape.gguf" --tokens "$ids" -n 3 --dump-routes zeros.trace --owner 007 --generation 007 >/dev/null
	python3 - <<'PY' >&3
import hb
plain, pr = hb.trace("plain.trace")
named, nr = hb.trace("named.trace")
uuid, alice = hb.name_id("3f2504e0-4f89-11d3-9a0c-0305e82c3301"), hb.name_id("alice@example.org")
assert (plain["version"], plain["owner"], plain["generation"], plain["thread"]) == (1, 0, 0, None), plain
assert (named["version"], named["owner"], named["generation"], named["thread"]) == (2, uuid, 4294967295, alice), named
assert uuid >> 63 and alice >> 63 and uuid != alice
# the header says who; the routes are the same
assert nr == pr
one, _ = hb.trace("one.trace")
assert (one["version"], one["owner"], one["generation"], one["thread"]) == (2, 1, 7, 0), one
# "007" is not the integer 7 but a name; a generation is a number
z, _ = hb.trace("zeros.trace")
assert (z["owner"], z["generation"], z["thread"]) == (hb.name_id("007"), 7, None) and z["owner"] != 7, z
print("# owner %d thread %d (named), owner %d (007)" % (uuid, alice, z["owner"]))
PY
}

@test "run: an affine4-g64 artifact runs; its logit error against the bf16 artifact is bounded" {
	ids=$(prompt realshape p2)
	"$run_" -q -m "$art/realshape.gguf" --tokens "$ids" -n 13 --dump-logits bf16.bin >bf16.ids
	run --separate-stderr "$run_" -q -m "$art/realshape-a4.gguf" --tokens "$ids" -n 13 --dump-logits a4.bin
	[ "$status" -eq 0 ]
	[[ $output =~ ^([0-9]+,){12}[0-9]+$ ]]
	python3 - "$output" "$(cat bf16.ids)" <<'PY' >&3
import hb, math, sys
V = 1024
a, b = hb.rows("a4.bin", V), hb.rows("bf16.bin", V)
assert len(a) == len(b) == 64 + 12
assert all(math.isfinite(x) for r in a for x in r)
# prefill rows see the same inputs; decode rows may follow other ids
T = 64
emax = max(abs(x - y) for ra, rb in zip(a[:T], b[:T]) for x, y in zip(ra, rb))
scale = max(abs(y) for rb in b[:T] for y in rb)
agree = sum(max(range(V), key=ra.__getitem__) == max(range(V), key=rb.__getitem__) for ra, rb in zip(a[:T], b[:T]))
same = sum(x == y for x, y in zip(sys.argv[1].split(","), sys.argv[2].split(",")))
print("# affine4-g64 vs bf16 (realshape p2, %d prefill rows): max |logit diff| %.4g (largest |logit| %.3g), "
      "argmax agrees on %d/%d rows; greedy ids agree on %d/13" % (T, emax, scale, agree, T, same))
# Gates, from the measurement (x86-64, gcc -O2): max |logit diff| 0.2026,
# argmax agrees on 62/64.  The bound is 0.25 (1.23x the measurement), the
# agreement at least 60/64; and the error is not zero (above 0.05), or the
# artifact was not quantised at all.
assert emax <= 0.25, "affine4 logit error %.4g above 0.25 (measured 0.2026)" % emax
assert emax > 0.05, "affine4 logit error %.4g: the experts were not quantised" % emax
assert agree >= 60, "argmax agrees on only %d/64 prefill rows (measured 62)" % agree
PY
}

@test "run: a corrupted artifact is refused with hb-admit's line, exit 1" {
	cp "$art/realshape.gguf" bad.gguf
	printf 'XXXX' | dd of=bad.gguf bs=1 seek=0 conv=notrunc status=none
	run --separate-stderr "$build/bin/hb-admit" bad.gguf
	[ "$status" -eq 1 ]
	admit_line=$stderr
	run --separate-stderr "$run_" -m bad.gguf --tokens 1,2,3
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[ "$stderr" = "${admit_line/#hb-admit:/hb-run:}" ]
	[ "$stderr" = 'hb-run: gguf-magic: gguf.magic: magic is not "GGUF" at byte 0' ]
	# a deeper refusal: the profile's status word
	cp "$art/realshape.gguf" bad2.gguf
	python3 - <<'PY'
b = bytearray(open("bad2.gguf", "rb").read())
i = b.find(b"correctness-fixture")
assert i > 0
b[i:i + 19] = b"correctness-fixturf"
open("bad2.gguf", "wb").write(b)
PY
	run --separate-stderr "$build/bin/hb-admit" bad2.gguf
	[ "$status" -eq 1 ]
	admit_line=$stderr
	run --separate-stderr "$run_" -m bad2.gguf --tokens 1
	[ "$status" -eq 1 ]
	[ "$stderr" = "${admit_line/#hb-admit:/hb-run:}" ]
}

@test "run: a PLE page that does not verify stops the run with its diagnostic, exit 1" {
	cp "$art/realshape.gguf" ple.gguf
	"$build/bin/hb-admit" --json ple.gguf >owners.json
	python3 - <<'PY'
import json
r = json.load(open("owners.json"))
o = next(o for o in r["owners"] if o["owner"] == "ple-pages")
with open("ple.gguf", "r+b") as f:
    f.seek(o["offset"])
    f.write(b"\xa5" * o["length"])
PY
	echo previous >routes.trace
	run --separate-stderr "$run_" -q -m ple.gguf --tokens 1,2,3 -n 2 --dump-routes routes.trace
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[[ $stderr =~ ^"hb-run: ple-page-header: ple.page["[0-9]+"].header.magic: page magic is not DS4PLEPG at byte "[0-9]+$ ]]
	# the failed run published nothing: the earlier file is untouched, no temporary left
	[ "$(cat routes.trace)" = previous ]
	[ -z "$(ls -A | grep hbtmp || true)" ]
	# rows are read over the threads, and the failure named is still the
	# first in token and head order: the same page whatever the count
	first=$stderr
	for n in 1 2 3; do
		run --separate-stderr "$run_" -q --threads "$n" -m ple.gguf --tokens 1,2,3,4,5,6,7,8,9 -n 2
		[ "$status" -eq 1 ]
		[ "$stderr" = "$first" ]
	done
}

@test "run: a missing artifact or unwritable output is exit 3" {
	run --separate-stderr "$run_" -m missing.gguf --tokens 1
	[ "$status" -eq 3 ]
	[ "$stderr" = "hb-run: cannot open 'missing.gguf': No such file or directory" ]
	run --separate-stderr "$run_" -q -m "$art/realshape.gguf" --tokens-file missing.txt
	[ "$status" -eq 3 ]
	[ "$stderr" = "hb-run: cannot open 'missing.txt': No such file or directory" ]
	run --separate-stderr "$run_" -q -m "$art/realshape.gguf" --tokens 1 --dump-routes no/such/dir.trace
	[ "$status" -eq 3 ]
	[ "$stderr" = "hb-run: cannot create temporary file 'no/such/dir.trace': No such file or directory" ]
	run --separate-stderr "$run_" -q -m "$art/realshape.gguf" --tokens 1 --dump-logits no/such/l.bin
	[ "$status" -eq 3 ]
	[ "$stderr" = "hb-run: cannot create temporary file 'no/such/l.bin': No such file or directory" ]
	[ ! -e no ]
}

@test "run: usage errors exit 2 with exact messages" {
	m=$art/realshape.gguf
	check() { # expected message, args...
		local want=$1
		shift
		run --separate-stderr "$run_" "$@"
		[ "$status" -eq 2 ] || { echo "$*: status $status" >&2; return 1; }
		[ "$output" = "" ]
		[ "$stderr" = "hb-run: $want
try 'hb-run --help'" ] || { echo "$*: got: $stderr" >&2; return 1; }
	}
	check "-m ARTIFACT is required" --tokens 1
	check "give exactly one of --tokens, --tokens-file, -p and --chat" -m "$m"
	check "give exactly one of --tokens, --tokens-file, -p and --chat" -m "$m" --tokens 1 --tokens-file f
	check "-n takes 0..1048576, not '-1'" -m "$m" --tokens 1 -n -1
	check "-n takes 0..1048576, not '1048577'" -m "$m" --tokens 1 -n 1048577
	check "--temp takes a positive number, not '0'" -m "$m" --tokens 1 --temp 0
	check "--temp takes a positive number, not '-1'" -m "$m" --tokens 1 --temp -1
	check "--top-p takes a number in (0, 1], not '1.5'" -m "$m" --tokens 1 --top-p 1.5
	check "--top-p takes a number in (0, 1], not '0'" -m "$m" --tokens 1 --top-p 0
	check "--top-k takes a positive count, not '0'" -m "$m" --tokens 1 --top-k 0
	check "--seed takes an unsigned integer, not 'x'" -m "$m" --tokens 1 --seed x
	check "--threads takes 1..1024, not '0'" -m "$m" --tokens 1 --threads 0
	check "--sequence takes an unsigned integer, not '-2'" -m "$m" --tokens 1 --sequence -2
	check "--generation takes 0..4294967295, not '4294967296'" -m "$m" --tokens 1 --generation 4294967296
	check "--generation takes 0..4294967295, not '-1'" -m "$m" --tokens 1 --generation -1
	check "--generation takes 0..4294967295, not 'x'" -m "$m" --tokens 1 --generation x
	check "--generation takes 0..4294967295, not ''" -m "$m" --tokens 1 --generation ''
	check "--generation takes 0..4294967295, not '99999999999999999999999'" -m "$m" --tokens 1 --generation 99999999999999999999999
	check "--owner takes an unsigned integer or a name of 1..256 bytes without control characters, not ''" -m "$m" --tokens 1 --owner ''
	check "--thread takes an unsigned integer or a name of 1..256 bytes without control characters, not ''" -m "$m" --tokens 1 --thread ''
	check "--owner takes an unsigned integer or a name of 1..256 bytes without control characters, not '$(printf 'a\tb')'" -m "$m" --tokens 1 --owner "$(printf 'a\tb')"
	long=$(printf 'x%.0s' {1..257})
	check "--thread takes an unsigned integer or a name of 1..256 bytes without control characters, not '$long'" -m "$m" --tokens 1 --thread "$long"
	check "--greedy excludes --temp, --top-p and --top-k" -m "$m" --tokens 1 --greedy --top-k 3
	check "--dump-logits needs a file (stdout carries the ids)" -m "$m" --tokens 1 --dump-logits -
	check "--dump-routes - and --json both want stdout" -m "$m" --tokens 1 --dump-routes - --json
	check "option '--tokens' needs an argument" -m "$m" --tokens
	check "bad option '-x'" -m "$m" --tokens 1 -x
	check "unexpected argument 'extra'" -m "$m" --tokens 1 extra
	# prompt ids are checked: a diagnostic line, still exit 2
	run --separate-stderr "$run_" -q -m "$m" --tokens 1,,2
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-run: run-tokens: --tokens: expected comma-separated token ids at byte 2" ]
	run --separate-stderr "$run_" -q -m "$m" --tokens 1,-2
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-run: run-tokens: --tokens: expected comma-separated token ids at byte 2" ]
	run --separate-stderr "$run_" -q -m "$m" --tokens 1,2,
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-run: run-tokens: --tokens: expected comma-separated token ids at byte 4" ]
	printf '1 2 x\n' >bad.txt
	run --separate-stderr "$run_" -q -m "$m" --tokens-file bad.txt
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-run: run-tokens: bad.txt: expected token ids separated by commas or white space at byte 4" ]
	# the whole file is read: ids after a NUL byte are not silently dropped
	printf '1 2\0003\n' >nul.txt
	run --separate-stderr "$run_" -q -m "$m" --tokens-file nul.txt
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-run: run-tokens: nul.txt: expected token ids separated by commas or white space at byte 3" ]
	run --separate-stderr "$run_" -q -m "$m" --tokens 5,1024
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-run: session-token-range: tokens: token 1024 at 1 is outside [0, 1024)" ]
}

@test "run: -n 0 generates nothing but still evaluates the prompt" {
	run --separate-stderr "$run_" -q -m "$art/realshape.gguf" --tokens 1,2,3 -n 0 --dump-logits l.bin --json
	[ "$status" -eq 0 ]
	python3 - "$output" <<'PY'
import json, os, sys
j = json.loads(sys.argv[1])
assert j["ids"] == [] and j["generated_tokens"] == 0 and j["prompt_tokens"] == 3, j
assert "decode_tokens_per_second" not in j
assert j["runtime_supported"] is False and j["status"] == "correctness-fixture" and j["dense_mask_bytes"] == 0
assert os.path.getsize("l.bin") == 3 * 1024 * 4
PY
	run --separate-stderr "$run_" -q -m "$art/realshape.gguf" --tokens 1,2,3 -n 0
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
}

@test "run: --no-prefault leaves the weights unread before the clock and changes no result" {
	# by default the CPU run reads its mapped weights first and says how long it took
	"$run_" -q --json --weights map -m "$art/realshape.gguf" --tokens 1,2,3 -n 4 --dump-logits a.bin >a.json
	"$run_" -q --json --weights map --no-prefault -m "$art/realshape.gguf" --tokens 1,2,3 -n 4 --dump-logits b.bin >b.json
	cmp a.bin b.bin
	art=$art python3 - <<'PY'
import json, os
a, b = json.load(open("a.json")), json.load(open("b.json"))
assert a["ids"] == b["ids"] and len(a["ids"]) == 4, (a["ids"], b["ids"])
assert a["prefault_seconds"] > 0, a["prefault_seconds"]
assert b["prefault_seconds"] == 0, b["prefault_seconds"]
# how much of the mapping the kernel maps 2 MiB at a time depends on its
# page cache; never more than the artifact, and not read without a prefault
size = os.path.getsize(os.environ["art"] + "/realshape.gguf")
assert 0 <= a["weights_pmd_mapped_bytes"] <= size, a["weights_pmd_mapped_bytes"]
assert a["weights_pmd_mapped_bytes"] % (2 << 20) == 0, a["weights_pmd_mapped_bytes"]
assert b["weights_pmd_mapped_bytes"] == 0, b["weights_pmd_mapped_bytes"]
PY
}

@test "run: --weights read (the CPU default) and map give the same bits; read is refused where it cannot apply" {
	"$run_" -q --json -m "$art/realshape.gguf" --tokens 1,2,3 -n 4 --dump-logits r.bin --dump-routes r.tr >r.json
	"$run_" -q --json --weights map -m "$art/realshape.gguf" --tokens 1,2,3 -n 4 --dump-logits m.bin --dump-routes m.tr >m.json
	cmp r.bin m.bin
	cmp r.tr m.tr
	"$run_" -q --json --weights read --no-prefault -m "$art/realshape.gguf" --tokens 1,2,3 -n 4 --dump-logits n.bin >n.json
	cmp r.bin n.bin
	# streamed experts keep the artifact mapped by default
	"$run_" -q --json --expert-cache 50% -m "$art/realshape.gguf" --tokens 1,2,3 -n 4 --dump-logits s.bin >s.json
	cmp r.bin s.bin
	art=$art python3 - <<'PY'
import json, os
r, m, n, s = (json.load(open(f)) for f in ("r.json", "m.json", "n.json", "s.json"))
assert r["ids"] == m["ids"] == n["ids"] == s["ids"] and len(r["ids"]) == 4, (r["ids"], m["ids"])
assert (r["weights"], m["weights"], n["weights"], s["weights"]) == ("read", "map", "read", "map")
assert r["weights_read_seconds"] > 0 and n["weights_read_seconds"] > 0, (r, n)
assert m["weights_read_seconds"] == 0 and s["weights_read_seconds"] == 0, (m, s)
size = os.path.getsize(os.environ["art"] + "/realshape.gguf")
assert 0 <= r["weights_pmd_mapped_bytes"] <= size and r["weights_pmd_mapped_bytes"] % (2 << 20) == 0, r
PY
	run --separate-stderr "$run_" -q --weights read --expert-cache 50% -m "$art/realshape.gguf" --tokens 1,2,3 -n 1
	[ "$status" -eq 2 ]
	[[ $stderr == *"--weights: read loads every expert, which --expert-cache 50% streams instead (use map)"* ]]
	run --separate-stderr "$run_" -q --weights read --backend cuda -m "$art/realshape.gguf" --tokens 1,2,3 -n 1
	[ "$status" -eq 2 ]
	[[ $stderr == *"--weights: read is for the cpu backend"* ]]
	run --separate-stderr "$run_" -q --weights mmap -m "$art/realshape.gguf" --tokens 1,2,3 -n 1
	[ "$status" -eq 2 ]
	[[ $stderr == *"--weights takes read or map, not 'mmap'"* ]]
	run --separate-stderr "$run_" -q --weights map -m "$art/realshape.gguf" -p hi --tokenize-only
	[ "$status" -eq 2 ]
	[[ $stderr == *"--tokenize-only runs no model: it excludes --weights"* ]]
}

@test "run: a stop id ends generation (printed, never fed back)" {
	# found by search: realshape's greedy choice after prompt 249 is 1000,
	# the artifact's only stop id (qwen4exp.stop_token_ids)
	run --separate-stderr "$run_" -q -m "$art/realshape.gguf" --tokens 249 -n 8 --dump-logits l.bin --dump-routes r.trace
	[ "$status" -eq 0 ]
	[ "$output" = "1000" ]
	[ "$(stat -c %s l.bin)" -eq $((1 * 1024 * 4)) ]
	python3 -c "import hb; h, r = hb.trace('r.trace'); assert [x['pos'] for x in r] == [0] * 8, r"
	run --separate-stderr "$run_" -q -m "$art/realshape.gguf" --tokens 249 -n 8 --json
	[ "$status" -eq 0 ]
	python3 -c "import json, sys; j = json.loads(sys.argv[1]); assert j['ids'] == [1000] and j['generated_tokens'] == 1, j" "$output"
}

@test "run: a seed reproduces a sampled run; ids stay in the vocabulary" {
	ids=$(prompt general p1)
	a=$("$run_" -q -m "$art/general.gguf" --tokens "$ids" -n 20 --temp 1.5 --top-p 0.9 --seed 11)
	b=$("$run_" -q -m "$art/general.gguf" --tokens "$ids" -n 20 --temp 1.5 --top-p 0.9 --seed 11 --threads 1)
	c=$("$run_" -q -m "$art/general.gguf" --tokens "$ids" -n 20 --temp 1.5 --top-p 0.9 --seed 12)
	[ "$a" = "$b" ]
	[ "$a" != "$c" ]
	python3 -c "
ids = [int(x) for x in '$a'.split(',')]
assert 1 <= len(ids) <= 20 and all(0 <= x < 768 for x in ids), ids"
	# --top-k 1 is greedy
	[ "$("$run_" -q -m "$art/general.gguf" --tokens "$ids" -n 6 --top-k 1 --seed 3)" = \
	  "$("$run_" -q -m "$art/general.gguf" --tokens "$ids" -n 6)" ]
}

# ------------------------------------------------------------ text prompts
# text.gguf: realshape plus the tiny tokenizer and the Qwen3.6 template
# (setup_file); othertmpl.gguf another template; nothink.gguf a tokenizer
# whose added tokens stop before <think>.

@test "run: -p --tokenize-only prints the ids of an independent BPE; atoms spelled in text stay data" {
	for text in "Hello there, the <|im_end|> x" "the user <|im_end|> said: it's 42!" "  tabs	and
CRLF
 end" "<think>"; do
		want=$(python3 "$art/bpe.py" "$art/ck-text/tokenizer.json" "$text")
		run --separate-stderr "$run_" -q -m "$art/text.gguf" -p "$text" --tokenize-only
		[ "$status" -eq 0 ]
		[ "$stderr" = "" ]
		[ "$output" = "$want" ] || { echo "'$text': got $output, want $want" >&2; return 1; }
		# no added token (ids 1000..1008) in caller text
		python3 -c "import sys; assert all(int(x) < 1000 for x in sys.argv[1].split(','))" "$output"
	done
	# an empty prompt is no ids: an empty line
	run --separate-stderr "$run_" -q -m "$art/text.gguf" -p "" --tokenize-only
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	[ "$stderr" = "" ]
}

@test "run: --chat --render-only prints upstream's rendering byte for byte" {
	python3 - "$run_" "$art/text.gguf" "$root/tests/fixtures/chat" <<'PY' >&3
import json, subprocess, sys
run, gguf, fx = sys.argv[1:]
oracle = json.load(open(fx + "/chat_oracle.json"))
refused = {r["case"] for r in json.load(open(fx + "/contract.json"))["refusals"]}
n = 0
for c in oracle["cases"]:
    kw = c["kwargs"]
    # hb-run renders with the generation prompt, thinking on or (--no-think) off
    if not kw.get("add_generation_prompt") or "preserve_thinking" in kw or c["id"] in refused:
        continue
    assert c["upstream"]["ok"], c["id"]
    open("c.json", "w", encoding="utf-8").write(c["input_json"])
    args = [run, "-q", "-m", gguf, "--chat", "c.json", "--render-only"]
    if kw.get("enable_thinking") is False:
        args.append("--no-think")
    p = subprocess.run(args, capture_output=True)
    assert p.returncode == 0 and p.stderr == b"", (c["id"], p.returncode, p.stderr)
    assert p.stdout == c["upstream"]["rendered"].encode("utf-8"), c["id"]
    n += 1
print("# %d oracle conversations rendered byte-identically" % n)
assert n >= 20, n
PY
	# - reads standard input
	echo '[{"role":"user","content":"Hello"}]' >c.json
	run --separate-stderr "$run_" -q -m "$art/text.gguf" --chat - --render-only <c.json
	[ "$status" -eq 0 ]
	[ "$output" = $'<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>' ]
	run --separate-stderr "$run_" -q -m "$art/text.gguf" --chat c.json --no-think --render-only
	[ "$status" -eq 0 ]
	[ "$output" = $'<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>' ]
}

@test "run: --chat --print-tokens: template atoms are TRUSTED_CONTROL, caller text that spells them DATA" {
	python3 - "$root/tests/fixtures/chat" <<'PY'
import json, sys
c = next(c for c in json.load(open(sys.argv[1] + "/chat_oracle.json"))["cases"] if c["id"] == "injection_user")
open("c.json", "w", encoding="utf-8").write(c["input_json"])
open("rendered", "wb").write(c["upstream"]["rendered"].encode("utf-8"))
PY
	run --separate-stderr "$run_" -q -m "$art/text.gguf" --chat c.json --tokenize-only
	[ "$status" -eq 0 ]
	ids=$output
	run --separate-stderr "$run_" -q -m "$art/text.gguf" --chat c.json --tokenize-only --print-tokens
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	printf '%s\n' "$output" >table
	python3 - "$ids" "$art/ck-text/tokenizer.json" <<'PY'
import json, sys
ids = [int(x) for x in sys.argv[1].split(",")]
lines = open("table", encoding="utf-8").read().split("\n")[:-1]
# the table, then the usual id line
assert lines[-1] == sys.argv[1], lines[-1]
rows = [l.split("\t") for l in lines[:-1]]
assert [int(r[0]) for r in rows] == ids
tok = json.load(open(sys.argv[2]))
added = {a["id"]: a["content"] for a in tok["added_tokens"]}
for r in rows:
    assert len(r) == 3 and r[1] in ("DATA", "TRUSTED_CONTROL"), r
    assert (r[1] == "TRUSTED_CONTROL") == (int(r[0]) in added), r
    if r[1] == "TRUSTED_CONTROL":
        assert json.loads(r[2]) == added[int(r[0])], r
# the contract's control atoms for this case, in order
assert [json.loads(r[2]) for r in rows if r[1] == "TRUSTED_CONTROL"] == \
    ["<|im_start|>", "<|im_end|>", "<|im_start|>", "<think>"]
# the ids decode to the rendering: ByteLevel symbols back to bytes
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs = bs[:]
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + len(cs) - 188)
unbyte = {chr(c): b for b, c in zip(bs, cs)}
inv = {v: k for k, v in tok["model"]["vocab"].items()}
out = b"".join(added[i].encode() if i in added else bytes(unbyte[ch] for ch in inv[i]) for i in ids)
assert out == open("rendered", "rb").read()
PY
	# --json: prompt_ids and prompt
	run --separate-stderr "$run_" -q -m "$art/text.gguf" --chat c.json --tokenize-only --print-tokens --json
	[ "$status" -eq 0 ]
	python3 - "$output" "$ids" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
ids = [int(x) for x in sys.argv[2].split(",")]
assert sorted(j) == ["prompt", "prompt_ids", "prompt_tokens"], sorted(j)
assert j["prompt_ids"] == ids and j["prompt_tokens"] == len(ids)
assert [p["id"] for p in j["prompt"]] == ids
assert all(p["provenance"] == ("TRUSTED_CONTROL" if p["id"] >= 1000 else "DATA") for p in j["prompt"])
assert "".join(p["text"] for p in j["prompt"]).startswith("<|im_start|>user\n")
PY
}

@test "run: -p and --chat generate text: the decoded ids, the same ids as --tokens" {
	prompt=$("$run_" -q -m "$art/text.gguf" -p "the user said" --tokenize-only)
	want=$("$run_" -q -m "$art/text.gguf" --tokens "$prompt" -n 6)
	run --separate-stderr "$run_" -q -m "$art/text.gguf" -p "the user said" -n 6 --json
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	printf '%s' "$output" >run.json
	python3 - "$want" "$prompt" "$art/ck-text/tokenizer.json" <<'PY'
import json, sys
j = json.load(open("run.json"))
assert ",".join(map(str, j["ids"])) == sys.argv[1], (j["ids"], sys.argv[1])
assert ",".join(map(str, j["prompt_ids"])) == sys.argv[2]
assert "prompt" not in j and j["prompt_tokens"] == len(j["prompt_ids"])
tok = json.load(open(sys.argv[3]))
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs = bs[:]
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + len(cs) - 188)
unbyte = {chr(c): b for b, c in zip(bs, cs)}
inv = {v: k for k, v in tok["model"]["vocab"].items()}
added = {a["id"]: a["content"] for a in tok["added_tokens"]}
raw = b"".join(added[i].encode() if i in added else bytes(unbyte[ch] for ch in inv[i]) for i in j["ids"])
# the display policy is Python's errors="replace" (maximal subparts)
assert j["text"] == raw.decode("utf-8", "replace"), (j["text"], raw)
open("want.txt", "w", encoding="utf-8").write(j["text"] + "\n")
PY
	# the plain output is that text on one line
	"$run_" -q -m "$art/text.gguf" -p "the user said" -n 6 >got.txt
	cmp got.txt want.txt
	# --chat: the same for the rendered prompt; --print-tokens puts the table first
	echo '[{"role":"user","content":"the user said"}]' >c.json
	prompt=$("$run_" -q -m "$art/text.gguf" --chat c.json --tokenize-only)
	n=$(tr ',' '\n' <<<"$prompt" | wc -l)
	"$run_" -q -m "$art/text.gguf" --chat c.json -n 5 --json >chat.json
	run --separate-stderr "$run_" -q -m "$art/text.gguf" --chat c.json -n 5 --print-tokens
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >out.txt
	python3 - "$prompt" "$n" "$("$run_" -q -m "$art/text.gguf" --tokens "$prompt" -n 5)" <<'PY'
import json, sys
j = json.load(open("chat.json"))
assert ",".join(map(str, j["prompt_ids"])) == sys.argv[1]
assert ",".join(map(str, j["ids"])) == sys.argv[3]
lines = open("out.txt", encoding="utf-8").read().split("\n")
n = int(sys.argv[2])
assert [l.split("\t")[0] for l in lines[:n]] == sys.argv[1].split(",")
assert lines[n:] == [j["text"], ""], lines[n:]
# a stop id may end the run; it is last
assert 1000 not in j["ids"][:-1]
PY
	# with --dump-routes - the text goes to stderr, as the ids do
	run --separate-stderr "$run_" -q -m "$art/text.gguf" -p "the user said" -n 6 --dump-routes -
	[ "$status" -eq 0 ]
	[ "$stderr" = "$(cat want.txt)" ]
}

@test "run: text prompts need the artifact's tokenizer and the Qwen3.6 template" {
	echo '[{"role":"user","content":"hi"}]' >c.json
	run --separate-stderr "$run_" -q -m "$art/realshape.gguf" -p hi
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[ "$stderr" = "hb-run: run-no-tokenizer: tokenizer.huggingface.json: the artifact embeds no tokenizer; -p and --chat need one (give --tokens)" ]
	run --separate-stderr "$run_" -q -m "$art/realshape.gguf" -p hi --tokenize-only
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-run: run-no-tokenizer: tokenizer.huggingface.json: the artifact embeds no tokenizer; -p and --chat need one (give --tokens)" ]
	run --separate-stderr "$run_" -q -m "$art/realshape.gguf" --chat c.json --render-only
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[ "$stderr" = "hb-run: run-chat-template: tokenizer.chat_template: the artifact embeds no chat template; --chat needs the Qwen3.6 one" ]
	sha=$(printf '%s\n' '{% for m in messages %}{{ m.content }}{% endfor %}' | sha256sum | cut -d' ' -f1)
	run --separate-stderr "$run_" -q -m "$art/othertmpl.gguf" --chat c.json
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[ "$stderr" = "hb-run: run-chat-template: tokenizer.chat_template: the chat template (sha256 $sha) is not the Qwen3.6 template hb-run renders" ]
	# -p needs no template
	run --separate-stderr "$run_" -q -m "$art/othertmpl.gguf" -p hi --tokenize-only
	[ "$status" -eq 0 ]
	[ "$output" = "$(python3 "$art/bpe.py" "$art/ck-othertmpl/tokenizer.json" hi)" ]
	# a template atom the tokenizer lacks is refused, never encoded as text
	run --separate-stderr "$run_" -q -m "$art/nothink.gguf" --chat c.json --tokenize-only
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[ "$stderr" = "hb-run: text-control: segments[6]: trusted control text '<think>' is not an added token of the tokenizer" ]
	# and --render-only does not tokenize
	run --separate-stderr "$run_" -q -m "$art/nothink.gguf" --chat c.json --render-only
	[ "$status" -eq 0 ]
}

@test "run: bad text prompts: a usage error (2) or a missing file (3)" {
	m=$art/text.gguf
	run --separate-stderr "$run_" -q -m "$m" -p "$(printf 'a\377b')"
	[ "$status" -eq 2 ]
	[ "$output" = "" ]
	[ "$stderr" = "hb-run: utf8-invalid: text: invalid UTF-8 at byte 1" ]
	run --separate-stderr "$run_" -q -m "$m" -p ""
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-run: run-prompt-empty: -p: the prompt encodes to no tokens" ]
	echo '[{"role":"user","content":[{"type":"image"}]}]' >media.json
	run --separate-stderr "$run_" -q -m "$m" --chat media.json
	[ "$status" -eq 2 ]
	[ "$output" = "" ]
	[ "$stderr" = "hb-run: chat-media: messages[0].content[0]: structured media parts are refused: the artifact is text-only" ]
	echo '[]' >empty.json
	run --separate-stderr "$run_" -q -m "$m" --chat empty.json --render-only
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-run: chat-empty: messages: "* ]]
	run --separate-stderr "$run_" -q -m "$m" --chat missing.json
	[ "$status" -eq 3 ]
	[ "$stderr" = "hb-run: cannot open 'missing.json': No such file or directory" ]
}

@test "run: text prompt usage errors exit 2 with exact messages" {
	m=$art/text.gguf
	echo '[{"role":"user","content":"hi"}]' >c.json
	check() { # expected message, args...
		local want=$1
		shift
		run --separate-stderr "$run_" "$@"
		[ "$status" -eq 2 ] || { echo "$*: status $status" >&2; return 1; }
		[ "$output" = "" ]
		[ "$stderr" = "hb-run: $want
try 'hb-run --help'" ] || { echo "$*: got: $stderr" >&2; return 1; }
	}
	check "give exactly one of --tokens, --tokens-file, -p and --chat" -m "$m" -p hi --chat c.json
	check "give exactly one of --tokens, --tokens-file, -p and --chat" -m "$m" -p hi --tokens 1
	check "--no-think needs --chat" -m "$m" -p hi --no-think
	check "--render-only needs --chat" -m "$m" -p hi --render-only
	check "--render-only excludes --tokenize-only, --print-tokens and --json" -m "$m" --chat c.json --render-only --json
	check "--render-only excludes --tokenize-only, --print-tokens and --json" -m "$m" --chat c.json --render-only --tokenize-only
	check "--tokenize-only needs -p or --chat" -m "$m" --tokens 1 --tokenize-only
	check "--print-tokens needs -p or --chat" -m "$m" --tokens 1 --print-tokens
	check "--tokenize-only runs no model: it excludes --dump-logits and --dump-routes" -m "$m" -p hi --tokenize-only --dump-logits l.bin
	check "--render-only runs no model: it excludes --dump-logits and --dump-routes" -m "$m" --chat c.json --render-only --dump-routes r.trace
	check "--dump-routes - and --print-tokens both want stdout" -m "$m" -p hi --print-tokens --dump-routes -
	check "option '-p' needs an argument" -m "$m" -p
	check "option '--chat' needs an argument" -m "$m" --chat
	[ ! -e l.bin ]
	[ ! -e r.trace ]
}

# --backend: cpu is the default and the reference (the same ids as without
# the option); anything but cpu or cuda is a usage error; cuda without a
# usable device, or in a binary built without nvcc, is refused (exit 1)
# before the model is loaded, saying which.  The GPU machine's own run of
# --backend cuda is make test-gpu's and bench/gpu-results.md's.
@test "run: --backend cpu is the default; an unknown backend is a usage error; cuda is refused clearly where it cannot run" {
	ids=$(python3 -c "import hb; print(hb.prompt('realshape', 'p0'))")
	a=$("$run_" -q -m "$art/realshape.gguf" --tokens "$ids" -n 4)
	b=$("$run_" -q -m "$art/realshape.gguf" --tokens "$ids" -n 4 --backend cpu)
	[ -n "$a" ]
	[ "$a" = "$b" ]
	run --separate-stderr "$run_" -q -m "$art/realshape.gguf" --tokens "$ids" --backend metal
	[ "$status" -eq 2 ]
	[ "${stderr%%$'\n'*}" = "hb-run: --backend takes cpu or cuda, not 'metal'" ]
	if nvidia-smi -L >/dev/null 2>&1; then
		skip "this machine has an NVIDIA GPU: the refusal needs one without"
	fi
	run --separate-stderr "$run_" -q -m /nonexistent.gguf --tokens "$ids" --backend cuda
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	if nm "$run_" | grep -q ' T hb_cuda_start$'; then
		[[ $stderr == "hb-run: cuda.device: cuda: no CUDA device: "* ]]
	else
		[ "$stderr" = "hb-run: backend: this binary was built without the CUDA backend (no nvcc when it was built)" ]
	fi
}
