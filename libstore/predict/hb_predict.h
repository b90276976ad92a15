/*
 * hb_predict.h: the predictor's inputs and the predictor itself, on disk
 * (AFN-021 Gates 3-5): feature shards and predictor checkpoints, both
 * safetensors files, so that numpy or PyTorch users can train and inspect
 * without our code (hb-replay(1) FEATURES, PREDICTOR CHECKPOINTS).
 *
 * A feature is the representation the predictor sees, reduced online
 * before it is written: a fixed, seeded random projection of width
 * `source_width` to `width` (Rademacher entries +-1/sqrt(width), exact in
 * float), one vector per layer per position.  A feature set is a directory:
 * shards features-KKKKKK.safetensors and a manifest features.json that names
 * each shard with its size and SHA-256; every shard repeats the identities
 * in its __metadata__ (artifact, tokenizer/template, projection seed and
 * digest, split name and id) and carries each row's lineage (sequence,
 * position, owner, thread).  Readers check the digests and the identities.
 *
 * A checkpoint is the smallest shared predictor: a low-rank trunk
 * [rank, width], a target-layer embedding [layers, rank], shared expert-head
 * embeddings [experts, rank] and a bias [experts]; scores
 * s_e = head_e . (trunk x + layer_l) + bias_e.  It carries the identities of
 * what it was trained on and refuses (a stable id naming the field) to score
 * features of another artifact, tokenizer, projection or split, or rows of
 * a thread it was trained on.  This module owns the formats, the
 * projection and the scoring; training is hb-replay's (cmd/hb-replay/
 * dataset/hb_replay_train.c).  It never prints.
 */
#ifndef HB_PREDICT_H
#define HB_PREDICT_H

#include "hb_base.h"
#include "hb_err.h"

/* X(symbol, "id", "meaning") */
#define HB_PREDICT_DIAGS(X)                                                                      \
	X(FEATURE_MANIFEST, "feature-manifest", "a feature manifest is malformed or names no shard")    \
	X(FEATURE_DIGEST, "feature-digest", "a feature shard's size or SHA-256 differ from its manifest") \
	X(FEATURE_IDENTITY, "feature-identity", "a feature shard or set disagrees with another's identity") \
	X(FEATURE_LEAK, "feature-leak", "one thread appears in two splits")                          \
	X(FEATURE_PARITY, "feature-parity", "decode features differ from replay's, or a row has none") \
	X(PREDICTOR_FORMAT, "predictor-format", "not a predictor checkpoint of a known version")        \
	X(PREDICTOR_ARTIFACT, "predictor-artifact", "the predictor was trained on another artifact")    \
	X(PREDICTOR_TEXT, "predictor-text", "the predictor was trained with another tokenizer/template") \
	X(PREDICTOR_PROJECTION, "predictor-projection", "the predictor was trained on another projection") \
	X(PREDICTOR_SPLIT, "predictor-split", "the features come from another split, or from its train split") \
	X(PREDICTOR_GEOMETRY, "predictor-geometry", "layers, width, experts or top-k differ")         \
	X(PREDICTOR_LEAK, "predictor-leak", "a row belongs to a thread the predictor was trained on")

enum hb_predict_diag {
#define HB_PREDICT_ENUM_(sym, id, meaning) HB_PDD_##sym,
	HB_PREDICT_DIAGS(HB_PREDICT_ENUM_)
#undef HB_PREDICT_ENUM_
	HB_PDD_COUNT
};
const char *hb_predict_diag_id(enum hb_predict_diag d);

#define HB_FEATURE_FORMAT "hebrus-features/1"
#define HB_FEATURE_MANIFEST "features.json"
#define HB_PREDICTOR_FORMAT "hebrus-predictor/1"
#define HB_PROJECTION_DOMAIN "hebrus-projection/1"
#define HB_SPLIT_NAME_MAX 24
#define HB_TAP_MAX 64

/* What a feature set is, besides its rows. */
struct hb_feature_ident {
	uint8_t artifact[32], text[32], projection[32], split_id[32];
	uint64_t projection_seed;
	uint32_t width, source_width, layers;
	char split[HB_SPLIT_NAME_MAX];     /* "train", "validation", "temporal", "runtime", "heldout" */
	char tap[HB_TAP_MAX];              /* where the state was read, e.g. "pre-attention-mix" */
};

struct hb_feature_set {
	struct hb_feature_ident id;
	uint64_t n, cap;
	uint64_t *sequence, *position, *owner, *thread;
	float *x;                          /* [n][layers][width] */
};

/* ------------------------------------------------------------ projection */

/* P[width][source_width]: entry (i, j) is +-1/sqrt(width), the sign bit i x
 * source_width + j of a splitmix64 stream from seed; digest is SHA-256 of
 * HB_PROJECTION_DOMAIN, NUL, seed, source_width, width (u64 LE) and P (f32
 * LE).  P is malloc'd. */
int hb_projection_make(uint64_t seed, uint32_t source_width, uint32_t width, float **P, uint8_t digest[32],
		       struct hb_error *err);
