#!/usr/bin/env bats
# The layout map (scripts/check-includes; ARCHITECTURE.md section 3): every
# #include "..." of cmd/, the libraries, tests/ and bench/ resolves to one
# file and points down the map (cmd -> libkern -> libstore -> libcore, the
# folder layers within a library, sealed and internal headers, binaries'
# private folders), and each rule is shown to fail on a tree copied and
# made wrong.  Also: no source file of cmd/ or a library is over 1,000
# lines, except generated tables (STYLE.md 10).
#
# Needs python3 (standard library only).

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	check=$root/scripts/check-includes
	cd "$BATS_TEST_TMPDIR"
}

# tree: a copy of the sources the map covers, to be made wrong
tree() {
	mkdir tree
	cp -R "$root/cmd" "$root/libcore" "$root/libstore" "$root/libkern" "$root/cuda" tree/
	run "$check" --root tree
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
}

# add FILE LINE: append LINE to tree/FILE; prints the line number it got
add() {
	printf '%s\n' "$2" >>"tree/$1"
	wc -l <"tree/$1"
}

# finding FILE LINE INCLUDE TARGET REASON: the one line check-includes prints
finding() {
	printf 'check-includes: %s:%s: includes "%s" (%s): %s' "$1" "$2" "$3" "$4" "$5"
}

@test "check-includes: every include of the tree points down the map" {
	run "$check"
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	# the includes are really read: edges the code has, and none it must not
	run "$check" --edges
	[ "$status" -eq 0 ]
	for e in "libkern/graph -> libkern/backend" "libkern/graph -> libkern/math" \
		"libkern/backend/cpu -> libkern/backend" "libkern/graph -> libstore/admit" \
		"libstore/admit -> libstore/artifact" "libstore/artifact -> libstore/expert" \
		"libstore/model -> libstore/checkpoint" "cmd/hb-trace.c -> cmd/hb-trace" \
		"cmd/hb-trace -> cmd/hb-trace/analysis" "cmd/hb-trace -> cmd/hb_cli" \
		"cmd/hb-replay.c -> cmd/hb-replay" "cmd/hb-replay -> cmd/hb-replay/dataset" \
		"cmd/hb-replay -> cmd/hb_cli" "cmd/hb-run.c -> cmd/hb-run" "cmd/hb-run -> libkern/text" \
		"tests -> cmd/hb-convert"; do
		grep -q "^$e [0-9]*$" <<<"$output" || { echo "no edge $e" >&2; return 1; }
	done
	if grep -q -e '-> libkern/backend/cpu ' -e '^libstore.* -> libkern' -e '^lib.* -> cmd' <<<"$output"; then false; fi
	[ "$(wc -l <<<"$output")" -ge 60 ]
}

