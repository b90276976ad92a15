/*
 * hb_simd.h: the weight-times-activation kernels of the CPU backend, in one
 * canonical floating-point order, on three code paths chosen at run time.
 *
 * The canonical order (every path, every thread count, every tiling):
 *
 *   y = sum_i w[i] * x[i] over i < n is computed as 16 partial sums:
 *   element i goes to lane i mod 16, and each lane is a chain of fused
 *   multiply-adds in increasing i starting from +0:
 *       L[i mod 16] = fma(w[i], x[i], L[i mod 16])
 *   (so a ragged tail of n mod 16 elements touches lanes 0 .. n mod 16 - 1
 *   and leaves the others as they were); then the lanes are combined in one
 *   fixed pairwise tree
 *       s8[j] = L[j] + L[j + 8]   (j < 8)
 *       s4[j] = s8[j] + s8[j + 4] (j < 4)
 *       s2[j] = s4[j] + s4[j + 2] (j < 2)
 *       y     = s2[0] + s2[1].
 *   w[i] is the weight's float32 value exactly as hb_wmat_row widens it
 *   (bf16 and f16 widen exactly; an MLX affine4 weight is the single
 *   rounding of scale * q + bias, scale * q being exact).  Both fma and the
 *   additions are IEEE-754 binary32, round to nearest: the portable path
 *   calls fmaf, the vector paths use VFMADD on whole lanes, which round
 *   identically, so every path gives the same bits.  An affine4 row whose
 *   scale or bias is not finite does not decode: every output of that row
 *   is the quiet NaN 0x7fc00000 (hb_wmat_row widens such a row to NaN).
 *   A NaN input gives a NaN output on every path; its payload may differ.
 *
 * Paths: "portable" (C, fmaf), "avx2" (AVX2 + FMA + F16C: 16 lanes as two
 * 8-float registers), "avx512" (AVX-512 F + BW + VL: one 16-float register
 * per accumulator), "avx512vbmi" (the same, affine4 nibbles decoded with
 * AVX512-VBMI).  The process's path is picked once, the best one CPUID and
 * XGETBV say the processor and OS can run, unless the environment variable
 * HB_KERNEL_IMPL names one ("portable", "avx2", "avx512", "avx512vbmi"); an
 * unknown name, or a path this processor or build lacks, is refused by
 * hb_kernel_select (tools stop there) and the kernels fall back to the
 * portable path, so a result is never wrong, only slower.
 *
 * Units that round activations to bfloat16 (AVX512-BF16 VDPBF16PS, AMX
 * TDPBF16PS) are detected and reported but not used: they change the
 * products (x rounded to 8 significant bits) and their internal order, so
 * no path using them can equal the portable one bit for bit.
 */
#ifndef HB_SIMD_H
#define HB_SIMD_H

#include "hb_base.h"
#include "hb_err.h"
#include "backend/hb_backend.h"

enum hb_kernel_path {
	HB_KERNEL_PORTABLE = 0,
	HB_KERNEL_AVX2 = 1,
	HB_KERNEL_AVX512 = 2,
	HB_KERNEL_AVX512VBMI = 3,
	HB_KERNEL_NPATHS = 4,
};

/* What CPUID and XGETBV report (all false off x86). */
struct hb_cpu_features {
	bool avx2, fma, f16c, os_ymm;            /* the avx2 path needs all four */
	bool avx512f, avx512bw, avx512vl, os_zmm; /* the avx512 path: these too */
	bool avx512_vbmi;                         /* avx512vbmi: and this */
	bool avx512_bf16, avx512_vnni, amx_bf16;  /* reported, not used (above) */
};
void hb_cpu_features(struct hb_cpu_features *f);

/* "portable", "avx2", "avx512", "avx512vbmi"; NULL for any other value. */
const char *hb_kernel_path_name(int path);
/* Whether this build carries the path and this processor can run it. */
bool hb_kernel_path_usable(int path);

