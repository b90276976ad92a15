/*
 * bench/gdn-step.c: one decode step of the gated delta rule at the real
 * widths (16 key / 48 value heads of 128 x 128, HB_BENCH_LAYERS layers,
 * default 3: the bench model's GDN layers), one thread, the state going
 * from one bank to the other as a chunk's does (AFN-010):
 *   A  memcpy of the bank, then the step in place (hb_kern_gdn_heads_from
 *      with S0 == S): what hb_gdn_scan_from did before the copy rode on
 *      the step;
 *   B  the step reading the other bank (hb_kern_gdn_heads_from).
 * Before each step a 64 MiB buffer is read, as a decode step's weights
 * pass through the caches between one token's GDN layers and the next's,
 * so both banks start in memory.  Interleaved A B B A, HB_BENCH_REPS times
 * (default 5), each sample the best of 20 steps; prints best and median
 * ms a token and B / A, and
 * checks every sample's state and outputs are the same bits in A and B.
 * Prints; asserts nothing about time (exit 1 only if the bits differ).
 */
#include "hb_base.h"
#include "hb_parse.h"
#include "backend/simd/hb_simd.h"

#include <time.h>

enum { NK = 16, NV = 48, DK = 128, DV = 128 };

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct banks {
	size_t layers, ns;
	float *from, *to, *qkv, *o, beta[NV], decay[NV];
	uint64_t *evict; /* EVICT bytes read before each step */
};

#define EVICT (64u << 20)

static volatile uint64_t sink;

static void evict(const struct banks *b)
{
	uint64_t x = 0;

	for (size_t i = 0; i < EVICT / 8; i += 8)
		x ^= b->evict[i];
	sink = x;
}

/* one step of every layer from `from` into `to`, the old way or the new */
static void step(const struct banks *b, bool fused)
{
	const float *q = b->qkv, *k = q + NK * DK, *v = k + NK * DK;

	for (size_t l = 0; l < b->layers; l++) {
		float *to = b->to + l * b->ns;
		const float *from = b->from + l * b->ns;
		if (fused) {
			hb_kern_gdn_heads_from(to, from, q, k, v, b->beta, b->decay, NK, NV, DK, DV, 0, NV, 0.088f,
					       b->o + l * NV * DV);
		} else {
			memcpy(to, from, b->ns * sizeof(float));
			hb_kern_gdn_heads_from(to, to, q, k, v, b->beta, b->decay, NK, NV, DK, DV, 0, NV, 0.088f,
					       b->o + l * NV * DV);
		}
	}
}

/* the best of 20 steps, ms; the state and outputs left in keep */
static double sample(struct banks *b, bool fused, float *keep, float *okeep)
{
	double best = 1e30;

	for (int i = 0; i < 20; i++) {
		double t0, t;
		evict(b);
		t0 = now();
		step(b, fused);
		t = now() - t0;
		best = t < best ? t : best;
	}
	memcpy(keep, b->to, b->layers * b->ns * sizeof(float));
	memcpy(okeep, b->o, b->layers * NV * DV * sizeof(float));
	return best * 1e3;
}

int main(void)
{
	const char *e = getenv("HB_BENCH_LAYERS"), *r = getenv("HB_BENCH_REPS");
	uint64_t layers = 3, reps = 5;
	struct banks b;
	double ta[64], tb[64];
	size_t na = 0, nb = 0;
	bool same = true;
	float *sa, *sb, *oa, *ob;

	if ((e && (hb_parse_u64(e, &layers) || !layers || layers > 64)) ||
	    (r && (hb_parse_u64(r, &reps) || !reps || reps > 16))) {
		fprintf(stderr, "gdn-step: HB_BENCH_LAYERS 1..64, HB_BENCH_REPS 1..16\n");
		return 2;
	}
	b.layers = layers, b.ns = (size_t)NV * DK * DV;
	b.from = malloc(layers * b.ns * sizeof(float)), b.to = malloc(layers * b.ns * sizeof(float));
	b.qkv = malloc((2 * NK * DK + NV * DV) * sizeof(float)), b.o = malloc(layers * NV * DV * sizeof(float));
	sa = malloc(layers * b.ns * sizeof(float)), sb = malloc(layers * b.ns * sizeof(float));
	b.evict = malloc(EVICT);
	oa = malloc(layers * NV * DV * sizeof(float)), ob = malloc(layers * NV * DV * sizeof(float));
	if (!b.from || !b.to || !b.qkv || !b.o || !sa || !sb || !oa || !ob || !b.evict) {
		fprintf(stderr, "gdn-step: out of memory\n");
		return 2;
	}
	for (size_t i = 0; i < layers * b.ns; i++)
		b.from[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f, b.to[i] = 0;
	for (size_t i = 0; i < 2 * NK * DK + NV * DV; i++)
		b.qkv[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
	for (int h = 0; h < NV; h++)
		b.beta[h] = 0.5f, b.decay[h] = 0.95f;
	for (size_t i = 0; i < EVICT / 8; i++)
		b.evict[i] = i;
	for (uint64_t i = 0; i < reps; i++) {
		ta[na++] = sample(&b, false, sa, oa);
		tb[nb++] = sample(&b, true, sb, ob);
		same &= !memcmp(sa, sb, layers * b.ns * sizeof(float)) && !memcmp(oa, ob, layers * NV * DV * sizeof(float));
		tb[nb++] = sample(&b, true, sb, ob);
		ta[na++] = sample(&b, false, sa, oa);
		same &= !memcmp(sa, sb, layers * b.ns * sizeof(float)) && !memcmp(oa, ob, layers * NV * DV * sizeof(float));
	}
	qsort(ta, na, sizeof(double), cmp_double), qsort(tb, nb, sizeof(double), cmp_double);
	printf("gdn decode step, %" PRIu64 " layers x %d heads of %d x %d (%.1f MiB of state a layer), one thread, "
	       "%s path, the banks in memory:\n",
	       layers, NV, DK, DV, (double)b.ns * 4 / 1048576, hb_kernel_path_name(hb_kernel_path()));
	printf("  A memcpy + step in place   %.3f / %.3f ms a token (best / median of %zu)\n", ta[0], ta[na / 2], na);
	printf("  B step from the other bank %.3f / %.3f ms a token (best / median of %zu)\n", tb[0], tb[nb / 2], nb);
	printf("  B / A %.3f / %.3f; state and outputs the same bits: %s\n", tb[0] / ta[0], tb[nb / 2] / ta[na / 2],
	       same ? "yes" : "NO");
	free(b.from), free(b.to), free(b.qkv), free(b.o), free(sa), free(sb), free(oa), free(ob), free(b.evict);
	return same ? 0 : 1;
}
