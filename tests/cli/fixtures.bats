#!/usr/bin/env bats
# The upstream oracle fixtures' provenance (AFN-014) is checked, not only
# recorded: scripts/oracle/check_fixtures.py (Python standard library) and
# tests/unit/test_fixtures.c both pass on the committed tree with the same
# cross-check counts, and each of their checks is shown to fail, naming the
# array or file, on a private copy of the fixture tree made wrong: a
# relabelled array (re-pinned, so that only the rule table can catch it), a
# flipped .bin byte, a manifest edited without re-pinning, a cross-check
# moved beyond its atol, skip_rows removed or its count contradicted, a
# derived array that is not what it claims.  Each mutation is also applied
# in a harmless form that must pass, so the copy-and-re-pin machinery is
# shown not to break the tree by itself.
#
# Needs python3 and "${HB_BUILD:-build}/tests/unit/test_fixtures" under the
# repository root ($HB_SRCDIR).

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	checker=$root/scripts/oracle/check_fixtures.py
	unit=$build/tests/unit/test_fixtures
	rules=$root/tests/fixtures/upstream/PROVENANCE.rules
	if [[ ! -x $unit ]]; then
		echo "no $unit: run make units first" >&2
		return 1
	fi
	command -v python3 >/dev/null || { echo "python3 is required" >&2; return 1; }
	cd "$BATS_TEST_TMPDIR"
}

# capture CMD...: run CMD, keep its status, stdout and stderr apart.
capture() {
	status=0
	"$@" >cap.out 2>cap.err || status=$?
	out=$(cat cap.out)
	err=$(cat cap.err)
}

