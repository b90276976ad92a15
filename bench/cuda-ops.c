/*
 * bench/cuda-ops.c: the CUDA backend's seam operations at the real layer
 * geometry (hidden 2560, GDN 16 x 128 keys / 48 x 128 values, QSA 32 x 256
 * heads over 2 KV heads, indexer 16 x 128 with budget 2048 and ratio 4,
 * 512 affine4-g64 experts of width 640, top-10, shared expert 640), model
 * free, on random data (GPU machine only; `make` builds it where nvcc is).
 *
 * Each operation is called through the seam exactly as the graph calls it
 * (host operands: the transfers are part of the figure), three times after
 * a warm-up, and the median wall time printed.  Then the sum of one
 * chunk's calls over 8 layers (L L L S twice) as the graph makes them:
 * what the device operations alone cost a chunk, so that the rest of a
 * measured chunk is the host's share.  The hyper-connection and router
 * products are small and left out (stated).  Last, one thread's time for
 * the graph's per-element transcendental work of one token over 8 layers
 * (282,624 hb_sigmoid calls: the hyper-connections' stream mixing, the
 * delta rule's conv silu and output gate, QSA's output gate, the router's
 * softmax), which the graph runs on the host today.  Prints; asserts
 * nothing.
 *
 *   cuda-ops [T ...]     (default: 1024 4096)
 */
#include "hb_base.h"
#include "hb_err.h"
#include "hb_half.h"
#include "backend/hb_backend.h"
#include "hb_cuda.h"
#include "math/hb_math.h"

#include <math.h>
#include <time.h>

enum { H = 2560, NK = 16, NV = 48, DK = 128, DV = 128, NH = 32, NKV = 2, HD = 256, IH = 16, IHD = 128 };
enum { E = 512, K = 10, I = 640, RATIO = 4, BUDGET = 2048, QB = 16 };

static uint64_t rng = 0x452821e638d01377u;

static uint32_t next(void)
{
	rng = rng * 6364136223846793005u + 1442695040888963407u;
	return (uint32_t)(rng >> 32);
}

