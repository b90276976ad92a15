#!/usr/bin/env bats
# scripts/mutants, the mutation proof of the suite (make test-mutants).
# The committed list must still apply to the tree (every original text
# occurs exactly once in its file, every hint names a test): that is what
# keeps it honest when code moves.  The tool's own decisions (caught,
# survived, invalid, a catcher that fails without a mutant, the real tree
# never written) are proved on a three-file project built here, in seconds.
#
# Needs python3 (standard library) and cc.

bats_require_minimum_version 1.5.0

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	mut=$root/scripts/mutants
	cd "$BATS_TEST_TMPDIR"
}

# A tiny project with the layout the tool expects: a Makefile with
# UNIT_TESTS lines and `all units`, one unit test, one Bats file.
mini() {
	mkdir -p mini/src mini/tests/unit mini/tests/cli mini/tests/mutants
	cat >mini/Makefile <<'EOF'
BUILD ?= build
UNIT_TESTS =
UNIT_TESTS += tests/unit/test_add
all: $(BUILD)/bin/twice
units: $(BUILD)/tests/unit/test_add
$(BUILD)/src/a.o: src/a.c
	mkdir -p $(@D) && cc -std=c11 -Werror -c -o $@ $<
$(BUILD)/bin/twice: src/twice.c $(BUILD)/src/a.o
	mkdir -p $(@D) && cc -std=c11 -o $@ $^
$(BUILD)/tests/unit/test_add: tests/unit/test_add.c $(BUILD)/src/a.o
	mkdir -p $(@D) && cc -std=c11 -o $@ $^
EOF
	cat >mini/src/a.c <<'EOF'
int add(int a, int b);
int twice(int a);
int never(int a);
int add(int a, int b) { return a + b; }
int twice(int a) { return 2 * a; }
int never(int a) { return a - 1; } /* no test looks at this */
/* end */
/* end */
EOF
	cat >mini/src/twice.c <<'EOF'
#include <stdio.h>
int twice(int a);
int main(void) { printf("%d\n", twice(21)); return 0; }
EOF
	cat >mini/tests/unit/test_add.c <<'EOF'
#include <stdio.h>
int add(int a, int b);
int main(void)
{
	int ok = add(2, 3) == 5;
	printf("1..1\n%s 1 - adds\n", ok ? "ok" : "not ok");
	return !ok;
}
EOF
	# printf, not a here-document: Bats rewrites every line that starts
	# with @test in this file, here-documents included
	printf '%s\n' '@test "twice doubles" {' '	[ "$("$HB_BUILD/bin/twice")" = 42 ]' '}' >mini/tests/cli/twice.bats
}

@test "mutants: the committed list applies to this tree (>= 25, every library, cmd/ and cuda/)" {
	run "$mut" --check
	[ "$status" -eq 0 ]
	[[ $output =~ ^([0-9]+)\ mutants\ apply\ \(cmd\ ([0-9]+),\ cuda\ ([0-9]+),\ libcore\ ([0-9]+),\ libkern\ ([0-9]+),\ libstore\ ([0-9]+)\)$ ]]
	((BASH_REMATCH[1] >= 25))
	((BASH_REMATCH[2] >= 1 && BASH_REMATCH[3] >= 1 && BASH_REMATCH[4] >= 1 && BASH_REMATCH[5] >= 1 && BASH_REMATCH[6] >= 1))
}

@test "mutants: the ci subset has a mutant in every library and cmd/" {
	run "$mut" --check --select ci
	[ "$status" -eq 0 ]
	[[ $output =~ ^([0-9]+)\ mutants\ apply\ \(cmd\ [1-9][0-9]*,\ libcore\ [1-9][0-9]*,\ libkern\ [1-9][0-9]*,\ libstore\ [1-9][0-9]*\)$ ]]
	((BASH_REMATCH[1] <= 10))
}

@test "mutants: an original text found twice, or not at all, or in no file, is refused" {
	mini
	cat >list <<'EOF'
mutant twice-found
file src/a.c
desc a line that occurs twice
-/* end */
+/* the end */

mutant not-found
file src/a.c
desc text the file does not have
-int add(int a, int b) { return a - b; }
+int add(int a, int b) { return a + b; }

mutant part-of-a-line
file src/a.c
desc only part of a line: the text must be whole lines
-return a + b;
+return a - b;

mutant moved-away
file src/gone.c
desc the file moved
-x
+y
EOF
	run "$mut" --root mini --list list --check
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "mutant twice-found: src/a.c: hunk 1 original text ('/* end */') occurs as whole lines 2 times, not once" ]
	[ "${lines[1]}" = "mutant not-found: src/a.c: hunk 1 original text ('int add(int a, int b) { return a - b; }') occurs as whole lines 0 times, not once" ]
	[ "${lines[2]}" = "mutant part-of-a-line: src/a.c: hunk 1 original text ('return a + b;') occurs as whole lines 0 times, not once" ]
	[ "${lines[3]}" = "mutant moved-away: file 'src/gone.c' not found" ]
	[ "${lines[4]}" = "mutants: 4 problem(s) in list" ]
	[ "${#lines[@]}" -eq 5 ]
}

