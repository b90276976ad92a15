/*
 * Unit tests: the SHA-NI path of hb_sha256 against the FIPS 180-2 examples
 * and, byte for byte, against libsodium (an independent implementation) on
 * every length 0..1024 and on multi-MiB messages in random chunkings; the
 * spent-state contract; the HB_SHA256_IMPL override (the process's choice is
 * made once, so the override cases re-run this binary with a changed
 * environment); and that dispatch picks ni on a processor that has it.
 *
 * On a processor without the SHA extensions a case that needs the ni path
 * is reported as skipped with that reason (hb_test_skip: "ok N - name #
 * SKIP ..."), never as passed; its sodium half, if it has one, still runs
 * and a failed CHECK there still fails it.  The dispatch and override cases
 * test the no-ni answer itself, so they run (and count) on both.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_err.h"
#include "hb_sha256.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng_state = 0x5eed0000; /* never 0: xorshift would stay 0 */

/* xorshift64*: deterministic, so a failure reproduces. */
static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(rng() >> 56);
}

/* Whether the ni path can run here; when not, the running case is skipped
 * for that reason. */
static bool have_ni(void)
{
	if (hb_sha256_ni_supported())
		return true;
	hb_test_skip("this processor lacks the SHA extensions (SHA, SSE4.1, SSSE3): ni path not run");
	return false;
}

/* Digest of data on path, fed in pieces whose sizes come from the rng,
 * between 0 and max_piece bytes (max_piece 0: one update). */
static void digest_chunked(int path, const uint8_t *data, size_t len,
			   size_t max_piece, uint8_t out[HB_SHA256_BYTES])
{
	struct hb_sha256 h;
	size_t pos = 0;

	CHECK_EQ_INT(hb_sha256_init_path(&h, path), HB_OK);
	while (pos < len) {
		size_t n = max_piece ? (size_t)(rng() % (max_piece + 1)) : len;
		if (n > len - pos)
			n = len - pos;
		hb_sha256_update(&h, data + pos, n);
		pos += n;
	}
	hb_sha256_final(&h, out);
}

static void check_hex(int path, const void *data, size_t len, const char *want)
{
	uint8_t d[HB_SHA256_BYTES];
	char hex[HB_SHA256_HEX];

	digest_chunked(path, data, len, 0, d);
	hb_hex_encode(d, sizeof(d), hex);
	CHECK_STR(hex, want);
	if (len > 1) { /* and once split at every size up to 70 */
		digest_chunked(path, data, len, 70, d);
		hb_hex_encode(d, sizeof(d), hex);
		CHECK_STR(hex, want);
	}
}