static float urand(void)
{
	return (float)(next() & 0xffffff) / 8388608.0f - 1.0f;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *vec(size_t n, float scale)
{
	float *p = malloc(n * sizeof(float) + 16);
	if (!p)
		exit(1);
	for (size_t i = 0; i < n; i++)
		p[i] = urand() * scale;
	return p;
}

/* bump allocation inside one block declared resident */
static uint8_t *arena;
static size_t arena_used, arena_len;

static void *take(size_t bytes)
{
	void *p = arena + arena_used;
	arena_used += (bytes + 255) / 256 * 256;
	if (arena_used > arena_len) {
		fprintf(stderr, "cuda-ops: arena too small\n");
		exit(1);
	}
	return p;
}

static struct hb_wmat bf16(uint64_t rows, uint64_t cols)
{
	uint16_t *d = take(rows * cols * 2);
	for (uint64_t i = 0; i < rows * cols; i++)
		d[i] = hb_f32_to_bf16(urand() * 0.03f);
	return (struct hb_wmat){ d, HB_W_BF16, rows, cols, cols * 2 };
}

/* affine4-g64 rows with random nibbles, a small scale and a centring bias */
static struct hb_wmat a4(uint64_t rows, uint64_t cols)
{
	uint64_t rb = cols / 64 * 36;
	uint8_t *d = take(rows * rb);
	uint16_t s = hb_f32_to_bf16(0.004f), b = hb_f32_to_bf16(-0.03f);
	for (uint64_t r = 0; r < rows; r++)
		for (uint64_t g = 0; g < cols / 64; g++) {
			uint8_t *p = d + r * rb + g * 36;
			for (int i = 0; i < 32; i += 4) {
				uint32_t v = next();
				memcpy(p + i, &v, 4);
			}
			memcpy(p + 32, &s, 2), memcpy(p + 34, &b, 2);
		}
	return (struct hb_wmat){ d, HB_W_AFFINE4_G64, rows, cols, rb };
}

static struct hb_wmat experts[E][3];

static void expert_view(const void *ctx, uint32_t e, struct hb_wmat *g, struct hb_wmat *u, struct hb_wmat *d)
{
	(void)ctx;
	*g = experts[e][0], *u = experts[e][1], *d = experts[e][2];
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* the median of 3 timed calls after a warm-up */
#define TIME(out, stmt)                                                  \
	do {                                                             \
		double s_[3];                                            \
		stmt;                                                    \
		for (int r_ = 0; r_ < 3; r_++) {                         \
			double t_ = now();                               \
			stmt;                                            \
			s_[r_] = now() - t_;                             \
		}                                                        \
		qsort(s_, 3, sizeof(double), cmp_d);                     \
		(out) = s_[1];                                           \
	} while (0)

static double mm(const struct hb_wmat *w, const float *x, size_t T, float *y, const char *name)
{
	double t;
	TIME(t, hb_matmul(NULL, w, x, T, y, NULL));
	printf("  matmul %-22s %5" PRIu64 " -> %5" PRIu64 ": %8.3f ms, %6.2f TFLOP/s\n", name, w->cols, w->rows,
	       t * 1e3, 2.0 * (double)w->rows * (double)w->cols * (double)T / t / 1e12);
	return t;
}

static struct hb_wmat qkv, z, ba, out, q, kv, iqk, o, router, sg, su, sd;

static void dense(void)
{
	qkv = bf16(2 * NK * DK + NV * DV, H), z = bf16(NV * DV, H), ba = bf16(NV, H);
	out = bf16(H, NV * DV), q = bf16(2 * NH * HD, H), kv = bf16(NKV * HD, H);
	iqk = bf16((IH + 1) * IHD, H), o = bf16(H, NH * HD), router = bf16(E, H);
	sg = bf16(I, H), su = bf16(I, H), sd = bf16(H, I);
}

static void run(size_t T)
{
	size_t cd = 2 * NK * DK + NV * DV, P = T * K;
	float *x = vec(T * H, 1), *y = malloc(T * 2 * NH * HD * 4), *y2 = malloc(T * H * 4);
	float *S = vec(NV * DK * DV, 0.01f), *xq = vec(T * cd, 0.1f), *bd = vec(2 * T * NV, 0.5f), *core = malloc(T * NV * DV * 4);
	float *w = vec(P, 0.1f);
	int32_t *ids = malloc(P * 4);
	uint32_t all[E];
	double t_qkv, t_z, t_ba, t_out, t_scan, t_q, t_kv, t_iqk, t_o, t_moe, t_sh, t_router, t_sel, t_att;

	printf("T = %zu\n", T);
	for (size_t i = 0; i < NV * 2 * T; i++)
		bd[i] = 0.6f + 0.3f * bd[i];
	t_qkv = mm(&qkv, x, T, y, "GDN qkv");
	t_z = mm(&z, x, T, y, "GDN z");
	t_ba = mm(&ba, x, T, y, "GDN b (a alike)");
	t_out = mm(&out, core, T, y2, "GDN out");
	t_q = mm(&q, x, T, y, "QSA q+gate");
	t_kv = mm(&kv, x, T, y, "QSA k (v alike)");
	t_iqk = mm(&iqk, x, T, y, "QSA index qk");
	t_o = mm(&o, y, T, y2, "QSA o");
	t_router = mm(&router, x, T, y, "router");
	TIME(t_scan, hb_gdn_scan(NULL, S, xq, cd, bd, bd + T * NV, T, NK, NV, DK, DV, 0.088f, core, NV * DV));
	printf("  gdn scan (48 heads, 128 x 128)        : %8.3f ms\n", t_scan * 1e3);
	for (size_t t = 0; t < T; t++) { /* top-10 of 512, distinct, uniform */
		for (size_t r = 0; r < K; r++) {
			int32_t e;
			bool dup;
			do {
				e = (int32_t)(next() % E);
				dup = false;
				for (size_t j = 0; j < r; j++)
					dup |= ids[t * K + j] == e;
			} while (dup);
			ids[t * K + r] = e;
		}
	}
	for (uint32_t e = 0; e < E; e++)
		all[e] = e;
	{
		const struct hb_device_ops *dev = hb_backend_device();
		struct hb_moe_batch b = { T, K, E, all, expert_view, NULL, ids, w, x, y2 };
		bool took = false;
		TIME(t_moe, took = dev->moe_experts(&b));
		printf("  routed experts (512 affine4, top-10)  : %8.3f ms, %6.2f TFLOP/s%s\n", t_moe * 1e3,
		       6.0 * H * I * (double)P / t_moe / 1e12, took ? "" : " (DECLINED)");
	}
	TIME(t_sh, hb_swiglu(NULL, &sg, &su, &sd, x, T, y, y + T * I, y, y2, NULL));
	printf("  shared expert (bf16 640)              : %8.3f ms\n", t_sh * 1e3);
	{
		/* one block of 16 queries at the chunk's end: visible ~ T */
		size_t rows_ld = BUDGET + RATIO + 16, g = T / RATIO;
		float *iq = vec(QB * (IH + 1) * IHD, 1), *pooled = vec((g + 1) * IHD, 1), *sc = malloc(QB * (g + 1) * 4);
		float *Kc = vec(T * NKV * HD, 1), *Vc = vec(T * NKV * HD, 1), *qn = vec(QB * NH * HD, 1);
		float *probs = malloc(rows_ld * 4), *qo = malloc(QB * NH * HD * 4);
		int32_t *heap = malloc(QB * (BUDGET / RATIO) * 4), *rows = malloc(QB * rows_ld * 4);
		uint64_t groups[QB], visible[QB];
		size_t n[QB];
		for (size_t i = 0; i < QB; i++)
			visible[i] = T - QB + 1 + i, groups[i] = visible[i] / RATIO;
		struct hb_qsa_batch sb = { QB, IH, IHD, iq, (IH + 1) * IHD, pooled, groups, visible, BUDGET / RATIO,
					   RATIO, sc, g + 1, heap, rows, rows_ld, n };
		struct hb_qsa_attn ab = { QB, NH, NH / NKV, HD, qn, NH * HD, HD, Kc, Vc, NKV * HD, 0.0625f, rows,
					  rows_ld, n, probs, rows_ld, qo, NH * HD, false };
		TIME(t_sel, hb_qsa_select_batch(NULL, &sb));
		double t_new;
		TIME(t_new, hb_qsa_attend_batch(NULL, &ab));
		ab.kv_kept = true; /* every later block of a chunk: K and V already there */
		TIME(t_att, hb_qsa_attend_batch(NULL, &ab));
		printf("  QSA block of 16 queries: select %8.3f ms, attend %8.3f ms (%.3f ms uploading K and V; "
		       "%zu rows each)\n", t_sel * 1e3, t_att * 1e3, t_new * 1e3, n[QB - 1]);
		free(iq), free(pooled), free(sc), free(Kc), free(Vc), free(qn), free(probs), free(qo), free(heap), free(rows);
	}
	{
		/* one chunk, 8 layers: 6 GDN, 2 QSA (the last query block's cost for every block: an upper bound) */
		double gdn = t_qkv + t_z + 2 * t_ba + t_out + t_scan;
		double qsa = t_q + 2 * t_kv + t_iqk + t_o + (double)(T / QB) * (t_sel + t_att);
		double moe = t_router + t_moe + t_sh + t_ba;
		double chunk = 6 * gdn + 2 * qsa + 8 * moe;
		printf("  one chunk, 8 layers: GDN %.1f ms x 6, QSA %.1f ms x 2, MoE %.1f ms x 8: %.3f s, "
		       "%.0f tokens/s if the host cost nothing\n", gdn * 1e3, qsa * 1e3, moe * 1e3, chunk,
		       (double)T / chunk);
	}
	free(x), free(y), free(y2), free(S), free(xq), free(bd), free(core), free(w), free(ids);
}

int main(int argc, char **argv)
{
	struct hb_error err;
	struct hb_cuda_stats st;
	size_t Ts[8], nT = 0;

	for (int i = 1; i < argc && nT < 8; i++)
		Ts[nT++] = (size_t)strtoull(argv[i], NULL, 10);
	if (!nT)
		Ts[nT++] = 1024, Ts[nT++] = 4096;
	hb_error_clear(&err);
	if (hb_backend_start(&err) || hb_cuda_start(&err)) {
		fprintf(stderr, "cuda-ops: %s\n", err.msg);
		return 1;
	}
	/* the experts and the dense matrices, in one block declared resident */
	arena_len = (size_t)E * (2 * I * (H / 64) * 36 + H * (I / 64) * 36) + 320u * 1024 * 1024;
	arena = malloc(arena_len);
	if (!arena)
		return 1;
	for (uint32_t e = 0; e < E; e++)
		experts[e][0] = a4(I, H), experts[e][1] = a4(I, H), experts[e][2] = a4(H, I);
	printf("# %s, experts %.2f GB affine4\n", hb_backend_name(), (double)arena_used / 1e9);
	dense();
	{
		double t0 = now();
		hb_cuda_resident(arena, arena_used);
		printf("# resident block of %.2f GB uploaded in %.2f s\n", (double)arena_used / 1e9, now() - t0);
	}
	for (size_t i = 0; i < nT; i++)
		run(Ts[i]);
	{
		enum { PER_TOKEN = 8 * 20480 + 6 * (6144 + 10240) + 2 * 8192 + 8 * 512 };
		float *v = vec(PER_TOKEN, 4), acc = 0;
		double t0 = now();
		for (int r = 0; r < 64; r++)
			for (size_t i = 0; i < PER_TOKEN; i++)
				acc += hb_sigmoid(v[i] + (float)r);
		double dt = (now() - t0) / 64;
		printf("# host, one thread: %d sigmoids a token (8 layers) in %.3f ms: %.0f tokens/s at most "
		       "from that work alone (checksum %g)\n", PER_TOKEN, dt * 1e3, 1 / dt, (double)acc);
		free(v);
	}
	if (hb_cuda_error(&err)) {
		fprintf(stderr, "cuda-ops: %s\n", err.msg);
		return 1;
	}
	hb_cuda_stats(&st);
	printf("# %" PRIu64 " seam calls, %.2f GB in, %.2f GB out\n", st.calls, st.bytes_in / 1e9, st.bytes_out / 1e9);
	hb_cuda_stop();
	free(arena);
	return 0;
}
