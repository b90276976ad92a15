#!/usr/bin/env bats
# Meta-tests (STYLE.md 12, 15, 16, 18): every binary answers -h/--help,
# --version and a bad option the same way; its -h usage line is the SYNOPSIS
# of its man page and its options are the page's OPTIONS; every man page
# renders without a groff or tbl warning and fits 80 columns; the pages list
# exactly the diagnostic ids the code raises (scripts/check-man-ids), and
# each of these checks is shown to fail on a page or a tree made wrong.
#
# Binaries come from "${HB_BUILD:-build}/bin" under the repository root
# ($HB_SRCDIR).  Needs groff (Debian package groff-base) and python3.

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	bins=()
	for b in "$build"/bin/*; do
		[[ -f $b && -x $b ]] && bins+=("$b")
	done
	if ((${#bins[@]} == 0)); then
		echo "no binaries in $build/bin: run make first" >&2
		return 1
	fi
	pages=("$root"/man/man1/*.1 "$root"/man/man5/*.5 "$root"/man/man7/*.7)
	command -v groff >/dev/null || { echo "groff is required (Debian package groff-base)" >&2; return 1; }
	cd "$BATS_TEST_TMPDIR"
}

# capture CMD...: run CMD, keep its status, stdout and stderr apart.
capture() {
	status=0
	"$@" >cap.out 2>cap.err || status=$?
	out=$(cat cap.out)
	err=$(cat cap.err)
}

# The usage forms an -h output opens with ("usage: X" and "   or: X" lines,
# up to the first blank line), prefixes dropped, one per line.
usage_of() {
	"$1" -h | awk 'NF == 0 { exit } { sub(/^ *(usage|or): */, ""); print }'
}

# The SYNOPSIS of a man page as man renders it, one form per line, spaces
# squeezed.
synopsis_of() {
	groff -t -man -Tascii -P-cbou -rLL=300n "$1" 2>/dev/null |
		awk '/^[A-Z]/ { on = ($0 == "SYNOPSIS"); next } on && NF { $1 = $1; print }'
}

# Options named in the option list of -h (lines that open with a dash).
help_options() {
	"$1" -h | awk '/^ +-/ { sub(/^ +/, ""); sub(/   .*/, ""); print }' |
		grep -oE '(^|[ ,])--?[A-Za-z][A-Za-z0-9-]*' | tr -d ' ,' | sort -u
}

# Options tagged in the OPTIONS section of a man page (the line after .TP).
page_options() {
	awk '/^\.SH/ { on = ($2 == "OPTIONS"); next }
	     on && tp { print; tp = 0; next }
	     on && /^\.TP/ { tp = 1 }' "$1" |
		sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/^\.[A-Z]* *//' -e 's/"//g' |
		grep -oE '(^|[ ,])--?[A-Za-z][A-Za-z0-9-]*' | tr -d ' ,' | sort -u
}

# new_findings BASE: the lines of $output that BASE lacks, sorted; fails if
# $output lost a line of BASE (a change must only add findings).
new_findings() {
	local gone
	gone=$(comm -23 <(printf '%s\n' "$1" | sed '/^$/d' | sort) <(printf '%s\n' "$output" | sort))
	[ -z "$gone" ] || { echo "findings disappeared: $gone" >&2; return 1; }
	comm -13 <(printf '%s\n' "$1" | sed '/^$/d' | sort) <(printf '%s\n' "$output" | sed '/^$/d' | sort)
}