static const char msg448[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
static const char msg896[] =
	"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
	"ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";

static void fips_vectors_both_paths(void)
{
	static const int paths[] = {HB_SHA256_PATH_SODIUM, HB_SHA256_PATH_NI};
	uint8_t *million = malloc(1000000);

	CHECK(million != NULL);
	if (!million)
		return;
	memset(million, 'a', 1000000);
	for (size_t i = 0; i < HB_ARRAY_LEN(paths); i++) {
		if (paths[i] == HB_SHA256_PATH_NI && !have_ni())
			continue;
		check_hex(paths[i], "", 0,
			  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
		check_hex(paths[i], "abc", 3,
			  "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
		check_hex(paths[i], msg448, 56,
			  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
		check_hex(paths[i], msg896, 112,
			  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
		check_hex(paths[i], million, 1000000,
			  "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	}
	free(million);
}

/* Every length 0..1024 covers every fill level and both padding cases
 * (length field in the last block or in an extra one). */
static void every_length_matches_sodium(void)
{
	uint8_t data[1024], want[HB_SHA256_BYTES], got[HB_SHA256_BYTES];
	int bad = 0;

	if (!have_ni())
		return;
	rng_state = 0x5eed0001;
	fill_random(data, sizeof(data));
	for (size_t len = 0; len <= sizeof(data); len++) {
		/* Start at an odd address too: the loads must not assume
		 * alignment. */
		const uint8_t *p = data + (len & 1 ? 0 : sizeof(data) - len);
		digest_chunked(HB_SHA256_PATH_SODIUM, p, len, 0, want);
		digest_chunked(HB_SHA256_PATH_NI, p, len, 0, got);
		bad += memcmp(want, got, sizeof(want)) != 0;
		digest_chunked(HB_SHA256_PATH_NI, p, len, 1 + len % 131, got);
		bad += memcmp(want, got, sizeof(want)) != 0;
	}
	CHECK_EQ_INT(bad, 0);
}

static void large_messages_random_chunks(void)
{
	static const size_t lens[] = {(4u << 20) + 1, (6u << 20) - 37, 8u << 20};
	static const size_t pieces[] = {0, 1000, 200000, 3u << 20};
	uint8_t *data = malloc(8u << 20);
	uint8_t want[HB_SHA256_BYTES], got[HB_SHA256_BYTES];

	CHECK(data != NULL);
	if (!data || !have_ni()) {
		free(data);
		return;
	}
	rng_state = 0x5eed0002;
	fill_random(data, 8u << 20);
	for (size_t i = 0; i < HB_ARRAY_LEN(lens); i++) {
		digest_chunked(HB_SHA256_PATH_SODIUM, data, lens[i], 0, want);
		for (size_t j = 0; j < HB_ARRAY_LEN(pieces); j++) {
			digest_chunked(HB_SHA256_PATH_NI, data, lens[i], pieces[j], got);
			CHECK(memcmp(want, got, sizeof(want)) == 0);
		}
		/* A changed last byte must change the digest. */
		data[lens[i] - 1] ^= 1;
		digest_chunked(HB_SHA256_PATH_NI, data, lens[i], 0, got);
		CHECK(memcmp(want, got, sizeof(want)) != 0);
		data[lens[i] - 1] ^= 1;
	}
	free(data);
}

/* hb_sha256_update2 equals two updates, whatever each state held before:
 * the same block offset (the shared-schedule path) and different ones
 * (the fallback), different earlier bytes, a sodium state beside an ni
 * one, pieces of every size; the expectations come from libsodium over
 * prefix + data. */
static void update2_equals_two_updates(void)
{
	static const size_t prefixes[][2] = {
		{0, 0}, {0, 64}, {5, 5}, {5, 69}, {63, 127}, {3, 17}, {0, 1}, {64, 0},
	};
	static const size_t pieces[] = {0, 1, 63, 64, 65, 1000, 70000};
	const size_t len = (1u << 20) + 13;
	uint8_t *data = malloc(len), pre[2][128];
	uint8_t want[2][HB_SHA256_BYTES], got[2][HB_SHA256_BYTES];
	int bad = 0, runs = 0;

	CHECK(data != NULL);
	if (!data || !have_ni()) {
		free(data);
		return;
	}
	rng_state = 0x5eed0003;
	fill_random(data, len);
	fill_random(pre[0], sizeof(pre[0]));
	fill_random(pre[1], sizeof(pre[1]));
	for (size_t i = 0; i < HB_ARRAY_LEN(prefixes); i++)
		for (int mix = 0; mix < 2; mix++) /* mix: b on the sodium path */
			for (size_t j = 0; j < HB_ARRAY_LEN(pieces); j++) {
				struct hb_sha256 h[2], ref;
				size_t pos = 0;
				for (int k = 0; k < 2; k++) {
					CHECK_EQ_INT(hb_sha256_init_path(&ref, HB_SHA256_PATH_SODIUM), HB_OK);
					hb_sha256_update(&ref, pre[k], prefixes[i][k]);
					hb_sha256_update(&ref, data, len);
					hb_sha256_final(&ref, want[k]);
					CHECK_EQ_INT(hb_sha256_init_path(&h[k], k && mix ? HB_SHA256_PATH_SODIUM
										    : HB_SHA256_PATH_NI), HB_OK);
					hb_sha256_update(&h[k], pre[k], prefixes[i][k]);
				}
				while (pos < len) {
					size_t n = pieces[j] ? (size_t)(rng() % (pieces[j] + 1)) : len;
					if (n > len - pos)
						n = len - pos;
					hb_sha256_update2(&h[0], &h[1], data + pos, n);
					pos += n;
				}
				hb_sha256_final(&h[0], got[0]);
				hb_sha256_final(&h[1], got[1]);
				bad += memcmp(want[0], got[0], HB_SHA256_BYTES) != 0;
				bad += memcmp(want[1], got[1], HB_SHA256_BYTES) != 0;
				runs++;
			}
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(runs, (int)(HB_ARRAY_LEN(prefixes) * 2 * HB_ARRAY_LEN(pieces)));
	/* a changed byte changes both digests */
	{
		struct hb_sha256 a, b;
		uint8_t orig[HB_SHA256_BYTES];
		hb_sha256_init_path(&a, HB_SHA256_PATH_SODIUM);
		hb_sha256_update(&a, data, len);
		hb_sha256_final(&a, orig);
		data[len / 2] ^= 1;
		hb_sha256_init_path(&a, HB_SHA256_PATH_NI);
		hb_sha256_init_path(&b, HB_SHA256_PATH_NI);
		hb_sha256_update2(&a, &b, data, len);
		hb_sha256_final(&a, got[0]);
		hb_sha256_final(&b, got[1]);
		CHECK(memcmp(got[0], got[1], HB_SHA256_BYTES) == 0);
		CHECK(memcmp(got[0], orig, HB_SHA256_BYTES) != 0);
	}
	free(data);
}

/* hb_sha256_update_lanes equals one update a lane, in lane order, for 1..3
 * lanes: states whose earlier bytes leave them at different block offsets
 * (so the lanes' whole blocks start at different places and their counts
 * differ by one), each lane its own bytes (from odd addresses too), pieces
 * of every size around the block edges and of megabytes; a sodium state
 * among ni ones; one state named by lanes 0 and 1 (so it takes each piece
 * twice, in turn).  The expectations are libsodium states fed the same
 * pieces lane by lane. */
static void lanes_equal_one_update_each(void)
{
	static const size_t prefixes[][4] = {
		{0, 0, 0, 0}, {0, 64, 128, 5}, {5, 69, 63, 1}, {63, 127, 0, 64}, {3, 17, 31, 100},
	};
	static const size_t pieces[] = {0, 1, 63, 64, 65, 1000, 70000};
	const size_t len = (1u << 20) + 13;
	uint8_t *data = malloc(HB_SHA256_LANES * len + 1), pre[HB_SHA256_LANES][128];
	uint8_t want[HB_SHA256_BYTES], got[HB_SHA256_BYTES];
	int bad = 0, runs = 0, cases = 0;

	CHECK(data != NULL);
	if (!data || !have_ni()) {
		free(data);
		return;
	}
	rng_state = 0x5eed0004;
	fill_random(data, HB_SHA256_LANES * len + 1);
	for (unsigned k = 0; k < HB_SHA256_LANES; k++)
		fill_random(pre[k], sizeof(pre[k]));
	for (unsigned n = 1; n <= HB_SHA256_LANES; n++)
		for (size_t i = 0; i < HB_ARRAY_LEN(prefixes); i++)
			for (int mix = 0; mix < 3; mix++) /* 1: the last lane on sodium; 2: lanes 0, 1 one state */
				for (size_t j = 0; j < HB_ARRAY_LEN(pieces); j++) {
					struct hb_sha256 h[HB_SHA256_LANES], ref[HB_SHA256_LANES], *hp[HB_SHA256_LANES];
					unsigned who[HB_SHA256_LANES]; /* the state lane k names */
					const uint8_t *lane[HB_SHA256_LANES];
					const void *at[HB_SHA256_LANES];
					size_t pos = 0;
					if (mix == 2 && n == 1)
						continue;
					cases++;
					for (unsigned k = 0; k < n; k++) {
						lane[k] = data + k * len + (k & 1); /* odd addresses too */
						CHECK_EQ_INT(hb_sha256_init_path(&h[k], mix == 1 && k == n - 1
											? HB_SHA256_PATH_SODIUM
											: HB_SHA256_PATH_NI),
							     HB_OK);
						CHECK_EQ_INT(hb_sha256_init_path(&ref[k], HB_SHA256_PATH_SODIUM), HB_OK);
						hb_sha256_update(&h[k], pre[k], prefixes[i][k]);
						hb_sha256_update(&ref[k], pre[k], prefixes[i][k]);
						who[k] = mix == 2 && k == 1 ? 0 : k;
						hp[k] = &h[who[k]];
					}
					while (pos < len) {
						size_t m = pieces[j] ? (size_t)(rng() % (pieces[j] + 1)) : len;
						if (m > len - pos)
							m = len - pos;
						for (unsigned k = 0; k < n; k++) {
							at[k] = lane[k] + pos;
							hb_sha256_update(&ref[who[k]], at[k], m);
						}
						hb_sha256_update_lanes(hp, at, m, n);
						pos += m;
					}
					for (unsigned k = 0; k < n; k++) {
						if (who[k] != k) {
							hb_sha256_final(&ref[k], want); /* unused: spend it */
							continue;
						}
						hb_sha256_final(&ref[k], want);
						hb_sha256_final(&h[k], got);
						bad += memcmp(want, got, HB_SHA256_BYTES) != 0;
						runs++;
					}
				}
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(cases, (int)((HB_SHA256_LANES * 3 - 1) * HB_ARRAY_LEN(prefixes) * HB_ARRAY_LEN(pieces)));
	CHECK(runs > cases);
	free(data);
}

/* hb_sha256_buf_lanes equals hb_sha256_buf on the sodium path for 1..3
 * buffers at every length around the block edges and on a large one; the
 * digests are each buffer's, not swapped (the buffers differ); a lane count
 * outside 1..3 writes nothing. */
static void buf_lanes_equal_bufs(void)
{
	const size_t big = (3u << 20) + 17;
	uint8_t *x = malloc(HB_SHA256_LANES * big), got[HB_SHA256_LANES + 1][HB_SHA256_BYTES];
	uint8_t want[HB_SHA256_BYTES];
	const void *at[HB_SHA256_LANES + 1];
	int bad = 0, runs = 0;

	CHECK(x != NULL);
	if (!x || !have_ni()) {
		free(x);
		return;
	}
	rng_state = 0x5eed0005;
	fill_random(x, HB_SHA256_LANES * big);
	for (unsigned n = 1; n <= HB_SHA256_LANES; n++) {
		for (size_t len = 0; len <= 300; len++) {
			for (unsigned k = 0; k < n; k++)
				at[k] = x + k * big + 1; /* an odd address */
			hb_sha256_buf_lanes(at, len, n, got);
			for (unsigned k = 0; k < n; k++) {
				digest_chunked(HB_SHA256_PATH_SODIUM, at[k], len, 0, want);
				bad += memcmp(want, got[k], HB_SHA256_BYTES) != 0;
			}
			runs++;
		}
		for (unsigned k = 0; k < n; k++)
			at[k] = x + k * big;
		hb_sha256_buf_lanes(at, big, n, got);
		for (unsigned k = 0; k < n; k++) {
			digest_chunked(HB_SHA256_PATH_SODIUM, at[k], big, 0, want);
			bad += memcmp(want, got[k], HB_SHA256_BYTES) != 0;
		}
		if (n > 1)
			CHECK(memcmp(got[0], got[1], HB_SHA256_BYTES) != 0);
	}
	memset(got, 0xa5, sizeof(got));
	for (unsigned k = 0; k <= HB_SHA256_LANES; k++)
		at[k] = x;
	hb_sha256_buf_lanes(at, 64, 0, got);
	hb_sha256_buf_lanes(at, 64, HB_SHA256_LANES + 1, got);
	for (unsigned k = 0; k <= HB_SHA256_LANES; k++)
		for (unsigned b = 0; b < HB_SHA256_BYTES; b++)
			bad += got[k][b] != 0xa5;
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(runs, 301 * HB_SHA256_LANES);
	free(x);
}

/* The contract in hb_sha256.h: final spends the state; a spent or zeroed
 * state ignores updates and yields zeros; init makes it good again. */
static void spent_state_needs_init(void)
{
	static const uint8_t zero[HB_SHA256_BYTES];
	static const int paths[] = {HB_SHA256_PATH_SODIUM, HB_SHA256_PATH_NI};
	struct hb_sha256 h;
	uint8_t d[HB_SHA256_BYTES];
	char hex[HB_SHA256_HEX];

	for (size_t i = 0; i < HB_ARRAY_LEN(paths); i++) {
		if (paths[i] == HB_SHA256_PATH_NI && !have_ni())
			continue;
		CHECK_EQ_INT(hb_sha256_init_path(&h, paths[i]), HB_OK);
		hb_sha256_update(&h, "ab", 2);
		hb_sha256_final(&h, d);
		CHECK_EQ_INT(h.path, HB_SHA256_PATH_NONE);
		hb_sha256_update(&h, "c", 1);
		hb_sha256_final(&h, d);
		CHECK(memcmp(d, zero, sizeof(d)) == 0);
		CHECK_EQ_INT(hb_sha256_init_path(&h, paths[i]), HB_OK);
		hb_sha256_update(&h, "a", 1);
		hb_sha256_update(&h, "bc", 2);
		hb_sha256_final(&h, d);
		hb_hex_encode(d, sizeof(d), hex);
		CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	}
	memset(&h, 0, sizeof(h));
	hb_sha256_update(&h, "abc", 3);
	memset(d, 0xff, sizeof(d));
	hb_sha256_final(&h, d);
	CHECK(memcmp(d, zero, sizeof(d)) == 0);

	/* A refused init leaves the state spent. */
	CHECK_EQ_INT(hb_sha256_init_path(&h, HB_SHA256_PATH_SODIUM), HB_OK);
	CHECK_EQ_INT(hb_sha256_init_path(&h, 7), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_sha256_init_path(&h, HB_SHA256_PATH_NONE), HB_ERR_INVALID);
	CHECK_EQ_INT(h.path, HB_SHA256_PATH_NONE);
	if (!hb_sha256_ni_supported()) {
		CHECK_EQ_INT(hb_sha256_init_path(&h, HB_SHA256_PATH_NI), HB_ERR_UNSUPPORTED);
		CHECK_EQ_INT(h.path, HB_SHA256_PATH_NONE);
	}
}

static void choose_rules(void)
{
	static const struct {
		const char *override;
		bool ni_ok;
		int rc, path;
	} cases[] = {
		{NULL, true, HB_OK, HB_SHA256_PATH_NI},
		{NULL, false, HB_OK, HB_SHA256_PATH_SODIUM},
		{"", true, HB_OK, HB_SHA256_PATH_NI},
		{"", false, HB_OK, HB_SHA256_PATH_SODIUM},
		{"sodium", true, HB_OK, HB_SHA256_PATH_SODIUM},
		{"sodium", false, HB_OK, HB_SHA256_PATH_SODIUM},
		{"ni", true, HB_OK, HB_SHA256_PATH_NI},
		{"ni", false, HB_ERR_UNSUPPORTED, HB_SHA256_PATH_SODIUM},
		{"NI", true, HB_ERR_INVALID, HB_SHA256_PATH_SODIUM},
		{"ni ", true, HB_ERR_INVALID, HB_SHA256_PATH_SODIUM},
		{"auto", true, HB_ERR_INVALID, HB_SHA256_PATH_SODIUM},
		{"libsodium", false, HB_ERR_INVALID, HB_SHA256_PATH_SODIUM},
	};

	for (size_t i = 0; i < HB_ARRAY_LEN(cases); i++) {
		struct hb_error err;
		int path = -1;

		hb_error_clear(&err);
		CHECK_EQ_INT(hb_sha256_choose(cases[i].override, cases[i].ni_ok,
					      &path, &err), cases[i].rc);
		CHECK_EQ_INT(path, cases[i].path);
		CHECK_EQ_INT(err.code, cases[i].rc);
		if (cases[i].rc)
			CHECK_STR(err.field, "env.HB_SHA256_IMPL");
	}
}

/* The CPUID probe against the kernel's reading of the same bits (Linux
 * /proc/cpuinfo flags "sha_ni", "sse4_1", "ssse3"). */
static void cpuid_probe_agrees_with_kernel(void)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[4096];
	bool seen = false, sha = false, sse41 = false, ssse3 = false;

	if (!f) {
		hb_test_skip("no /proc/cpuinfo (not Linux): the CPUID probe is not cross-checked");
		return;
	}
	while (!seen && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5) != 0)
			continue;
		seen = true;
		sha = strstr(line, " sha_ni") != NULL;
		sse41 = strstr(line, " sse4_1") != NULL;
		ssse3 = strstr(line, " ssse3") != NULL;
	}
	fclose(f);
	CHECK(seen);
	CHECK_EQ_INT(hb_sha256_ni_supported(), sha && sse41 && ssse3);
}

/*
 * What this process chose.  Run plainly, it expects the default (ni when the
 * processor has it) or whatever HB_SHA256_IMPL asks for; the override case
 * below re-runs it with HB_TEST_SHA_EXPECT="<impl> <rc>" to state the answer
 * independently.
 */
static void dispatch_matches_env(void)
{
	const char *expect = getenv("HB_TEST_SHA_EXPECT");
	const char *env = getenv("HB_SHA256_IMPL");
	char want_impl[16] = "";
	int want_rc = 0, rc;
	struct hb_error err;
	struct hb_sha256 h;
	uint8_t d[HB_SHA256_BYTES];
	char hex[HB_SHA256_HEX];

	if (expect) {
		CHECK(sscanf(expect, "%15s %d", want_impl, &want_rc) == 2);
	} else if (env && *env) {
		int path;
		want_rc = hb_sha256_choose(env, hb_sha256_ni_supported(), &path, NULL);
		snprintf(want_impl, sizeof(want_impl), "%s",
			 path == HB_SHA256_PATH_NI ? "ni" : "sodium");
	} else if (hb_sha256_ni_supported()) {
		snprintf(want_impl, sizeof(want_impl), "ni");
	} else {
		snprintf(want_impl, sizeof(want_impl), "sodium");
	}
	CHECK_EQ_INT(hb_crypto_init(), want_rc);
	hb_error_clear(&err);
	rc = hb_sha256_select(&err);
	CHECK_EQ_INT(rc, want_rc);
	CHECK_EQ_INT(err.code, want_rc);
	if (rc)
		CHECK_STR(err.field, "env.HB_SHA256_IMPL");
	CHECK_STR(hb_sha256_impl(), want_impl);
	hb_sha256_init(&h);
	CHECK_EQ_INT(h.path, strcmp(want_impl, "ni") == 0 ? HB_SHA256_PATH_NI
							 : HB_SHA256_PATH_SODIUM);
	hb_sha256_update(&h, "abc", 3);
	hb_sha256_final(&h, d);
	hb_hex_encode(d, sizeof(d), hex);
	CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

/* Runs this binary's dispatch_matches_env with HB_SHA256_IMPL set to impl
 * (NULL: unset) and the stated expectation; returns whether that case ran
 * and passed. */
static bool child_agrees(const char *impl, const char *expect)
{
	char out[4096], *hit;
	int status = 0, fd;
	ssize_t n;
	pid_t pid;

	snprintf(out, sizeof(out), "%s/child.tap", hb_test_tmpdir());
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		if (impl)
			setenv("HB_SHA256_IMPL", impl, 1);
		else
			unsetenv("HB_SHA256_IMPL");
		setenv("HB_TEST_SHA_EXPECT", expect, 1);
		execl("/proc/self/exe", "test_core_sha256_ni", "dispatch_matches_env",
		      (char *)NULL);
		_exit(127);
	}
	CHECK(pid > 0);
	if (pid <= 0 || waitpid(pid, &status, 0) != pid)
		return false;
	fd = open(out, O_RDONLY);
	n = fd >= 0 ? read(fd, out, sizeof(out) - 1) : -1;
	if (fd >= 0)
		close(fd);
	out[n > 0 ? n : 0] = '\0';
	/* The case must have run ("ok N - name" with nothing after the name,
	 * not "# SKIP not selected") and passed. */
	hit = strstr(out, " - dispatch_matches_env\n");
	if (!hit)
		return false;
	while (hit > out && hit[-1] != '\n')
		hit--;
	return strncmp(hit, "ok ", 3) == 0 && WIFEXITED(status) &&
	       WEXITSTATUS(status) == 0;
}

static void override_variable(void)
{
	bool ni = hb_sha256_ni_supported();
	char want[32];

	CHECK(child_agrees("sodium", "sodium 0"));
	if (ni) {
		CHECK(child_agrees("ni", "ni 0"));
		CHECK(child_agrees(NULL, "ni 0"));
		CHECK(child_agrees("", "ni 0"));
	} else {
		snprintf(want, sizeof(want), "sodium %d", HB_ERR_UNSUPPORTED);
		CHECK(child_agrees("ni", want));
		CHECK(child_agrees(NULL, "sodium 0"));
	}
	snprintf(want, sizeof(want), "sodium %d", HB_ERR_INVALID);
	CHECK(child_agrees("sha-ni", want));
	/* Controls: the child case can fail, so the passes above mean
	 * something. */
	CHECK(!child_agrees("sodium", "ni 0"));
	CHECK(!child_agrees("sha-ni", "sodium 0"));
}

HB_TEST_MAIN(T(fips_vectors_both_paths), T(every_length_matches_sodium),
	     T(large_messages_random_chunks), T(update2_equals_two_updates), T(lanes_equal_one_update_each), T(buf_lanes_equal_bufs),
	     T(spent_state_needs_init),
	     T(choose_rules), T(cpuid_probe_agrees_with_kernel),
	     T(dispatch_matches_env), T(override_variable))
