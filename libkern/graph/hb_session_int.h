/*
 * hb_session_int.h: the session's state and workspace (not public).
 *   hb_session.c       lifecycle, the forward driver, embeddings, logits
 *   hb_layer_mix.c     hyper-connections, PLE, MoE
 *   hb_layer_attn.c    Gated DeltaNet and QSA
 */
#ifndef HB_SESSION_INT_H
#define HB_SESSION_INT_H

#include "hb_base.h"
#include "hb_session.h"

/* QSA queries selected and attended together over the pool (a block
 * bounds the per-query scratch; 16 keeps 2 to 4 workers busy) */
#define HB_QSA_BLOCK 16

/* a query's selected rows, at most keep * ratio + ratio - 1, at this stride */
static inline size_t hb_qsa_rows_ld(const struct hb_qwen_config *c)
{
	return (size_t)(c->indexer_budget + c->indexer_compress_ratio + 8);
}

struct hb_gdn_state {
	float *conv;     /* [K-1][conv_dim]: the previous K-1 inputs, oldest first */
	float *S;        /* [nv][dk][dv] recurrent state */
};

/* Append-only caches, indexed by (position - base): rows past the public
 * frontier belong to no one until a chunk publishes them. */
struct hb_qsa_state {
	float *k, *v;    /* [cap][nkv][hd]: normed, rotated keys; values */
	float *raw;      /* [cap][ihd]: raw index keys (before any norm) */
	float *pooled;   /* [cap / ratio][ihd]: complete groups, pooled, normed, rotated */
};

struct hb_ple_state {
	int32_t hist[8];  /* the last ngram_size - 1 tokens, oldest first (EOS at start) */
	float *conv;      /* [(K-1) * dilation][hc*H], oldest first */
};

/*
 * Everything a chunk mutates in place, twice (AFN-010): the public bank is
 * what the frontier describes; a chunk works on the other, private one and
 * publishes by flipping the index.  Append-only caches live outside the
 * banks: a chunk writes only rows past the public frontier.
 */
struct hb_bank {
	struct hb_gdn_state *gdn;    /* per layer (empty for QSA layers) */
	struct hb_ple_state *ple;    /* per layer (empty without PLE) */
	uint64_t *groups;            /* per layer: complete QSA groups */
};

/* the largest chunk whose experts run as jobs side by side (decode and
 * prefill: one pool run a layer instead of two a routed expert, and the
 * gather, SiLU and scatter of each expert on its own worker); a larger
 * chunk splits each expert's rows over the pool instead.  The per-worker
 * buffers are [min(T, HB_EJOB_T)][2H + 2I] floats, less than half of the
 * chunk's [T][k][H] expert outputs for k >= 4. */
#define HB_EJOB_T 1024
/* hb_ple_rows takes a chunk's PLE row ids this many tokens at a time */
#define HB_PLE_ROWS_BLOCK 4096

/* a PLE row of a block to read: its page, and its (token, head) index */
struct hb_ple_req {
	uint64_t page;
	uint32_t at;
};

