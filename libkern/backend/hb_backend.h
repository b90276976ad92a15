/*
 * hb_backend.h: the kernel seam, the one header through which the Qwen4Exp
 * graph (libkern/graph/) calls its heavy operations.
 *
 * Above the seam: the session, its transactional state (the two banks, the
 * frontier, the append-only caches and their publication, AFN-010), the
 * order of the stages, routing decisions, observers, and the cheap
 * per-token arithmetic of libkern/math/hb_math.h.  Below it: the operations
 * whose cost grows with the weights or the context, which a GPU backend
 * must own to be worth having.  Today one backend implements it, the CPU
 * reference in libkern/backend/cpu/, chosen at compile time (direct calls,
 * no function pointers: a call costs what it did before the seam; a device
 * backend installed at run time, below, costs one pointer test).  A GPU
 * backend (cuda/, metal/) implements these same functions and is compared
 * against the CPU reference within a stated tolerance (STYLE.md 7; ds4's
 * ds4_gpu.h is the model).  The CPU reference is float32 throughout, with a
 * fixed summation order, so its results do not depend on the thread count.
 *
 * What sits here and why:
 *   hb_wmat, hb_wmat_row  the weights as the artifact stores them (F32,
 *                         F16, BF16, MLX affine4 rows), never copied; a
 *                         backend decides how to read them.  One row is an
 *                         embedding lookup.
 *   hb_matmul             every Linear layer of the graph: projections,
 *                         router, lm_head (the largest matrix of a token).
 *   hb_swiglu             an expert FFN over a batch of tokens: the routed
 *                         experts (one call per expert, its tokens gathered)
 *                         and the shared expert; 3 of a layer's matrices.
 *   hb_gdn_step           the gated delta rule's recurrence for one token,
 *                         [nv][dk][dv] of state read and written per token;
 *                         hb_gdn_scan the same over a chunk, heads over
 *                         the pool.
 *   hb_qsa_select         QSA's group scoring and top-k selection, the work
 *                         that grows with the context (AFN-016/017).
 *   hb_qsa_attend         attention over gathered K/V rows; dense attention
 *                         is the same call over every visible row.
 *   the _batch forms      a chunk's queries (and heads) over the pool, each
 *                         output that of the single call.
 * Buffers are the caller's (the session's workspace): nothing here
 * allocates in a per-token path.  `pool` is the CPU backend's workers; a
 * backend that does not use it ignores it.
 */
#ifndef HB_BACKEND_H
#define HB_BACKEND_H

#include "hb_base.h"
#include "hb_err.h"
#include "hb_pool.h"

struct hb_dev_chunk;

enum hb_wtype {
	HB_W_F32 = 0,
	HB_W_F16 = 1,
	HB_W_BF16 = 2,
	HB_W_AFFINE4_G64 = 3, /* MLX affine layout, rows of `cols` weights */
};

/* A row-major weight matrix [rows][cols] in its storage type. */
struct hb_wmat {
	const void *data;
	enum hb_wtype type;
	uint64_t rows, cols;
	uint64_t row_bytes;
};

/*
 * Start the backend, once per process (thread-safe).  The CPU reference
 * picks its kernel path here (backend/simd/hb_simd.h: the best the
 * processor has, or HB_KERNEL_IMPL); an unknown or unrunnable
 * HB_KERNEL_IMPL is refused (field "env.HB_KERNEL_IMPL"), and sessions are
 * not created on a refused backend.  Returns 0 or the refusal.
 */
int hb_backend_start(struct hb_error *err);
/* "cpu/" and the kernel path, e.g. "cpu/avx512vbmi" (static). */
const char *hb_backend_name(void);

/* Widen row r of w into out[cols].  A row that does not decode (an affine4
 * row with a non-finite scale) becomes NaN, never a stale row. */
void hb_wmat_row(const struct hb_wmat *w, uint64_t r, float *out);

/*
 * y[t][r] = sum_c w[r][c] * x[t][c] for t < T, r < w->rows (a Linear layer
 * applied to T inputs).  Rows are spread over the pool (may be NULL).
 * x is [T][cols], y is [T][rows].  scratch: (pool size) * cols floats.
 */
void hb_matmul(struct hb_pool *pool, const struct hb_wmat *w, const float *x, size_t T,
	       float *y, float *scratch);

/*
 * Several products of T tokens each, y_i = w_i x_i, as hb_matmul computes
 * each (the same bits), in one pass over the pool: one wake-up instead of
 * n, the rows of all of them shared out together (decode's projections of
 * one input are many and small).  No y_i may overlap any x_j or y_j.  At
 * most HB_MM_GROUP_MAX products (more run one by one).
 */
#define HB_MM_GROUP_MAX 4
struct hb_mm {
	const struct hb_wmat *w;
	const float *x;
	float *y;
};
void hb_matmul_group(struct hb_pool *pool, const struct hb_mm *mm, size_t n, size_t T);

/*
 * A SwiGLU expert over n inputs x [n][cols]:
 *   g = gate(x), u = up(x)            [n][I] each, I = gate->rows
 *   act = silu(g) * u                 [n][I]
 *   out = down(act)                   [n][down->rows]
 * act may be g (computed in place); out may be g or u, but neither act nor
 * x.  scratch as for hb_matmul, for the widest of the three matrices.
 */