@test "check-includes refuses an include into a higher library, and a library including cmd/" {
	tree
	n=$(add libstore/gguf/hb_gguf.c '#include "graph/hb_model.h"')
	m=$(add libstore/trace/hb_trace.c '#include "hb_cli.h"')
	k=$(add libcore/hb_io.c '#include "admit/hb_admit.h"')
	run "$check" --root tree
	[ "$status" -eq 1 ]
	[ "$output" = "$(finding libcore/hb_io.c "$k" admit/hb_admit.h libstore/admit/hb_admit.h "upward: libstore lies above libcore")
$(finding libstore/gguf/hb_gguf.c "$n" graph/hb_model.h libkern/graph/hb_model.h "upward: libkern lies above libstore")
$(finding libstore/trace/hb_trace.c "$m" hb_cli.h cmd/hb_cli.h "upward: cmd lies above libstore")" ]
}

@test "check-includes refuses a sideways and an upward edge between the folders of a library" {
	tree
	n=$(add libstore/expert/hb_expert_store.c '#include "ple/hb_ple_store.h"')
	m=$(add libstore/gguf/hb_gguf_read.c '#include "admit/hb_admit.h"')
	k=$(add libkern/text/hb_tok.c '#include "sampler/hb_sampler.h"')
	run "$check" --root tree
	[ "$status" -eq 1 ]
	[ "$output" = "$(finding libstore/expert/hb_expert_store.c "$n" ple/hb_ple_store.h libstore/ple/hb_ple_store.h "sideways: libstore/expert and libstore/ple are peers in libstore's map")
$(finding libstore/gguf/hb_gguf_read.c "$m" admit/hb_admit.h libstore/admit/hb_admit.h "upward: libstore/admit lies above libstore/gguf in libstore's map")
$(finding libkern/text/hb_tok.c "$k" sampler/hb_sampler.h libkern/sampler/hb_sampler.h "sideways: libkern/text and libkern/sampler are peers in libkern's map")" ]
}

@test "check-includes: the graph reaches the CPU backend only through the seam; internal headers stay in their folder" {
	tree
	printf '/* a CPU-only helper */\n' >tree/libkern/backend/cpu/hb_cpu.h
	n=$(add libkern/graph/hb_layer_mix.c '#include "backend/cpu/hb_cpu.h"')
	m=$(add libkern/graph/hb_model.c '#include "text/hb_tok_int.h"')
	k=$(add cmd/hb-run.c '#include "graph/hb_session_test.h"')
	# the CPU backend's own files may include it
	add libkern/backend/cpu/hb_gdn.c '#include "hb_cpu.h"' >/dev/null
	run "$check" --root tree
	[ "$status" -eq 1 ]
	[ "$output" = "$(finding libkern/graph/hb_layer_mix.c "$n" backend/cpu/hb_cpu.h libkern/backend/cpu/hb_cpu.h "libkern/backend/cpu is sealed: only its own files include it")
$(finding libkern/graph/hb_model.c "$m" text/hb_tok_int.h libkern/text/hb_tok_int.h "internal to libkern/text/ (only its files and the tests include it)")
$(finding cmd/hb-run.c "$k" graph/hb_session_test.h libkern/graph/hb_session_test.h "internal to libkern/graph/ (only its files and the tests include it)")" ]
}

@test "check-includes: the CUDA backend reaches libkern only through the seam, and no library includes it" {
	tree
	n=$(add cuda/hb_cuda.c '#include "graph/hb_session.h"')
	m=$(add cuda/hb_cuda.c '#include "math/hb_math.h"')
	k=$(add libkern/graph/hb_model.c '#include "hb_cuda.h"')
	# the seam itself, libcore, and the fronts including the backend are fine
	add cuda/hb_cuda.c '#include "backend/hb_backend.h"' >/dev/null
	add cmd/hb-run.c '#include "hb_cuda.h"' >/dev/null
	run "$check" --root tree
	[ "$status" -eq 1 ]
	[ "$output" = "$(finding libkern/graph/hb_model.c "$k" hb_cuda.h cuda/hb_cuda.h "upward: cuda lies above libkern")
$(finding cuda/hb_cuda.c "$n" graph/hb_session.h libkern/graph/hb_session.h "a GPU backend reaches libkern only through the seam libkern/backend/hb_backend.h")
$(finding cuda/hb_cuda.c "$m" math/hb_math.h libkern/math/hb_math.h "a GPU backend reaches libkern only through the seam libkern/backend/hb_backend.h")" ]
}

@test "check-includes: a binary's folder is private to it, and its engines never include the fronts' header" {
	tree
	n=$(add cmd/hb-run.c '#include "hb-trace/analysis/hb_trace_stats.h"')
	m=$(add cmd/hb-trace/analysis/hb_trace_stats.c '#include "hb_cli.h"')
	k=$(add cmd/hb_cli.c '#include "hb-convert/hb_convert.h"')
	j=$(add cmd/hb-trace/analysis/hb_trace_svg.c '#include "hb-trace/hb_trace_cli.h"')
	run "$check" --root tree
	[ "$status" -eq 1 ]
	[ "$output" = "$(finding cmd/hb-run.c "$n" hb-trace/analysis/hb_trace_stats.h cmd/hb-trace/analysis/hb_trace_stats.h "sideways: cmd/hb-trace/analysis is private to hb-trace")
$(finding cmd/hb_cli.c "$k" hb-convert/hb_convert.h cmd/hb-convert/hb_convert.h "upward: cmd/hb-convert is private to hb-convert")
$(finding cmd/hb-trace/analysis/hb_trace_stats.c "$m" hb_cli.h cmd/hb_cli.h "an engine never prints, so it does not include the fronts' cmd/hb_cli.h")
$(finding cmd/hb-trace/analysis/hb_trace_svg.c "$j" hb-trace/hb_trace_cli.h cmd/hb-trace/hb_trace_cli.h "upward: an engine does not include its binary's subcommand files")" ]
}

@test "check-includes: an include resolves to exactly one file, never climbs, and every folder is in the map" {
	tree
	printf '/* x */\n' >tree/libcore/hb_dup.h
	printf '/* x */\n' >tree/libstore/gguf/hb_dup.h
	n=$(add libstore/gguf/hb_gguf.c '#include "hb_dup.h"')
	m=$(add libstore/gguf/hb_gguf_write.c '#include "hb_no_such.h"')
	k=$(add libstore/ple/hb_ple_layout.c '#include "../codec/hb_affine4.h"')
	mkdir tree/libstore/newformat
	printf '/* x */\n' >tree/libstore/newformat/hb_new.c
	run "$check" --root tree
	[ "$status" -eq 1 ]
	[ "$output" = "check-includes: libstore/gguf/hb_gguf.c:$n: \"hb_dup.h\" is ambiguous: libstore/gguf/hb_dup.h, libcore/hb_dup.h
check-includes: libstore/gguf/hb_gguf_write.c:$m: \"hb_no_such.h\" resolves to no file
check-includes: libstore/newformat/hb_new.c: folder libstore/newformat is not in the map (scripts/check-includes FOLDER_LAYERS)
check-includes: libstore/ple/hb_ple_layout.c:$k: \"../codec/hb_affine4.h\" climbs with \"..\": name it from its library root" ]
}

@test "check-includes: an include inside a comment is not an edge; usage errors exit 2" {
	tree
	printf '/*\n#include "graph/hb_model.h"\n */\n// #include "graph/hb_model.h"\n' >>tree/libstore/gguf/hb_gguf.c
	run "$check" --root tree
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	run "$check" --bogus
	[ "$status" -eq 2 ]
	[ "$output" = "check-includes: bad argument '--bogus'" ]
	run "$check" --root "$PWD/absent"
	[ "$status" -eq 2 ]
	[ "$output" = "check-includes: '$PWD/absent' is not a source tree (no libcore/)" ]
}

# files of cmd/ and the libraries over LIMIT lines that are not generated
too_long() {
	local f
	find "$1/cmd" "$1/libcore" "$1/libstore" "$1/libkern" -name '*.[ch]' | sort | while read -r f; do
		(($(wc -l <"$f") > 1000)) || continue
		head -n 3 "$f" | grep -q 'GENERATED by scripts/' || echo "${f#"$1"/}"
	done
}

# "FILE:LINE LINES" for every function of FILE...: from its signature (a
# line at column 0 with a parenthesis, not a prototype) to the closing brace
# at column 0
function_lengths() {
	awk 'FNR == 1 { start = 0 }
	     /^[A-Za-z_].*\(/ && !/;$/ && !start { start = FNR }
	     /^}/ && start { print FILENAME ":" start, FNR - start + 1; start = 0 }' "$@"
}

@test "no source file of cmd/ or a library is over 1,000 lines, except generated tables; no front's function over 150" {
	[ "$(too_long "$root")" = "" ]
	# the binaries are thin fronts: no function of a front (cmd/hb-X.c) or
	# of the subcommand files of a split one (cmd/hb-X/, its engines aside)
	# is over 150 lines; a newly split binary's folder is added here
	lens=$(cd "$root" && function_lengths cmd/hb-*.c cmd/hb-trace/*.c cmd/hb-run/*.c cmd/hb-replay/*.c)
	[ "$(awk '$2 > 150' <<<"$lens")" = "" ]
	# every front's main() is among those measured (92 functions when written)
	for f in hb-convert hb-admit hb-verify-pages hb-run hb-trace hb-replay; do
		grep -q "^cmd/$f\.c:$(grep -n '^int main(' "$root/cmd/$f.c" | cut -d: -f1) [0-9]*$" <<<"$lens"
	done
	[ "$(wc -l <<<"$lens")" -ge 80 ]
	# the generated Unicode tables are longer, and they are exempt by their mark
	(($(wc -l <"$root/libkern/text/hb_unicode_tables.c") > 1000))
	# and the check can fail
	mkdir -p t/cmd t/libcore t/libstore t/libkern
	cp "$root/libkern/text/hb_unicode_tables.c" t/libkern/
	sed 1,5d "$root/libkern/text/hb_unicode_tables.c" >t/libstore/big.c
	[ "$(too_long t)" = "libstore/big.c" ]
	# and the function check can fail: 151 lines are reported, 150 are not
	{
		printf 'static int f(void)\n{\n'
		for i in $(seq 146); do printf '\tx();\n'; done
		printf '\treturn 0;\n}\n\nint main(int argc,\n\t char **argv)\n{\n'
		for i in $(seq 146); do printf '\tx();\n'; done
		printf '\treturn 0;\n}\n'
	} >t/f.c
	[ "$(function_lengths t/f.c | awk '$2 > 150')" = "t/f.c:152 151" ]
	[ "$(function_lengths t/f.c)" = "t/f.c:1 150
t/f.c:152 151" ]
}