/* out[i] = sum_j P[i][j] in[j], summed in j order in double. */
void hb_projection_apply(const float *P, uint32_t source_width, uint32_t width, const float *in, float *out);

/* ------------------------------------------------------------ feature sets */

void hb_feature_set_init(struct hb_feature_set *s, const struct hb_feature_ident *id);
/* Append one row: x holds layers x width floats. */
int hb_feature_append(struct hb_feature_set *s, uint64_t sequence, uint64_t position, uint64_t owner,
		      uint64_t thread, const float *x, struct hb_error *err);
void hb_feature_set_release(struct hb_feature_set *s);

/* Write s as shards of at most rows_per_shard rows and the manifest into
 * dir (created if absent); each file is published atomically, the manifest
 * last.  *bytes (may be NULL) receives the bytes of all shards. */
int hb_feature_dir_write(const char *dir, const struct hb_feature_set *s, uint64_t rows_per_shard, uint64_t *bytes,
			 struct hb_error *err);
/* The same, row by row with bounded memory: a shard is written each
 * rows_per_shard rows (0: one shard), the manifest by close, which frees
 * w (abort frees it and leaves no manifest: a set without one is partial). */
struct hb_feature_writer;
int hb_feature_writer_open(struct hb_feature_writer **w, const char *dir, const struct hb_feature_ident *id,
			   uint64_t rows_per_shard, struct hb_error *err);
int hb_feature_writer_add(struct hb_feature_writer *w, uint64_t sequence, uint64_t position, uint64_t owner,
			  uint64_t thread, const float *x, struct hb_error *err);
int hb_feature_writer_close(struct hb_feature_writer *w, uint64_t *bytes, struct hb_error *err);
void hb_feature_writer_abort(struct hb_feature_writer *w);
/* Read a feature directory: the manifest, then every shard, checked
 * against it (feature-digest, feature-identity); rows in shard order. */
int hb_feature_dir_load(const char *dir, struct hb_feature_set *s, struct hb_error *err);
/* Bytes a shard of `rows` rows takes on disk, header included (the
 * manifest's arithmetic, hb-replay(1) FEATURES). */
uint64_t hb_feature_row_bytes(uint32_t layers, uint32_t width);

/* No thread of a is in b (feature-leak names the first, else HB_OK). */
int hb_feature_check_disjoint(const struct hb_feature_set *a, const struct hb_feature_set *b, struct hb_error *err);
/* a and b share artifact, text, projection and split id (feature-identity). */
int hb_feature_check_same_origin(const struct hb_feature_ident *a, const struct hb_feature_ident *b,
				 const char *what, struct hb_error *err);

/* Decode features (hb-run) against replay's (hb-replay label) of the same
 * sequences (AFN-021 Gate 4): every row of dec must have the row of rep
 * with its sequence and position, the same owner and thread, and floats
 * within tol (0: bit-for-bit; a NaN is never within); the two sets must
 * share artifact, text, projection, tap and layers (their splits may
 * differ).  feature-parity names the first row that fails. */
struct hb_feature_parity {
	uint64_t rows, floats, identical;  /* rows compared; floats; of them bit-identical */
	double max_abs;                    /* largest |difference| (inf for a NaN) */
	uint64_t failures;
};
int hb_feature_compare(const struct hb_feature_set *dec, const struct hb_feature_set *rep, double tol,
		       struct hb_feature_parity *st, struct hb_error *err);

/* ------------------------------------------------------------ predictors */

struct hb_predictor {
	uint32_t width, rank, layers, experts, top_k;
	float *trunk, *layer, *head, *bias;
	struct hb_feature_ident id;        /* of the train split it learned from */
	uint64_t *train_threads;           /* sorted, unique */
	size_t n_train_threads;
	char *training;                    /* JSON text: how it was trained (metadata "training") */
};

/* Allocate zeroed weights for the geometry (p->width .. p->top_k set). */
int hb_predictor_alloc(struct hb_predictor *p, struct hb_error *err);
void hb_predictor_release(struct hb_predictor *p);
int hb_predictor_save(const char *path, const struct hb_predictor *p, struct hb_error *err);
int hb_predictor_load(const char *path, struct hb_predictor *p, struct hb_error *err);
/*
 * May p score rows of set s?  The artifact, tokenizer, projection and split
 * id must be p's (predictor-artifact, -text, -projection, -split), s must
 * not be the train split (predictor-split), layers and width equal
 * (predictor-geometry), and no row's thread one p trained on
 * (predictor-leak).  The field of err names what differs.
 */
int hb_predictor_check(const struct hb_predictor *p, const struct hb_feature_set *s, const char *what,
		       struct hb_error *err);
/* idx[0..n) := the n largest of v[0..E), largest first, ties to the lower
 * index (n <= E): the one candidate order of predictions and the oracle. */
void hb_predict_top(const float *v, uint32_t E, uint32_t n, uint32_t *idx);
/* scores[experts] of row x (width floats) at layer; z: rank floats of scratch. */
void hb_predictor_scores(const struct hb_predictor *p, const float *x, uint32_t layer, float *z, float *scores);

#endif
