/*
 * GPU tests (make test-gpu): each operation of the CUDA backend against the
 * CPU reference behind the same seam (backend/hb_backend.h), on random
 * shapes.  Each case runs the seam function with the device uninstalled
 * (the CPU reference), then installed, on the same inputs:
 *   matrix products    every storage type, resident and per-call weights,
 *                      T from 1 (decode) to 100; |err| <= 1e-5 x the
 *                      largest |y| times sqrt(cols) / 8 (float32 sums in
 *                      another order; measured values printed)
 *   SwiGLU             bf16 experts, the same bound on the output
 *   delta rule         bit for bit (the same operations in the same order)
 *   QSA selection      the same rows, except where the reference's keep-th
 *                      and next score lie within 1e-5 relative (a near tie:
 *                      counted and printed); exact ties (duplicated keys,
 *                      all-zero scores) must follow the tie rule exactly
 *   gathered attention |err| <= 1e-5
 *   fail-closed        an injected device error: NaN outputs, the error kept
 * Without nvcc at build time, or without a device, each case skips.
 */
#include "hb_base.h"
#include "harness.h"
#include "backend/hb_backend.h"
#include "codec/hb_affine4.h"
#include "hb_half.h"
#ifdef HB_WITH_CUDA
#define CUDA_DEV_SEED 0x243f6a8885a308d3u
#include "cuda_dev.h"
#endif

#include <math.h>

#ifdef HB_WITH_CUDA
/* a random [rows][cols] matrix in storage type t; *bytes its size */
static void *make_w(enum hb_wtype t, uint64_t rows, uint64_t cols, struct hb_wmat *w)
{
	uint64_t rb = t == HB_W_F32 ? cols * 4 : t == HB_W_AFFINE4_G64 ? cols / 64 * 36 : cols * 2;
	uint8_t *d = malloc(rows * rb);
	float *row = malloc(cols * sizeof(float));

	for (uint64_t r = 0; r < rows; r++) {
		uint8_t *p = d + r * rb;
		for (uint64_t c = 0; c < cols; c++)
			row[c] = urand() * 0.5f;
		if (t == HB_W_F32)
			memcpy(p, row, cols * 4);
		for (uint64_t c = 0; t == HB_W_BF16 && c < cols; c++) {
			uint16_t h = hb_f32_to_bf16(row[c]);
			memcpy(p + 2 * c, &h, 2);
		}
		for (uint64_t c = 0; t == HB_W_F16 && c < cols; c++) {
			uint16_t h = hb_f32_to_f16(row[c]);
			memcpy(p + 2 * c, &h, 2);
		}
		if (t == HB_W_AFFINE4_G64)
			CHECK_EQ_INT(hb_affine4_encode(row, (size_t)cols, 64, p, (size_t)rb, "w", NULL), HB_OK);
	}
	free(row);
	*w = (struct hb_wmat){ d, t, rows, cols, rb };
	return d;
}

static double max_abs(const float *a, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++)
		m = hb_test_max_nan(m, fabs((double)a[i]));
	return m;
}

static double mm_bound(double ymax, uint64_t cols)
{
	return 1e-5 * hb_test_max_nan(ymax, 1) * sqrt((double)cols) / 8 + 1e-6;
}
#endif

