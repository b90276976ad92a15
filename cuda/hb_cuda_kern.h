/*
 * hb_cuda_kern.h: the CUDA backend's kernel launchers, in C (internal to
 * cuda/: hb_cuda.c is their one caller, hb_cuda_kern.cu their body).
 *
 * Every pointer here is device memory; every launcher queues its kernels on
 * the default stream and returns the launch's cudaError_t as an int (0 when
 * queued).  Results are float32, accumulated in float32:
 *   hbk_matmul      y[T][rows] = x[T][cols] . W^T, W in its storage type
 *                   (F32, F16, BF16, MLX affine4-g64), widened in the
 *                   kernel exactly as the CPU reference widens it
 *   hbk_swiglu_act  a = silu(g) * u, silu as libkern/math (x * sigmoid x)
 *   hbk_gdn_step    the gated delta rule for one token, every value head;
 *                   the same operations in the same order as the CPU
 *                   reference (no FMA), so bit-identical to it
 *   hbk_qsa_select  group scores, top `keep` by (score desc, group asc),
 *                   chronological rows and the tail; count written to *count
 *   hbk_attend      one query over n gathered rows [n][dim] with an online
 *                   softmax (no mask, no score array)
 */
#ifndef HB_CUDA_KERN_H
#define HB_CUDA_KERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* the storage types of hb_backend.h's enum hb_wtype */
enum { HBK_F32 = 0, HBK_F16 = 1, HBK_BF16 = 2, HBK_AFFINE4_G64 = 3 };

int hbk_matmul(int type, const void *W, uint64_t row_bytes, uint64_t rows, uint64_t cols,
	       const float *x, size_t T, float *y);
int hbk_swiglu_act(const float *g, const float *u, size_t n, float *a);
int hbk_gdn_step(float *S, const float *q, const float *k, const float *v, const float *beta,
		 const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o);
/* scores: [groups] floats of scratch, flags: [groups] ints of scratch;
 * rows: keep * ratio + ratio - 1 ints at least */
int hbk_qsa_select(const float *iq, size_t heads, size_t dim, const float *pooled, uint64_t groups,
		   uint64_t keep, uint64_t ratio, uint64_t visible, float *scores, int32_t *flags,
		   int32_t *rows, int32_t *count);
int hbk_attend(const float *q, const float *K, const float *V, size_t dim, float scale, size_t n,
	       float *out);
/* the chunk forms: each output that of the single launcher's */
int hbk_gdn_scan(float *S, const float *qkv, size_t ld, const float *beta, const float *decay, size_t T,
		 size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o, size_t ldo);
/* hbk_gdn_scan for several sequences in one launch: sequence j's state
 * at S + j s_stride, its rows [off[j], off[j] + len[j]) of qkv, beta,
 * decay and o (the batch's rows, as hbk_gdn_scan takes row 0) */
#define HBK_SEQS_MAX 64
struct hbk_seqs {
	uint32_t n;
	uint32_t off[HBK_SEQS_MAX], len[HBK_SEQS_MAX];
	size_t s_stride;
};
/* the same with tokens overlapped (hb_cuda_gdn.cu), bit-identical; -1:
 * not a key width it is built for */
int hbk_gdn_scan_pipe(float *S, const float *qkv, size_t ld, const float *beta, const float *decay,
		      const struct hbk_seqs *q, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o,
		      size_t ldo);
int hbk_gdn_scan_seqs(float *S, const float *qkv, size_t ld, const float *beta, const float *decay,
		      const struct hbk_seqs *q, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o,
		      size_t ldo);
/*
 * The delta rule's chunked parallel form (hb_cuda_gdnc.cu): what
 * hbk_gdn_scan_seqs computes, over spans of HBK_GDN_SPAN tokens, in
 * another arithmetic order (not bit-identical: bounded against the CPU
 * reference by test_cuda_parity).  g: the log decays (hbg_gdn_gates' g),
 * as beta's rows; scratch: hbk_gdn_chunked_scratch(q, nv, dk, dv) floats.
 * -1: a key width over 128.
 */
