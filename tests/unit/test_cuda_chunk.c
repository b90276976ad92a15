/*
 * GPU tests (make test-gpu): the CUDA backend's chunk forms (hb_device_ops'
 * gdn_scan, qsa_select_batch, qsa_attend_batch, moe_experts) against the
 * CPU reference behind the same seam, on random shapes:
 *   hb_gdn_scan          bit for bit (the step's operations in its order),
 *                        padded strides on both sides
 *   hb_qsa_select_batch  the same rows and counts per query, except where
 *                        the reference's keep-th and next scores lie within
 *                        1e-5 relative (a near tie: counted and printed)
 *   hb_qsa_attend_batch  |err| <= 1e-5, grouped KV heads; the shapes of the
 *                        grouped kernels by the tensor-core one (a bound
 *                        from its bf16 terms, below), the grouped float32
 *                        one and the per-head one
 *   moe_experts          against per-expert hb_swiglu and the graph's
 *                        weighted sum: |err| <= 1e-5 x the largest |y|
 *                        times sqrt(I) / 8 (float32 sums in another order);
 *                        declined (nothing written) for weights outside the
 *                        resident ranges
 *   fail-closed          an injected device error: NaN outputs, one row
 * Without nvcc at build time, or without a device, each case skips.
 */
#include "hb_base.h"
#include "harness.h"
#include "backend/hb_backend.h"
#include "hb_half.h"
#ifdef HB_WITH_CUDA
#define CUDA_DEV_SEED 0x13198a2e03707344u
#include "cuda_dev.h"
#endif

#include <math.h>

#ifdef HB_WITH_CUDA
/* the device with its chunk forms, or the case skipped */
static bool up_chunk(void)
{
	if (!up())
		return false;
	CHECK(dev->gdn_scan && dev->qsa_select_batch && dev->qsa_attend_batch && dev->moe_experts);
	return true;
}

static float *randv(size_t n, float scale)
{
	float *p = malloc(n * sizeof(float) + 4);
	for (size_t i = 0; i < n; i++)
		p[i] = urand() * scale;
	return p;
}

#endif

static void gdn_scan_is_bit_identical(void)
{
#ifdef HB_WITH_CUDA
	/* widths 64 and 128 take the pipelined scan (hb_cuda_gdn.cu): chunks of 1, 2 and 3 tokens test its prologue */
	static const size_t shapes[][5] = {{16, 48, 128, 128, 37}, {2, 6, 64, 96, 9}, {1, 1, 32, 40, 1}, {4, 8, 128, 24, 64},
					   {16, 48, 128, 128, 1}, {2, 6, 64, 96, 2}, {4, 8, 128, 24, 3}};

	if (!up_chunk())
		return;
	for (size_t si = 0; si < HB_ARRAY_LEN(shapes); si++) {
		size_t nk = shapes[si][0], nv = shapes[si][1], dk = shapes[si][2], dv = shapes[si][3], T = shapes[si][4];
		size_t ns = nv * dk * dv, ld = 2 * nk * dk + nv * dv + 5, ldo = nv * dv + 3 * (si % 2);
		float *S0 = randv(ns, 0.1f), *Sc = malloc(ns * 4), *Sg = malloc(ns * 4), *qkv = randv(T * ld, 0.2f);
		float *beta = malloc(T * nv * 4), *decay = malloc(T * nv * 4);
		float *oc = calloc(T * ldo, 4), *og = calloc(T * ldo, 4);
		for (size_t i = 0; i < T * nv; i++)
			beta[i] = 0.5f + 0.5f * urand(), decay[i] = 0.9f + 0.1f * urand();
		memcpy(Sc, S0, ns * 4), memcpy(Sg, S0, ns * 4);
		cpu();
		hb_gdn_scan(NULL, Sc, qkv, ld, beta, decay, T, nk, nv, dk, dv, 0.088f, oc, ldo);
		gpu();
		hb_gdn_scan(NULL, Sg, qkv, ld, beta, decay, T, nk, nv, dk, dv, 0.088f, og, ldo);
		cpu();
		printf("# gdn scan nk=%zu nv=%zu dk=%zu dv=%zu T=%zu: max |o| diff %.3g, |S| %.3g\n", nk, nv, dk, dv, T,
		       max_diff(oc, og, T * ldo), max_diff(Sc, Sg, ns));
		CHECK(!memcmp(Sc, Sg, ns * 4));
		CHECK(!memcmp(oc, og, T * ldo * 4)); /* the padding untouched on both */
		free(S0), free(Sc), free(Sg), free(qkv), free(beta), free(decay), free(oc), free(og);
	}
	hb_cuda_stop();
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}


