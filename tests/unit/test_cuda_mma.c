/*
 * GPU tests (make test-gpu): the tensor-core matrix products
 * (cuda/hb_cuda_mma.h) on random shapes, ragged ones included (rows, cols
 * and T off the tiles; T = 1, 3, 17, 1000; cols 5 .. 10240; grouped
 * products with empty groups; unaligned x and weights, which take the
 * element-wise loads), each against
 *   a double-precision host reference: max |err| / max over outputs of
 *     sum_c |w x| (the scale of the sums) <= 2^-(8 terms) (the bf16 terms'
 *     representation of x; doubled for affine4, whose tensor-core operand
 *     is scale (q - 8), not w) + 2^-22 sqrt(cols) (float32 accumulation;
 *     the float32 kernel's own measured error is printed beside it);
 *   the float32 kernel (hbk_matmul, hbk_matmul_grouped): the same bound
 *     doubled;
 *   the outputs' neighbours: a guard zone past y keeps its sentinel.
 * The skinny kernel (few rows, float32) against the same reference; the
 * paired product (two weights, one launch) against two single ones, bit
 * for bit; the products from a split of x (hbk_mma_split) against the
 * unsplit ones, bit for bit.
 * Both term counts (2 and 3) are measured and checked; the worst ratios
 * are printed.  Without nvcc at build time, or without a device, each case
 * skips.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_half.h"
#ifdef HB_WITH_CUDA
#include "hb_cuda_kern.h"
#include "hb_cuda_mma.h"
#include <cuda_runtime_api.h>
#endif

#include <math.h>

#ifdef HB_WITH_CUDA
static uint64_t rng = 0x13198a2e03707344u;

static float urand(void) /* [-1, 1) */
{
	rng = rng * 6364136223846793005u + 1442695040888963407u;
	return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static size_t pick(size_t lo, size_t hi)
{
	rng = rng * 6364136223846793005u + 1442695040888963407u;
	return lo + (size_t)((rng >> 33) % (hi - lo + 1));
}

static bool device_up(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
		hb_test_skip("no usable CUDA device");
		return false;
	}
	return true;
}

/* a [rows][cols] matrix in its storage type (host bytes h, row_bytes rb)
 * and its exact values in double (wd) */
struct mat {
	int type;
	uint64_t rows, cols, rb;
	uint8_t *h;
	double *wd;
};

/* bf16: |w| < 0.5, one in 16 eight times larger; affine4: MLX-like groups
 * (bias near -7.5 scale), or with `skew` biases of either sign */
static void make_mat(struct mat *m, int type, uint64_t rows, uint64_t cols, bool skew)
{
	uint64_t rb = type == HBK_BF16 ? cols * 2 : cols / 64 * 36;

	*m = (struct mat){ type, rows, cols, rb, malloc(rows * rb + 16), malloc(rows * cols * sizeof(double) + 8) };
	for (uint64_t r = 0; r < rows; r++) {
		uint8_t *p = m->h + r * rb;
		double *w = m->wd + r * cols;
		for (uint64_t c = 0; type == HBK_BF16 && c < cols; c++) {
			uint16_t b = hb_f32_to_bf16(urand() * (pick(0, 15) ? 0.5f : 4.0f));
			memcpy(p + 2 * c, &b, 2);
			w[c] = hb_bf16_to_f32(b);
		}
		for (uint64_t g = 0; type == HBK_AFFINE4_G64 && g < cols / 64; g++) {
			uint8_t *q = p + g * 36;
			float s0 = 0.002f + 0.05f * fabsf(urand());
			uint16_t s = hb_f32_to_bf16(s0), b;
			float sf = hb_bf16_to_f32(s);
			b = hb_f32_to_bf16(skew ? 8 * sf * urand() : -7.5f * sf + sf * urand());
			for (int i = 0; i < 32; i++)
				q[i] = (uint8_t)pick(0, 255);
			memcpy(q + 32, &s, 2), memcpy(q + 34, &b, 2);
			for (int k = 0; k < 64; k++)
				w[g * 64 + k] = (double)sf * ((q[k / 2] >> (k % 2 * 4)) & 15) + hb_bf16_to_f32(b);
		}
	}
}

static void free_mat(struct mat *m)
{
	free(m->h), free(m->wd);
}

/* device copy of n bytes, placed `skew` bytes into its allocation (to
 * test unaligned operands); *base what to free */
static void *put(const void *h, size_t n, size_t skew, void **base)
{
	uint8_t *d = NULL;

	CHECK_EQ_INT(cudaMalloc((void **)&d, n + skew + 16), cudaSuccess);
	CHECK_EQ_INT(cudaMemcpy(d + skew, h, n, cudaMemcpyHostToDevice), cudaSuccess);
	*base = d;
	return d + skew;
}

static const float SENTINEL = 12345.0f;
enum { GUARD = 1024 };