#define HBK_GDN_SPAN 64
static inline size_t hbk_gdn_span_floats(size_t dk, size_t dv)
{
	size_t DK = dk <= 64 ? 64 : 128;

	/* W, U, P, the decays; Kt; Qg; the starting state (hb_cuda_gdnc.cu's span_at) */
	return HBK_GDN_SPAN * (DK + dv + HBK_GDN_SPAN + 2) + 2 * DK * HBK_GDN_SPAN + DK * dv;
}
static inline size_t hbk_gdn_chunked_scratch(const struct hbk_seqs *q, size_t nv, size_t dk, size_t dv)
{
	size_t spans = 0;

	for (uint32_t j = 0; j < q->n; j++)
		spans += (q->len[j] + HBK_GDN_SPAN - 1) / HBK_GDN_SPAN;
	return spans * nv * hbk_gdn_span_floats(dk, dv);
}
int hbk_gdn_chunked(float *S, const float *qkv, size_t ld, const float *beta, const float *g,
		    const struct hbk_seqs *q, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o,
		    size_t ldo, float *scratch);
/* for bench/cuda-gdn, which times the chunked form's kernels apart: bit 0
 * runs the spans' preparation, bit 1 the scan over them, bit 2 the
 * outputs (7, all three: anything else leaves S and o wrong) */
extern int hbk_gdn_chunked_parts;
/* query i: iq + i iq_ld, groups[i], visible[i] (device arrays), scores and
 * flags at i scores_ld (scores_ld >= most, the largest groups[i]), rows at
 * i rows_ld, its count in count[i] */
int hbk_qsa_select_batch(size_t nq, const float *iq, size_t iq_ld, size_t heads, size_t dim,
			 const float *pooled, const uint64_t *groups, const uint64_t *visible, uint64_t most,
			 uint64_t keep, uint64_t ratio, float *scores, size_t scores_ld, int32_t *flags,
			 int32_t *rows, size_t rows_ld, int32_t *count);
/* the scores of hbk_qsa_select_batch on tiles of queries and groups
 * (hb_cuda_qsa_score.cu), bit for bit the warp kernel's; -1 where it is
 * not built for the width (64 and 128) */
int hbk_qsa_score_tiles(size_t nq, const float *iq, size_t iq_ld, size_t heads, size_t dim, const float *pooled,
			const uint64_t *groups, uint64_t most, float scale, float *scores, size_t scores_ld);
/* 1 (the default): hbk_qsa_select_batch scores on tiles where they fit;
 * 0: always with the warp kernel (tests compare the two) */
extern int hbk_qsa_tiles;
/* hb_backend.h's hb_qsa_attn, every pointer the device's, n as int32 */
struct hbk_attn {
	size_t nq, heads, per_kv, dim;
	const float *q;
	size_t q_ld, qh_ld;
	const float *K, *V;
	size_t stride;
	float scale;
	const int32_t *rows;
	size_t rows_ld;
	const int32_t *n;
	float *out;
	size_t out_ld;
};
int hbk_attend_batch(const struct hbk_attn *a);
/* hbk_matmul for a weight of few rows (hb_cuda_skinny.cu: any row count;
 * worth it below the tiled kernels' 64) */
int hbk_matmul_skinny(int type, const void *W, uint64_t row_bytes, uint64_t rows, uint64_t cols, const float *x,
		      size_t T, float *y);
/* the same with one block to a query's K/V head (hb_cuda_attn.cu); -1:
 * not a shape it takes */
int hbk_attend_group(const struct hbk_attn *a);
/* whether a batch's strides are whole float4s and its pointers 16-byte
 * aligned (what the grouped kernels' wide loads need) */
bool hbk_attn_float4(const struct hbk_attn *a);
/* the same on the tensor cores, float32 operands as two bf16 terms
 * (hb_cuda_attn_mma.cu: 1 to 16 query heads to a K/V head, width a
 * multiple of 16 up to 256); -1: not a shape it takes */
int hbk_attend_mma(const struct hbk_attn *a);
/* the routed experts: y[off[z] ..) = W[z] x[off[z] ..) for each group z
 * (most: the largest group); packed rows gathered from and combined into
 * token rows (hb_moe_batch) */
int hbk_matmul_grouped(int type, const void *const *W, uint64_t row_bytes, uint64_t rows, uint64_t cols,
		       const int32_t *off, size_t groups, size_t most, const float *x, float *y);
int hbk_gather_rows(const float *x, size_t H, const int32_t *pack, size_t k, size_t P, float *xg);
int hbk_combine(const float *out, const int32_t *at, const float *w, size_t T, size_t k, size_t H, float *y);
/* the widest head hbk_attend takes, and the widest value head of hbk_gdn_step */
#define HBK_ATTEND_MAXDIM 1024
#define HBK_GDN_MAXDV 1024

#ifdef __cplusplus
}
#endif

#endif