# Metadata keys of libstore/artifact/hb_artifact.h that PAGE has no table row for
# (a row names the key in full, or without its namespace: general.,
# qwen4exp. or hebrus.).
undocumented_keys() {
	local key rest
	sed -n 's/^#define HB_KEY_[A-Z0-9_]* "\([^"]*\)".*/\1/p' "$root/libstore/artifact/hb_artifact.h" |
		while read -r key; do
			rest=${key#general.}; rest=${rest#qwen4exp.}; rest=${rest#hebrus.}
			grep -qF -e "$key"$'\t' -e "$rest"$'\t' "$1" || echo "$key"
		done
}

# Render a page; prints groff/tbl diagnostics and every line over 80 columns.
render_problems() {
	local page=$1 text
	text=$(groff -t -man -Tascii -P-cbou -ww "$page" 2>render.err) || echo "groff failed on $page"
	cat render.err
	groff -t -man -Tutf8 -ww -z "$page" 2>&1
	awk -v p="$page" 'length > 80 { print p ": rendered line over 80 columns: " $0 }' <<<"$text"
}

@test "every binary prints its usage for -h and --help on stdout, exit 0" {
	for b in "${bins[@]}"; do
		name=${b##*/}
		capture "$b" -h
		[ "$status" -eq 0 ] || { echo "$name -h: status $status" >&2; return 1; }
		[ -z "$err" ] || { echo "$name -h wrote on stderr: $err" >&2; return 1; }
		[[ $out == "usage: $name "* ]] || { echo "$name -h: $out" >&2; return 1; }
		help=$out
		capture "$b" --help
		[ "$status" -eq 0 ]
		[ -z "$err" ]
		[ "$out" = "$help" ]
	done
}

@test "every binary refuses a bad option with one line and a hint, exit 2" {
	for b in "${bins[@]}"; do
		name=${b##*/}
		capture "$b" --no-such-option
		[ "$status" -eq 2 ] || { echo "$name: status $status" >&2; return 1; }
		[ -z "$out" ]
		[ "$err" = "$name: bad option '--no-such-option'
try '$name --help'" ] || { echo "$name: got: $err" >&2; return 1; }
	done
}

@test "every binary refuses an option missing its argument with one printable line and a hint, exit 2" {
	for b in "${bins[@]}"; do
		name=${b##*/}
		# options that take an argument: "--opt ARG" in the -h list
		for opt in $("$b" -h | awk '/^ +--?[A-Za-z]/ { sub(/^ +/, ""); if ($2 ~ /^[A-Z]|\|/) print $1 }' | tr -d ,); do
			capture "$b" "$opt"
			[ "$status" -eq 2 ] || { echo "$name $opt: status $status" >&2; return 1; }
			[ -z "$out" ]
			[ "$(wc -l <cap.err)" -eq 2 ]
			[ "$(sed -n 2p cap.err)" = "try '$name --help'" ]
			[[ $(sed -n 1p cap.err) == "$name: "*"$opt"* ]] || { echo "$name $opt: $err" >&2; return 1; }
			! LC_ALL=C grep -q '[^[:print:]]' cap.err || { echo "$name $opt: unprintable: $(od -c cap.err)" >&2; return 1; }
		done
	done
}

@test "every binary prints one version line for --version" {
	version=$(sed -n 's/^HB_VERSION = //p' "$root/Makefile")
	[ -n "$version" ]
	for b in "${bins[@]}"; do
		name=${b##*/}
		capture "$b" --version
		[ "$status" -eq 0 ]
		[ -z "$err" ]
		[[ $out =~ ^$name\ ${version//./\\.}\ \(libsodium\ [0-9.]+,\ cJSON\ [0-9.]+,\ zlib\ [0-9.]+\)$ ]] ||
			{ echo "$name --version: $out" >&2; return 1; }
	done
}

@test "every binary's -h usage is the SYNOPSIS of its man page" {
	for b in "${bins[@]}"; do
		name=${b##*/}
		page=$root/man/man1/$name.1
		[ -f "$page" ] || { echo "no man page $page" >&2; return 1; }
		usage=$(usage_of "$b")
		synopsis=$(synopsis_of "$page")
		[ -n "$usage" ]
		[ "$usage" = "$synopsis" ] || { printf '%s -h: %s\nSYNOPSIS: %s\n' "$name" "$usage" "$synopsis" >&2; return 1; }
	done
}

@test "the SYNOPSIS comparison fails on a page whose SYNOPSIS differs" {
	b=$build/bin/hb-convert
	[ "$(usage_of "$b")" = "$(synopsis_of "$root/man/man1/hb-convert.1")" ]
	sed 's/^\.I SRC_DIR$/.I SOURCE_DIR/' "$root/man/man1/hb-convert.1" >changed.1
	run cmp -s changed.1 "$root/man/man1/hb-convert.1"
	[ "$status" -eq 1 ] # 1: differ (2 would be an error)
	[ "$(usage_of "$b")" != "$(synopsis_of changed.1)" ]
}

@test "every option of -h is in the man page's OPTIONS, and no other" {
	for b in "${bins[@]}"; do
		name=${b##*/}
		page=$root/man/man1/$name.1
		[ -f "$page" ] || { echo "no man page $page" >&2; return 1; }
		help=$(help_options "$b")
		documented=$(page_options "$page")
		[ -n "$help" ]
		[ "$help" = "$documented" ] || { diff <(echo "$help") <(echo "$documented") >&2; return 1; }
	done
	# hb-convert's list, so that the extraction itself is pinned
	[ "$(help_options "$build/bin/hb-convert" | tr '\n' ' ')" = "--expert-codec --force --help --io --json --ple-codec --ple-rows-per-page --profile --quiet --source-revision --threads --version -h -q " ]
}

@test "every man page renders without warnings and fits 80 columns" {
	for page in "${pages[@]}"; do
		[ -z "$(LC_ALL=C grep -n '[^[:print:][:space:]]' "$page")" ] || { echo "$page: not ASCII" >&2; return 1; }
		problems=$(render_problems "$page")
		[ -z "$problems" ] || { echo "$problems" >&2; return 1; }
	done
}

@test "the render check fails on a page with a bad request and an overlong line" {
	cp "$root/man/man5/ds4-ple-rows.5" bad.5
	printf '.SH EXTRA\n.XYZZY\n.EX\n%s\n.EE\n' "$(printf 'x%.0s' $(seq 90))" >>bad.5
	problems=$(render_problems bad.5)
	[[ $problems == *"XYZZY"* ]]
	[[ $problems == *"rendered line over 80 columns"* ]]
}

@test "hebrus-artifact(5) has a row for every metadata key of hb_artifact.h" {
	[ "$(sed -n 's/^#define HB_KEY_[A-Z0-9_]* "\([^"]*\)".*/\1/p' "$root/libstore/artifact/hb_artifact.h" | wc -l)" -ge 70 ]
	missing=$(undocumented_keys "$root/man/man5/hebrus-artifact.5")
	[ -z "$missing" ] || { echo "undocumented: $missing" >&2; return 1; }
	# and the check can fail
	grep -v '^rope\.freq_base'$'\t' "$root/man/man5/hebrus-artifact.5" >artifact.5
	[ "$(undocumented_keys artifact.5)" = "qwen4exp.rope.freq_base" ]
}

@test "check-man-ids: the man pages list exactly the diagnostic ids the code raises" {
	run "$root/scripts/check-man-ids"
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	# the tables are really read: counts per page
	run "$root/scripts/check-man-ids" --list
	[ "$status" -eq 0 ]
	[ "$(grep -c '^ds4-expert-major.5 em-' <<<"$output")" -eq "$(grep -c '^ds4-expert-major.5 ' <<<"$output")" ]
	[ "$(grep -c '^ds4-ple-rows.5 ple-' <<<"$output")" -ge 19 ]
	[ "$(grep -c '^hebrus-artifact.5 gguf-' <<<"$output")" -ge 25 ]
	for fam in cfg inv conv profile st ck em ple gguf; do
		grep -q "^hb-convert.1 $fam-" <<<"$output" || { echo "no $fam-* id for hb-convert.1" >&2; return 1; }
	done
}

@test "check-man-ids fails when a page misses an id" {
	sed '/^\.TP$/{N;/\n\.B ple\\-magic$/d}' "$root/man/man5/ds4-ple-rows.5" >ds4-ple-rows.5
	run cmp -s ds4-ple-rows.5 "$root/man/man5/ds4-ple-rows.5"
	[ "$status" -eq 1 ] # 1: differ (2 would be an error)
	run "$root/scripts/check-man-ids"
	base=$output
	run "$root/scripts/check-man-ids" --man ds4-ple-rows.5="$PWD/ds4-ple-rows.5"
	[ "$status" -eq 1 ]
	[ "$(new_findings "$base")" = "check-man-ids: $PWD/ds4-ple-rows.5: ple-magic is raised (HB_PLE_DIAGS in libstore/ple/hb_ple_store.h) but not listed" ]
}

@test "check-man-ids fails when a page lists an id the code does not raise" {
	sed 's/^\.SH DIAGNOSTICS$/&\n.TP\n.B conv\\-no\\-such\\-id\nnothing raises this/' "$root/man/man1/hb-convert.1" >hb-convert.1
	run "$root/scripts/check-man-ids"
	base=$output
	run "$root/scripts/check-man-ids" --man hb-convert.1="$PWD/hb-convert.1"
	[ "$status" -eq 1 ]
	[ "$(new_findings "$base")" = "check-man-ids: $PWD/hb-convert.1: conv-no-such-id is listed but raised nowhere" ]
}

@test "check-man-ids fails when the code gains an id: table row, literal, unknown family, new table" {
	mkdir tree
	cp -R "$root/cmd" "$root/libcore" "$root/libstore" "$root/libkern" "$root/man" tree/
	run "$root/scripts/check-man-ids" --root tree
	[ "$status" -le 1 ]
	base=$output
	# a new row in an X-macro table: both pages that list that table
	sed -i 's/^\(\tX(TRUNCATED, "em-truncated",.*\)$/\1\n\tX(NEW_THING, "em-new-thing", "a new check") \\/' tree/libstore/expert/hb_expert_store.h
	grep -q em-new-thing tree/libstore/expert/hb_expert_store.h
	run "$root/scripts/check-man-ids" --root tree
	[ "$status" -eq 1 ]
	[ "$(new_findings "$base")" = "check-man-ids: tree/man/man1/hb-convert.1: em-new-thing is raised (HB_EM_DIAGNOSTICS in libstore/expert/hb_expert_store.h) but not listed
check-man-ids: tree/man/man5/ds4-expert-major.5: em-new-thing is raised (HB_EM_DIAGNOSTICS in libstore/expert/hb_expert_store.h) but not listed" ]
	# a literal of a known family, and one of no family at all
	cp "$root/libstore/expert/hb_expert_store.h" tree/libstore/expert/
	cat >>tree/cmd/hb-convert/hb_convert.c <<'EOF'
static int new_check(struct hb_error *err)
{
	return hb_error_diag(err, "conv-new-check", HB_ERR_CONTRACT, "x", false, 0, "new");
}
static int stray(struct hb_error *err)
{
	return hb_error_diag(err,
			     "zz-stray", HB_ERR_CONTRACT, "x", false, 0, "stray");
}
EOF
	line=$(grep -n '"zz-stray"' tree/cmd/hb-convert/hb_convert.c | cut -d: -f1)
	run "$root/scripts/check-man-ids" --root tree
	[ "$status" -eq 1 ]
	[ "$(new_findings "$base")" = "check-man-ids: cmd/hb-convert/hb_convert.c:$((line - 1)): id 'zz-stray' is raised but belongs to no diagnostic table
check-man-ids: tree/man/man1/hb-convert.1: conv-new-check is raised (conv-* literal in cmd/hb-convert/hb_convert.c) but not listed" ]
	# a new diagnostic table that no page is mapped to
	cp "$root/cmd/hb-convert/hb_convert.c" tree/cmd/hb-convert/
	printf '#define HB_NEW_DIAGS(X) \\\n\tX(ONE, "new-one", "a new table")\n' >tree/libstore/hb_new.h
	run "$root/scripts/check-man-ids" --root tree
	[ "$status" -eq 1 ]
	[ "$(new_findings "$base")" = "check-man-ids: libstore/hb_new.h: diagnostic table HB_NEW_DIAGS is listed by no man page (map it in scripts/check-man-ids)" ]
}

@test "check-man-ids refuses a bad argument and an unreadable page with exit 2" {
	run "$root/scripts/check-man-ids" --bogus
	[ "$status" -eq 2 ]
	[ "$output" = "check-man-ids: bad argument '--bogus'" ]
	run "$root/scripts/check-man-ids" --man ds4-ple-rows.5="$PWD/absent.5"
	[ "$status" -eq 2 ]
	[ "$output" = "check-man-ids: cannot read '$PWD/absent.5': No such file or directory" ]
}
