/*
 * bench/cuda-mma.c: the tensor-core matrix products (cuda/hb_cuda_mma.h)
 * against the float32 kernel (hbk_matmul, hbk_matmul_grouped) at the
 * model's shapes, model free, on random data (GPU machine only; `make`
 * builds it where nvcc is):
 *   dense  2560 -> 10240, 2560 -> 16384, 6144 -> 2560, 8192 -> 2560 at T
 *   experts 2560 -> 640 and 640 -> 2560 grouped as 512 experts of
 *          T * 10 / 512 tokens each (top-10 of 512, evenly routed)
 * each for bf16 and affine4-g64 weights (experts' weights distinct
 * allocations' worth of memory: 512 of them, not one reused).  Device
 * operands only (no transfers); each launcher timed with events after a
 * warm-up, 5 runs for the tensor-core kernel (2 and 3 terms), 3 for the
 * float32 one; min and median TFLOP/s (2 T rows cols flops).  Then the
 * largest |y_mma - y_f32| relative to the largest |y_f32|.  Then the
 * graph's form, 2 terms: x split once beforehand (hbk_mma_split, not
 * timed) and the _split launchers, 5 runs, at the block height the
 * launcher chooses and at each forced (hbk_mma_tile: the median of 5),
 * and whether every output is the unsplit one's bits; then the same
 * launchers in the wgmma form (sm_90 only; elsewhere they fall back to
 * the mma.sync form), the block's tokens chosen and each forced (32, 64,
 * 96, 128), with the largest difference from the float32 kernel and from
 * the mma.sync form, relative to the largest output.
 * Prints; asserts nothing.
 *
 *   cuda-mma [T ...]     (default: 4096 1024)
 */
#include "hb_base.h"
#include "hb_half.h"
#include "hb_cuda_kern.h"
#include "hb_cuda_mma.h"

#include <cuda_runtime_api.h>
#include <math.h>

enum { E = 512, K = 10, HOSTMATS = 16 };

static uint64_t rng = 0xa4093822299f31d0u;

static uint32_t next(void)
{
	rng = rng * 6364136223846793005u + 1442695040888963407u;
	return (uint32_t)(rng >> 32);
}

static float urand(void)
{
	return (float)(next() & 0xffffff) / 8388608.0f - 1.0f;
}

static void ok(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "cuda-mma: %s: %s\n", what, cudaGetErrorString(e));
		exit(1);
	}
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static uint64_t row_bytes(int type, uint64_t cols)
{
	return type == HBK_BF16 ? cols * 2 : cols / 64 * 36;
}

/* count [rows][cols] matrices back to back at dw: HOSTMATS made on the
 * host (bf16 |w| < 0.03; affine4 random nibbles, scale 0.004, bias
 * -0.03), repeated */
static void fill(uint8_t *dw, int type, uint64_t rows, uint64_t cols, size_t count)
{
	uint64_t rb = row_bytes(type, cols), bytes = rows * rb;
	size_t made = count < HOSTMATS ? count : HOSTMATS;
	uint8_t *h = malloc(bytes * made);
	uint16_t s = hb_f32_to_bf16(0.004f), b = hb_f32_to_bf16(-0.03f);

	if (!h)
		exit(1);
	for (uint64_t r = 0; r < rows * made; r++) {
		uint8_t *p = h + r * rb;
		for (uint64_t c = 0; type == HBK_BF16 && c < cols; c++) {
			uint16_t v = hb_f32_to_bf16(urand() * 0.03f);
			memcpy(p + 2 * c, &v, 2);
		}
		for (uint64_t g = 0; type == HBK_AFFINE4_G64 && g < cols / 64; g++) {
			for (int i = 0; i < 32; i += 4) {
				uint32_t v = next();
				memcpy(p + g * 36 + i, &v, 4);
			}
			memcpy(p + g * 36 + 32, &s, 2), memcpy(p + g * 36 + 34, &b, 2);
		}
	}
	for (size_t i = 0; i < count; i++)
		ok(cudaMemcpy(dw + i * bytes, h + (i % made) * bytes, bytes, cudaMemcpyHostToDevice), "weights");
	free(h);
}