# A private copy of tests/fixtures at $tree/tests/fixtures ($fx), laid out so
# that HB_SRCDIR=$tree points test_fixtures at it.  The .bin arrays and the
# checkpoints are hard links: copying 34 MB for each of 21 mutations took
# most of this file's 2 minutes on a loaded machine.  So every write into
# the upstream sets goes through mutate's write(), which replaces the file
# (a new inode) and never writes into a linked one; the small files a shell
# command edits in place (manifests, the rule table, the pin, the other
# sets) are real copies.
copy_tree() {
	tree=$BATS_TEST_TMPDIR/tree
	fx=$tree/tests/fixtures
	mkdir -p "$fx"
	cp -al "$root/tests/fixtures/upstream" "$fx/upstream" 2>/dev/null ||
		{ rm -rf "$fx/upstream"; cp -R "$root/tests/fixtures/upstream" "$fx/upstream"; }
	local f
	for f in "$root"/tests/fixtures/upstream/*/oracle/manifest.json "$rules"; do
		cp --remove-destination "$f" "$fx/${f#"$root"/tests/fixtures/}"
	done
	cp -R "$root/tests/fixtures/chat" "$root/tests/fixtures/tokenizer" "$root/tests/fixtures/codec" "$root/tests/fixtures/draft" "$root/tests/fixtures/spec" \
		"$root/tests/fixtures/MANIFESTS.sha256" "$fx/"
}

# mutate 'PYTHON': run the statements against the copy, with helpers:
# load(set)/save(set, doc) a manifest (written as the producer writes it),
# entry(doc, name), f32(set, name)/put_f32(set, name, values) an array's
# values, rehash(set, doc, name) its manifest sha256, repin() the digest pin,
# write(path, bytes) any other write (by replacement, see copy_tree).
mutate() {
	python3 - "$fx" "$1" <<'PY'
import hashlib, json, os, struct, sys
fx, code = sys.argv[1], sys.argv[2]
up = os.path.join(fx, "upstream")
def mpath(s): return os.path.join(up, s, "oracle", "manifest.json")
def load(s):
    with open(mpath(s)) as f: return json.load(f)
def write(p, data):
    # replace, never write into: p may be a hard link into the committed tree
    with open(p + ".new", "wb") as f: f.write(data)
    os.replace(p + ".new", p)
def save(s, d): write(mpath(s), (json.dumps(d, indent=1) + "\n").encode())
def entry(d, n): return next(a for a in d["arrays"] if a["name"] == n)
def binpath(s, n): return os.path.join(up, s, "oracle", n.replace("/", ".") + ".bin")
def digest(p):
    with open(p, "rb") as f: return hashlib.sha256(f.read()).hexdigest()
def rehash(s, d, n): entry(d, n)["sha256"] = digest(binpath(s, n))
def f32(s, n):
    with open(binpath(s, n), "rb") as f: raw = f.read()
    return list(struct.unpack("<%df" % (len(raw) // 4), raw))
def put_f32(s, n, v): write(binpath(s, n), struct.pack("<%df" % len(v), *v))
def repin():
    p, out = os.path.join(fx, "MANIFESTS.sha256"), []
    with open(p) as f:
        for line in f:
            rel = line.rstrip("\n").split("  ", 1)[1]
            out.append("%s  %s\n" % (digest(os.path.join(fx, rel)), rel))
    write(p, "".join(out).encode())
exec(code)
PY
}

# py_fails PROBLEM...: check_fixtures.py on the copy exits 1 and prints
# exactly these PROBLEM lines, then says FAIL.
py_fails() {
	capture python3 "$checker" "$fx/upstream"
	[ "$status" -eq 1 ]
	[ "$err" = "" ]
	local got want
	got=$(grep '^PROBLEM ' cap.out)
	want=$(printf 'PROBLEM %s\n' "$@")
	[ "$got" = "$want" ] || { printf 'got:\n%s\nwant:\n%s\n' "$got" "$want"; return 1; }
	[ "$(tail -n 1 cap.out)" = "check_fixtures: $# problems -> FAIL" ]
}

# c_fails CASE MESSAGE...: test_fixtures on the copy exits 1 with exactly
# case CASE failing, and exactly these check-failure messages.
c_fails() {
	capture env HB_SRCDIR="$tree" "$unit"
	[ "$status" -eq 1 ]
	local got want case=$1
	shift
	[ "$(grep '^not ok' cap.out | sed 's/^not ok [0-9]* - //')" = "$case" ] || { cat cap.out; return 1; }
	got=$(sed -n 's/^# [^ ]*: check failed: //p' cap.out)
	want=$(printf '%s\n' "$@")
	[ "$got" = "$want" ] || { printf 'got:\n%s\nwant:\n%s\n' "$got" "$want"; return 1; }
}

# both_pass: the copy passes both checkers.
both_pass() {
	capture python3 "$checker" "$fx/upstream"
	[ "$status" -eq 0 ] || { cat cap.out; return 1; }
	[ "$(tail -n 1 cap.out)" = "check_fixtures: 0 problems -> OK" ]
	capture env HB_SRCDIR="$tree" "$unit"
	[ "$status" -eq 0 ] || { cat cap.out; return 1; }
	[ "$(grep -c '^not ok' cap.out)" -eq 0 ]
}

# rule_line PATTERN: the line number of PATTERN's rule in PROVENANCE.rules.
rule_line() {
	grep -nF -- "$1 " "$rules" | grep -v '^[0-9]*:#' | head -n 1 | cut -d: -f1
}

@test "check_fixtures.py passes on the committed fixtures, with every count" {
	capture python3 "$checker"
	[ "$status" -eq 0 ]
	[ "$err" = "" ]
	[ "$out" = "check_fixtures: 4 fixture sets (general, realshape, realshape-fp8, realshape-packed), 1040 arrays (695 upstream-capture, 267 independent-cross-check, 6 contract-control, 72 derived), 26 pinned files, 48 rules
check_fixtures: cross-checks: 267 arrays, 61753 elements compared, 3 rows skipped (ties); derived: 72 arrays re-derived
check_fixtures: 0 problems -> OK" ]
}

@test "test_fixtures compares the same cross-checks as check_fixtures.py" {
	capture env HB_SRCDIR="$root" "$unit"
	[ "$status" -eq 0 ]
	[ "$err" = "" ]
	[ "$out" = "1..4
ok 1 - fixtures_are_intact
ok 2 - manifests_are_pinned
ok 3 - labels_follow_the_rule_table
# cross-checks: 267 arrays, 61753 elements compared, 3 rows skipped (ties)
ok 4 - cross_checks_agree" ]
}

@test "the pin is plain sha256sum format and holds" {
	capture bash -c 'cd "$1" && sha256sum -c --strict --quiet MANIFESTS.sha256' _ "$root/tests/fixtures"
	[ "$status" -eq 0 ]
	[ "$out" = "" ]
	[ "$err" = "" ]
}

@test "control: a copy re-written, re-hashed and re-pinned, a cross-check moved within its atol, passes" {
	copy_tree
	# realshape's router weights are cross-checked at atol 2e-6; 1e-6 off stays inside it
	mutate 'd = load("realshape"); n = "pre/p0/xc/route/w/L00"
v = f32("realshape", "pre/p0/route/w/L00"); x = f32("realshape", n); x[0] = v[0] + 1e-6
put_f32("realshape", n, x); rehash("realshape", d, n); save("realshape", d); repin()'
	both_pass
}

@test "relabelling pre/p0/logits to any other label fails both checkers, naming the array" {
	local ln
	ln=$(rule_line 'pre/p[0-9]/logits')
	[ -n "$ln" ]
	for label in derived contract-control independent-cross-check; do
		copy_tree
		mutate "d = load('realshape'); entry(d, 'pre/p0/logits')['provenance'] = '$label'; save('realshape', d); repin()"
		local rule="realshape: pre/p0/logits: labelled '$label', but rule 'pre/p[0-9]/logits' (PROVENANCE.rules:$ln) requires 'upstream-capture'"
		case $label in
		derived) py_fails "$rule" "realshape: pre/p0/logits: derived, but check_fixtures has no re-derivation for it" ;;
		contract-control) py_fails "$rule" ;;
		independent-cross-check) py_fails "$rule" "realshape: pre/p0/logits: an independent-cross-check that names no array it checks (checks nothing)" ;;
		esac
		case $label in
		independent-cross-check) c_fails labels_follow_the_rule_table "$rule" \
			"realshape: pre/p0/logits: an independent-cross-check that names no array it checks" ;;
		*) c_fails labels_follow_the_rule_table "$rule" ;;
		esac
		rm -rf "$tree"
	done
}

@test "relabelling a cross-check as upstream-capture fails both checkers, naming the array" {
	local ln rule
	ln=$(rule_line '*/xc/*')
	[ -n "$ln" ]
	copy_tree
	mutate 'd = load("general"); entry(d, "dec/p1/xc/route/ids/L03")["provenance"] = "upstream-capture"; save("general", d); repin()'
	rule="general: dec/p1/xc/route/ids/L03: labelled 'upstream-capture', but rule '*/xc/*' (PROVENANCE.rules:$ln) requires 'independent-cross-check'"
	py_fails "$rule" "general: dec/p1/xc/route/ids/L03: names an array it checks (dec/p1/route/ids/L03) but is labelled 'upstream-capture'"
	c_fails labels_follow_the_rule_table "$rule" \
		"general: dec/p1/xc/route/ids/L03: names an array it checks but is labelled 'upstream-capture'"
}

@test "the fp8 dequantised experts labelled independent-cross-check again fail: they check nothing" {
	local ln rule
	ln=$(rule_line 'deq/gate/L[0-9][0-9]')
	[ -n "$ln" ]
	copy_tree
	mutate 'd = load("realshape-fp8"); entry(d, "deq/gate/L07")["provenance"] = "independent-cross-check"; save("realshape-fp8", d); repin()'
	rule="realshape-fp8: deq/gate/L07: labelled 'independent-cross-check', but rule 'deq/gate/L[0-9][0-9]' (PROVENANCE.rules:$ln) requires 'derived'"
	py_fails "$rule" "realshape-fp8: deq/gate/L07: an independent-cross-check that names no array it checks (checks nothing)"
	c_fails labels_follow_the_rule_table "$rule" \
		"realshape-fp8: deq/gate/L07: an independent-cross-check that names no array it checks"
}

@test "a cross-check naming an array that is not its xc/ twin fails both checkers" {
	copy_tree
	mutate 'd = load("realshape"); entry(d, "pre/p0/xc/route/ids/L01")["checks"] = "pre/p0/route/ids/L00"; save("realshape", d); repin()'
	py_fails "realshape: pre/p0/xc/route/ids/L01: checks pre/p0/route/ids/L00, which is not its xc/ twin pre/p0/route/ids/L01"
	c_fails labels_follow_the_rule_table \
		"realshape: pre/p0/xc/route/ids/L01: checks pre/p0/route/ids/L00, which is not its xc/ twin pre/p0/route/ids/L01"
}

@test "an array no rule matches is refused by both checkers" {
	copy_tree
	# drop the rule for full/pN/logits_tail (and re-pin the table) so that nothing matches them
	grep -v '^full/p\[0-9\]/logits_tail ' "$rules" >"$fx/upstream/PROVENANCE.rules"
	mutate 'repin()'
	local p set msgs=() cmsgs=()
	for set in general realshape; do
		for p in p0 p1 p2; do
			msgs+=("$set: full/$p/logits_tail: no rule in PROVENANCE.rules matches this name (add one before adding such an array)")
			cmsgs+=("$set: full/$p/logits_tail: no rule in PROVENANCE.rules matches")
		done
	done
	py_fails "${msgs[@]}"
	# readdir order decides which set test_fixtures reports first
	capture env HB_SRCDIR="$tree" "$unit"
	[ "$status" -eq 1 ]
	[ "$(grep '^not ok' cap.out | sed 's/^not ok [0-9]* - //')" = labels_follow_the_rule_table ]
	[ "$(sed -n 's/^# [^ ]*: check failed: //p' cap.out | sort)" = "$(printf '%s\n' "${cmsgs[@]}" | sort)" ]
}

@test "flipping one byte of a .bin fails both checkers, naming the array" {
	copy_tree
	mutate 'p = binpath("realshape", "pre/p0/logits"); b = bytearray(open(p, "rb").read()); b[1000] ^= 0x01; write(p, bytes(b))'
	py_fails "realshape: pre/p0/logits: pre.p0.logits.bin sha256 differs from the manifest (the .bin was edited)"
	c_fails fixtures_are_intact "realshape: pre/p0/logits: pre.p0.logits.bin sha256 differs from the manifest"
}

@test "a manifest edited without re-pinning fails both checkers, naming the manifest" {
	copy_tree
	# widen a cross-check's tolerance: consistent with the arrays, caught by the pin alone
	mutate 'd = load("realshape"); entry(d, "pre/p0/xc/route/w/L00")["atol"] = 1.0; save("realshape", d)'
	local sum
	sum=$(sha256sum "$fx/upstream/realshape/oracle/manifest.json" | cut -d' ' -f1)
	py_fails "upstream/realshape/oracle/manifest.json: sha256 $sum differs from the pin in MANIFESTS.sha256 (edited by hand? re-pin only a reviewed change)"
	c_fails manifests_are_pinned "upstream/realshape/oracle/manifest.json: sha256 differs from the pin in MANIFESTS.sha256"
}

@test "the rule table and the other sets' oracle files are pinned too" {
	local f sum
	for f in upstream/PROVENANCE.rules chat/chat_oracle.json tokenizer/qwen3-tokenizer-oracle.json codec/affine4-cases.json; do
		copy_tree
		printf '\n' >>"$fx/$f"
		sum=$(sha256sum "$fx/$f" | cut -d' ' -f1)
		py_fails "$f: sha256 $sum differs from the pin in MANIFESTS.sha256 (edited by hand? re-pin only a reviewed change)"
		c_fails manifests_are_pinned "$f: sha256 differs from the pin in MANIFESTS.sha256"
		rm -rf "$tree"
	done
}

@test "a fixture set whose manifest is not pinned fails both checkers" {
	copy_tree
	cp -R "$fx/upstream/general" "$fx/upstream/general-copy"
	py_fails "upstream/general-copy/oracle/manifest.json: not pinned in MANIFESTS.sha256"
	c_fails manifests_are_pinned "upstream/general-copy/oracle/manifest.json: not pinned in MANIFESTS.sha256"
}

@test "a cross-check moved beyond its atol fails both checkers, naming the array" {
	copy_tree
	# the mirror of the control above: 1e-3 off is 500 times the atol of 2e-6
	mutate 'd = load("realshape"); n = "pre/p0/xc/route/w/L00"
v = f32("realshape", "pre/p0/route/w/L00"); x = f32("realshape", n); x[0] = v[0] + 1e-3
put_f32("realshape", n, x); rehash("realshape", d, n); save("realshape", d); repin()'
	capture python3 "$checker" "$fx/upstream"
	[ "$status" -eq 1 ]
	[ "$(grep -c '^PROBLEM ' cap.out)" -eq 1 ]
	[[ $(grep '^PROBLEM ' cap.out) == "PROBLEM realshape: pre/p0/xc/route/w/L00: disagrees with pre/p0/route/w/L00 in 1 elements (max |diff| 0.00"*" > atol 2e-06)" ]]
	capture env HB_SRCDIR="$tree" "$unit"
	[ "$status" -eq 1 ]
	[ "$(grep '^not ok' cap.out | sed 's/^not ok [0-9]* - //')" = cross_checks_agree ]
	[ "$(grep -c ': check failed: ' cap.out)" -eq 1 ]
	[[ $(sed -n 's/^# [^ ]*: check failed: //p' cap.out) == "realshape: pre/p0/xc/route/w/L00: disagrees with pre/p0/route/w/L00 in 1 elements (max |diff| 0.00"*" > atol 2e-06)" ]]
}

@test "an integer cross-check off by one fails both checkers" {
	copy_tree
	mutate 'import struct; d = load("general"); n = "dec/p2/xc/route/ids/L04"; p = binpath("general", n)
b = bytearray(open(p, "rb").read()); v = struct.unpack_from("<i", b, 0)[0]; struct.pack_into("<i", b, 0, v + 1)
write(p, bytes(b)); rehash("general", d, n); save("general", d); repin()'
	py_fails "general: dec/p2/xc/route/ids/L04: disagrees with dec/p2/route/ids/L04 in 1 elements (max |diff| 1 > atol 0)"
	c_fails cross_checks_agree "general: dec/p2/xc/route/ids/L04: disagrees with dec/p2/route/ids/L04 in 1 elements (max |diff| 1 > atol 0)"
}

@test "skip_rows is honoured: without it, the tie-dependent row of general disagrees" {
	copy_tree
	# general pre/p0 row 9 of the first sparse layer: upstream kept blocks {0,2,3,4} of
	# tied scores, the cross-check {0,1,2,4}; the ascending selections differ in 4 places
	mutate 'd = load("general"); del entry(d, "pre/p0/xc/qsa/sel/L02")["skip_rows"]; save("general", d); repin()'
	py_fails "general: pre/p0/xc/qsa/sel/L02: disagrees with pre/p0/qsa/sel/L02 in 4 elements (max |diff| 2 > atol 0)"
	c_fails cross_checks_agree "general: pre/p0/xc/qsa/sel/L02: disagrees with pre/p0/qsa/sel/L02 in 4 elements (max |diff| 2 > atol 0)"
}

@test "the number of skipped rows is held to the capture's tie count" {
	copy_tree
	mutate 'd = load("general"); d["stats"]["p0"]["prefill"]["qsa_rows_with_tie_dependent_set"][0] = 0; save("general", d); repin()'
	py_fails "general: pre/p0/xc/qsa/sel/L02: skips 1 rows; the capture recorded 0 tie-dependent rows" \
		"general: pre/p0/xc/qsa/cnt/L02: skips 1 rows; the capture recorded 0 tie-dependent rows"
	c_fails cross_checks_agree "general: pre/p0/xc/qsa/sel/L02: skips 1 rows; the capture recorded 0 tie-dependent rows" \
		"general: pre/p0/xc/qsa/cnt/L02: skips 1 rows; the capture recorded 0 tie-dependent rows"
}

@test "a derived array that is not what it claims fails check_fixtures.py" {
	copy_tree
	mutate 'import struct; d = load("realshape"); n = "dec/p1/next_ids"; p = binpath("realshape", n)
b = bytearray(open(p, "rb").read()); struct.pack_into("<q", b, 8 * 5, struct.unpack_from("<q", b, 8 * 5)[0] ^ 1)
write(p, bytes(b)); rehash("realshape", d, n); save("realshape", d); repin()'
	py_fails "realshape: dec/p1/next_ids: is not the first argmax of each row of dec/p1/logits"
	rm -rf "$tree"
	copy_tree
	mutate 'd = load("realshape-fp8"); n = "deq/down/L00"; x = f32("realshape-fp8", n); x[4096 * 3 + 7] += 1.0
put_f32("realshape-fp8", n, x); rehash("realshape-fp8", d, n); save("realshape-fp8", d); repin()'
	py_fails "realshape-fp8: deq/down/L00: expert 3 differs from fp8 * scale_inv of the committed checkpoint"
}