void hb_swiglu(struct hb_pool *pool, const struct hb_wmat *gate, const struct hb_wmat *up,
	       const struct hb_wmat *down, const float *x, size_t n, float *g, float *u, float *act,
	       float *out, float *scratch);

/*
 * One token of the gated delta rule (upstream's recurrent form) for every
 * value head h < nv, whose key head is h / (nv / nk):
 *   S_h *= decay[h]
 *   d    = (v_h - S_h^T k) * beta[h]
 *   S_h += k d^T
 *   o_h  = S_h^T (q * qscale)
 * S: [nv][dk][dv], updated in place; q, k: [nk][dk] (l2-normed); v: [nv][dv];
 * beta, decay: [nv]; o: [nv][dv].
 */
void hb_gdn_step(float *S, const float *q, const float *k, const float *v, const float *beta,
		 const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o);

/*
 * T consecutive tokens of the same rule: token t's q, k and v at
 * qkv + t * ld (q at 0, k at nk * dk, v at 2 * nk * dk), its beta and decay
 * at beta + t * nv and decay + t * nv, its output at o + t * ldo.  Value
 * heads are independent through the whole chunk, so they are spread over
 * the pool (may be NULL), each head running its tokens in order with
 * hb_gdn_step's operations: the state and outputs are those of T calls of
 * hb_gdn_step, bit for bit, for any pool size.  A head's state stays in
 * cache across the chunk instead of the whole state once per token.
 */
void hb_gdn_scan(struct hb_pool *pool, float *S, const float *qkv, size_t ld, const float *beta,
		 const float *decay, size_t T, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o,
		 size_t ldo);
/*
 * hb_gdn_scan starting from the state S0 (S0 == S: in place) and writing S:
 * each value head's [dk][dv] is copied by the job that then runs it, so a
 * transaction's private state (AFN-010) costs no serial copy of the whole
 * state before the chunk.  Returns whether S is all finite afterwards,
 * checked head by head as each job ends, while the head is in cache.
 */
bool hb_gdn_scan_from(struct hb_pool *pool, float *S, const float *S0, const float *qkv, size_t ld,
		      const float *beta, const float *decay, size_t T, size_t nk, size_t nv, size_t dk, size_t dv,
		      float qscale, float *o, size_t ldo);

/*
 * QSA selection for one query (AFN-016, AFN-017).  Every complete group of
 * the query's visible run is scored from its pooled key (sum over index
 * heads of relu(q_h . k) / sqrt(d)); the best `keep` groups by (score
 * descending, group ascending) are kept with a bounded heap, emitted
 * chronologically expanded to their tokens, and the incomplete tail is
 * appended.  Work and memory per query scale with the number of groups plus
 * the selected width (at most keep * ratio + ratio - 1 rows), never with
 * queries x keys; no mask exists.  Model-free: arrays only, so the
 * long-context tests drive it at 262,144 visible tokens without a model.
 *
 * iq: [heads][dim] index queries (normed, rotated); pooled: [groups][dim]
 * group keys (pooled, normed, rotated).  scores is scratch for `groups`
 * floats, heap scratch for `keep` entries.  rows receives the selected rows
 * (relative to the first live position), chronological; returns their count.
 */
size_t hb_qsa_select(const float *iq, size_t heads, size_t dim, const float *pooled,
		     uint64_t groups, uint64_t keep, uint64_t ratio, uint64_t visible,
		     float *scores, int32_t *heap, int32_t *rows);

/*
 * hb_qsa_select for the nq queries of a chunk, over the pool (may be NULL).
 * Query i: index queries at iq + i * iq_ld, groups[i] complete groups,
 * visible[i] visible rows; its scores scratch at scores + i * scores_ld (at
 * least groups[i] floats), heap scratch at heap + i * keep, selected rows
 * at rows + i * rows_ld, their count in n[i].  Group scores are computed in
 * slices spread over the pool (so one long query uses every worker), each
 * score by hb_qsa_select's operations, then each query's membership and
 * emission as there: n[i] and the rows are those of the serial call, for
 * any pool size.
 */
struct hb_qsa_batch {
	size_t nq, heads, dim;
	const float *iq;
	size_t iq_ld;
	const float *pooled;
	const uint64_t *groups, *visible;
	uint64_t keep, ratio;
	float *scores;
	size_t scores_ld;
	int32_t *heap, *rows;
	size_t rows_ld;
	size_t *n;
};
void hb_qsa_select_batch(struct hb_pool *pool, const struct hb_qsa_batch *b);

/*
 * Attention of one query head over exactly `n` gathered rows: K and V rows
 * at rows[i] * stride + offset, dim values each; probs is scratch for n.
 * out[dim] = softmax(q . k_i * scale) weighted values, in the rows' order.
 */
void hb_qsa_attend(const float *q, const float *K, const float *V, size_t stride, size_t offset,
		   size_t dim, float scale, const int32_t *rows, size_t n, float *probs, float *out);