@test "mutants: malformed records are refused with their line numbers" {
	mini
	cat >list <<'EOF'
mutant ok-one
file src/a.c
desc fine
hint test_add
-int add(int a, int b) { return a + b; }
+int add(int a, int b) { return a - b; }

mutant ok-one
file src/a.c
colour blue
desc twice the id and an unknown field
hint test_nothing
-int twice(int a) { return 2 * a; }
+int twice(int a) { return 3 * a; }

mutant Bad_Id
file src/a.c
+orphan replacement
EOF
	run "$mut" --root mini --list list --check
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "list:10: mutant ok-one: unknown field 'colour'" ]
	[ "${lines[1]}" = "list:16: bad mutant id 'Bad_Id' (lower case, digits, '-')" ]
	[ "${lines[2]}" = "list:18: mutant Bad_Id: '+' line without an original before it" ]
	[ "${lines[3]}" = "list:16: mutant Bad_Id: no 'desc' line" ]
	[ "${lines[4]}" = "list:16: mutant Bad_Id: no '-' original text" ]
	[ "${lines[5]}" = "list:8: mutant id 'ok-one' repeats" ]
	[ "${#lines[@]}" -eq 6 ]
}

@test "mutants: a hint that names no test is refused" {
	mini
	cat >list <<'EOF'
mutant hint-nowhere
file src/a.c
desc the hint names nothing
hint test_nothing
-int add(int a, int b) { return a + b; }
+int add(int a, int b) { return a - b; }
EOF
	run "$mut" --root mini --list list --check
	[ "$status" -eq 2 ]
	[ "${lines[0]}" = "mutant hint-nowhere: hint 'test_nothing' names no unit test of the Makefile and no tests/cli file" ]
}

@test "mutants: caught, survived and invalid mutants are told apart; the tree is never written" {
	mini
	cat >list <<'EOF'
mutant add-wrong
file src/a.c
desc caught by the unit test
-int add(int a, int b) { return a + b; }
+int add(int a, int b) { return a - b; }

mutant twice-wrong
file src/a.c
desc the unit test passes; the Bats file catches it
-int twice(int a) { return 2 * a; }
+int twice(int a) { return 3 * a; }

mutant never-wrong
file src/a.c
desc no test looks
-int never(int a) { return a - 1; } /* no test looks at this */
+int never(int a) { return a + 1; } /* no test looks at this */

mutant no-compile
file src/a.c
desc does not compile: invalid, never caught
-int add(int a, int b) { return a + b; }
+int add(int a, int b) { return a + ; }

mutant same-code
file src/a.c
desc only a comment changes: the object is the same
-int never(int a) { return a - 1; } /* no test looks at this */
+int never(int a) { return a - 1; } /* nobody looks at this */
EOF
	before=$(cat mini/src/a.c | sha256sum)
	run --separate-stderr "$mut" --root mini --list list
	[ "$status" -eq 1 ]
	[[ ${lines[0]} =~ ^id\ +caught-by\ +seconds\ +first\ failing\ case$ ]]
	[[ ${lines[1]} =~ ^add-wrong\ +test_add\ +[0-9]+\.[0-9]\ +adds$ ]]
	[[ ${lines[2]} =~ ^twice-wrong\ +tests/cli/twice\.bats\ +[0-9]+\.[0-9]\ +twice\ doubles$ ]]
	[[ ${lines[3]} =~ ^never-wrong\ +SURVIVED\ +[0-9]+\.[0-9]\ +no\ test\ failed\ \(2\ run\)$ ]]
	[[ ${lines[4]} =~ ^no-compile\ +INVALID\ +[0-9]+\.[0-9]\ +does\ not\ compile ]]
	[[ ${lines[5]} =~ ^same-code\ +INVALID\ +[0-9]+\.[0-9]\ +compiles\ to\ the\ same\ object\ code$ ]]
	[[ ${lines[6]} =~ ^5\ mutants:\ 2\ caught,\ 1\ survived,\ 2\ invalid ]]
	[ "${#lines[@]}" -eq 7 ]
	[ "$(cat mini/src/a.c | sha256sum)" = "$before" ]
	[ ! -e mini/build ]
}

@test "mutants: all caught exits 0; the hint is tried first" {
	mini
	cat >list <<'EOF'
mutant both-wrong
file src/a.c
desc breaks add and twice; the hint names the Bats file
hint twice.bats
-int add(int a, int b) { return a + b; }
-int twice(int a) { return 2 * a; }
+int add(int a, int b) { return a - b; }
+int twice(int a) { return 3 * a; }
EOF
	run --separate-stderr "$mut" --root mini --list list
	[ "$status" -eq 0 ]
	[[ ${lines[1]} =~ ^both-wrong\ +tests/cli/twice\.bats\ +[0-9.]+\ +twice\ doubles$ ]]
	[[ ${lines[2]} =~ ^1\ mutants:\ 1\ caught,\ 0\ survived,\ 0\ invalid ]]
}

@test "mutants: a catcher that also fails without the mutant is an error, not a catch" {
	mini
	# the unit test fails on the clean tree too (it wants 6)
	sed -i 's/add(2, 3) == 5/add(2, 3) == 6/' mini/tests/unit/test_add.c
	cat >list <<'EOF'
mutant add-wrong
file src/a.c
desc "caught" by a test that always fails
-int add(int a, int b) { return a + b; }
+int add(int a, int b) { return a - b; }
EOF
	run --separate-stderr "$mut" --root mini --list list
	[ "$status" -eq 1 ]
	[[ ${lines[1]} =~ ^add-wrong\ +test_add\  ]]
	[ "${lines[2]}" = "ERROR catcher test_add fails on the unmutated tree: adds" ]
}
