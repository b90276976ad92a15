/*
 * bench/kernels.c: the libkern/backend/simd kernels against the machine's own
 * limits, measured in the same invocation (`make bench-kernels`).  Prints;
 * asserts nothing about time.
 *
 *   stream read   every thread ORs its slice of one buffer (widest vector
 *                 loads the processor has), bytes read per second;
 *   fma peak      every thread runs independent FMA chains on registers
 *                 (16 chains: twice latency x ports on current x86),
 *                 2 x lanes FLOP per FMA, per vector width;
 *   decode        T = 1 over a matrix as large as the stream buffer: weight
 *                 bytes per second, as a fraction of the stream read;
 *   prefill       T tokens over a 2560-column matrix (HB_BENCH_COLS): 2 rows cols T FLOP
 *                 per second, as a fraction of the FMA peak of the path's
 *                 own vector width and of the machine's widest.  T = 128
 *                 is a dense projection's chunk, its slice of rows warm in
 *                 the cache; smaller T (HB_BENCH_TOKENS, default 128,20,10:
 *                 the tokens an expert gets in a 128-token chunk of the
 *                 real widths' top-10 of 64 and the bench model's of 128)
 *                 run over 128 / T times as many rows, so that each call
 *                 does the same work, from memory as an expert's weights
 *                 are.
 *
 * Each kernel figure is measured A/B/B/A against its reference (A the stream
 * read or the FMA peak, B the kernel), HB_BENCH_REPS times (default 3), and
 * printed as best and median of the samples; the ratios pair best with best
 * and median with median.  Environment: HB_BENCH_THREADS (default: all
 * CPUs), HB_BENCH_MIB (stream buffer and decode matrix, default 1024: far
 * beyond any last-level cache this runs on), HB_BENCH_REPS, HB_BENCH_ONLY
 * (run only the kernels whose "type path" contains this, e.g. "bf16 avx"),
 * HB_BENCH_TOKENS (the prefill token counts, 1..128, comma-separated),
 * HB_BENCH_COLS (the prefill matrix's columns, default 2560; 640 is an
 * expert's down projection at the real widths).
 * With --limits it measures only the stream read and the widest FMA peak
 * and prints them as numbers (bench/run.sh reads them).
 */
#include "hb_base.h"
#include "codec/hb_affine4.h"
#include "hb_err.h"
#include "hb_half.h"
#include "hb_parse.h"
#include "hb_pool.h"
#include "backend/simd/hb_simd.h"

#include <math.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BENCH_X86 1
#endif

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rs = 0x6b65726e656c73;

static uint64_t rng(void)
{
	rs ^= rs >> 12;
	rs ^= rs << 25;
	rs ^= rs >> 27;
	return rs * 0x2545f4914f6cdd1dull;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------ stream read */

static volatile uint64_t sink;

#ifdef BENCH_X86
__attribute__((target("avx512f"))) static uint64_t or_512(const uint8_t *p, size_t n)
{
	__m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
	for (size_t i = 0; i + 256 <= n; i += 256) {
		a = _mm512_or_si512(a, _mm512_loadu_si512((const void *)(p + i)));
		b = _mm512_or_si512(b, _mm512_loadu_si512((const void *)(p + i + 64)));
		c = _mm512_or_si512(c, _mm512_loadu_si512((const void *)(p + i + 128)));
		d = _mm512_or_si512(d, _mm512_loadu_si512((const void *)(p + i + 192)));
	}
	a = _mm512_or_si512(_mm512_or_si512(a, b), _mm512_or_si512(c, d));
	return (uint64_t)_mm512_reduce_or_epi64(a);
}

__attribute__((target("avx2"))) static uint64_t or_256(const uint8_t *p, size_t n)
{
	__m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
	for (size_t i = 0; i + 128 <= n; i += 128) {
		a = _mm256_or_si256(a, _mm256_loadu_si256((const void *)(p + i)));
		b = _mm256_or_si256(b, _mm256_loadu_si256((const void *)(p + i + 32)));
		c = _mm256_or_si256(c, _mm256_loadu_si256((const void *)(p + i + 64)));
		d = _mm256_or_si256(d, _mm256_loadu_si256((const void *)(p + i + 96)));
	}
	a = _mm256_or_si256(_mm256_or_si256(a, b), _mm256_or_si256(c, d));
	return (uint64_t)_mm256_extract_epi64(a, 0) | (uint64_t)_mm256_extract_epi64(a, 3);
}
#endif

static uint64_t or_64(const uint8_t *p, size_t n)
{
	uint64_t a = 0, b = 0, c = 0, d = 0, w[4];
	for (size_t i = 0; i + 32 <= n; i += 32) {
		memcpy(w, p + i, 32);
		a |= w[0], b |= w[1], c |= w[2], d |= w[3];
	}
	return a | b | c | d;
}

struct stream_ctx {
	const uint8_t *buf;
	size_t slice;
	int width; /* 512, 256 or 64 */
};

static int stream_job(void *ctx, size_t job, unsigned worker)
{
	struct stream_ctx *s = ctx;
	const uint8_t *p = s->buf + job * s->slice;
	uint64_t v;

	(void)worker;
#ifdef BENCH_X86
	if (s->width == 512)
		v = or_512(p, s->slice);
	else if (s->width == 256)
		v = or_256(p, s->slice);
	else
#endif
		v = or_64(p, s->slice);
	sink |= v;
	return 0;
}

/* ------------------------------------------------------------ fma peak */

#define PEAK_ITERS 4000000ull

#ifdef BENCH_X86
__attribute__((target("avx512f"))) static float fma_512(float seed)
{
	__m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f), v[16];
	for (int k = 0; k < 16; k++)
		v[k] = _mm512_set1_ps(seed + (float)k);
	for (uint64_t i = 0; i < PEAK_ITERS; i++)
#pragma GCC unroll 16
		for (int k = 0; k < 16; k++)
			v[k] = _mm512_fmadd_ps(v[k], m, c);
	for (int k = 1; k < 16; k++)
		v[0] = _mm512_add_ps(v[0], v[k]);
	return _mm512_reduce_add_ps(v[0]);
}

