#!/usr/bin/env bats
# The Makefile from a clean clone (issue 14): every target `make help` lists
# is one the Makefile can make from the files git tracks, with no build
# outputs present (`make -n TARGET` in a clean copy); `make help` lists
# exactly the phony targets, so a new target is covered here without editing
# this file; the packages' flags are asked of pkg-config only after
# bootstrap has run, and without the packages the build stops at once with
# one line naming them.  Each check is shown to fail on a tree made wrong.
#
# The clean copy holds the files git tracks in the working tree as they are
# now, nothing else (no build/, no untracked file): what a clone of the next
# commit would hold, so an uncommitted edit is tested but a file that was
# never added is not there.  Needs git and a git checkout.

bats_require_minimum_version 1.5.0

# The makes here are the test's own: nothing from a make that runs the suite
# (jobserver, command-line variables such as BUILD=) reaches them.
unset MAKEFLAGS MFLAGS MAKELEVEL BUILD V CFLAGS

setup_file() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
		{ echo "$root is not a git checkout: the clean copy is made from git's list of files" >&2; return 1; }
	clean_copy "$root" "$BATS_FILE_TMPDIR/clean"
}

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	clean=$BATS_FILE_TMPDIR/clean
	cd "$BATS_TEST_TMPDIR"
}

# clean_copy SRC DST: the files git tracks in SRC, as they are in its working
# tree (a tracked file deleted there is left out).
clean_copy() {
	mkdir -p "$2"
	git -C "$1" ls-files -z |
		while IFS= read -r -d '' f; do
			[[ -e $1/$f || -L $1/$f ]] && printf '%s\0' "$f"
		done |
		tar -C "$1" --null -T - -cf - | tar -C "$2" -xf -
}

# The targets `make help` lists in DIR: the first word of each line indented
# by two spaces under "Targets:".
help_targets() {
	make -s -C "$1" help | awk '/^Targets:/ { on = 1; next } on && /^  [a-z]/ { print $1; next } on { exit }'
}

# Every phony target of DIR's Makefile.
phony_targets() {
	sed -n 's/^\.PHONY: *//p' "$1/Makefile" | tr ' ' '\n' | sed '/^$/d' | sort
}

# make_n_all DIR: `make -n` of every target help lists in DIR; prints one
# line per target that fails, with make's first message.
make_n_all() {
	local t
	for t in $(help_targets "$1"); do
		make -C "$1" -n "$t" >/dev/null 2>make.err ||
			echo "make -n $t: $(head -1 make.err)"
	done
}

@test "the clean copy holds exactly the tracked files: no build output, no .git" {
	[ -f "$clean/Makefile" ]
	[ ! -e "$clean/build" ]
	[ ! -e "$clean/.git" ]
	find "$clean" ! -type d | sed "s|^$clean/||" | LC_ALL=C sort >have
	git -C "$root" ls-files | while IFS= read -r f; do if [ -e "$root/$f" ]; then echo "$f"; fi; done | LC_ALL=C sort >want
	[ "$(wc -l <want)" -ge 1000 ]
	diff want have
}

@test "make help lists every phony target, one per line, and no other" {
	listed=$(help_targets "$clean")
	[ "$(wc -l <<<"$listed")" -ge 20 ]
	for t in all demo test bench-build test-fresh install; do
		grep -qx "$t" <<<"$listed" || { echo "make help does not list $t" >&2; return 1; }
	done
	diff <(sort <<<"$listed") <(phony_targets "$clean")
}

@test "make -n of every target make help lists succeeds in a clean copy" {
	[ "$(help_targets "$clean" | wc -l)" -ge 20 ]
	failures=$(make_n_all "$clean")
	[ -z "$failures" ] || { echo "$failures" >&2; return 1; }
	# and the dry runs are real: the build's own commands are in them
	make -C "$clean" -n bench-build >out
	grep -q ' -c -o build/bench/make-sparse-artifact.o bench/make-sparse-artifact.c$' out
	grep -q ' -o build/bin/hb-run ' out
}

@test "make -n fails on a clean copy that lacks a file the build needs, or a target help names" {
	mkdir tree
	clean_copy "$root" tree
	[ -z "$(make_n_all tree)" ]
	# a source listed in the Makefile that was never committed: absent from a clone
	rm tree/libcore/hb_parse.c
	[[ $(make_n_all tree) == *"make -n all: make: *** No rule to make target 'build/libcore/hb_parse.o', needed by 'build/libhbcore.a'."* ]]
	cp "$root/libcore/hb_parse.c" tree/libcore/
	# a target that help lists and the Makefile cannot make
	sed -i "s/^\t@echo '  clean  .*/&\n\t@echo '  no-such-target  nothing'/" tree/Makefile
	help_targets tree | grep -qx no-such-target
	[ "$(make_n_all tree)" = "make -n no-such-target: make: *** No rule to make target 'no-such-target'.  Stop." ]
	# a phony target help forgets
	sed -i "/^\t@echo '  no-such-target  nothing'$/d; /^\t@echo '  fuzz  /d" tree/Makefile
	run diff <(help_targets tree | sort) <(phony_targets tree)
	[ "$status" -eq 1 ]
	[ "$(grep '^[<>]' <<<"$output")" = "> fuzz" ]
}