/*
 * The choice as a pure function: override is HB_KERNEL_IMPL's value (NULL
 * or "" for none), usable[p] whether path p may run.  Sets *path and returns
 * 0; or sets *path to HB_KERNEL_PORTABLE and returns HB_ERR_INVALID for an
 * unknown name, HB_ERR_UNSUPPORTED for a path that may not run here, with
 * field "env.HB_KERNEL_IMPL" in err.
 */
int hb_kernel_choose(const char *override, const bool usable[HB_KERNEL_NPATHS], int *path,
		     struct hb_error *err);
/* The process's choice, made once (thread-safe): 0 or its refusal. */
int hb_kernel_select(struct hb_error *err);
/* The path the process runs (portable after a refusal). */
int hb_kernel_path(void);
/*
 * Test and benchmark seam: make `path` the process's path from now on (the
 * model-level tests run every path in one process).  HB_ERR_UNSUPPORTED,
 * and no change, for a path this processor or build cannot run.  Not to be
 * called while kernels run on other threads.
 */
int hb_kernel_force(int path, struct hb_error *err);

/*
 * y[t * ldy + r] = sum_c w[r][c] * x[t * ldx + c] for r0 <= r < r1 and
 * t < T, in the canonical order, on the given path (an unusable one runs
 * portable).  Weights are widened in registers (the portable path: 256 at a
 * time on the stack); nothing is allocated and no matrix is copied.
 * An affine4 matrix must have cols a multiple of 64 (admission proves it).
 */
void hb_kern_rows_path(int path, const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x,
		       size_t ldx, size_t T, float *y, size_t ldy);
/* The same on the process's path. */
void hb_kern_rows(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx,
		  size_t T, float *y, size_t ldy);

/*
 * One token of the gated delta rule, hb_gdn_step's contract
 * (backend/hb_backend.h), vectorised across the value dimension with each
 * output's operations unchanged: bit-identical to the reference loops on
 * every path (hb_simd_gdn.h says why).
 */
void hb_kern_gdn_step_path(int path, float *S, const float *q, const float *k, const float *v, const float *beta,
			   const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o);
void hb_kern_gdn_step(float *S, const float *q, const float *k, const float *v, const float *beta,
		      const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o);
/*
 * The same for value heads h0 <= h < h1 only (S, S0, v and o still indexed
 * from head 0), starting from S0's heads: another bank of the state, whose
 * heads end in S with S0 unchanged, or S itself (in place).  Each head's
 * state and output depend on that head alone, so any split of [0, nv) into
 * ranges gives hb_kern_gdn_step's bits; pass 1 reads S0 as it writes S, so
 * another bank gives the bits of a memcpy and then the step, one pass over
 * the state less.
 */
void hb_kern_gdn_heads_from_path(int path, float *S, const float *S0, const float *q, const float *k,
				 const float *v, const float *beta, const float *decay, size_t nk, size_t nv,
				 size_t dk, size_t dv, size_t h0, size_t h1, float qscale, float *o);
void hb_kern_gdn_heads_from(float *S, const float *S0, const float *q, const float *k, const float *v,
			    const float *beta, const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, size_t h0,
			    size_t h1, float qscale, float *o);

/*
 * out[i] = hb_silu(g[i]) * u[i] for i < n (out may be g or u): hb_math.h's
 * hb_expf, sigmoid and product, lane for lane, so the same bits on every
 * path (portable calls hb_silu; avx2 runs hb_expf's double operations on
 * four lanes at a time, avx512 on eight).
 */
void hb_kern_silu_mul_path(int path, const float *g, const float *u, size_t n, float *out);
void hb_kern_silu_mul(const float *g, const float *u, size_t n, float *out);
/* out[i] = hb_sigmoid(x[i]) for i < n (out may be x), the same way */
void hb_kern_sigmoid_path(int path, const float *x, size_t n, float *out);
void hb_kern_sigmoid(const float *x, size_t n, float *out);

/* sum a[i] * b[i], i < n, float32 vectors, in the canonical order. */
float hb_kern_dot_path(int path, const float *a, const float *b, size_t n);
float hb_kern_dot(const float *a, const float *b, size_t n);

#endif