__attribute__((target("avx2,fma"))) static float fma_256(float seed)
{
	__m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f), v[12];
	for (int k = 0; k < 12; k++)
		v[k] = _mm256_set1_ps(seed + (float)k);
	for (uint64_t i = 0; i < PEAK_ITERS; i++)
#pragma GCC unroll 12
		for (int k = 0; k < 12; k++)
			v[k] = _mm256_fmadd_ps(v[k], m, c);
	for (int k = 1; k < 12; k++)
		v[0] = _mm256_add_ps(v[0], v[k]);
	return _mm_cvtss_f32(_mm256_castps256_ps128(v[0]));
}
#endif

/* the portable path's own peak: fmaf on 8 independent chains */
static float fma_1(float seed)
{
	float v[8];
	for (int k = 0; k < 8; k++)
		v[k] = seed + (float)k;
	for (uint64_t i = 0; i < PEAK_ITERS / 16; i++)
#pragma GCC unroll 8
		for (int k = 0; k < 8; k++)
			v[k] = fmaf(v[k], 0.999999f, 1e-6f);
	return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

struct peak_ctx {
	int width;
	float out;
};

static int peak_job(void *ctx, size_t job, unsigned worker)
{
	struct peak_ctx *p = ctx;
	float v;

	(void)worker;
#ifdef BENCH_X86
	if (p->width == 512)
		v = fma_512((float)job);
	else if (p->width == 256)
		v = fma_256((float)job);
	else
#endif
		v = fma_1((float)job);
	p->out += v * 0.0f; /* keep the result alive */
	return 0;
}

/* FLOP of one peak_job */
static double peak_flop(int width)
{
	if (width == 512)
		return 2.0 * 16 * 16 * (double)PEAK_ITERS;
	if (width == 256)
		return 2.0 * 8 * 12 * (double)PEAK_ITERS;
	return 2.0 * 8 * (double)(PEAK_ITERS / 16);
}

/* ------------------------------------------------------------ kernels */

struct mm_ctx {
	int path;
	const struct hb_wmat *w;
	const float *x;
	size_t T;
	float *y;
	uint64_t rows_per_job;
};

static int mm_job(void *ctx, size_t job, unsigned worker)
{
	struct mm_ctx *m = ctx;
	uint64_t r0 = job * m->rows_per_job, r1 = r0 + m->rows_per_job;

	(void)worker;
	if (r1 > m->w->rows)
		r1 = m->w->rows;
	hb_kern_rows_path(m->path, m->w, r0, r1, m->x, (size_t)m->w->cols, m->T, m->y, (size_t)m->w->rows);
	return 0;
}

static const char *type_name(int t)
{
	static const char *const n[] = { "f32", "f16", "bf16", "affine4" };
	return n[t];
}

static size_t row_bytes(int type, size_t cols)
{
	return type == HB_W_AFFINE4_G64 ? cols / 64 * 36 : cols * (type == HB_W_F32 ? 4 : 2);
}

/* Plausible weights (normal numbers of magnitude ~0.01-1: no subnormal
 * assists, no NaN) in place. */
static void fill_weights(uint8_t *p, int type, size_t rows, size_t cols)
{
	size_t rb = row_bytes(type, cols);

	for (size_t r = 0; r < rows; r++) {
		uint8_t *q = p + r * rb;
		if (type == HB_W_AFFINE4_G64) {
			for (size_t g = 0; g < cols / 64; g++, q += 36) {
				uint64_t v = rng();
				for (int i = 0; i < 32; i++)
					q[i] = (uint8_t)(v >> (i % 8 * 8)) ^ (uint8_t)i;
				q[32] = 0x24, q[33] = 0x3c; /* scale 0.01 */
				q[34] = 0x8f, q[35] = 0xbd; /* bias -0.07 */
			}
			continue;
		}
		for (size_t c = 0; c < cols; c += 4) {
			uint64_t v = rng();
			for (size_t k = 0; k < 4 && c + k < cols; k++) {
				uint16_t m = (uint16_t)(v >> (16 * k));
				if (type == HB_W_BF16) {
					uint16_t h = (uint16_t)((m & 0x807f) | 0x3c00);
					q[2 * (c + k)] = (uint8_t)h, q[2 * (c + k) + 1] = (uint8_t)(h >> 8);
				} else if (type == HB_W_F16) {
					uint16_t h = (uint16_t)((m & 0x83ff) | 0x2c00);
					q[2 * (c + k)] = (uint8_t)h, q[2 * (c + k) + 1] = (uint8_t)(h >> 8);
				} else {
					float f = (float)(int16_t)m * 0x1p-16f + 0.01f;
					memcpy(q + 4 * (c + k), &f, 4);
				}
			}
		}
	}
}

struct bench {
	struct hb_pool *pool;
	unsigned threads;
	int reps;
	int widest;          /* 512, 256 or 64: the stream read and peak widths */
	uint8_t *stream;
	size_t stream_bytes;
	size_t stream_jobs;
};

static double time_stream(struct bench *b)
{
	struct stream_ctx s = { b->stream, b->stream_bytes / b->stream_jobs, b->widest };
	double t0 = now();
	hb_pool_run(b->pool, b->stream_jobs, stream_job, &s);
	return now() - t0;
}

static double time_peak(struct bench *b, int width)
{
	struct peak_ctx p = { width, 0 };
	double t0 = now();
	hb_pool_run(b->pool, b->threads, peak_job, &p);
	return now() - t0;
}

static double time_mm(struct bench *b, struct mm_ctx *m)
{
	size_t jobs = (size_t)b->threads * 8;
	double t0;

	m->rows_per_job = (m->w->rows + jobs - 1) / jobs;
	t0 = now();
	hb_pool_run(b->pool, (size_t)((m->w->rows + m->rows_per_job - 1) / m->rows_per_job), mm_job, m);
	return now() - t0;
}

/* best and median of n rates */
static void stats(double *rate, int n, double *best, double *median)
{
	qsort(rate, (size_t)n, sizeof(double), cmp_double);
	*best = rate[n - 1];
	*median = n % 2 ? rate[n / 2] : 0.5 * (rate[n / 2 - 1] + rate[n / 2]);
}

static int path_width(int path)
{
	return path >= HB_KERNEL_AVX512 ? 512 : path == HB_KERNEL_AVX2 ? 256 : 64;
}

int main(int argc, char **argv)
{
	struct bench b;
	struct hb_error err;
	struct hb_cpu_features cf;
	const char *e, *only = getenv("HB_BENCH_ONLY");
	const char *tokens = getenv("HB_BENCH_TOKENS");
	const char *cols_env = getenv("HB_BENCH_COLS");
	int32_t *tl = NULL;
	size_t mib = 1024, ntl = 0, bench_cols = 2560;
	double peak_best[3] = {0};
	int widths[3] = {64, 256, 512};

	memset(&b, 0, sizeof(b));
	hb_error_clear(&err);
	if (hb_kernel_select(&err)) {
		fprintf(stderr, "bench/kernels: %s: %s\n", err.field, err.msg);
		return 2;
	}
	b.threads = hb_cpu_count();
	b.reps = 3;
	{
		static const char *const names[3] = { "HB_BENCH_THREADS", "HB_BENCH_MIB", "HB_BENCH_REPS" };
		static const uint64_t lo[3] = { 1, 16, 1 }, hi[3] = { 256, 1 << 16, 16 };
		for (int i = 0; i < 3; i++) {
			uint64_t v;
			e = getenv(names[i]);
			if (!e || !*e)
				continue;
			if (hb_parse_u64_range(e, lo[i], hi[i], &v)) {
				fprintf(stderr, "bench/kernels: %s must be %" PRIu64 "..%" PRIu64 "\n", names[i], lo[i],
					hi[i]);
				return 2;
			}
			if (i == 0)
				b.threads = (unsigned)v;
			else if (i == 1)
				mib = (size_t)v;
			else
				b.reps = (int)v;
		}
	}
	if (!tokens || !*tokens)
		tokens = "128,20,10";
	if (hb_parse_id_list(tokens, strlen(tokens), &tl, &ntl, NULL)) {
		fprintf(stderr, "bench/kernels: HB_BENCH_TOKENS must be token counts 1..128, comma-separated\n");
		return 2;
	}
	for (size_t i = 0; i < ntl; i++)
		if (tl[i] < 1 || tl[i] > 128) {
			fprintf(stderr, "bench/kernels: HB_BENCH_TOKENS must be token counts 1..128, comma-separated\n");
			return 2;
		}
	if (cols_env && *cols_env) {
		uint64_t v;
		if (hb_parse_u64_range(cols_env, 64, 65536, &v) || v % 64) {
			fprintf(stderr, "bench/kernels: HB_BENCH_COLS must be a multiple of 64, 64..65536\n");
			return 2;
		}
		bench_cols = (size_t)v;
	}
	if (hb_pool_create(b.threads, &b.pool, &err)) {
		fprintf(stderr, "bench/kernels: %s\n", err.msg);
		return 2;
	}
	b.threads = hb_pool_size(b.pool);
	b.widest = hb_kernel_path_usable(HB_KERNEL_AVX512) ? 512 : hb_kernel_path_usable(HB_KERNEL_AVX2) ? 256 : 64;
	b.stream_bytes = mib << 20;
	b.stream_jobs = (size_t)b.threads * 8;
	b.stream_bytes -= b.stream_bytes % (b.stream_jobs * 256);
	b.stream = malloc(b.stream_bytes);
	if (!b.stream) {
		fprintf(stderr, "bench/kernels: cannot allocate %zu MiB\n", mib);
		return 2;
	}
	memset(b.stream, 0x5a, b.stream_bytes);
	if (argc > 1 && strcmp(argv[1], "--limits") == 0) {
		/* for bench/run.sh: the two references alone, best of 2 x reps,
		 * as "stream BYTES_PER_S", "peak FLOP_PER_S", "width BITS" */
		double bs = 0, bp = 0;
		int wi = b.widest == 512 ? 2 : b.widest == 256 ? 1 : 0;
		for (int i = 0; i < 2 * b.reps; i++) {
			double r = (double)b.stream_bytes / time_stream(&b);
			bs = r > bs ? r : bs;
			r = peak_flop(widths[wi]) * b.threads / time_peak(&b, widths[wi]);
			bp = r > bp ? r : bp;
		}
		printf("stream %.0f\npeak %.0f\nwidth %d\n", bs, bp, b.widest);
		hb_pool_destroy(b.pool);
		free(b.stream);
		return 0;
	}
	hb_cpu_features(&cf);
	printf("threads %u, process path %s; paths here:", b.threads, hb_kernel_path_name(hb_kernel_path()));
	for (int p = 0; p < HB_KERNEL_NPATHS; p++)
		if (hb_kernel_path_usable(p))
			printf(" %s", hb_kernel_path_name(p));
	printf("\ncpu: avx512-bf16 %d, avx512-vnni %d, amx-bf16 %d (detected, not used: they round activations to bf16)\n",
	       cf.avx512_bf16, cf.avx512_vnni, cf.amx_bf16);
	printf("A/B/B/A x %d: rates are best / median of %d samples\n", b.reps, 2 * b.reps);

	/* the reference limits alone first (warm-up and the headline) */
	{
		double r[64], sb, sm;
		int n = 0;
		for (int i = 0; i < 2 * b.reps && n < 64; i++)
			r[n++] = (double)b.stream_bytes / time_stream(&b);
		stats(r, n, &sb, &sm);
		printf("stream read   %zu MiB, %d-bit loads: %.2f / %.2f GB/s\n", b.stream_bytes >> 20, b.widest,
		       sb / 1e9, sm / 1e9);
		for (int w = 0; w < 3; w++) {
			double best, med;
			if (widths[w] > b.widest)
				continue;
			n = 0;
			for (int i = 0; i < 2 * b.reps && n < 64; i++)
				r[n++] = peak_flop(widths[w]) * b.threads / time_peak(&b, widths[w]);
			stats(r, n, &best, &med);
			peak_best[w] = best;
			printf("fma peak      %3d-bit: %.1f / %.1f GFLOP/s\n", widths[w], best / 1e9, med / 1e9);
		}
	}

	for (int type = 0; type < 4; type++) {
		const size_t cols = bench_cols;
		size_t rb = row_bytes(type, cols), rows = b.stream_bytes / rb;
		struct hb_wmat w;
		uint8_t *mat;
		float *x, *y;
		bool wanted = !only;
		for (int p = 0; p < HB_KERNEL_NPATHS && !wanted; p++) {
			char label[32];
			snprintf(label, sizeof(label), "%s %s", type_name(type), hb_kernel_path_name(p));
			wanted = hb_kernel_path_usable(p) && strstr(label, only);
		}
		if (!wanted)
			continue;
		mat = malloc(rows * rb);
		x = malloc(128 * cols * sizeof(float));
		y = malloc(rows * 128 * sizeof(float));
		if (!mat || !x || !y) {
			fprintf(stderr, "bench/kernels: out of memory\n");
			return 2;
		}
		fill_weights(mat, type, rows, cols);
		for (size_t i = 0; i < 128 * cols; i++)
			x[i] = (float)((int)(rng() % 2001) - 1000) * 1e-3f;
		for (int p = 0; p < HB_KERNEL_NPATHS; p++) {
			double ra[64], rk[64], a_best, a_med, k_best, k_med;
			int na = 0, nk = 0;
			size_t prows;
			struct mm_ctx m;
			char label[32];
			snprintf(label, sizeof(label), "%s %s", type_name(type), hb_kernel_path_name(p));
			if (!hb_kernel_path_usable(p) || (only && !strstr(label, only)))
				continue;
			/* decode: every row of the big matrix, one token */
			w = (struct hb_wmat){ mat, (enum hb_wtype)type, rows, cols, rb };
			m = (struct mm_ctx){ p, &w, x, 1, y, 0 };
			for (int i = 0; i < b.reps; i++) {
				ra[na++] = (double)b.stream_bytes / time_stream(&b);
				rk[nk++] = (double)(rows * rb) / time_mm(&b, &m);
				rk[nk++] = (double)(rows * rb) / time_mm(&b, &m);
				ra[na++] = (double)b.stream_bytes / time_stream(&b);
			}
			stats(ra, na, &a_best, &a_med);
			stats(rk, nk, &k_best, &k_med);
			printf("decode  %-7s %-8s T=1: %6.2f / %6.2f GB/s of weights = %.3f / %.3f of the stream read "
			       "(%.2f / %.2f GB/s alongside)\n",
			       type_name(type), hb_kernel_path_name(p), k_best / 1e9, k_med / 1e9, k_best / a_best,
			       k_med / a_med, a_best / 1e9, a_med / 1e9);
			for (size_t ti = 0; ti < ntl; ti++) {
				size_t T = (size_t)tl[ti];
				/* prefill: T tokens over a slice of rows that runs ~0.1 s;
				 * below 128 tokens 128 / T times the rows, from memory */
				prows = (p == HB_KERNEL_PORTABLE ? 64 : 4096) * (T < 128 ? 128 / T : 1);
				if (prows > rows)
					prows = rows;
				prows -= prows % 8;
				w.rows = prows;
				m = (struct mm_ctx){ p, &w, x, T, y, 0 };
				time_mm(&b, &m); /* T = 128: the slice into cache */
				na = nk = 0;
				for (int i = 0; i < b.reps; i++) {
					double f = 2.0 * (double)prows * (double)cols * (double)T;
					ra[na++] = peak_flop(path_width(p)) * b.threads / time_peak(&b, path_width(p));
					rk[nk++] = f / time_mm(&b, &m);
					rk[nk++] = f / time_mm(&b, &m);
					ra[na++] = peak_flop(path_width(p)) * b.threads / time_peak(&b, path_width(p));
				}
				stats(ra, na, &a_best, &a_med);
				stats(rk, nk, &k_best, &k_med);
				printf("prefill %-7s %-8s T=%-3zu: %7.2f / %7.2f GFLOP/s = %.3f / %.3f of the %d-bit FMA peak "
				       "alongside, %.3f of the widest (%d-bit)\n",
				       type_name(type), hb_kernel_path_name(p), T, k_best / 1e9, k_med / 1e9, k_best / a_best,
				       k_med / a_med, path_width(p),
				       k_best / peak_best[b.widest == 512 ? 2 : b.widest == 256 ? 1 : 0], b.widest);
			}
		}
		free(mat), free(x), free(y);
	}
	hb_pool_destroy(b.pool);
	free(b.stream);
	free(tl);
	return 0;
}