@test "the clean copy leaves out a file git does not track, and keeps an uncommitted edit" {
	git clone -q "$root" repo
	echo 'int hb_untracked(void);' >repo/libcore/hb_untracked.c
	echo '# edited' >>repo/Makefile
	clean_copy repo copy
	[ ! -e copy/libcore/hb_untracked.c ]
	[ "$(tail -1 copy/Makefile)" = "# edited" ]
	cmp repo/libcore/hb_io.c copy/libcore/hb_io.c
}

# A fake toolchain in the clean copy: cc records its arguments and creates
# its output; pkg-config answers only once bootstrap has left its mark;
# bootstrap, the demo and the test runner only say that they ran.
fake_tree() {
	mkdir tree bin
	clean_copy "$root" tree
	cat >bin/cc <<-'EOF'
		#!/bin/sh
		echo "$*" >>"$HB_FAKE/cc.log"
		while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
		: >"$out"
	EOF
	cat >bin/pkg-config <<-'EOF'
		#!/bin/sh
		[ -e "$HB_FAKE/bootstrapped" ] || exit 1
		case $1 in --cflags) echo -I/fake/include/cjson ;; --libs) echo -lfakecjson ;; esac
	EOF
	printf '#!/bin/sh\necho bootstrap-ran\n: >"$HB_FAKE/bootstrapped"\n' >tree/scripts/bootstrap
	printf '#!/bin/sh\necho demo-ran\n' >tree/scripts/demo
	printf '#!/bin/sh\necho run-tests-ran\n' >tree/scripts/run-tests
	printf '#!/bin/sh\n' >tree/scripts/npm-deps
	chmod +x bin/* tree/scripts/bootstrap tree/scripts/demo tree/scripts/run-tests tree/scripts/npm-deps
	export HB_FAKE=$PWD
	fake=(CC="$PWD/bin/cc" PKG_CONFIG="$PWD/bin/pkg-config")
}

@test "make demo and make test ask pkg-config after bootstrap: every compile has the include path (make and make -j2)" {
	fake_tree
	for goal in demo test; do
		for j in -j1 -j2; do
			rm -rf tree/build bootstrapped cc.log
			run make -C tree --no-print-directory -s V=1 "$j" "${fake[@]}" "$goal"
			[ "$status" -eq 0 ] || { echo "make $j $goal: $output" >&2; return 1; }
			[ "$output" = "bootstrap-ran
$([ $goal = demo ] && echo demo-ran || echo run-tests-ran)" ]
			compiles=$(grep -c ' -c -o ' cc.log)
			[ "$compiles" -ge 70 ]
			[ "$(grep ' -c -o ' cc.log | grep -c -- ' -I/fake/include/cjson ')" -eq "$compiles" ]
			[ "$(grep -v ' -c -o ' cc.log | grep -c -- ' -lfakecjson')" -eq "$(grep -vc ' -c -o ' cc.log)" ]
		done
	done
	# the same check fails on the Makefile of issue 14, which read pkg-config
	# when it was parsed and built demo's objects beside bootstrap
	rm -rf tree/build bootstrapped cc.log
	sed -i -e 's/^DEP_CFLAGS = .*/DEP_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(DEPS_PKGS) 2>\/dev\/null)/' \
		-e '/^demo: bootstrap$/{s/$/ all/;n;d}' tree/Makefile
	grep -q '^demo: bootstrap all$' tree/Makefile
	run make -C tree --no-print-directory -s V=1 "${fake[@]}" demo
	[ "$status" -eq 0 ]
	[ "$(grep -c -- ' -I/fake/include/cjson ' cc.log)" -eq 0 ]
}

@test "without the packages the build stops before compiling, with one line naming them" {
	fake_tree
	want="the build needs the Debian packages pkg-config libsodium-dev libcjson-dev zlib1g-dev: run 'scripts/bootstrap' (or 'apt-get install pkg-config libsodium-dev libcjson-dev zlib1g-dev')."
	for goal in all units bench-sha256; do
		rm -f bootstrapped cc.log
		run --separate-stderr make -C tree --no-print-directory "${fake[@]}" "$goal"
		[ "$status" -eq 2 ]
		[ "$output" = "" ]
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ ${stderr_lines[0]} =~ ^Makefile:[0-9]+:\ \*\*\*\ (.*)\ \ Stop\.$ ]] || { echo "$stderr" >&2; return 1; }
		[ "${BASH_REMATCH[1]}" = "$want" ]
		[ ! -e cc.log ]
		[ ! -e tree/build ]
	done
	# pkg-config itself missing: the same line
	run --separate-stderr make -C tree --no-print-directory CC="$PWD/bin/cc" PKG_CONFIG=/nonexistent/pkg-config all
	[ "$status" -eq 2 ]
	[[ $stderr == *"*** $want  Stop." ]]
	# targets that compile nothing do not ask
	run make -C tree --no-print-directory -s "${fake[@]}" help
	[ "$status" -eq 0 ]
	# and once bootstrap has run, the same command builds
	: >bootstrapped
	run make -C tree --no-print-directory -s "${fake[@]}" all
	[ "$status" -eq 0 ]
	[ -e tree/build/bin/hb-run ]
}