struct shape {
	const char *name;
	uint64_t cols, rows;
	bool grouped;
};

static const struct shape shapes[] = {
	{"dense 2560 -> 10240", 2560, 10240, false}, {"dense 2560 -> 16384", 2560, 16384, false},
	{"dense 6144 -> 2560", 6144, 2560, false},   {"dense 8192 -> 2560", 8192, 2560, false},
	{"experts 2560 -> 640", 2560, 640, true},    {"experts 640 -> 2560", 640, 2560, true},
};

/* the operands of one timed call */
struct call {
	int type, kind; /* kind: 0 mma, 1 float32, 2 mma from the split at sp */
	const struct shape *s;
	uint8_t *w;
	const void *const *wp;
	const int32_t *off;
	size_t T, per;
	const float *x;
	float *y;
	const void *sp;
};

static void launch(const struct call *c)
{
	uint64_t rb = row_bytes(c->type, c->s->cols);
	int e;

	if (c->kind == 2)
		e = c->s->grouped ? hbk_mma_grouped2_split(c->type, c->wp, NULL, rb, c->s->rows, c->s->cols, c->off, E,
							   c->per, c->sp, c->per * E, c->y, NULL)
				  : hbk_mma_matmul2_split(c->type, c->w, rb, c->s->rows, NULL, 0, 0, c->s->cols, c->sp,
							  c->T, c->y, NULL);
	else if (c->s->grouped)
		e = c->kind == 0 ? hbk_mma_matmul_grouped(c->type, c->wp, rb, c->s->rows, c->s->cols, c->off, E, c->per,
							  c->x, c->y)
				 : hbk_matmul_grouped(c->type, c->wp, rb, c->s->rows, c->s->cols, c->off, E, c->per, c->x,
						      c->y);
	else
		e = c->kind == 0 ? hbk_mma_matmul(c->type, c->w, rb, c->s->rows, c->s->cols, c->x, c->T, c->y)
				 : hbk_matmul(c->type, c->w, rb, c->s->rows, c->s->cols, c->x, c->T, c->y);
	ok((cudaError_t)e, "launch");
}

/* the best and the median TFLOP/s (of the least and the median time) of
 * `runs` timed calls after a warm-up */
static void timed(const struct call *c, size_t tokens, int runs, double *best, double *med)
{
	double t[8], flop = 2.0 * (double)tokens * (double)c->s->rows * (double)c->s->cols;
	cudaEvent_t a, b;

	ok(cudaEventCreate(&a), "event"), ok(cudaEventCreate(&b), "event");
	launch(c);
	ok(cudaDeviceSynchronize(), "warm-up");
	for (int r = 0; r < runs; r++) {
		float ms = 0;
		ok(cudaEventRecord(a, 0), "record");
		launch(c);
		ok(cudaEventRecord(b, 0), "record");
		ok(cudaEventSynchronize(b), "sync");
		ok(cudaEventElapsedTime(&ms, a, b), "elapsed");
		t[r] = ms * 1e-3;
	}
	qsort(t, (size_t)runs, sizeof(double), cmp_d);
	*best = flop / t[0] / 1e12;
	*med = flop / t[runs / 2] / 1e12;
	cudaEventDestroy(a), cudaEventDestroy(b);
}

static double max_rel(const float *a, const float *ref, size_t n)
{
	double d = 0, m = 0;

	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)a[i] - (double)ref[i]);
		d = e > d || isnan(e) ? e : d;
		m = fabs((double)ref[i]) > m ? fabs((double)ref[i]) : m;
	}
	return d / (m > 0 ? m : 1);
}

