/*
 * Unit tests: the sampler (libkern/sampler/hb_sampler.h) and AFN-005's masking.
 *
 * Every row is PHYSICAL wide (16) while the tokenizer knows SEMANTIC (10)
 * ids; the rows past it hold values that would win any comparison (FLT_MAX,
 * +infinity, NaN), so a sampler that looked at them would be caught.
 * Greedy must pick the best valid id (also when that is the last valid
 * one); sampling never returns an invalid id; a seed reproduces a
 * sequence; top-k 1 and a tiny top-p are greedy; bad parameters are
 * refused.  Assertions are exact: the generator is seeded.
 */
#include "hb_base.h"
#include "harness.h"
#include "sampler/hb_sampler.h"

#include <float.h>
#include <math.h>

#define SEMANTIC 10u
#define PHYSICAL 16u

/* A row whose invalid tail dominates numerically. */
static void row(float *l, const float valid[SEMANTIC])
{
	memcpy(l, valid, SEMANTIC * sizeof(float));
	l[10] = FLT_MAX;
	l[11] = INFINITY;
	l[12] = 1e30f;
	l[13] = NAN;
	l[14] = FLT_MAX;
	l[15] = 3e38f;
}

/* A deterministic pseudo-random row (xorshift), values in [-4, 4). */
static void random_row(float *l, uint64_t *st)
{
	float v[SEMANTIC];
	for (size_t i = 0; i < SEMANTIC; i++) {
		*st ^= *st << 13, *st ^= *st >> 7, *st ^= *st << 17;
		v[i] = (float)((*st >> 40) % 8000) / 1000.0f - 4.0f;
	}
	row(l, v);
}

static int32_t first_max(const float *l)
{
	size_t best = 0;
	for (size_t i = 1; i < SEMANTIC; i++)
		if (l[i] > l[best])
			best = i;
	return (int32_t)best;
}

static void greedy_masks_invalid_rows(void)
{
	static const float mid[SEMANTIC] = {0.1f, -2, 0.5f, 7.25f, 3, 7, -1, 0, 2, 1};
	static const float last[SEMANTIC] = {0.1f, -2, 0.5f, 7.25f, 3, 7, -1, 0, 2, 9.5f};
	static const float tie[SEMANTIC] = {1, 4, 2, 4, 0, 0, 0, 0, 0, 4};
	struct hb_sampler s;
	struct hb_error err;
	float l[PHYSICAL];

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_sampler_init(&s, true, 1.0f, 0, 1.0f, 0, SEMANTIC, &err), HB_OK);
	row(l, mid);
	CHECK_EQ_INT(hb_sampler_next(&s, l, SEMANTIC), 3);
	row(l, last);
	CHECK_EQ_INT(hb_sampler_next(&s, l, SEMANTIC), 9); /* the last valid id */
	row(l, tie);
	CHECK_EQ_INT(hb_sampler_next(&s, l, SEMANTIC), 1); /* the first maximum */
	hb_sampler_release(&s);
}

/* Sampling over many seeds never leaves [0, SEMANTIC) and reaches every valid id. */
static void sampling_never_returns_an_invalid_id(void)
{
	static const float flat[SEMANTIC] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	static const float skew[SEMANTIC] = {-9, -9, -9, -9, -9, -9, -9, -9, 1, 2};
	const float *rows[] = {flat, skew};
	unsigned seen[SEMANTIC] = {0}, bad = 0;
	struct hb_sampler s;
	struct hb_error err;
	float l[PHYSICAL];

	for (size_t k = 0; k < HB_ARRAY_LEN(rows); k++) {
		row(l, rows[k]);
		for (uint64_t seed = 0; seed < 64; seed++) {
			hb_error_clear(&err);
			CHECK_EQ_INT(hb_sampler_init(&s, false, seed % 2 ? 0.5f : 2.0f, 0, 1.0f, seed, SEMANTIC, &err),
				     HB_OK);
			for (int d = 0; d < 50; d++) {
				int32_t id = hb_sampler_next(&s, l, SEMANTIC);
				if (id < 0 || id >= (int32_t)SEMANTIC)
					bad++;
				else if (k == 0)
					seen[id]++;
			}
			hb_sampler_release(&s);
		}
	}
	CHECK_EQ_U64(bad, 0);
	for (size_t i = 0; i < SEMANTIC; i++)
		if (!seen[i])
			hb_check_fail(__FILE__, __LINE__, "id %zu never drawn from a flat row", i);
}

static void a_seed_reproduces_a_sequence(void)
{
	struct hb_sampler a, b, c;
	struct hb_error err;
	float l[PHYSICAL];
	uint64_t st = 99;
	unsigned same_ab = 0, same_ac = 0;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_sampler_init(&a, false, 1.0f, 0, 0.95f, 12345, SEMANTIC, &err), HB_OK);
	CHECK_EQ_INT(hb_sampler_init(&b, false, 1.0f, 0, 0.95f, 12345, SEMANTIC, &err), HB_OK);
	CHECK_EQ_INT(hb_sampler_init(&c, false, 1.0f, 0, 0.95f, 12346, SEMANTIC, &err), HB_OK);
	for (int i = 0; i < 200; i++) {
		int32_t x, y, z;
		random_row(l, &st);
		x = hb_sampler_next(&a, l, SEMANTIC);
		y = hb_sampler_next(&b, l, SEMANTIC);
		z = hb_sampler_next(&c, l, SEMANTIC);
		same_ab += x == y;
		same_ac += x == z;
	}
	CHECK_EQ_U64(same_ab, 200);
	CHECK(same_ac < 200); /* another seed is another sequence */
	hb_sampler_release(&a);
	hb_sampler_release(&b);
	hb_sampler_release(&c);
}