static void select_batch_matches_cpu(void)
{
#ifdef HB_WITH_CUDA
	unsigned same = 0, near = 0, total = 0;

	if (!up_chunk())
		return;
	for (int it = 0; it < 6; it++) {
		size_t nq = pick(1, 16), heads = pick(1, 16), dim = it % 2 ? 128 : pick(2, 64), iq_ld = heads * dim + 7;
		uint64_t ratio = it % 3 ? 4 : pick(1, 8), keep = pick(1, 300), g0 = pick(0, 2000), most = 0;
		uint64_t groups[16], visible[16];
		size_t rows_ld = 0, nc[16], ng[16];
		for (size_t i = 0; i < nq; i++) {
			visible[i] = g0 * ratio + i * 3 + pick(0, 2);
			groups[i] = visible[i] / ratio;
			most = groups[i] > most ? groups[i] : most;
		}
		rows_ld = (size_t)(keep * ratio + ratio + visible[nq - 1]);
		float *iq = randv(nq * iq_ld, 1), *pooled = randv((most + 1) * dim, 1);
		float *scores = malloc(nq * (most + 1) * 4), *one = malloc((most + 1) * 4);
		int32_t *heap = malloc(nq * (keep + 1) * 4), *rc = calloc(nq * rows_ld, 4), *rg = calloc(nq * rows_ld, 4);
		struct hb_qsa_batch b = { nq, heads, dim, iq, iq_ld, pooled, groups, visible, keep, ratio, scores,
					  (size_t)most + 1, heap, rc, rows_ld, nc };
		cpu();
		hb_qsa_select_batch(NULL, &b);
		gpu();
		b.rows = rg, b.n = ng;
		hb_qsa_select_batch(NULL, &b);
		cpu();
		for (size_t i = 0; i < nq; i++) {
			total++;
			if (nc[i] == ng[i] && !memcmp(rc + i * rows_ld, rg + i * rows_ld, nc[i] * 4)) {
				same++;
				continue;
			}
			int32_t *h1 = malloc((keep + 1) * 4);
			hb_qsa_select(iq + i * iq_ld, heads, dim, pooled, groups[i], keep, ratio, visible[i], one, h1,
				      rc + i * rows_ld);
			free(h1);
			if (near_tie(one, groups[i], keep)) {
				near++;
				printf("# select batch near tie: query %zu groups %" PRIu64 "\n", i, groups[i]);
			} else {
				hb_check_fail(__FILE__, __LINE__, "select batch %d query %zu: %zu vs %zu rows, not a near tie",
					      it, i, nc[i], ng[i]);
			}
		}
		free(iq), free(pooled), free(scores), free(one), free(heap), free(rc), free(rg);
	}
	printf("# select batch: %u/%u queries identical, %u near ties\n", same, total, near);
	hb_cuda_stop();
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

static void attend_batch_matches_cpu(void)
{
#ifdef HB_WITH_CUDA
	double worst = 0;

	if (!up_chunk())
		return;
	for (int it = 0; it < 6; it++) {
		size_t nq = pick(1, 16), nkv = pick(1, 2), per = pick(1, 4), heads = nkv * per;
		size_t dim = it % 2 ? 256 : pick(1, 300), nrows = pick(1, 2500), stride = nkv * dim + pick(0, 3);
		size_t rows_ld = nrows + 2, q_ld = heads * dim * 2, out_ld = heads * dim + 1;
		float *K = randv(nrows * stride, 1), *V = randv(nrows * stride, 1), *q = randv(nq * q_ld, 2);
		float *probs = malloc(nrows * 4), *oc = calloc(nq * out_ld, 4), *og = calloc(nq * out_ld, 4);
		int32_t *rows = malloc(nq * rows_ld * 4);
		size_t n[16];
		for (size_t i = 0; i < nq; i++) {
			n[i] = pick(1, nrows);
			for (size_t j = 0; j < n[i]; j++)
				rows[i * rows_ld + j] = (int32_t)(j * nrows / n[i]);
		}
		struct hb_qsa_attn a = { nq, heads, per, dim, q, q_ld, dim, K, V, stride, 0.0625f, rows, rows_ld, n,
					 probs, nrows, oc, out_ld, false };
		cpu();
		hb_qsa_attend_batch(NULL, &a);
		gpu();
		a.out = og;
		hb_qsa_attend_batch(NULL, &a);
		worst = hb_test_max_nan(worst, max_diff(oc, og, nq * out_ld));
		/* the rows past row 0 change; a first block reads row 0 alone,
		 * then the full batch runs on the kept copy (kv_kept): the
		 * changed rows must cross the bus then, not come from the
		 * device's stale copy of the first call */
		for (size_t j = stride; j < nrows * stride; j++)
			K[j] *= 0.5f, V[j] *= -1.0f;
		cpu();
		hb_qsa_attend_batch(NULL, &a); /* a.out is og: the reference of the changed rows */
		memcpy(oc, og, nq * out_ld * 4);
		{
			int32_t zero[16] = {0};
			size_t one[16];
			struct hb_qsa_attn f = a;
			for (size_t i = 0; i < nq; i++)
				one[i] = 1;
			f.rows = zero, f.rows_ld = 1, f.n = one;
			gpu();
			hb_qsa_attend_batch(NULL, &f);
		}
		memset(og, 0, nq * out_ld * 4);
		a.kv_kept = true;
		hb_qsa_attend_batch(NULL, &a);
		cpu();
		worst = hb_test_max_nan(worst, max_diff(oc, og, nq * out_ld));
		free(K), free(V), free(q), free(probs), free(oc), free(og), free(rows);
	}
	printf("# attend batch: worst |err| %.3g\n", worst);
	CHECK(worst <= 1e-5);
	hb_cuda_stop();
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

#ifdef HB_WITH_CUDA
/* n experts of [I][H] gate/up and [H][I] down in one resident block */
struct experts {
	uint16_t *w;
	size_t n, H, I;
	uint32_t ids[64];
};

static void view(const void *ctx, uint32_t e, struct hb_wmat *g, struct hb_wmat *u, struct hb_wmat *d)
{
	const struct experts *x = ctx;
	size_t per = 3 * x->H * x->I, z = 0;

	while (x->ids[z] != e)
		z++;
	*g = (struct hb_wmat){ x->w + z * per, HB_W_BF16, x->I, x->H, x->H * 2 };
	*u = (struct hb_wmat){ x->w + z * per + x->H * x->I, HB_W_BF16, x->I, x->H, x->H * 2 };
	*d = (struct hb_wmat){ x->w + z * per + 2 * x->H * x->I, HB_W_BF16, x->H, x->I, x->I * 2 };
}

/* the graph's composition on the CPU: each expert's tokens, then the sum */
static void moe_cpu(const struct hb_moe_batch *b, const struct experts *x, float *y)
{
	size_t H = x->H, I = x->I, P = b->T * b->k;
	float *out = malloc(P * H * 4), *g = malloc(I * 4), *u = malloc(I * 4), *sc = malloc((H + I) * 4);

	for (size_t p = 0; p < P; p++) {
		struct hb_wmat wg, wu, wd;
		view(x, (uint32_t)b->route_ids[p], &wg, &wu, &wd);
		hb_swiglu(NULL, &wg, &wu, &wd, b->x + (p / b->k) * H, 1, g, u, g, out + p * H, sc);
	}
	for (size_t t = 0; t < b->T; t++)
		for (size_t j = 0; j < H; j++) {
			float acc = 0;
			for (size_t r = 0; r < b->k; r++)
				acc += out[(t * b->k + r) * H + j] * b->route_w[t * b->k + r];
			y[t * H + j] = acc;
		}
	free(out), free(g), free(u), free(sc);
}
#endif

static void moe_experts_match_cpu(void)
{
#ifdef HB_WITH_CUDA
	if (!up_chunk())
		return;
	for (int it = 0; it < 4; it++) {
		struct experts x = { NULL, pick(1, 40), 64 * pick(1, 6), 64 * pick(1, 5), {0} };
		size_t T = pick(1, 70), k = pick(1, x.n < 8 ? x.n : 8), per = 3 * x.H * x.I;
		float *xin = randv(T * x.H, 1), *w = malloc(T * k * 4), *yc = malloc(T * x.H * 4);
		float *yg = malloc(T * x.H * 4);
		int32_t *ids = malloc(T * k * 4);
		x.w = malloc(x.n * per * 2);
		for (size_t i = 0; i < x.n * per; i++)
			x.w[i] = hb_f32_to_bf16(urand() * 0.2f);
		for (size_t z = 0; z < x.n; z++)
			x.ids[z] = (uint32_t)(z * 3 + 1);
		for (size_t t = 0; t < T; t++) {
			size_t first = pick(0, x.n - 1);
			for (size_t r = 0; r < k; r++)
				ids[t * k + r] = (int32_t)x.ids[(first + r * 7) % x.n], w[t * k + r] = 0.05f + fabsf(urand());
		}
		struct hb_moe_batch b = { T, k, x.n, x.ids, view, &x, ids, w, xin, yg };
		for (size_t i = 0; i < T * x.H; i++)
			yg[i] = 12345;
		CHECK(!dev->moe_experts(&b)); /* not resident: declined, nothing written */
		CHECK(yg[0] == 12345);
		hb_cuda_resident(x.w, x.n * per * 2);
		moe_cpu(&b, &x, yc);
		CHECK(dev->moe_experts(&b));
		double ymax = 0, e = max_diff(yc, yg, T * x.H);
		for (size_t i = 0; i < T * x.H; i++)
			ymax = hb_test_max_nan(ymax, fabs((double)yc[i]));
		double bound = 1e-5 * hb_test_max_nan(ymax, 1) * sqrt((double)x.I) / 8 + 1e-6;
		printf("# moe n=%zu H=%zu I=%zu T=%zu k=%zu: err %.3g (bound %.3g)\n", x.n, x.H, x.I, T, k, e, bound);
		CHECK(e <= bound);
		hb_cuda_stop(); /* forgets the resident range before its memory goes */
		CHECK(up_chunk());
		free(xin), free(w), free(yc), free(yg), free(ids), free(x.w);
	}
	hb_cuda_stop();
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

static void chunk_forms_fail_closed(void)
{
#ifdef HB_WITH_CUDA
	size_t nk = 1, nv = 2, dk = 8, dv = 8, T = 3, ld = 2 * nk * dk + nv * dv;
	float *S = randv(nv * dk * dv, 0.1f), *qkv = randv(T * ld, 0.2f), *bd = randv(2 * T * nv, 0.5f);
	float *o = malloc(T * nv * dv * 4), pooled[8 * 4], iq[4];
	uint64_t groups[2] = {8, 8}, visible[2] = {33, 34};
	int32_t rows[2 * 40], heap[2 * 4];
	size_t n[2];
	float scores[2 * 8];
	struct hb_qsa_batch sb = { 2, 1, 4, iq, 4, pooled, groups, visible, 2, 4, scores, 8, heap, rows, 40, n };
	struct hb_error err;

	if (!up_chunk())
		return;
	for (int i = 0; i < 32; i++)
		pooled[i] = urand();
	for (int i = 0; i < 4; i++)
		iq[i] = urand();
	hb_cuda_test_fail_at(1);
	hb_gdn_scan(NULL, S, qkv, ld, bd, bd + T * nv, T, nk, nv, dk, dv, 0.3f, o, nv * dv);
	for (size_t i = 0; i < T * nv * dv; i++)
		CHECK(isnan(o[i]));
	CHECK(isnan(S[0]));
	hb_qsa_select_batch(NULL, &sb);
	CHECK(n[0] == 1 && n[1] == 1 && rows[0] == 0 && rows[40] == 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_cuda_error(&err), HB_ERR_FAULT);
	hb_cuda_stop();
	free(S), free(qkv), free(bd), free(o);
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

/*
 * Shapes the grouped kernels take (hb_cuda_attn.cu: 2..16 query heads to
 * a K/V head, width a multiple of 4 up to 256, strides of whole float4s;
 * hb_cuda_attn_mma.cu, the tensor cores: 1..16 heads, width a multiple of
 * 16), the model's own among them (32 heads, 2 K/V heads of 256), row
 * counts under, at and past a tile; each against the CPU three times: by
 * the default path (the tensor-core kernel where it takes the shape), by
 * the grouped float32 kernel (HB_CUDA_ATTEND=group) and by the per-head
 * one (HB_CUDA_ATTEND=head).  The float32 kernels: |err| <= 1e-5.  The
 * tensor-core kernel's operands are two bf16 terms each (within 2^-16 of
 * float32): a score is within ds = 3 2^-16 scale dim max|q| max|k| (plus
 * float32's dim 2^-24 of the same), each softmax weight within a relative
 * 2 ds, and the weighted sum adds 3 2^-16 max|v|: |err| <= (2 ds + 3 2^-16)
 * max|v| + 1e-6.
 */
#ifdef HB_WITH_CUDA
static double max_abs(const float *x, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		m = hb_test_max_nan(m, fabs((double)x[i]));
	return m;
}
#endif

static void attend_group_matches_cpu(void)
{
#ifdef HB_WITH_CUDA
	static const size_t shape[][3] = { { 2, 16, 256 }, { 1, 2, 128 }, { 2, 5, 64 }, { 4, 16, 4 }, { 1, 3, 252 },
					   { 1, 7, 48 },   { 2, 1, 16 } };
	static const char *const path[3] = { NULL, "group", "head" };
	double worst[3] = { 0, 0, 0 }, worst_ratio = 0;

	if (!up_chunk())
		return;
	for (size_t it = 0; it < 2 * HB_ARRAY_LEN(shape); it++) {
		size_t nkv = shape[it / 2][0], per = shape[it / 2][1], dim = shape[it / 2][2], heads = nkv * per;
		size_t nq = pick(1, 12), nrows = it % 2 ? pick(1, 40) : pick(1, 2500), stride = nkv * dim + 4 * pick(0, 2);
		size_t rows_ld = nrows + 3, q_ld = heads * dim * 2, out_ld = heads * dim;
		float *K = randv(nrows * stride, 1), *V = randv(nrows * stride, 1), *q = randv(nq * q_ld, 2);
		float *probs = malloc(nrows * 4), *oc = calloc(nq * out_ld, 4), *og = calloc(nq * out_ld, 4);
		int32_t *rows = malloc(nq * rows_ld * 4);
		size_t n[12];
		double ds, bound;
		for (size_t i = 0; i < nq; i++) {
			n[i] = pick(1, nrows);
			for (size_t j = 0; j < n[i]; j++) /* not in order: the kernel gathers */
				rows[i * rows_ld + j] = (int32_t)((j * 7919) % nrows);
		}
		struct hb_qsa_attn a = { nq, heads, per, dim, q, q_ld, dim, K, V, stride, 0.0625f, rows, rows_ld, n,
					 probs, nrows, oc, out_ld, false };
		ds = (3 * ldexp(1, -16) + ldexp(1, -24)) * 0.0625 * (double)dim * max_abs(q, nq * q_ld) *
		     max_abs(K, nrows * stride);
		bound = (2 * ds + 3 * ldexp(1, -16)) * max_abs(V, nrows * stride) + 1e-6;
		cpu();
		hb_qsa_attend_batch(NULL, &a);
		for (int k = 0; k < 3; k++) {
			double d;
			if (path[k])
				setenv("HB_CUDA_ATTEND", path[k], 1);
			gpu();
			a.out = og;
			memset(og, 0, nq * out_ld * 4);
			hb_qsa_attend_batch(NULL, &a);
			cpu();
			unsetenv("HB_CUDA_ATTEND");
			d = max_diff(oc, og, nq * out_ld);
			worst[k] = hb_test_max_nan(worst[k], d);
			if (k == 0) {
				worst_ratio = hb_test_max_nan(worst_ratio, d / bound);
				if (!(d <= bound))
					hb_check_fail(__FILE__, __LINE__,
						      "attend %zu x %zu heads of %zu, %zu rows: |err| %.3g > bound %.3g", nkv,
						      per, dim, nrows, d, bound);
			}
		}
		a.out = oc;
		free(K), free(V), free(q), free(probs), free(oc), free(og), free(rows);
	}
	printf("# attend grouped: worst |err| %.3g on the tensor cores (worst err / bound %.3g), %.3g grouped float32, "
	       "%.3g per head\n",
	       worst[0], worst_ratio, worst[1], worst[2]);
	CHECK(worst[1] <= 1e-5 && worst[2] <= 1e-5);
	hb_cuda_stop();
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

HB_TEST_MAIN(T(gdn_scan_is_bit_identical), T(select_batch_matches_cpu), T(attend_batch_matches_cpu),
	     T(attend_group_matches_cpu),
	     T(moe_experts_match_cpu), T(chunk_forms_fail_closed))
