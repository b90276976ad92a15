#!/usr/bin/env bats
# The repository explains itself (issue 14): the README links only to files
# in the repository, its folder map has one row for every folder and names
# no folder that does not exist, and hebrus(7) points at every page of the
# manual and at every binary.  Each check is shown to fail on a document
# made wrong.  Folders are those of the files git tracks; needs git.

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
		{ echo "$root is not a git checkout" >&2; return 1; }
	cd "$BATS_TEST_TMPDIR"
}

# link_problems README: one line per markdown link that leaves the
# repository or names nothing in it (an anchor after # is ignored).
link_problems() {
	local t
	grep -o '\]([^)]*)' "$1" | sed 's/^](//; s/)$//' | while IFS= read -r t; do
		case $t in
		*://* | /* | ../* | */../*) echo "link leaves the repository: $t" ;;
		*) [[ -e $root/${t%%#*} ]] || echo "link names nothing: $t" ;;
		esac
	done
}

# map_rows README: the folders of the map block, one per line, as written.
map_rows() {
	sed -n '/^<!-- folder map: begin/,/^<!-- folder map: end/p' "$1" |
		sed -n 's/^| `\([^`]*\/\)` |.*/\1/p'
}

# Tracked folders of depth 1 and 2, with a final slash.
tracked_folders() {
	git -C "$root" ls-files | awk -F/ 'NF > 1 { print $1 "/" } NF > 2 { print $1 "/" $2 "/" }' | LC_ALL=C sort -u
}

# map_problems README: a tracked folder without a row, a row for a folder
# that is neither tracked nor an ignored build output, a row given twice.
map_problems() {
	local rows
	rows=$(map_rows "$1")
	[ -n "$rows" ] || { echo "no folder map"; return; }
	comm -23 <(tracked_folders) <(LC_ALL=C sort -u <<<"$rows") | sed 's/^/no row for /'
	comm -13 <(tracked_folders) <(LC_ALL=C sort -u <<<"$rows") | while IFS= read -r d; do
		git -C "$root" check-ignore -q "$d" || echo "row for a folder that does not exist: $d"
	done
	LC_ALL=C sort <<<"$rows" | uniq -d | sed 's/^/row given twice: /'
}

@test "the README links only to files in the repository, and not to ../shared" {
	[ "$(grep -c '](' "$root/README.md")" -ge 8 ]
	problems=$(link_problems "$root/README.md")
	[ -z "$problems" ] || { echo "$problems" >&2; return 1; }
	[ -z "$(grep -n '\.\./shared' "$root/README.md")" ]
	grep -q '](man/man7/hebrus.7)' "$root/README.md"
}

@test "the link check fails on a link out of the repository and on a dangling one" {
	cp "$root/README.md" r.md
	printf '[a](../shared/docs/ARCHITECTURE.md) [b](man/man7/none.7) [c](https://example.org/)\n' >>r.md
	[ "$(link_problems r.md)" = "link leaves the repository: ../shared/docs/ARCHITECTURE.md
link names nothing: man/man7/none.7
link leaves the repository: https://example.org/" ]
}

@test "the README's folder map has one row for every folder, and names none that does not exist" {
	[ "$(map_rows "$root/README.md" | wc -l)" -ge 15 ]
	for d in cmd/ libcore/ libstore/ libkern/ tests/unit/ man/man7/; do
		tracked_folders | grep -qxF "$d"
	done
	problems=$(map_problems "$root/README.md")
	[ -z "$problems" ] || { echo "$problems" >&2; return 1; }
	# the layout the README used to claim: no metal/ anywhere
	[ -z "$(grep -n 'metal/' "$root/README.md")" ]
}

@test "the map check fails on a row for a missing folder, a missing row and a row given twice" {
	sed -e 's/^| `libkern\/` |/| `metal\/` | the Apple GPU backend | - |\n&/' \
		-e '/^| `tests\/long\/` |/d' \
		-e 's/^| `bench\/` |.*/&\n&/' "$root/README.md" >r.md
	[ "$(map_problems r.md | LC_ALL=C sort)" = "no row for tests/long/
row for a folder that does not exist: metal/
row given twice: bench/" ]
	# a new folder in the tree needs a row: a repository of the tracked files, plus one
	mkdir repo
	git -C "$root" ls-files -z | tar -C "$root" --null -T - -cf - --ignore-failed-read 2>/dev/null | tar -C repo -xf -
	git -C repo init -q
	git -C repo add -A
	[ -z "$(root=$PWD/repo map_problems repo/README.md)" ]
	mkdir repo/libstore/newformat
	echo x >repo/libstore/newformat/f
	git -C repo add libstore/newformat/f
	[ "$(root=$PWD/repo map_problems repo/README.md)" = "no row for libstore/newformat/" ]
}

@test "hebrus(7) names every binary and sees also every other page of the manual" {
	page=$root/man/man7/hebrus.7
	[ -f "$page" ]
	seealso=$(awk '/^\.SH/ { on = ($2 == "SEE") ; next } on' "$page" | sed -n 's/^\.BR \([^ ]*\) (\([0-9]\)).*/\1.\2/p' | sed 's/\\-/-/g' | LC_ALL=C sort)
	want=$(cd "$root/man" && ls man1/*.1 man5/*.5 | sed 's|.*/||' | LC_ALL=C sort)
	[ "$(wc -l <<<"$want")" -ge 11 ]
	[ "$seealso" = "$want" ] || { diff <(echo "$want") <(echo "$seealso") >&2; return 1; }
	for b in "$root"/cmd/hb-*.c; do
		b=${b##*/}
		b=${b%.c}
		grep -q "^\.BR ${b//-/\\\\-} (1)$" "$page" || { echo "hebrus(7) has no entry for $b" >&2; return 1; }
	done
	# every AFN id it cites is one of the notes, AFN-001 to AFN-021
	ids=$(grep -o 'AFN\\-0[0-9][0-9]' "$page" | sed 's/\\//' | LC_ALL=C sort -u)
	[ "$(wc -l <<<"$ids")" -ge 15 ]
	[ -z "$(grep -v '^AFN-0\(0[1-9]\|1[0-9]\|2[01]\)$' <<<"$ids")" ]
}