static void matmul_every_type_matches_cpu(void)
{
#ifdef HB_WITH_CUDA
	static const char *const tn[] = {"f32", "f16", "bf16", "affine4"};
	double worst[4] = {0, 0, 0, 0};
	void *keep[24]; /* freed at the end: a resident range must not be reused */

	if (!up())
		return;
	for (int it = 0; it < 24; it++) {
		enum hb_wtype t = (enum hb_wtype)(it % 4);
		uint64_t rows = pick(1, 300), cols = 64 * pick(1, 16) + (t == HB_W_AFFINE4_G64 ? 0 : pick(0, 63));
		size_t T = it < 4 ? 1 : pick(2, 100);
		struct hb_wmat w;
		void *d = make_w(t, rows, cols, &w);
		float *x = malloc(T * cols * 4), *yc = malloc(T * rows * 4), *yg = malloc(T * rows * 4);
		for (size_t i = 0; i < T * cols; i++)
			x[i] = urand();
		if (it % 8 >= 4) /* half the cases through the resident cache, twice */
			hb_cuda_resident(d, (size_t)(rows * w.row_bytes));
		cpu();
		hb_matmul(NULL, &w, x, T, yc, NULL);
		gpu();
		for (int rep = 0; rep < 2; rep++) {
			hb_matmul(NULL, &w, x, T, yg, NULL);
			double e = max_diff(yc, yg, T * rows), b = mm_bound(max_abs(yc, T * rows), cols);
			worst[t] = hb_test_max_nan(worst[t], e / b);
			if (!(e <= b))
				hb_check_fail(__FILE__, __LINE__, "%s %" PRIu64 "x%" PRIu64 " T=%zu: err %.3g > %.3g",
					      tn[t], rows, cols, T, e, b);
		}
		cpu();
		keep[it] = d;
		free(x), free(yc), free(yg);
	}
	for (int it = 0; it < 24; it++)
		free(keep[it]);
	printf("# matmul: worst err / bound: f32 %.3f f16 %.3f bf16 %.3f affine4 %.3f\n", worst[0], worst[1],
	       worst[2], worst[3]);
	hb_cuda_stop();
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

static void swiglu_matches_cpu(void)
{
#ifdef HB_WITH_CUDA
	if (!up())
		return;
	for (int it = 0; it < 6; it++) {
		uint64_t H = 64 * pick(1, 8), I = 64 * pick(1, 10);
		size_t n = pick(1, 40);
		struct hb_wmat g, u, d;
		void *pg = make_w(HB_W_BF16, I, H, &g), *pu = make_w(HB_W_BF16, I, H, &u);
		void *pd = make_w(it % 2 ? HB_W_AFFINE4_G64 : HB_W_BF16, H, I, &d);
		float *x = malloc(n * H * 4), *b1 = malloc(n * I * 4), *b2 = malloc(n * I * 4), *b3 = malloc(n * I * 4);
		float *oc = malloc(n * H * 4), *og = malloc(n * H * 4), *scratch = malloc(I * 4 + 64);
		for (size_t i = 0; i < n * H; i++)
			x[i] = urand();
		cpu();
		hb_swiglu(NULL, &g, &u, &d, x, n, b1, b2, b3, oc, scratch);
		gpu();
		hb_swiglu(NULL, &g, &u, &d, x, n, b1, b2, b3, og, scratch);
		cpu();
		double e = max_diff(oc, og, n * H), bnd = mm_bound(max_abs(oc, n * H), I);
		printf("# swiglu H=%" PRIu64 " I=%" PRIu64 " n=%zu: err %.3g (bound %.3g)\n", H, I, n, e, bnd);
		CHECK(e <= bnd);
		free(pg), free(pu), free(pd), free(x), free(b1), free(b2), free(b3), free(oc), free(og), free(scratch);
	}
	hb_cuda_stop();
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

static void delta_rule_is_bit_identical(void)
{
#ifdef HB_WITH_CUDA
	static const size_t shapes[][4] = {{2, 6, 64, 96}, {16, 48, 128, 128}, {1, 1, 32, 40}, {4, 4, 128, 24}};

	if (!up())
		return;
	for (size_t si = 0; si < HB_ARRAY_LEN(shapes); si++) {
		size_t nk = shapes[si][0], nv = shapes[si][1], dk = shapes[si][2], dv = shapes[si][3];
		size_t ns = nv * dk * dv;
		float *Sc = calloc(ns, 4), *Sg = calloc(ns, 4), *q = malloc(nk * dk * 4), *k = malloc(nk * dk * 4);
		float *v = malloc(nv * dv * 4), *beta = malloc(nv * 4), *decay = malloc(nv * 4);
		float *oc = malloc(nv * dv * 4), *og = malloc(nv * dv * 4);
		unsigned differ = 0;
		for (int step = 0; step < 5; step++) {
			for (size_t i = 0; i < nk * dk; i++)
				q[i] = urand() * 0.2f, k[i] = urand() * 0.2f;
			for (size_t i = 0; i < nv * dv; i++)
				v[i] = urand();
			for (size_t i = 0; i < nv; i++)
				beta[i] = 0.5f + 0.5f * urand(), decay[i] = 0.9f + 0.1f * urand();
			cpu();
			hb_gdn_step(Sc, q, k, v, beta, decay, nk, nv, dk, dv, 0.088f, oc);
			gpu();
			hb_gdn_step(Sg, q, k, v, beta, decay, nk, nv, dk, dv, 0.088f, og);
			cpu();
			differ += memcmp(Sc, Sg, ns * 4) != 0 || memcmp(oc, og, nv * dv * 4) != 0;
		}
		printf("# gdn nk=%zu nv=%zu dk=%zu dv=%zu: %u of 5 steps differ (max |o| diff %.3g, |S| %.3g)\n", nk,
		       nv, dk, dv, differ, max_diff(oc, og, nv * dv), max_diff(Sc, Sg, ns));
		CHECK_EQ_INT(differ, 0);
		free(Sc), free(Sg), free(q), free(k), free(v), free(beta), free(decay), free(oc), free(og);
	}
	hb_cuda_stop();
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}


static void qsa_selection_matches_cpu(void)
{
#ifdef HB_WITH_CUDA
	unsigned same = 0, near = 0, total = 0;

	if (!up())
		return;
	for (int it = 0; it < 40; it++) {
		size_t heads = pick(1, 16), dim = it % 3 ? 128 : pick(2, 64);
		uint64_t ratio = it % 5 ? 4 : pick(1, 8), groups = pick(0, 3000), keep = pick(1, 600);
		uint64_t visible = groups * ratio + pick(0, ratio - 1);
		int mode = it % 4; /* 0, 1 random; 2 duplicated keys (exact ties); 3 all scores zero */
		float *iq = malloc(heads * dim * 4), *pooled = malloc((groups + 1) * dim * 4);
		float *scores = malloc((groups + 1) * 4);
		int32_t *heap = malloc((keep + 1) * 4), *rc = malloc((visible + 1) * 4), *rg = malloc((visible + 1) * 4);
		size_t nc, ng;
		for (size_t i = 0; i < heads * dim; i++)
			iq[i] = mode == 3 ? -fabsf(urand()) : urand();
		for (uint64_t g = 0; g < groups; g++)
			for (size_t i = 0; i < dim; i++)
				pooled[g * dim + i] = mode == 2 && g % 3 ? pooled[(g - g % 3) * dim + i]
					: mode == 3 ? fabsf(urand()) : urand();
		cpu();
		nc = hb_qsa_select(iq, heads, dim, pooled, groups, keep, ratio, visible, scores, heap, rc);
		gpu();
		ng = hb_qsa_select(iq, heads, dim, pooled, groups, keep, ratio, visible, scores, heap, rg);
		cpu();
		total++;
		if (nc == ng && !memcmp(rc, rg, nc * 4)) {
			same++;
		} else if (mode < 2 && near_tie(scores, groups, keep)) {
			near++;
			printf("# qsa near tie: groups %" PRIu64 " keep %" PRIu64 ": selections differ\n", groups, keep);
		} else {
			hb_check_fail(__FILE__, __LINE__, "qsa case %d (mode %d, groups %" PRIu64 ", keep %" PRIu64
				      ", ratio %" PRIu64 "): %zu vs %zu rows, not a near tie", it, mode, groups, keep,
				      ratio, nc, ng);
		}
		free(iq), free(pooled), free(scores), free(heap), free(rc), free(rg);
	}
	printf("# qsa select: %u/%u identical, %u near ties\n", same, total, near);
	hb_cuda_stop();
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

static void attention_matches_cpu(void)
{
#ifdef HB_WITH_CUDA
	double worst = 0;

	if (!up())
		return;
	for (int it = 0; it < 12; it++) {
		size_t dim = it % 2 ? 256 : pick(1, 512), nrows = pick(1, 3000), n = pick(1, nrows);
		size_t stride = dim * 2 + 3, offset = pick(0, dim + 3);
		float *K = malloc(nrows * stride * 4), *V = malloc(nrows * stride * 4), *q = malloc(dim * 4);
		float *probs = malloc(n * 4), *oc = malloc(dim * 4), *og = malloc(dim * 4);
		int32_t *rows = malloc(n * 4);
		for (size_t i = 0; i < nrows * stride; i++)
			K[i] = urand(), V[i] = urand();
		for (size_t i = 0; i < dim; i++)
			q[i] = urand() * 2;
		for (size_t i = 0; i < n; i++)
			rows[i] = (int32_t)(i * nrows / n);
		cpu();
		hb_qsa_attend(q, K, V, stride, offset, dim, 0.0625f, rows, n, probs, oc);
		gpu();
		hb_qsa_attend(q, K, V, stride, offset, dim, 0.0625f, rows, n, probs, og);
		cpu();
		worst = hb_test_max_nan(worst, max_diff(oc, og, dim));
		free(K), free(V), free(q), free(probs), free(oc), free(og), free(rows);
	}
	printf("# attend: worst |err| %.3g\n", worst);
	CHECK(worst <= 1e-5);
	hb_cuda_stop();
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

static void a_device_error_fails_closed(void)
{
#ifdef HB_WITH_CUDA
	struct hb_wmat w;
	struct hb_error err;
	void *d;
	float x[64], y[8];

	if (!up())
		return;
	d = make_w(HB_W_BF16, 8, 64, &w);
	for (int i = 0; i < 64; i++)
		x[i] = urand();
	hb_matmul(NULL, &w, x, 1, y, NULL);
	CHECK(isfinite(y[0]));
	CHECK_EQ_INT(hb_cuda_error(NULL), HB_OK);
	hb_cuda_test_fail_at(1);
	hb_matmul(NULL, &w, x, 1, y, NULL);
	for (int i = 0; i < 8; i++)
		CHECK(isnan(y[i]));
	y[0] = 0;
	hb_matmul(NULL, &w, x, 1, y, NULL); /* sticky: still NaN */
	CHECK(isnan(y[0]));
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_cuda_error(&err), HB_ERR_FAULT);
	CHECK_STR(err.field, "cuda.fault");
	hb_cuda_stop();
	CHECK(hb_backend_device() == NULL);
	CHECK_EQ_INT(strncmp(hb_backend_name(), "cpu/", 4), 0);
	free(d);
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

HB_TEST_MAIN(T(matmul_every_type_matches_cpu), T(swiglu_matches_cpu), T(delta_rule_is_bit_identical),
	     T(qsa_selection_matches_cpu), T(attention_matches_cpu), T(a_device_error_fails_closed))