/*
 * hb_qsa_attend for every (query, head) of a chunk, over the pool (may be
 * NULL): head h of query i reads q + i * q_ld + h * qh_ld, the K/V rows of
 * KV head h / per_kv (offset (h / per_kv) * dim), query i's rows at
 * rows + i * rows_ld (n[i] of them), and writes out + i * out_ld + h * dim.
 * probs: one scratch of probs_ld floats (at least the largest n[i]) per
 * worker of the pool.  Every output is hb_qsa_attend's, bit for bit.
 */
struct hb_qsa_attn {
	size_t nq, heads, per_kv, dim;
	const float *q;
	size_t q_ld, qh_ld;
	const float *K, *V;
	size_t stride;
	float scale;
	const int32_t *rows;
	size_t rows_ld;
	const size_t *n;
	float *probs;
	size_t probs_ld;
	float *out;
	size_t out_ld;
	/* true: K and V (same pointers, same stride) hold the same rows as at
	 * the previous call, and more rows only where that call read none, so
	 * a device may keep its copy; false promises nothing.  The CPU
	 * reference ignores it. */
	bool kv_kept;
};
void hb_qsa_attend_batch(struct hb_pool *pool, const struct hb_qsa_attn *a);

/*
 * A device backend (cuda/; metal/ later) is linked only into the binaries
 * that may use one (hb-run, hb-replay) and installed at run time, before
 * any session exists, with hb_backend_set_device; none installed (the
 * default) is the CPU reference, unchanged bit for bit.  While one is
 * installed the operations above run on it: one test of a pointer per
 * call, no other indirection.  A device operation that fails (a device
 * error, an out-of-memory) writes NaN into its outputs, so that the
 * chunk's finite check refuses the chunk and its public state stays as it
 * was (AFN-010); the device keeps its first error for the front to report.
 * hb_qsa_select on a failed device returns one row (row 0) whose attention
 * is then NaN.  The pointer arguments are the CPU reference's, host memory.
 * The chunk forms (hb_gdn_scan, hb_qsa_select_batch, hb_qsa_attend_batch)
 * go to the device's own chunk entry where it has one (one upload of the
 * chunk's operands, one launch, one download: each output that of the
 * single calls), else run their single-token or single-query calls one
 * after another, so every operation still reaches it.  moe_experts (may be
 * NULL) runs a chunk's routed experts and their weighted sum in one call
 * (hb_moe_batch); it returns false, having touched nothing, when it cannot
 * take the batch (a weight outside the resident ranges, mixed storage
 * types), and the graph then runs the experts one by one.
 */
struct hb_moe_batch {
	size_t T, k, n;           /* tokens, ranks a token, distinct experts */
	const uint32_t *ids;      /* [n] the chunk's experts, ascending */
	/* expert e's three matrices (the model's, never copied) */
	void (*expert)(const void *ctx, uint32_t e, struct hb_wmat *gate, struct hb_wmat *up,
		       struct hb_wmat *down);
	const void *ctx;
	const int32_t *route_ids; /* [T][k] */
	const float *route_w;     /* [T][k] */
	const float *x;           /* [T][gate->cols] */
	/* [T][down->rows]: y_t = sum over r < k, in rank order from +0, of
	 * expert(route_ids[t][r])(x_t) * route_w[t][r] */
	float *y;
};
struct hb_device_ops {
	const char *name; /* e.g. "cuda/sm_90", what hb_backend_name says */
	void (*matmul)(const struct hb_wmat *w, const float *x, size_t T, float *y);
	void (*swiglu)(const struct hb_wmat *gate, const struct hb_wmat *up,
		       const struct hb_wmat *down, const float *x, size_t n, float *out);
	void (*gdn_step)(float *S, const float *q, const float *k, const float *v, const float *beta,
			 const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, float qscale,
			 float *o);
	size_t (*qsa_select)(const float *iq, size_t heads, size_t dim, const float *pooled,
			     uint64_t groups, uint64_t keep, uint64_t ratio, uint64_t visible,
			     int32_t *rows);
	void (*qsa_attend)(const float *q, const float *K, const float *V, size_t stride,
			   size_t offset, size_t dim, float scale, const int32_t *rows, size_t n,
			   float *out);
	/* the chunk forms: NULL where the device has none */
	void (*gdn_scan)(float *S, const float *qkv, size_t ld, const float *beta, const float *decay,
			 size_t T, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o,
			 size_t ldo);
	void (*qsa_select_batch)(const struct hb_qsa_batch *b);
	void (*qsa_attend_batch)(const struct hb_qsa_attn *a);
	bool (*moe_experts)(const struct hb_moe_batch *b);
	/* n whole chunks of the graph (graph/hb_dev_chunk.h; n sequences of
	 * one model) as one pass: false, having written nothing, when the
	 * device declines them; NULL where the device has no graph of its own */
	bool (*chunk)(struct hb_dev_chunk *c, size_t n);
};

/* Install a device backend (NULL: back to the CPU reference).  Not
 * thread-safe against running sessions: call it before creating any. */
void hb_backend_set_device(const struct hb_device_ops *ops);
const struct hb_device_ops *hb_backend_device(void);

#endif