struct hb_session {
	const struct hb_model *m;
	struct hb_pool *pool;
	uint64_t cap;                /* positions the caches hold */
	uint64_t base;               /* the first live position (left padding) */
	uint64_t pos;                /* while a chunk runs: its first position */
	bool want_logits;            /* while a chunk runs: the caller asked for logits */
	bool last_logits;            /* ... of its last position only (hb_session_forward_last) */
	uint64_t frontier;           /* public: positions [base, frontier) are state */
	uint64_t epoch;              /* the public state's identity (hb_session_new_epoch) */
	struct hb_bank bank[2];
	int pub;                     /* index of the public bank */
	struct hb_gdn_state *gdn;    /* the private bank's arrays during a chunk */
	const struct hb_gdn_state *gdn_from; /* during a chunk: the public bank's, its GDN layers' start */
	bool gdn_bad;                /* during a chunk: a GDN state came out not finite */
	struct hb_ple_state *ple;
	uint64_t *groups;
	struct hb_qsa_state *qsa;
	int32_t *tokens;             /* [cap] the sequence, for rewind */
	float *out_logits;           /* [ws_T][vocab] private until publication */
	int (*fault)(void *ctx, const char *stage); /* test seam (hb_session_test.h) */
	void *fault_ctx;
	bool fail_alloc;             /* test seam: the next workspace growth fails */
	struct hb_ple_scratch *ple_scratch; /* [pool workers] a PLE page snapshot each */
	int64_t *ple_ids;            /* [HB_PLE_ROWS_BLOCK][HB_PLE_MAX_HEADS] a block's row ids */
	struct hb_ple_req *ple_req;  /* [HB_PLE_ROWS_BLOCK][HB_PLE_MAX_HEADS] the same by page */
	struct hb_session_counters ctr;
	/* workspace, grown to the largest chunk seen (never per token) */
	size_t ws_T;
	float *x;          /* [T][hc*H] streams */
	float *xn;         /* [T][hc*H] normed streams */
	float *mixed;      /* [T][H] */
	float *inj;        /* [T][hc] */
	float *y;          /* [T][H] block output */
	float *big;        /* [T][max projection] */
	float *big2;       /* [T][max projection] */
	float *big3;       /* [T][max projection] */
	float *scratch;    /* pool workers x max cols */
	float *tok;        /* per-token scratch, max projection */
	float *tok2;
	float *experts;    /* [T][k][H] routed expert outputs, summed in rank order */
	int32_t *route_ids;/* [T][k] */
	float *route_w;    /* [T][k] */
	/* QSA, a block of HB_QSA_BLOCK queries at a time (hb_layer_attn.c) */
	int32_t *sel;      /* [block][keep] heaps, [block][rows_ld] rows, [rows_ld] positions */
	float *scores;     /* [block][scores_ld]: every group a query can see */
	size_t scores_ld;  /* cap / ratio + 1 */
	float *probs;      /* [pool][rows_ld] */
	float *qout;       /* [block][heads * head_dim]: gated outputs */
	float *qnorm;      /* [block][heads * head_dim]: queries normed, rotated */
	uint64_t qgroups[HB_QSA_BLOCK], qvisible[HB_QSA_BLOCK];
	size_t qn[HB_QSA_BLOCK];
	size_t max_proj;
	/* streamed experts (m->xs): a route's wants and its experts in
	 * ascending id [num_experts], and the previous-route predictor */
	struct hb_xs_want *xs_w;
	uint32_t *xs_u;
	struct hb_xs_prev xs_prev;
	/* expert jobs run side by side (hb_moe_forward): per pool worker
	 * [ws_T][2H + 2I] floats (gathered inputs, gate, up, outputs) and
	 * [ws_T] output rows */
	float *ejob;
	uint32_t *ejob_rows;      /* [workers][min(ws_T, HB_EJOB_T)] */
	size_t ejob_stride;
	size_t ejob_T;            /* tokens a worker's buffers hold */
	struct hb_moe_flat *flat; /* a decode token's experts over the pool */
	/* whole chunks on a device (hb_session_dev.c) */
	uint32_t obs_kinds;       /* the observations the caller takes (bits 1 << kind) */
	bool dev_ran, dev_finite; /* this chunk ran on the device; what it found */
	bool dev_kept;            /* and wrote its state back (not a final chunk's) */
	bool final_next, spent;   /* hb_session_final: the next chunk is the last; it was */
	uint64_t dev_epoch;       /* the epoch its publication takes (the device's promise) */
	struct hb_dev_layer *dev_layers; /* [num_layers] */
	float *dev_emb;           /* [PLE layers][dev_T][ple_embed_dim] */
	int32_t *dev_ids;         /* [num_layers][dev_T][k] */
	float *dev_w;
	size_t dev_T;
};

/* hb_layer_mix.c */
/*
 * fn(s, i0, i1, ctx) over ranges covering [0, n), spread over the session's
 * pool (about 4 ranges a worker; serially for one item or without a
 * pool).  For per-token (or per-channel) loops whose items are
 * independent: each item's operations are those of the serial loop, so
 * the bits do not depend on the pool.  fn must not touch the pool.
 */
typedef void (*hb_range_fn)(struct hb_session *s, size_t i0, size_t i1, void *ctx);
void hb_each(struct hb_session *s, size_t n, hb_range_fn fn, void *ctx);
void hb_hc_forward(struct hb_session *s, const struct hb_hc_weights *w, size_t T, bool combine);
void hb_hc_inject(struct hb_session *s, size_t T);
int hb_ple_forward(struct hb_session *s, uint32_t layer, const int32_t *tokens, size_t T,
		   hb_observe_fn obs, void *ctx, struct hb_error *err);
/* hb_ple_forward's parts: the chunk's rows (history read), the history moved on */
int hb_ple_rows(struct hb_session *s, uint32_t layer, const int32_t *tokens, size_t T, float *emb,
		hb_observe_fn obs, void *ctx, struct hb_error *err);
void hb_ple_history(struct hb_session *s, uint32_t layer, const int32_t *tokens, size_t T);
/* hb_session.c: a state identity never given before (process-wide) */
uint64_t hb_session_new_epoch(void);
/* hb_session_dev.c */
/* the n sessions' open chunks (hb_session_forward_batch) on a device as one
 * pass: false when none takes them (nothing changed); true with *rc */
bool hb_session_dev_chunks(struct hb_session *const *ss, size_t n, const int32_t *const *tokens, const size_t *T,
			   hb_observe_fn obs, void *const *ctx, int *rc, struct hb_error *err);
void hb_session_dev_free(struct hb_session *s);
/* A streamed expert that cannot be read fails the chunk (err names the record). */
int hb_moe_forward(struct hb_session *s, uint32_t layer, size_t T, hb_observe_fn obs, void *ctx,
		   struct hb_error *err);
/* hb_moe_flat.c: a decode token's resident experts as row ranges over the
 * pool (bit-identical to one job per expert); n routed experts in s->xs_u,
 * outputs into s->experts by rank and the shared one into s->big2 */
struct hb_moe_flat *hb_moe_flat_new(const struct hb_qwen_config *c);
void hb_moe_flat_free(struct hb_moe_flat *f);
bool hb_moe_flat_fits(const struct hb_session *s, size_t T);
void hb_moe_flat(struct hb_session *s, uint32_t layer, size_t n);
/* hb_layer_attn.c */
void hb_gdn_forward(struct hb_session *s, uint32_t layer, size_t T);
void hb_qsa_forward(struct hb_session *s, uint32_t layer, size_t T, hb_observe_fn obs, void *ctx);
void hb_rope(const struct hb_model *m, float *x, uint64_t pos);

#endif