int main(int argc, char **argv)
{
	size_t Ts[8] = {4096, 1024}, nT = 2, most = 0; /* most: floats of the largest x or y */
	uint8_t *dw;
	float *x, *dx, *dy, *h[4];
	void *dsp;
	size_t sp_bytes = 0;
	void **wp = malloc(E * sizeof(void *));
	void *dwp;
	int32_t off[E + 1], *doff;
	int dev = 0, terms;
	struct cudaDeviceProp prop;

	if (argc > 1)
		nT = 0;
	for (int i = 1; i < argc && nT < 8; i++)
		Ts[nT++] = (size_t)strtoull(argv[i], NULL, 10);
	for (size_t i = 0; i < nT; i++) {
		size_t m = Ts[i] * 8192 > Ts[i] * K * 2560 ? Ts[i] * 8192 : Ts[i] * K * 2560;
		most = m > most ? m : most;
	}
	if (cudaGetDeviceCount(&dev) != cudaSuccess || dev == 0) {
		printf("cuda-mma: no CUDA device\n");
		return 0;
	}
	ok(cudaGetDeviceProperties(&prop, 0), "properties");
	printf("cuda-mma on %s (%d SMs); default terms %d; TFLOP/s as 2 T rows cols / time, best and median\n",
	       prop.name, prop.multiProcessorCount, terms = hbk_mma_terms(0));
	/* the largest operands: x [T * 10][2560] of the experts, y alike, the experts' weights */
	x = malloc(most * sizeof(float));
	for (int k = 0; k < 4; k++)
		h[k] = malloc(most * sizeof(float));
	if (!x || !h[0] || !h[1] || !h[2] || !h[3])
		return 1;
	for (size_t i = 0; i < nT; i++)
		for (int type = HBK_BF16; type <= HBK_AFFINE4_G64; type++)
			for (size_t si = 0; si < HB_ARRAY_LEN(shapes); si++) {
				size_t tokens = shapes[si].grouped ? Ts[i] * K / E * E : Ts[i];
				size_t b = hbk_mma_split_bytes(type, tokens, shapes[si].cols);
				sp_bytes = b > sp_bytes ? b : sp_bytes;
			}
	for (size_t i = 0; i < most; i++)
		x[i] = urand();
	ok(cudaMalloc((void **)&dx, most * sizeof(float)), "x");
	ok(cudaMalloc((void **)&dy, most * sizeof(float)), "y");
	ok(cudaMalloc(&dsp, sp_bytes), "split");
	ok(cudaMalloc((void **)&dw, (size_t)E * 640 * 2560 * 2), "weights");
	ok(cudaMalloc(&dwp, E * sizeof(void *)), "pointers");
	ok(cudaMalloc((void **)&doff, sizeof off), "offsets");
	ok(cudaMemcpy(dx, x, most * sizeof(float), cudaMemcpyHostToDevice), "x");

	for (size_t ti = 0; ti < nT; ti++)
		for (int type = HBK_BF16; type <= HBK_AFFINE4_G64; type++) {
			size_t T = Ts[ti], per = T * K / E;
			printf("T = %zu, %s weights\n", T, type == HBK_BF16 ? "bf16" : "affine4");
			printf("  %-22s %17s %17s %17s   %-18s\n", "", "mma 2 terms", "mma 3 terms", "f32 kernel",
			       "err vs f32 (2, 3)");
			for (int e = 0; e <= E; e++)
				off[e] = (int32_t)(per * (size_t)e);
			ok(cudaMemcpy(doff, off, sizeof off, cudaMemcpyHostToDevice), "offsets");
			for (size_t si = 0; si < HB_ARRAY_LEN(shapes); si++) {
				const struct shape *s = &shapes[si];
				size_t n = s->grouped ? E : 1, tokens = s->grouped ? per * E : T;
				uint64_t bytes = s->rows * row_bytes(type, s->cols);
				double r[3][2];
				struct call c = {type, 0, s, dw, (const void *const *)dwp, doff, T, per, dx, dy, dsp};
				double rs[4][2], rw[5][2], wg_err = 0, wg_sync = 0;
				int wg_was;
				bool same;
				fill(dw, type, s->rows, s->cols, n);
				for (size_t z = 0; z < n; z++)
					wp[z] = dw + z * bytes;
				ok(cudaMemcpy(dwp, wp, E * sizeof(void *), cudaMemcpyHostToDevice), "pointers");
				for (int k = 0; k < 3; k++) {
					c.kind = k == 2;
					if (k < 2)
						hbk_mma_terms(k + 2);
					timed(&c, tokens, k < 2 ? 5 : 3, &r[k][0], &r[k][1]);
					ok(cudaMemcpy(h[k], dy, tokens * s->rows * sizeof(float), cudaMemcpyDeviceToHost),
					   "y");
				}
				/* the graph's form, 2 terms: x split once */
				hbk_mma_terms(2);
				ok((cudaError_t)hbk_mma_split(type, dx, tokens, s->cols, dsp), "split");
				c.kind = 2;
				same = true;
				wg_was = hbk_mma_wgmma(-1); /* the mma.sync form first */
				for (int wt = 0; wt < 4; wt++) { /* the chosen height, then each forced */
					int was = hbk_mma_tile(wt ? wt + 1 : 0);
					timed(&c, tokens, 5, &rs[wt][0], &rs[wt][1]);
					hbk_mma_tile(was);
					ok(cudaMemcpy(h[3], dy, tokens * s->rows * sizeof(float), cudaMemcpyDeviceToHost),
					   "y");
					same &= !memcmp(h[0], h[3], tokens * s->rows * sizeof(float));
				}
				/* then the wgmma form (sm_90), chosen and at each block width */
				for (int k = 0; k < 5; k++) {
					hbk_mma_wgmma(k ? 32 * k : 0);
					timed(&c, tokens, 5, &rw[k][0], &rw[k][1]);
					ok(cudaMemcpy(h[3], dy, tokens * s->rows * sizeof(float), cudaMemcpyDeviceToHost),
					   "y");
					wg_err = fmax(wg_err, max_rel(h[3], h[2], tokens * s->rows));
					wg_sync = fmax(wg_sync, max_rel(h[3], h[0], tokens * s->rows));
				}
				hbk_mma_wgmma(wg_was);
				hbk_mma_terms(terms);
				printf("  %-22s %7.1f / %7.1f %7.1f / %7.1f %7.2f / %7.2f   %.2e %.2e\n", s->name, r[0][0],
				       r[0][1], r[1][0], r[1][1], r[2][0], r[2][1], max_rel(h[0], h[2], tokens * s->rows),
				       max_rel(h[1], h[2], tokens * s->rows));
				printf("  %-22s %7.1f / %7.1f split once (2 terms); at 64 / 96 / 128 tokens a block %.1f / "
				       "%.1f / %.1f; bits %s\n",
				       "", rs[0][0], rs[0][1], rs[1][1], rs[2][1], rs[3][1],
				       same ? "identical to unsplit" : "DIFFER");
				printf("  %-22s %7.1f / %7.1f wgmma (sm_90); at 32 / 64 / 96 / 128 tokens a block %.1f / "
				       "%.1f / %.1f / %.1f; err vs f32 %.2e, vs mma.sync %.2e\n",
				       "", rw[0][0], rw[0][1], rw[1][1], rw[2][1], rw[3][1], rw[4][1], wg_err, wg_sync);
				fflush(stdout);
			}
		}
	cudaFree(dx), cudaFree(dy), cudaFree(dw), cudaFree(dwp), cudaFree(doff), cudaFree(dsp);
	free(x), free(wp);
	for (int k = 0; k < 4; k++)
		free(h[k]);
	return 0;
}
