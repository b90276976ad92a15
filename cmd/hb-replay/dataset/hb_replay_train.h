/*
 * hb_replay_train.h: the planted-structure control, the smallest learned
 * predictor and its predictions (AFN-021 Gate 3, items 6 and the control).
 *
 * plant writes a dataset whose routes are a known low-rank function of its
 * features plus Gumbel noise, in the formats replay itself writes (label
 * shards, feature sets), with the oracle's ranking (the noiseless planted
 * scores) as a predictions shard and the theory of every baseline, so that
 * a trainer and the evaluator can be held to numbers known in advance.
 * train fits hb_predict.h's predictor on the CPU, deterministically: the
 * same inputs, seed and options give the same checkpoint bytes whatever
 * the thread count (a minibatch is cut into fixed jobs whose gradients are
 * summed in job order).  predict scores a feature set with a checkpoint
 * after hb_predictor_check, as a hebrus-trace(5) predictions shard that
 * `eval --predictions` reads.  None of it prints.
 */
#ifndef HB_REPLAY_TRAIN_H
#define HB_REPLAY_TRAIN_H

#include "hb_replay.h"
#include "predict/hb_predict.h"

struct hb_plant_config {
	uint64_t seed;
	uint32_t sequences;                /* train sequences; validation and heldout get a quarter each */
	uint32_t positions, layers, experts, top_k, width, source_width, rank;
	double noise;                      /* Gumbel scale on the planted scores */
};
void hb_plant_defaults(struct hb_plant_config *c);
/* Write DIR/{train,validation,heldout}/{labels,features}, DIR/oracle and
 * DIR/planted.json (also in *json). */
int hb_plant_run(const char *dir, const struct hb_plant_config *c, char **json, struct hb_error *err);

#define HB_TRAIN_RANK_MAX 256u

struct hb_train_config {
	uint64_t seed;
	unsigned threads;                  /* 0: all CPUs; never changes the result */
	uint32_t rank, epochs, patience, batch;
	double lr;
	double fp_cost;                    /* lambda_overfetch: weight of the false-positive mass */
	double rank_decay;                 /* target weight of the native rank j: rank_decay^j */
	double accept_weight;              /* w_accept of a rejected-suffix row (lineage) */
	const double *deadline;            /* w_deadline per layer (n_deadline == layers), or NULL: 1 */
	size_t n_deadline;
};
void hb_train_defaults(struct hb_train_config *c);
/* Train on (labels, features) with early stopping on the validation pair;
 * write the checkpoint to out; *json: the training record. */
int hb_train_run(const char *train_labels, const char *train_features, const char *val_labels,
		 const char *val_features, const struct hb_train_config *c, const char *out, char **json,
		 struct hb_error *err);

/* Score features with the checkpoint into outdir/predictions.hbtrace (the
 * first min(64, experts) experts by score, best first; weights: the
 * confidence min(1, top_k x softmax)); *json: a summary. */
int hb_predict_run(const char *checkpoint, const char *features, const char *outdir, char **json,
		   struct hb_error *err);

/* shadow (hb_replay_shadow.c): Gate 5 driven by the routes of labels
 * through the streaming engine over a scratch store (hb-replay(1) SHADOW):
 * no prediction, then each predictions shard hinted at its availability
 * (enum hb_avail), each on a fresh engine of budget `cache` (bytes or N%
 * of the scratch store); *json: every run's engine counters, its shadow
 * accounting, misses avoided and evictions caused against none. */
struct hb_replay_shadow_config {
	const char *labels, *cache, *store;  /* store: the scratch file (removed after) */
	const char *const *predictions, *const *names;
	const uint8_t *available;
	size_t n_pred;
	uint32_t hints;                      /* candidates hinted per token and layer; 0: top-k */
};
int hb_replay_shadow_run(const struct hb_replay_shadow_config *c, char **json, struct hb_error *err);

#endif