@test "objects are rebuilt when the flags change, and only then: make, make DEVELOPER=1, back, CFLAGS" {
	fake_tree
	: >bootstrapped
	local n
	# compiles GOAL ARGS...: how many objects one make compiled
	compiles() {
		rm -f cc.log
		make -C tree --no-print-directory -s NO_CUDA=1 "${fake[@]}" "$@" all >/dev/null || return 1
		[ -e cc.log ] || { echo 0; return; }
		grep -c ' -c -o ' cc.log || true
	}
	n=$(compiles)
	((n >= 70))
	[ "$(compiles)" -eq 0 ]
	[ "$(compiles DEVELOPER=1)" -eq "$n" ]
	[ "$(grep ' -c -o ' cc.log | grep -c -- ' -Werror ')" -eq "$n" ]
	[ "$(compiles DEVELOPER=1)" -eq 0 ]
	[ "$(compiles)" -eq "$n" ]
	[ "$(grep -c -- ' -Werror ' cc.log)" -eq 0 ]
	[ "$(compiles CFLAGS=-O1)" -eq "$n" ]
	[ "$(compiles CFLAGS=-O1)" -eq 0 ]
	# without the stamp (the Makefile before it) the same change compiles nothing
	sed -i 's|^\$(BUILD)/%\.o: %\.c \$(FLAGS_STAMP)$|$(BUILD)/%.o: %.c|' tree/Makefile
	grep -q '^$(BUILD)/%\.o: %\.c$' tree/Makefile
	compiles >/dev/null
	[ "$(compiles DEVELOPER=1)" -eq 0 ]
}

@test "make install puts the binaries and every man page (1, 5, 7) under DESTDIR, and uninstall removes them" {
	fake_tree
	: >bootstrapped
	run make -C tree --no-print-directory -s "${fake[@]}" DESTDIR="$PWD/dest" prefix=/usr install
	[ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
	find dest -type f | sed 's|^dest/||' | LC_ALL=C sort >installed
	{
		for b in hb-admit hb-convert hb-replay hb-run hb-trace hb-verify-pages; do echo "usr/bin/$b"; done
		ls "$root"/man/man1/*.1 "$root"/man/man5/*.5 "$root"/man/man7/*.7 | sed "s|^$root/man/|usr/share/man/|"
	} | LC_ALL=C sort >want
	grep -qx usr/share/man/man7/hebrus.7 want
	diff want installed
	cmp "$root/man/man7/hebrus.7" dest/usr/share/man/man7/hebrus.7
	run make -C tree --no-print-directory -s "${fake[@]}" DESTDIR="$PWD/dest" prefix=/usr uninstall
	[ "$status" -eq 0 ]
	[ -z "$(find dest -type f)" ]
}

# The CUDA backend is built where nvcc is and only there: NVCC names it
# (a stand-in nvcc here, so the check runs on a machine with or without the
# toolkit), NO_CUDA=1 builds as a machine without it does.  Dry runs only.
@test "the CUDA backend is compiled and linked into hb-run and hb-replay with nvcc, and not with NO_CUDA=1" {
	mkdir -p fakecuda/bin fakecuda/lib64
	printf '#!/bin/sh\nexit 0\n' >fakecuda/bin/nvcc
	chmod +x fakecuda/bin/nvcc
	make -C "$clean" -n NVCC="$PWD/fakecuda/bin/nvcc" build/bin/hb-run build/bin/hb-replay build/bin/hb-admit |
		sed -e :a -e '/\\$/N; s/\\\n//; ta' >with
	grep -q "fakecuda/bin/nvcc .*-gencode arch=compute_90,code=sm_90 .*-c -o build/cuda/hb_cuda_kern.o cuda/hb_cuda_kern.cu$" with
	grep -q ' -DHB_WITH_CUDA .* -c -o build/cmd/hb_backend_cli.o cmd/hb_backend_cli.c$' with
	[ "$(grep -c ' -o build/bin/hb-r[a-z]* .*build/libhbcuda.a .*-lcudart_static' with)" -eq 2 ]
	if grep ' -o build/bin/hb-admit ' with | grep -q 'cuda'; then false; fi
	make -C "$clean" -n NO_CUDA=1 NVCC="$PWD/fakecuda/bin/nvcc" build/bin/hb-run build/bin/hb-replay |
		sed -e :a -e '/\\$/N; s/\\\n//; ta' >without
	grep -q ' -o build/bin/hb-run ' without
	if grep -qi 'nvcc\|cuda\|HB_WITH_CUDA' without; then false; fi
}