/* y: n floats and a guard zone, all sentinel */
static float *y_alloc(size_t n)
{
	float *d = NULL, *h = malloc((n + GUARD) * sizeof(float));

	for (size_t i = 0; i < n + GUARD; i++)
		h[i] = SENTINEL;
	CHECK_EQ_INT(cudaMalloc((void **)&d, (n + GUARD) * sizeof(float)), cudaSuccess);
	CHECK_EQ_INT(cudaMemcpy(d, h, (n + GUARD) * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
	free(h);
	return d;
}

/* y back to the host; the guard zone must be untouched */
static float *y_get(const float *d, size_t n)
{
	float *h = malloc((n + GUARD) * sizeof(float));
	bool guard = true;

	CHECK_EQ_INT(cudaDeviceSynchronize(), cudaSuccess);
	CHECK_EQ_INT(cudaMemcpy(h, d, (n + GUARD) * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
	for (size_t i = n; i < n + GUARD; i++)
		guard &= h[i] == SENTINEL;
	CHECK(guard);
	return h;
}

/* the bound on max |err| / max sum |w x| */
static double bound(int type, int terms, uint64_t cols)
{
	return (type == HBK_AFFINE4_G64 ? 2 : 1) * ldexp(1, -8 * terms) + ldexp(1, -22) * sqrt((double)cols);
}

/* worst err / bound per [type == affine4][terms - 2], and the float32
 * kernel's worst relative error per type */
static double worst[2][2], worst_f32[2];

/* for the sampled tokens of x ([n][cols]): the largest |y - ref| for each
 * of the results ys (nres of them), and the largest sum |w x| */
struct cmp {
	double err[3], mag;
};

static void compare(const struct mat *m, const float *x, size_t n, const float *const *ys, int nres, struct cmp *o)
{
	size_t step = n <= 64 ? 1 : n / 40;

	for (size_t t = 0; t < n; t += (t < 8 || t + 8 >= n) ? 1 : step)
		for (uint64_t r = 0; r < m->rows; r++) {
			const double *w = m->wd + r * m->cols;
			const float *xt = x + t * m->cols;
			double s = 0, a = 0;
			for (uint64_t c = 0; c < m->cols; c++)
				s += w[c] * xt[c], a += fabs(w[c] * xt[c]);
			o->mag = hb_test_max_nan(o->mag, a);
			for (int i = 0; i < nres; i++)
				o->err[i] = hb_test_max_nan(o->err[i], fabs((double)ys[i][t * m->rows + r] - s));
		}
}

/* judge one comparison: results 0 and 1 the mma kernel with 2 and 3
 * terms, result 2 the float32 kernel; d23 the largest |mma - f32| per
 * term count */
static void judge(const struct mat *m, const struct cmp *c, const double d23[2], const char *what)
{
	int a = m->type == HBK_AFFINE4_G64;
	double mag = hb_test_max_nan(c->mag, 1e-30);

	worst_f32[a] = hb_test_max_nan(worst_f32[a], c->err[2] / mag);
	for (int k = 0; k < 2; k++) {
		double b = bound(m->type, k + 2, m->cols), e = c->err[k] / mag, d = d23[k] / mag;
		worst[a][k] = hb_test_max_nan(worst[a][k], e / b);
		if (!(e <= b) || !(d <= 2 * b))
			hb_check_fail(__FILE__, __LINE__,
				      "%s %s %" PRIu64 "x%" PRIu64 " terms %d: err %.3g, vs f32 %.3g (bound %.3g)", what,
				      a ? "affine4" : "bf16", m->rows, m->cols, k + 2, e, d, b);
	}
}

static double max_diff(const float *a, const float *b, size_t n)
{
	return hb_test_max_abs_err(a, b, n);
}

static void random_x(float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = urand() * (pick(0, 31) ? 1.0f : 20.0f);
}

/* one ungrouped case; skew_x / skew_w misalign x and W (element-wise loads) */
static void one_matmul(int type, uint64_t rows, uint64_t cols, size_t T, bool skew_x, bool skew_w)
{
	struct mat m;
	struct cmp c = {{0, 0, 0}, 0};
	float *x = malloc(T * cols * sizeof(float) + 4), *dy, *ys[3];
	void *bx, *bw;
	double d23[2];

	make_mat(&m, type, rows, cols, pick(0, 3) == 0);
	random_x(x, T * cols);
	const float *dx = put(x, T * cols * sizeof(float), skew_x ? 4 : 0, &bx);
	const void *dw = put(m.h, rows * m.rb, skew_w ? (type == HBK_BF16 ? 2 : 1) : 0, &bw);
	for (int k = 0; k < 3; k++) {
		dy = y_alloc(T * rows);
		if (k < 2) {
			hbk_mma_terms(k + 2);
			CHECK_EQ_INT(hbk_mma_matmul(type, dw, m.rb, rows, cols, dx, T, dy), cudaSuccess);
		} else {
			CHECK_EQ_INT(hbk_matmul(type, dw, m.rb, rows, cols, dx, T, dy), cudaSuccess);
		}
		ys[k] = y_get(dy, T * rows);
		cudaFree(dy);
	}
	compare(&m, x, T, (const float *const *)ys, 3, &c);
	for (int k = 0; k < 2; k++)
		d23[k] = max_diff(ys[k], ys[2], T * rows);
	judge(&m, &c, d23, T == 1 ? "T=1" : "matmul");
	for (int k = 0; k < 3; k++)
		free(ys[k]);
	cudaFree(bx), cudaFree(bw), free(x), free_mat(&m);
}
#endif

static void takes_the_two_types(void)
{
#ifdef HB_WITH_CUDA
	CHECK(hbk_mma_takes(HBK_BF16, 1));
	CHECK(hbk_mma_takes(HBK_BF16, 777));
	CHECK(hbk_mma_takes(HBK_AFFINE4_G64, 640));
	CHECK(!hbk_mma_takes(HBK_AFFINE4_G64, 96));
	CHECK(!hbk_mma_takes(HBK_BF16, 0));
	CHECK(!hbk_mma_takes(HBK_F32, 64));
	CHECK(!hbk_mma_takes(HBK_F16, 64));
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

static void matmul_matches_double(void)
{
#ifdef HB_WITH_CUDA
	static const size_t Ts[] = {1, 3, 17, 1000};
	/* type, rows, cols, T */
	static const uint64_t fixed[][4] = {
		{HBK_BF16, 1, 64, 1},          {HBK_BF16, 5, 7, 3},           {HBK_BF16, 130, 100, 17},
		{HBK_BF16, 129, 777, 1000},    {HBK_BF16, 256, 2560, 3},      {HBK_BF16, 300, 10240, 17},
		{HBK_BF16, 77, 640, 1000},     {HBK_BF16, 128, 64, 128},      {HBK_AFFINE4_G64, 1, 64, 1},
		{HBK_AFFINE4_G64, 130, 640, 17}, {HBK_AFFINE4_G64, 129, 2560, 1000},
		{HBK_AFFINE4_G64, 300, 10240, 3}, {HBK_AFFINE4_G64, 64, 6144, 97},
		{HBK_AFFINE4_G64, 257, 128, 1000},
	};
	int was;

	if (!device_up())
		return;
	was = hbk_mma_terms(0);
	for (size_t i = 0; i < HB_ARRAY_LEN(fixed); i++)
		one_matmul((int)fixed[i][0], fixed[i][1], fixed[i][2], (size_t)fixed[i][3], i % 3 == 1, i % 4 == 2);
	for (int it = 0; it < 12; it++) {
		int type = it % 2 ? HBK_AFFINE4_G64 : HBK_BF16;
		uint64_t rows = pick(1, 300), cols = type == HBK_BF16 ? pick(64, 4096) : 64 * pick(1, 160);
		size_t T = it < 8 ? Ts[it / 2] : pick(1, 300);
		one_matmul(type, rows, cols, T, it % 3 == 0, it % 5 == 0);
	}
	hbk_mma_terms(was);
	printf("# matmul: worst err / bound: bf16 %.3f (2 terms) %.3f (3 terms), affine4 %.3f (2) %.3f (3); "
	       "f32 kernel's err / sum|wx|: bf16 %.3g affine4 %.3g\n",
	       worst[0][0], worst[0][1], worst[1][0], worst[1][1], worst_f32[0], worst_f32[1]);
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

#ifdef HB_WITH_CUDA
/* one grouped case: group z has n[z] tokens and its own weights;
 * skew_w misaligns every W[z] (the kernel's per-group check) */
static void one_grouped(int type, uint64_t rows, uint64_t cols, const size_t *n, size_t groups, bool skew_w)
{
	struct mat *m = malloc(groups * sizeof(struct mat));
	int32_t *off = malloc((groups + 1) * sizeof(int32_t));
	const void **dw = malloc(groups * sizeof(void *));
	void **bw = malloc(groups * sizeof(void *)), *bo, *bp, *bx;
	size_t P = 0, most = 0;
	float *x, *ys[3], *dy;

	off[0] = 0;
	for (size_t z = 0; z < groups; z++) {
		make_mat(&m[z], type, rows, cols, z % 3 == 2);
		dw[z] = put(m[z].h, rows * m[z].rb, skew_w ? (type == HBK_BF16 ? 2 : 1) : 0, &bw[z]);
		P += n[z], most = n[z] > most ? n[z] : most;
		off[z + 1] = (int32_t)P;
	}
	x = malloc(P * cols * sizeof(float) + 4);
	random_x(x, P * cols);
	const float *dx = put(x, P * cols * sizeof(float), 0, &bx);
	const int32_t *doff = put(off, (groups + 1) * sizeof(int32_t), 0, &bo);
	const void *const *dptr = put(dw, groups * sizeof(void *), 0, &bp);
	for (int k = 0; k < 3; k++) {
		dy = y_alloc(P * rows);
		if (k < 2) {
			hbk_mma_terms(k + 2);
			CHECK_EQ_INT(hbk_mma_matmul_grouped(type, dptr, m[0].rb, rows, cols, doff, groups, most, dx, dy),
				     cudaSuccess);
		} else {
			CHECK_EQ_INT(hbk_matmul_grouped(type, dptr, m[0].rb, rows, cols, doff, groups, most, dx, dy),
				     cudaSuccess);
		}
		ys[k] = y_get(dy, P * rows);
		cudaFree(dy);
	}
	for (size_t z = 0; z < groups; z++) {
		struct cmp c = {{0, 0, 0}, 0};
		const float *yz[3];
		double d23[2];
		if (!n[z])
			continue;
		for (int k = 0; k < 3; k++)
			yz[k] = ys[k] + (size_t)off[z] * rows;
		compare(&m[z], x + (size_t)off[z] * cols, n[z], yz, 3, &c);
		for (int k = 0; k < 2; k++)
			d23[k] = max_diff(yz[k], yz[2], n[z] * rows);
		judge(&m[z], &c, d23, "grouped");
	}
	for (int k = 0; k < 3; k++)
		free(ys[k]);
	for (size_t z = 0; z < groups; z++)
		free_mat(&m[z]), cudaFree(bw[z]);
	cudaFree(bx), cudaFree(bo), cudaFree(bp);
	free(m), free(off), free(dw), free(bw), free(x);
}
#endif

static void grouped_matches_double(void)
{
#ifdef HB_WITH_CUDA
	static const size_t a[] = {0, 1, 80, 0, 17, 130, 3, 0}, b[] = {5, 0, 0, 96, 1, 200}, c[] = {3, 64, 0, 65},
			    d[] = {0, 10, 129}, e[] = {0, 0, 0};
	size_t r[20];
	int was;

	if (!device_up())
		return;
	was = hbk_mma_terms(0);
	one_grouped(HBK_BF16, 200, 640, a, HB_ARRAY_LEN(a), false);
	one_grouped(HBK_AFFINE4_G64, 640, 2560, b, HB_ARRAY_LEN(b), false);
	one_grouped(HBK_BF16, 70, 136, c, HB_ARRAY_LEN(c), true);
	one_grouped(HBK_AFFINE4_G64, 33, 192, d, HB_ARRAY_LEN(d), true);
	one_grouped(HBK_BF16, 40, 100, c, HB_ARRAY_LEN(c), false); /* cols % 8: element-wise weights */
	one_grouped(HBK_AFFINE4_G64, 16, 64, e, HB_ARRAY_LEN(e), false); /* all empty: nothing written */
	for (int it = 0; it < 4; it++) {
		int type = it % 2 ? HBK_AFFINE4_G64 : HBK_BF16;
		size_t groups = pick(1, 20);
		for (size_t z = 0; z < groups; z++)
			r[z] = pick(0, 2) ? pick(1, 150) : 0;
		one_grouped(type, pick(1, 400), type == HBK_BF16 ? pick(8, 3000) : 64 * pick(1, 40), r, groups, false);
	}
	hbk_mma_terms(was);
	printf("# grouped (and all before): worst err / bound: bf16 %.3f (2 terms) %.3f (3 terms), "
	       "affine4 %.3f (2) %.3f (3); f32 kernel's err / sum|wx|: bf16 %.3g affine4 %.3g\n",
	       worst[0][0], worst[0][1], worst[1][0], worst[1][1], worst_f32[0], worst_f32[1]);
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

/*
 * The skinny kernel (hb_cuda_skinny.cu), float32 throughout: against the
 * double reference, max |err| / max sum |w x| <= 2^-23 (cols / 32 + 6)
 * (each lane's cols / 32 sums in order, then five levels of the lanes'
 * tree, each rounding at most half an ulp of a partial sum bounded by
 * sum |w x|); the outputs' neighbours keep their sentinel.
 */
static void skinny_matches_double(void)
{
#ifdef HB_WITH_CUDA
	/* type, rows, cols, T: the model's (4 x 10240, 1 x 2560, 48 x 2560) and ragged ones */
	static const uint64_t shape[][4] = {
		{HBK_BF16, 4, 10240, 1000}, {HBK_BF16, 1, 2560, 17},  {HBK_BF16, 48, 2560, 3},  {HBK_BF16, 63, 77, 1},
		{HBK_BF16, 9, 33, 129},     {HBK_AFFINE4_G64, 4, 10240, 31}, {HBK_AFFINE4_G64, 13, 640, 1000},
		{HBK_AFFINE4_G64, 1, 64, 1},
	};
	double worst_ratio = 0;

	if (!device_up())
		return;
	for (size_t i = 0; i < HB_ARRAY_LEN(shape); i++) {
		int type = (int)shape[i][0];
		uint64_t rows = shape[i][1], cols = shape[i][2];
		size_t T = (size_t)shape[i][3];
		struct mat m;
		struct cmp c = {{0, 0, 0}, 0};
		float *x = malloc(T * cols * sizeof(float)), *dy = y_alloc(T * rows), *y;
		void *bx, *bw;
		make_mat(&m, type, rows, cols, i % 2);
		random_x(x, T * cols);
		const float *dx = put(x, T * cols * sizeof(float), 0, &bx);
		const void *dw = put(m.h, rows * m.rb, i % 3 == 2 && type == HBK_BF16 ? 2 : 0, &bw);
		CHECK_EQ_INT(hbk_matmul_skinny(type, dw, m.rb, rows, cols, dx, T, dy), cudaSuccess);
		y = y_get(dy, T * rows);
		compare(&m, x, T, (const float *const *)&y, 1, &c);
		double r = c.err[0] / hb_test_max_nan(c.mag, 1e-30) / (ldexp(1, -23) * ((double)cols / 32 + 6));
		worst_ratio = hb_test_max_nan(worst_ratio, r);
		if (!(r <= 1))
			hb_check_fail(__FILE__, __LINE__, "skinny %" PRIu64 "x%" PRIu64 " T=%zu: err / bound %.3g", rows,
				      cols, T, r);
		free(y), free(x), free_mat(&m), cudaFree(dy), cudaFree(bx), cudaFree(bw);
	}
	printf("# skinny: worst err / bound %.3f\n", worst_ratio);
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

/*
 * hbk_mma_matmul2 (two weights on one x, one launch) against two
 * hbk_mma_matmul calls: bit for bit (each block's arithmetic is the single
 * product's), both outputs' guard zones untouched; the model's pairs (the
 * injection's 4 rows beside the down product's 320, the gates' 48 and 48,
 * the router's 512 beside the shared gate's 1) and ragged ones, weights
 * aligned and not.
 */
static void paired_products_match_single_ones(void)
{
#ifdef HB_WITH_CUDA
	/* type, rows1, rows2, cols, T */
	static const uint64_t shape[][5] = {
		{HBK_BF16, 320, 4, 10240, 100},   {HBK_BF16, 48, 48, 2560, 1000}, {HBK_BF16, 512, 1, 2560, 33},
		{HBK_AFFINE4_G64, 130, 7, 640, 77}, {HBK_BF16, 5, 129, 33, 64},    {HBK_AFFINE4_G64, 1, 1, 64, 32},
	};
	size_t same = 0;

	if (!device_up())
		return;
	for (size_t i = 0; i < HB_ARRAY_LEN(shape); i++) {
		int type = (int)shape[i][0];
		uint64_t r1 = shape[i][1], r2 = shape[i][2], cols = shape[i][3];
		size_t T = (size_t)shape[i][4];
		struct mat m1, m2;
		float *x = malloc(T * cols * sizeof(float)), *y[4], *dy[4];
		void *bx, *b1, *b2;
		make_mat(&m1, type, r1, cols, false), make_mat(&m2, type, r2, cols, true);
		random_x(x, T * cols);
		const float *dx = put(x, T * cols * sizeof(float), 0, &bx);
		const void *w1 = put(m1.h, r1 * m1.rb, 0, &b1);
		const void *w2 = put(m2.h, r2 * m2.rb, i % 2 && type == HBK_BF16 ? 2 : 0, &b2);
		for (int k = 0; k < 4; k++)
			dy[k] = y_alloc(T * (k % 2 ? r2 : r1));
		CHECK_EQ_INT(hbk_mma_matmul(type, w1, m1.rb, r1, cols, dx, T, dy[0]), cudaSuccess);
		CHECK_EQ_INT(hbk_mma_matmul(type, w2, m2.rb, r2, cols, dx, T, dy[1]), cudaSuccess);
		CHECK_EQ_INT(hbk_mma_matmul2(type, w1, m1.rb, r1, w2, m2.rb, r2, cols, dx, T, dy[2], dy[3]), cudaSuccess);
		for (int k = 0; k < 4; k++)
			y[k] = y_get(dy[k], T * (k % 2 ? r2 : r1));
		CHECK(!memcmp(y[0], y[2], T * r1 * sizeof(float)));
		CHECK(!memcmp(y[1], y[3], T * r2 * sizeof(float)));
		same += !memcmp(y[0], y[2], T * r1 * sizeof(float)) && !memcmp(y[1], y[3], T * r2 * sizeof(float));
		for (int k = 0; k < 4; k++)
			free(y[k]), cudaFree(dy[k]);
		free(x), free_mat(&m1), free_mat(&m2), cudaFree(bx), cudaFree(b1), cudaFree(b2);
	}
	printf("# paired products: %zu of %zu shapes bit-identical to single ones\n", same, HB_ARRAY_LEN(shape));
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

#ifdef HB_WITH_CUDA
/* a grouped pair's operands: group z has n[z] tokens and two weights,
 * m[z] and m[G + z] (skew: every fourth misaligned); x, the offsets and
 * the pointer arrays on the device */
struct gpair {
	size_t G, P, most;
	struct mat *m;
	const void **dw;
	void **bw, *bx, *bo, *bp, *bp2;
	int32_t *off;
	float *x;
	const float *dx;
	const int32_t *doff;
	const void *const *d1;
	const void *const *d2;
};

static void gpair_make(struct gpair *g, int type, uint64_t rows, uint64_t cols, const size_t *n, size_t G, bool skew)
{
	g->G = G, g->P = 0, g->most = 0;
	g->m = malloc(2 * G * sizeof(struct mat));
	g->dw = malloc(2 * G * sizeof(void *));
	g->bw = malloc(2 * G * sizeof(void *));
	g->off = malloc((G + 1) * sizeof(int32_t));
	g->off[0] = 0;
	for (size_t z = 0; z < G; z++) {
		g->P += n[z], g->most = n[z] > g->most ? n[z] : g->most;
		g->off[z + 1] = (int32_t)g->P;
	}
	for (size_t z = 0; z < 2 * G; z++) {
		make_mat(&g->m[z], type, rows, cols, z % 3 == 1);
		g->dw[z] = put(g->m[z].h, rows * g->m[z].rb, skew && z % 4 == 3 ? (type == HBK_BF16 ? 2 : 1) : 0,
			       &g->bw[z]);
	}
	g->x = malloc(g->P * cols * sizeof(float) + 4);
	random_x(g->x, g->P * cols);
	g->dx = put(g->x, g->P * cols * sizeof(float), 0, &g->bx);
	g->doff = put(g->off, (G + 1) * sizeof(int32_t), 0, &g->bo);
	g->d1 = put(g->dw, G * sizeof(void *), 0, &g->bp);
	g->d2 = put(g->dw + G, G * sizeof(void *), 0, &g->bp2);
}

static void gpair_free(struct gpair *g)
{
	for (size_t z = 0; z < 2 * g->G; z++)
		free_mat(&g->m[z]), cudaFree(g->bw[z]);
	free(g->m), free(g->dw), free(g->bw), free(g->off), free(g->x);
	cudaFree(g->bx), cudaFree(g->bo), cudaFree(g->bp), cudaFree(g->bp2);
}
#endif

/*
 * The graph's form: x split once (hbk_mma_split), then the _split
 * launchers, against the unsplit launchers, bit for bit, for both term
 * counts (the same steps in the same order, the affine4 sums taken in the
 * same tree).  Single and paired, grouped and not, the model's widths and
 * ragged ones (cols not a multiple of 64, groups empty or of one token),
 * aligned weights and not.
 */
#ifdef HB_WITH_CUDA
/* the unsplit results against the split launchers' (a pair of weights on
 * one x), for each term count; counts the comparisons and the identical ones */
static void split_case(int type, const void *dw, const void *dw2, uint64_t rb, uint64_t rows, uint64_t cols,
		       const float *dx, size_t T, const int32_t *doff, const void *const *dptr,
		       const void *const *dptr2, size_t groups, size_t most, size_t *cases, size_t *same)
{
	int wg_was = hbk_mma_wgmma(-1); /* the mma.sync form's promise; the wgmma form's is below */

	for (int terms = 2; terms <= 3; terms++) {
		int was = hbk_mma_terms(terms);
		float *dr[2], *ref[2], *dy[2], *y[2];
		void *sp = NULL;
		CHECK_EQ_INT(cudaMalloc(&sp, hbk_mma_split_bytes(type, T, cols) + 16), cudaSuccess);
		for (int k = 0; k < 2; k++)
			dr[k] = y_alloc(T * rows), dy[k] = y_alloc(T * rows);
		if (groups) {
			CHECK_EQ_INT(hbk_mma_matmul_grouped(type, dptr, rb, rows, cols, doff, groups, most, dx, dr[0]),
				     cudaSuccess);
			CHECK_EQ_INT(hbk_mma_matmul_grouped(type, dptr2, rb, rows, cols, doff, groups, most, dx, dr[1]),
				     cudaSuccess);
		} else {
			CHECK_EQ_INT(hbk_mma_matmul(type, dw, rb, rows, cols, dx, T, dr[0]), cudaSuccess);
			CHECK_EQ_INT(hbk_mma_matmul(type, dw2, rb, rows, cols, dx, T, dr[1]), cudaSuccess);
		}
		CHECK_EQ_INT(hbk_mma_split(type, dx, T, cols, sp), cudaSuccess);
		if (groups)
			CHECK_EQ_INT(hbk_mma_grouped2_split(type, dptr, dptr2, rb, rows, cols, doff, groups, most, sp, T,
							    dy[0], dy[1]),
				     cudaSuccess);
		else
			CHECK_EQ_INT(hbk_mma_matmul2_split(type, dw, rb, rows, dw2, rb, rows, cols, sp, T, dy[0], dy[1]),
				     cudaSuccess);
		hbk_mma_terms(was);
		for (int k = 0; k < 2; k++) {
			ref[k] = y_get(dr[k], T * rows), y[k] = y_get(dy[k], T * rows);
			bool eq = !memcmp(y[k], ref[k], T * rows * sizeof(float));
			if (!eq)
				hb_check_fail(__FILE__, __LINE__,
					      "%s %" PRIu64 "x%" PRIu64 " T=%zu groups=%zu terms=%d product %d: split "
					      "differs from unsplit",
					      type == HBK_BF16 ? "bf16" : "affine4", rows, cols, T, groups, terms, k + 1);
			*cases += 1, *same += eq;
			free(ref[k]), free(y[k]), cudaFree(dr[k]), cudaFree(dy[k]);
		}
		cudaFree(sp);
	}
	hbk_mma_wgmma(wg_was);
}
#endif

static void split_products_match_unsplit_ones(void)
{
#ifdef HB_WITH_CUDA
	/* type, rows, cols, T (ungrouped); skew: misaligned weights */
	static const uint64_t dense[][4] = {
		{HBK_BF16, 324, 10240, 200}, {HBK_BF16, 130, 100, 17},  {HBK_BF16, 64, 2560, 1000},
		{HBK_BF16, 7, 24, 5},        {HBK_AFFINE4_G64, 129, 640, 97}, {HBK_AFFINE4_G64, 33, 64, 1},
		{HBK_AFFINE4_G64, 256, 2560, 300},
	};
	/* type, rows, cols; the groups' sizes below */
	static const uint64_t grouped[][3] = {
		{HBK_BF16, 200, 640}, {HBK_AFFINE4_G64, 640, 2560}, {HBK_AFFINE4_G64, 2560, 640}, {HBK_BF16, 40, 100},
	};
	static const size_t n[] = {0, 1, 80, 0, 17, 130, 3, 96, 0};
	size_t cases = 0, same = 0;

	if (!device_up())
		return;
	for (size_t i = 0; i < HB_ARRAY_LEN(dense); i++) {
		int type = (int)dense[i][0];
		uint64_t rows = dense[i][1], cols = dense[i][2];
		size_t T = (size_t)dense[i][3], skew = i % 2 ? (type == HBK_BF16 ? 2 : 1) : 0;
		struct mat m1, m2;
		float *x = malloc(T * cols * sizeof(float));
		void *bx, *b1, *b2;
		make_mat(&m1, type, rows, cols, false), make_mat(&m2, type, rows, cols, true);
		random_x(x, T * cols);
		const float *dx = put(x, T * cols * sizeof(float), 0, &bx);
		const void *w1 = put(m1.h, rows * m1.rb, skew, &b1), *w2 = put(m2.h, rows * m2.rb, 0, &b2);
		split_case(type, w1, w2, m1.rb, rows, cols, dx, T, NULL, NULL, NULL, 0, 0, &cases, &same);
		free(x), free_mat(&m1), free_mat(&m2), cudaFree(bx), cudaFree(b1), cudaFree(b2);
	}
	for (size_t i = 0; i < HB_ARRAY_LEN(grouped); i++) {
		int type = (int)grouped[i][0];
		struct gpair g;
		gpair_make(&g, type, grouped[i][1], grouped[i][2], n, HB_ARRAY_LEN(n), i % 2);
		split_case(type, NULL, NULL, g.m[0].rb, grouped[i][1], grouped[i][2], g.dx, g.P, g.doff, g.d1, g.d2, g.G,
			   g.most, &cases, &same);
		gpair_free(&g);
	}
	printf("# split products: %zu of %zu bit-identical to unsplit ones (terms 2 and 3)\n", same, cases);
	CHECK_EQ_INT((int)cases, (int)((HB_ARRAY_LEN(dense) + HB_ARRAY_LEN(grouped)) * 2 * 2));
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

/*
 * The experts' rows gathered as they are split (hbk_mma_split_rows): the
 * split of x's rows pack[p] / k byte for byte the split of those rows
 * gathered on the host (its terms and, for affine4, its group sums), for
 * both term counts; and the sums against the host's own, added in the
 * tree the product kernels use (per four columns (a + b) + (c + d), then
 * partners 8, 4, 2, 1 apart), bit for bit.
 */
#ifdef HB_WITH_CUDA
static void split_rows_case(int type, uint64_t cols, size_t S, size_t k, size_t P, int terms)
{
	float *x = malloc(S * cols * sizeof(float)), *xg = malloc(P * cols * sizeof(float));
	int32_t *pack = malloc(P * sizeof(int32_t));
	int was = hbk_mma_terms(terms);
	size_t bytes = hbk_mma_split_bytes(type, P, cols), ng = cols / 64;
	uint8_t *a = malloc(bytes), *b = malloc(bytes);
	void *bx, *bp, *dxg, *sa = NULL, *sb = NULL;

	random_x(x, S * cols);
	for (size_t p = 0; p < P; p++) {
		pack[p] = (int32_t)pick(0, S * k - 1);
		memcpy(xg + p * cols, x + (size_t)(pack[p] / (int32_t)k) * cols, cols * sizeof(float));
	}
	const float *dx = put(x, S * cols * sizeof(float), 0, &bx);
	const int32_t *dpack = put(pack, P * sizeof(int32_t), 0, &bp);
	const float *dg = put(xg, P * cols * sizeof(float), 0, &dxg);
	CHECK_EQ_INT(cudaMalloc(&sa, bytes), cudaSuccess);
	CHECK_EQ_INT(cudaMalloc(&sb, bytes), cudaSuccess);
	CHECK_EQ_INT(cudaMemset(sa, 0x5a, bytes), cudaSuccess);
	CHECK_EQ_INT(cudaMemset(sb, 0x5a, bytes), cudaSuccess);
	CHECK_EQ_INT(hbk_mma_split_rows(type, dx, dpack, k, P, cols, sa), cudaSuccess);
	CHECK_EQ_INT(hbk_mma_split(type, dg, P, cols, sb), cudaSuccess);
	CHECK_EQ_INT(cudaMemcpy(a, sa, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
	CHECK_EQ_INT(cudaMemcpy(b, sb, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
	if (memcmp(a, b, bytes))
		hb_check_fail(__FILE__, __LINE__, "%s cols=%" PRIu64 " P=%zu terms=%d: the gathered split differs",
			      type == HBK_BF16 ? "bf16" : "affine4", cols, P, terms);
	if (type == HBK_AFFINE4_G64) {
		const float *sums = (const float *)(a + bytes - P * ng * sizeof(float));
		size_t off = 0;
		for (size_t p = 0; p < P; p++)
			for (size_t g = 0; g < ng; g++) {
				const float *v = xg + p * cols + g * 64;
				float t[16];
				for (int j = 0; j < 16; j++)
					t[j] = (v[4 * j] + v[4 * j + 1]) + (v[4 * j + 2] + v[4 * j + 3]);
				for (int o = 8; o > 0; o >>= 1) {
					float u[16];
					for (int j = 0; j < 16; j++)
						u[j] = t[j] + t[j ^ o];
					memcpy(t, u, sizeof(t));
				}
				off += memcmp(&t[0], &sums[p * ng + g], sizeof(float)) != 0;
			}
		if (off)
			hb_check_fail(__FILE__, __LINE__, "affine4 cols=%" PRIu64 " P=%zu: %zu group sums differ from the host's",
				      cols, P, off);
	}
	hbk_mma_terms(was);
	free(x), free(xg), free(pack), free(a), free(b);
	cudaFree(bx), cudaFree(bp), cudaFree(dxg), cudaFree(sa), cudaFree(sb);
}
#endif

static void split_rows_match_a_gathered_split(void)
{
#ifdef HB_WITH_CUDA
	/* type, cols, source rows, k, rows gathered */
	static const uint64_t cases[][5] = {
		{HBK_AFFINE4_G64, 2560, 300, 10, 3000}, {HBK_AFFINE4_G64, 640, 37, 3, 5},   {HBK_AFFINE4_G64, 64, 9, 2, 1},
		{HBK_BF16, 2560, 300, 10, 3000},        {HBK_BF16, 100, 17, 4, 33},         {HBK_BF16, 8, 5, 1, 7},
	};

	if (!device_up())
		return;
	for (size_t i = 0; i < HB_ARRAY_LEN(cases); i++)
		for (int terms = 2; terms <= 3; terms++)
			split_rows_case((int)cases[i][0], cases[i][1], cases[i][2], cases[i][3], cases[i][4], terms);
	CHECK_EQ_INT(hbk_mma_split_rows(HBK_BF16, NULL, (const int32_t *)8, 0, 1, 8, NULL),
		     (int)cudaErrorInvalidValue);
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

/*
 * The experts' products reading their rows where they lie in a split of
 * the source's rows (hbk_mma_grouped2_split_rows, the device graph's
 * form) against the same products on a split of the rows gathered
 * (hbk_mma_split_rows, then hbk_mma_grouped2_split), bit for bit: the
 * mma.sync form, and the wgmma one at each block width where the device is
 * sm_90; both types, gate and up in one launch, groups empty and of one
 * token, rows repeated, both term counts.
 */
#ifdef HB_WITH_CUDA
static bool sm90_device(void)
{
	int dev = 0, major = 0, minor = 0;

	return cudaGetDevice(&dev) == cudaSuccess &&
	       cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
	       cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess && major == 9 &&
	       minor == 0;
}

static size_t rows_outputs, rows_identical;

static void rows_case(int type, uint64_t rows, uint64_t cols, const size_t *n, size_t G, size_t S, size_t k, int terms,
		      int mode)
{
	struct gpair g;
	float *x = malloc(S * cols * sizeof(float)), *dy[2][2], *y[2][2];
	int32_t *pack;
	void *bx, *bp, *ss = NULL, *sg = NULL;
	int was = hbk_mma_terms(terms), wg_was = hbk_mma_wgmma(mode);

	gpair_make(&g, type, rows, cols, n, G, false);
	pack = malloc(g.P * sizeof(int32_t) + 4);
	random_x(x, S * cols);
	for (size_t p = 0; p < g.P; p++)
		pack[p] = (int32_t)pick(0, S * k - 1);
	const float *dx = put(x, S * cols * sizeof(float), 0, &bx);
	const int32_t *dpack = put(pack, g.P * sizeof(int32_t) + 4, 0, &bp);
	CHECK_EQ_INT(cudaMalloc(&ss, hbk_mma_split_bytes(type, S, cols) + 16), cudaSuccess);
	CHECK_EQ_INT(cudaMalloc(&sg, hbk_mma_split_bytes(type, g.P, cols) + 16), cudaSuccess);
	CHECK_EQ_INT(hbk_mma_split(type, dx, S, cols, ss), cudaSuccess);
	CHECK_EQ_INT(hbk_mma_split_rows(type, dx, dpack, k, g.P, cols, sg), cudaSuccess);
	for (int f = 0; f < 2; f++) { /* f 0: where they lie, 1: gathered */
		dy[f][0] = y_alloc(g.P * rows), dy[f][1] = y_alloc(g.P * rows);
		CHECK_EQ_INT(f ? hbk_mma_grouped2_split(type, g.d1, g.d2, g.m[0].rb, rows, cols, g.doff, G, g.most, sg,
							g.P, dy[f][0], dy[f][1])
			       : hbk_mma_grouped2_split_rows(type, g.d1, g.d2, g.m[0].rb, rows, cols, g.doff, G, g.most,
							     ss, S, dpack, k, g.P, dy[f][0], dy[f][1]),
			     cudaSuccess);
		for (int i = 0; i < 2; i++)
			y[f][i] = y_get(dy[f][i], g.P * rows), cudaFree(dy[f][i]);
	}
	for (int i = 0; i < 2; i++) {
		size_t same = 0;
		for (size_t e = 0; e < g.P * rows; e++)
			same += !memcmp(&y[0][i][e], &y[1][i][e], sizeof(float));
		rows_outputs += g.P * rows, rows_identical += same;
		if (same != g.P * rows)
			hb_check_fail(__FILE__, __LINE__,
				      "%s %" PRIu64 "x%" PRIu64 " P=%zu terms=%d mode %d product %d: %zu of %zu outputs differ",
				      type == HBK_BF16 ? "bf16" : "affine4", rows, cols, g.P, terms, mode, i,
				      g.P * rows - same, g.P * rows);
		free(y[0][i]), free(y[1][i]);
	}
	hbk_mma_wgmma(wg_was), hbk_mma_terms(was);
	gpair_free(&g);
	free(x), free(pack);
	cudaFree(bx), cudaFree(bp), cudaFree(ss), cudaFree(sg);
}
#endif

static void grouped_rows_read_where_they_lie(void)
{
#ifdef HB_WITH_CUDA
	static const size_t n1[] = {0, 1, 37, 130, 9}, n2[] = {3, 0, 100}, n3[] = {96, 97};
	static const int modes[] = {-1, 0, 32, 64, 96, 128};
	bool sm90;

	if (!device_up())
		return;
	sm90 = sm90_device();
	for (size_t i = 0; i < HB_ARRAY_LEN(modes); i++)
		for (int terms = 2; terms <= 3; terms++) {
			if (modes[i] >= 0 && (!sm90 || terms == 3))
				continue;
			rows_case(HBK_AFFINE4_G64, 256, 640, n1, HB_ARRAY_LEN(n1), 40, 10, terms, modes[i]);
			rows_case(HBK_BF16, 130, 200, n2, HB_ARRAY_LEN(n2), 17, 4, terms, modes[i]);
			rows_case(HBK_AFFINE4_G64, 128, 2560, n3, HB_ARRAY_LEN(n3), 300, 10, terms, modes[i]);
		}
	printf("# rows where they lie: %zu of %zu outputs those of the gathered split (%s)\n", rows_identical,
	       rows_outputs, sm90 ? "mma.sync and wgmma" : "mma.sync; no sm_90 device for wgmma");
	CHECK(rows_outputs > 0);
	CHECK_EQ_INT(hbk_mma_grouped2_split_rows(HBK_BF16, NULL, NULL, 16, 1, 8, NULL, 1, 1, NULL, 1,
						 (const int32_t *)8, 0, 1, NULL, NULL),
		     (int)cudaErrorInvalidValue);
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

/*
 * The wgmma form (sm_90 only): the split launchers with wgmma at each
 * block width (32, 64, 96, 128 tokens) and chosen, against the double
 * reference (the bound above, two terms) and against the mma.sync form's
 * split launchers, bit for bit (the same bf16 products added in the same
 * order: 16 columns an instruction, lo term then hi, then the affine4
 * fold).  Dense and grouped, single and paired, the model's widths and
 * ragged ones (rows off 128, cols off 64, T off every width, empty and
 * one-token groups), aligned weights and not; the guard zones past y.
 */
#ifdef HB_WITH_CUDA

static double wg_worst[2], wg_vs_sync[2];
static size_t wg_outputs, wg_identical;

/* the split launchers on a pair of weights (m1, m2; grouped: mats m[0 ..
 * 2 groups), m[z] and m[groups + z] group z's), wgmma at `mode` against
 * the mma.sync form and the double reference */
static void wg_case(int type, const struct mat *m, const void *dw, const void *dw2, const float *x, const float *dx,
		    size_t T, const int32_t *off, const int32_t *doff, const void *const *d1,
		    const void *const *d2, size_t groups, size_t most, int mode)
{
	uint64_t rows = m[0].rows, cols = m[0].cols, rb = m[0].rb;
	float *dy[2][2], *y[2][2];
	void *sp = NULL;
	int was = hbk_mma_terms(2);

	CHECK_EQ_INT(cudaMalloc(&sp, hbk_mma_split_bytes(type, T, cols) + 16), cudaSuccess);
	CHECK_EQ_INT(hbk_mma_split(type, dx, T, cols, sp), cudaSuccess);
	for (int f = 0; f < 2; f++) { /* f 0: wgmma at mode, 1: mma.sync */
		int wg_was = hbk_mma_wgmma(f ? -1 : mode);
		dy[f][0] = y_alloc(T * rows), dy[f][1] = y_alloc(T * rows);
		if (groups)
			CHECK_EQ_INT(hbk_mma_grouped2_split(type, d1, d2, rb, rows, cols, doff, groups, most, sp, T,
							    dy[f][0], dy[f][1]),
				     cudaSuccess);
		else
			CHECK_EQ_INT(hbk_mma_matmul2_split(type, dw, rb, rows, dw2, rb, rows, cols, sp, T, dy[f][0],
							   dy[f][1]),
				     cudaSuccess);
		hbk_mma_wgmma(wg_was);
		for (int k = 0; k < 2; k++)
			y[f][k] = y_get(dy[f][k], T * rows), cudaFree(dy[f][k]);
	}
	hbk_mma_terms(was);
	for (int k = 0; k < 2; k++)
		for (size_t z = 0; z < (groups ? groups : 1); z++) {
			size_t o = groups ? (size_t)off[z] : 0, n = groups ? (size_t)(off[z + 1] - off[z]) : T;
			const struct mat *mz = &m[groups ? (size_t)k * groups + z : (size_t)k];
			const float *yz[2] = {y[0][k] + o * rows, y[1][k] + o * rows};
			struct cmp c = {{0, 0, 0}, 0};
			double b = bound(type, 2, cols), mag, e, d;
			if (!n)
				continue;
			compare(mz, x + o * cols, n, yz, 2, &c);
			mag = hb_test_max_nan(c.mag, 1e-30), e = c.err[0] / mag, d = max_diff(yz[0], yz[1], n * rows) / mag;
			wg_worst[type == HBK_AFFINE4_G64] = hb_test_max_nan(wg_worst[type == HBK_AFFINE4_G64], e / b);
			wg_vs_sync[type == HBK_AFFINE4_G64] = hb_test_max_nan(wg_vs_sync[type == HBK_AFFINE4_G64], d / b);
			size_t same = 0;
			for (size_t i = 0; i < n * rows; i++)
				same += !memcmp(&yz[0][i], &yz[1][i], sizeof(float));
			wg_outputs += n * rows, wg_identical += same;
			if (!(e <= b) || same != n * rows)
				hb_check_fail(__FILE__, __LINE__,
					      "wgmma %s %" PRIu64 "x%" PRIu64 " T=%zu group %zu mode %d product %d: err "
					      "%.3g (bound %.3g); %zu of %zu outputs mma.sync's bits (largest difference "
					      "%.3g of the bound)",
					      type == HBK_BF16 ? "bf16" : "affine4", rows, cols, n, z, mode, k + 1, e, b, same,
					      n * rows, d / b);
		}
	for (int f = 0; f < 2; f++)
		free(y[f][0]), free(y[f][1]);
	cudaFree(sp);
}
#endif

static void wgmma_products_match_double(void)
{
#ifdef HB_WITH_CUDA
	static const uint64_t dense[][4] = {
		{HBK_BF16, 324, 2560, 200},      {HBK_BF16, 130, 100, 17},       {HBK_BF16, 640, 2560, 1000},
		{HBK_BF16, 7, 24, 5},            {HBK_AFFINE4_G64, 129, 640, 97}, {HBK_AFFINE4_G64, 33, 64, 1},
		{HBK_AFFINE4_G64, 256, 2560, 300},
	};
	static const uint64_t grouped[][3] = {
		{HBK_BF16, 200, 640}, {HBK_AFFINE4_G64, 640, 2560}, {HBK_AFFINE4_G64, 2560, 640}, {HBK_BF16, 40, 100},
	};
	static const size_t n[] = {0, 1, 80, 0, 17, 130, 3, 96, 0, 33};
	static const int modes[] = {0, 32, 64, 96, 128};

	if (!device_up())
		return;
	if (!sm90_device()) {
		hb_test_skip("the device is not sm_90: the wgmma form does not run on it");
		return;
	}
	for (size_t i = 0; i < HB_ARRAY_LEN(dense); i++) {
		int type = (int)dense[i][0];
		uint64_t rows = dense[i][1], cols = dense[i][2];
		size_t T = (size_t)dense[i][3], skew = i % 2 ? (type == HBK_BF16 ? 2 : 1) : 0;
		struct mat m[2];
		float *x = malloc(T * cols * sizeof(float));
		void *bx, *b1, *b2;
		make_mat(&m[0], type, rows, cols, false), make_mat(&m[1], type, rows, cols, true);
		random_x(x, T * cols);
		const float *dx = put(x, T * cols * sizeof(float), 0, &bx);
		const void *w1 = put(m[0].h, rows * m[0].rb, skew, &b1), *w2 = put(m[1].h, rows * m[1].rb, 0, &b2);
		for (size_t k = 0; k < HB_ARRAY_LEN(modes); k++)
			wg_case(type, m, w1, w2, x, dx, T, NULL, NULL, NULL, NULL, 0, 0, modes[k]);
		free(x), free_mat(&m[0]), free_mat(&m[1]), cudaFree(bx), cudaFree(b1), cudaFree(b2);
	}
	for (size_t i = 0; i < HB_ARRAY_LEN(grouped); i++) {
		int type = (int)grouped[i][0];
		struct gpair g;
		gpair_make(&g, type, grouped[i][1], grouped[i][2], n, HB_ARRAY_LEN(n), i % 2);
		for (size_t k = 0; k < HB_ARRAY_LEN(modes); k++)
			wg_case(type, g.m, NULL, NULL, g.x, g.dx, g.P, g.off, g.doff, g.d1, g.d2, g.G, g.most, modes[k]);
		gpair_free(&g);
	}
	printf("# wgmma form: worst err / bound bf16 %.3f affine4 %.3f; |wgmma - mma.sync| / bound bf16 %.3f "
	       "affine4 %.3f; %zu of %zu outputs bit-identical to mma.sync's\n",
	       wg_worst[0], wg_worst[1], wg_vs_sync[0], wg_vs_sync[1], wg_identical, wg_outputs);
	CHECK(wg_outputs > 0);
	CHECK(wg_identical == wg_outputs);
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

HB_TEST_MAIN(T(takes_the_two_types), T(matmul_matches_double), T(grouped_matches_double), T(skinny_matches_double),
	     T(paired_products_match_single_ones), T(split_products_match_unsplit_ones),
	     T(split_rows_match_a_gathered_split), T(grouped_rows_read_where_they_lie), T(wgmma_products_match_double))