/* top-k 1 and a tiny nucleus keep only the best id: greedy, ties included. */
static void top_k_one_and_tiny_top_p_are_greedy(void)
{
	static const float tie[SEMANTIC] = {1, 4, 2, 4, 0, 0, 0, 0, 0, 4};
	struct hb_sampler g, k1, p0;
	struct hb_error err;
	float l[PHYSICAL];
	uint64_t st = 7;
	unsigned differ = 0;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_sampler_init(&g, true, 1.0f, 0, 1.0f, 0, SEMANTIC, &err), HB_OK);
	CHECK_EQ_INT(hb_sampler_init(&k1, false, 1.0f, 1, 1.0f, 5, SEMANTIC, &err), HB_OK);
	CHECK_EQ_INT(hb_sampler_init(&p0, false, 1.0f, 0, 1e-6f, 6, SEMANTIC, &err), HB_OK);
	for (int i = 0; i < 300; i++) {
		int32_t want;
		if (i == 0)
			row(l, tie);
		else
			random_row(l, &st);
		want = hb_sampler_next(&g, l, SEMANTIC);
		CHECK_EQ_INT(want, first_max(l));
		differ += hb_sampler_next(&k1, l, SEMANTIC) != want;
		differ += hb_sampler_next(&p0, l, SEMANTIC) != want;
	}
	CHECK_EQ_U64(differ, 0);
	hb_sampler_release(&g);
	hb_sampler_release(&k1);
	hb_sampler_release(&p0);
}

/* top-k 2 draws only the two best; the draw follows the probabilities. */
static void top_k_two_and_temperature(void)
{
	struct hb_sampler s;
	struct hb_error err;
	float l[PHYSICAL], w[SEMANTIC];
	unsigned count[SEMANTIC] = {0};

	/* the top two are 4 and 7, with p(4) : p(7) = 3 : 1 */
	for (size_t i = 0; i < SEMANTIC; i++)
		w[i] = -1.0f;
	w[4] = logf(3.0f);
	w[7] = 0.0f;
	row(l, w);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_sampler_init(&s, false, 1.0f, 2, 1.0f, 2024, SEMANTIC, &err), HB_OK);
	for (int i = 0; i < 20000; i++)
		count[hb_sampler_next(&s, l, SEMANTIC)]++;
	hb_sampler_release(&s);
	CHECK_EQ_U64(count[4] + count[7], 20000);
	CHECK(count[4] > 14600 && count[4] < 15400); /* 0.75 +- 0.02 */
}

static void refuses_bad_parameters(void)
{
	static const float temps[] = {0.0f, -1.0f, -0.0f, NAN, INFINITY};
	static const float tops[] = {0.0f, -0.25f, 1.0001f, 2.0f, NAN};
	struct hb_sampler s;
	struct hb_error err;

	for (size_t i = 0; i < HB_ARRAY_LEN(temps); i++) {
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_sampler_init(&s, false, temps[i], 0, 1.0f, 0, SEMANTIC, &err), HB_ERR_INVALID);
		CHECK_STR(err.field, "temperature");
	}
	for (size_t i = 0; i < HB_ARRAY_LEN(tops); i++) {
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_sampler_init(&s, false, 1.0f, 0, tops[i], 0, SEMANTIC, &err), HB_ERR_INVALID);
		CHECK_STR(err.field, "top_p");
	}
	/* the bounds that are allowed */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_sampler_init(&s, false, 1e-3f, 0, 1.0f, 0, SEMANTIC, &err), HB_OK);
	hb_sampler_release(&s);
	CHECK_EQ_INT(hb_sampler_init(&s, false, 1.0f, 0, 1e-9f, 0, SEMANTIC, &err), HB_OK);
	hb_sampler_release(&s);
	/* greedy takes no temperature */
	CHECK_EQ_INT(hb_sampler_init(&s, true, 0.0f, 0, 1.0f, 0, SEMANTIC, &err), HB_OK);
	hb_sampler_release(&s);
}

/* Asked for more rows than it was set up for, sampling refuses (-1)
 * instead of silently turning greedy. */
static void refuses_more_rows_than_set_up_for(void)
{
	struct hb_sampler s;
	struct hb_error err;
	float l[PHYSICAL];

	for (size_t i = 0; i < PHYSICAL; i++)
		l[i] = (float)i;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_sampler_init(&s, false, 1.0f, 0, 1.0f, 7, SEMANTIC - 1, &err), HB_OK);
	CHECK_EQ_INT(hb_sampler_next(&s, l, SEMANTIC), -1);
	CHECK(hb_sampler_next(&s, l, SEMANTIC - 1) >= 0); /* the control: within its rows it samples */
	hb_sampler_release(&s);
}

HB_TEST_MAIN(T(greedy_masks_invalid_rows), T(refuses_more_rows_than_set_up_for), T(sampling_never_returns_an_invalid_id), T(a_seed_reproduces_a_sequence),
	     T(top_k_one_and_tiny_top_p_are_greedy), T(top_k_two_and_temperature), T(refuses_bad_parameters))
