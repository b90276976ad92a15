/*
 * hb_replay.h: decode replayed as prefill (AFN-021): transcripts, splits,
 * route-label shards, decode/replay parity and shard coverage.
 *
 * This engine owns the data side of hb-replay(1): the transcript JSON-lines
 * schema, the owner/thread split, the label-shard layout on disk (each shard
 * is a hebrus-trace(5) file with a JSON manifest beside it), resume,
 * parity against decode traces and the coverage proof of `merge`.  It does
 * not own the forward pass: the labeller is handed a struct
 * hb_replay_engine (cmd/hb-replay/engine.c wires hb_session into it; the
 * unit tests wire a deterministic fake).  It never prints.
 */
#ifndef HB_REPLAY_H
#define HB_REPLAY_H

#include "hb_base.h"
#include "hb_err.h"
#include "trace/hb_trace.h"

/* X(symbol, "id", "meaning") */
#define HB_REPLAY_DIAGS(X)                                                                   \
	X(JSON, "replay-json", "a transcript line is not one JSON object")                    \
	X(KEY, "replay-key", "a transcript carries a key the schema does not define")         \
	X(FIELD, "replay-field", "a transcript field is missing, mistyped or out of range")   \
	X(SEQUENCE, "replay-sequence", "two transcripts share a sequence id")                 \
	X(THREAD, "replay-thread", "one thread appears under two owners")                     \
	X(TOKEN, "replay-token", "a token id lies outside the model's vocabulary")            \
	X(GEOMETRY, "replay-geometry", "labels and a trace disagree on top-k, layers or experts") \
	X(IDENTITY, "replay-identity", "artifact or tokenizer/template digests differ")       \
	X(OWNER, "replay-owner", "owner, generation or thread differ for one sequence")       \
	X(MISSING, "replay-missing", "a decode route has no label")                           \
	X(MISMATCH, "replay-mismatch", "a label's expert ids or rank differ from decode")     \
	X(WEIGHT, "replay-weight", "a label's weight differs from decode beyond the tolerance") \
	X(DUPLICATE, "replay-duplicate", "one sequence, position and layer is labelled twice") \
	X(COVERAGE, "replay-coverage", "shards leave a gap in a sequence or cover it twice")   \
	X(MANIFEST, "replay-manifest", "a shard manifest is malformed or disagrees with its shard") \
	X(CAPTURE, "replay-capture", "--capture-hidden names a layer twice or one the model lacks") \
	X(COLLISION, "replay-collision", "two owner or thread names map to one 64-bit id")

enum hb_replay_diag {
#define HB_REPLAY_ENUM_(sym, id, meaning) HB_RPD_##sym,
	HB_REPLAY_DIAGS(HB_REPLAY_ENUM_)
#undef HB_REPLAY_ENUM_
	HB_RPD_COUNT
};
const char *hb_replay_diag_id(enum hb_replay_diag d);

/* ------------------------------------------------------------ transcripts */

#define HB_REPLAY_ROLE_MAX 32

struct hb_replay_boundary {
	uint64_t at;                       /* token index where the message starts */
	char role[HB_REPLAY_ROLE_MAX];     /* "system", "user", "assistant", "tool", ... */
};

/*
 * One transcript line (hb-replay(1) TRANSCRIPTS):
 *   {"owner": ID, "thread": ID, "turn": U64, "tokens": [U32, ...],
 *    "sequence": U64?, "generation": U32?, "time": U64?, "runtime": BOOL?,
 *    "boundaries": [{"at": U64, "role": STR}, ...]?, "window": [U64, U64]?}
 * Any other key is refused with its field path (line[N].key).  An ID is an
 * unsigned integer or a name (a string), mapped to its 64-bit id by
 * hb_trace_name_id (hb_trace.h); a name is kept as given.
 */
struct hb_transcript {
	uint64_t line;                     /* 1-based line in its file */
	uint64_t sequence, owner, thread, turn, time;
	char *owner_name, *thread_name;    /* as given when a string, else NULL */
	uint32_t generation;
	bool runtime, has_window, has_time;
	uint64_t window[2];
	int32_t *tokens;
	size_t n_tokens;
	struct hb_replay_boundary *bounds;
	size_t n_bounds;
};

struct hb_transcripts {
	struct hb_transcript *t;
	size_t n;
};

/* Parse JSON lines (len bytes); `what` names the input in errors.  A missing
 * "sequence" defaults to the 0-based index of the line. Sequence ids must be
 * unique, a thread must belong to one owner, and two different owner (or
 * thread) names must not share an id ("replay-collision"). */
int hb_transcripts_parse(const char *text, size_t len, const char *what, struct hb_transcripts *out,
			 struct hb_error *err);
/* Read a file ("-" for stdin) and parse it. */
int hb_transcripts_load(const char *path, struct hb_transcripts *out, struct hb_error *err);
void hb_transcripts_release(struct hb_transcripts *ts);
/* One line of JSON (no newline) for t, heap string. */
char *hb_transcript_render(const struct hb_transcript *t);
/* SHA-256 of the token ids as little-endian u32. */
void hb_transcript_token_digest(const struct hb_transcript *t, uint8_t out[32]);

/* ------------------------------------------------------------ split */

enum { HB_SPLIT_TRAIN, HB_SPLIT_VALIDATION, HB_SPLIT_TEMPORAL, HB_SPLIT_RUNTIME, HB_SPLIT_COUNT };
const char *hb_split_name(int split);

struct hb_split_config {
	uint64_t seed;
	double validation_fraction;        /* of the owners left after the holdouts */
	double temporal_fraction;          /* newest owners (by max "time") */
	uint64_t window, stride;           /* 0: whole transcripts */
};

struct hb_split_counts {
	uint64_t owners, threads, transcripts, windows, tokens, duplicates_dropped;
};

struct hb_split_result {
	int *owner_split;                  /* per transcript: the split of its owner */
	struct hb_split_counts counts[HB_SPLIT_COUNT];
	/* the proof: owners and threads found in more than one split (always 0
	 * unless the assignment is broken; computed from the emitted windows) */
	uint64_t owner_overlap, thread_overlap;
};

/* Emit callback: one window of transcript t (tokens [start, end)) for split. */
typedef int (*hb_split_emit_fn)(void *ctx, int split, const struct hb_transcript *window,
				struct hb_error *err);

/*
 * Assign whole owners (and so whole threads: a thread has one owner) to a
 * split before any windowing: owners with a runtime transcript go to the
 * runtime holdout, then the newest temporal_fraction of the remaining owners
 * (only when times are given) to the temporal holdout, then a seeded hash
 * sends validation_fraction of the rest to validation, the others to train.
 * Then windows are cut and emitted; an exact duplicate window (same tokens)
 * is emitted once, in the first of runtime, temporal, validation, train that
 * holds it, and dropped from the others.
 */
int hb_split_run(const struct hb_transcripts *ts, const struct hb_split_config *cfg, hb_split_emit_fn emit,
		 void *ctx, struct hb_split_result *res, struct hb_error *err);
void hb_split_result_release(struct hb_split_result *res);

/* ------------------------------------------------------------ labelling */

typedef int (*hb_replay_emit_fn)(void *ctx, uint32_t layer, uint64_t pos, const int32_t *ids,
				 const float *weights, size_t k);
/* One layer's output streams at one position: float[n], n = hc x hidden. */
typedef int (*hb_replay_hidden_fn)(void *ctx, uint32_t layer, uint64_t pos, const float *state, size_t n);

/* What the labeller needs of a model: geometry, identity and a causal
 * forward of the next chunk of the current sequence. */
struct hb_replay_engine {
	uint32_t top_k, layers, experts;
	uint64_t vocab;                    /* token ids must be below this */
	uint8_t artifact[32];
	void *ctx;
	/* start a new, empty sequence able to hold max_tokens */
	int (*begin)(void *ctx, uint64_t max_tokens, struct hb_error *err);
	/* run tokens as the next chunk; emit every (layer, position) route */
	int (*forward)(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit, void *emit_ctx,
		       struct hb_error *err);
	/* Optional (--capture-hidden): hc streams of `hidden` floats make one
	 * layer output; forward_hidden is forward that also hands every
	 * (layer, position) output to `hidden` (same emit_ctx).  NULL or a zero
	 * geometry: this engine cannot capture. */
	uint32_t hc, hidden;
	/* Optional: told which transcript the next begin starts (features and
	 * router-ahead record each row's lineage from it). */
	int (*sequence)(void *ctx, const struct hb_transcript *t, struct hb_error *err);
	int (*forward_hidden)(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit,
			      hb_replay_hidden_fn hidden, void *emit_ctx, struct hb_error *err);
	/* Optional: called instead of begin, with the transcript itself, by an
	 * engine that needs to know which sequence comes (merge -o replays
	 * labels already made instead of running a model). */
	int (*begin_transcript)(void *ctx, const struct hb_transcript *t, struct hb_error *err);
	/* Optional: told, before the first begin, every transcript this run
	 * will label, in order, and the chunk size (an engine that runs
	 * several transcripts ahead together, hb-replay label --together). */
	int (*plan)(void *ctx, const struct hb_transcript *const *order, size_t n, uint64_t chunk_tokens,
		    struct hb_error *err);
};

#define HB_REPLAY_CAPTURE_MAX 1024u     /* entries of --capture-hidden */

/* the most workers one labelling can be split into (--shard I/N) */
#define HB_REPLAY_MAX_WORKERS 9999u

struct hb_label_config {
	const char *outdir;
	uint32_t shard_index, shard_count; /* --shard i/N: transcripts with index % N == i */
	/* (N <= HB_REPLAY_MAX_WORKERS: the names give it four digits) */
	uint64_t max_shard_bytes;          /* a shard never exceeds this */
	uint64_t chunk_tokens;             /* positions per forward */
	uint8_t text[32];                  /* tokenizer+template digest */
	/* --capture-hidden: layer indices as given (checked: in range, no
	 * duplicate), n_capture 0 for none; capture_positions: the sample of
	 * each sequence, positions floor(i x n / P) for i < P (every position
	 * when n <= P) */
	const uint32_t *capture;
	size_t n_capture;
	uint64_t capture_positions;
};

struct hb_label_stats {
	uint64_t sequences, positions, records, shards_written, shards_kept, partial_discarded;
	uint64_t positions_skipped;        /* already in kept shards (resume) */
	uint64_t hidden_samples;           /* positions whose hidden states were written */
};

/*
 * Label the share of ts that cfg selects into cfg->outdir (created if
 * absent).  Shard k of worker i/N is labels-IIII-of-NNNN-KKKKKK.hbtrace and
 * its manifest the same name with .json, each published atomically, shard
 * first: a shard without its manifest is partial.  Resume: kept manifests
 * are checked against their shards (size and SHA-256) and the run continues
 * after the last position they cover; a partial shard and stray temporary
 * files of this worker are removed.  Records are written position-major.
 *
 * With cfg->n_capture, the sampled positions' outputs of the captured
 * layers go to a sidecar labels-IIII-of-NNNN-KKKKKK.hbhidden (hb-replay(1)
 * HIDDEN STATES), published after its shard and before the manifest, which
 * records it ("hidden"); the sidecar is held to max_shard_bytes too, so a
 * shard may be cut earlier than without capture.  Resume refuses kept
 * shards made with other capture settings.  Bad capture settings are
 * refused before anything is written ("replay-capture", HB_ERR_INVALID).
 */
int hb_label_run(const struct hb_transcripts *ts, const struct hb_replay_engine *e, const struct hb_label_config *cfg,
		 struct hb_label_stats *st, struct hb_error *err);

/* ------------------------------------------------------------ parity */

struct hb_parity_stats {
	uint64_t label_records, trace_records, sequences, checked, unchecked_labels;
	double max_weight_diff;
	uint64_t failures;                 /* mismatching records (the first is in err) */
};

/*
 * Compare decode traces with labels: every trace record must have a label
 * with the same ids in the same rank order and weights within weight_tol;
 * geometry, artifact and tokenizer digests equal; the trace's owner and
 * generation those of the label's shard, and a thread the trace names the
 * one the shard's manifest gives the sequence (a shard without a manifest
 * fails such a trace).  labels: shard files or
 * directories of them (*.hbtrace).  Returns 0, or HB_ERR_CONTRACT with the
 * first failure's location in err; I/O and format errors as read.
 */
int hb_parity_run(const char *const *labels, size_t n_labels, const char *const *traces, size_t n_traces,
		  double weight_tol, struct hb_parity_stats *st, struct hb_error *err);

/* ------------------------------------------------------------ merge */

struct hb_merge_stats {
	uint64_t shards, sequences, positions, records;
};

/*
 * Prove that the shards of dirs cover every sequence exactly once: each
 * manifest agrees with its shard (size, SHA-256, and the records it holds
 * are exactly its ranges x layers), every sequence's ranges tile [0, n)
 * with no gap or overlap, one artifact and tokenizer identity throughout,
 * and (when ts is given) every transcript appears with its token digest.
 * *report receives the JSON proof (heap string) even when coverage fails.
 */
int hb_merge_run(const char *const *dirs, size_t n_dirs, const struct hb_transcripts *ts, char **report,
		 struct hb_merge_stats *st, struct hb_error *err);

/*
 * hb_merge_run, then, only when coverage is complete, the labels of the
 * shards re-cut into outdir exactly as one unsharded `hb-replay label` run
 * over ts would have cut them (worker 0/1, the shards' own shard size,
 * artifact and tokenizer digests): the same bytes, shard for shard and
 * manifest for manifest.  ts is required, since its order is the order of
 * an unsharded run.  The writing is hb_label_run's, so it is published shard
 * by shard and resumes after an interruption like a labelling run; outdir
 * is complete when a merge of outdir alone proves coverage.  Shards must
 * agree on geometry and shard size and carry no hidden-state sidecar
 * ("replay-manifest").  Memory: the shards whose ranges are not yet all
 * written are held decoded, one per worker in the usual i/N layout.
 * *report as hb_merge_run's; lst receives the writing's counts.
 */
int hb_merge_write(const char *const *dirs, size_t n_dirs, const struct hb_transcripts *ts, const char *outdir,
		   char **report, struct hb_merge_stats *st, struct hb_label_stats *lst, struct hb_error *err);

/* ------------------------------------------------------------ eval */

/*
 * AFN-021 Gate 3 on held-out labels at equal candidate budgets (ascending):
 * random (seeded), frequency from the train labels, per-sequence LRU,
 * previous token same layer, adjacent layer, and each predictions shard
 * (hebrus-trace(5): a record's ids are that predictor's candidates for the
 * record's sequence, position and layer, best first).  *json and *svg
 * receive the report and its chart (heap strings).
 */
/* When a predictions shard's candidates exist (hb-replay(1) GATE 4). */
enum hb_avail { HB_AVAIL_PRE_ATTN = 0, HB_AVAIL_AHEAD = 1, HB_AVAIL_PREV_TOKEN = 2, HB_AVAIL_STATIC = 3 };
struct hb_eval_gate4 {
	const char *const *names;          /* per predictions shard its name (NULL entry: its path) */
	const uint8_t *available;          /* per predictions shard, enum hb_avail */
	const char *const *deadlines;      /* hb-run --deadlines files, one a sequence */
	size_t n_deadlines;
	double read_ns;                    /* > 0: instead of the files' measured p50 */
	const char *validation;            /* an eval.json of the replay validation split, or NULL */
};
/* g (may be NULL): names, and with deadlines each predictor's recall and
 * timely recall on the decode steps, and with validation the Gate 4 table */
int hb_eval_run(const char *train, const char *heldout, const char *const *predictions, size_t n_pred,
		const uint64_t *budgets, size_t n_budgets, uint64_t seed, const struct hb_eval_gate4 *g, char **json,
		char **svg, struct hb_error *err);

struct cJSON;
/* An eval.json of an earlier `hb-replay eval` (--validation-eval): parsed
 * strictly (hb_json_parse), and every part Gate 4 reads checked:
 * "predictors" an object of objects; in each, "overall" (when present) an
 * object whose "budgets" is an object keyed by decimal budgets (1 to 2^53 - 1,
 * no leading zero), each an object whose "recall" is a number in [0, 1].
 * *out is the tree (the caller deletes it); what names the file. */
int hb_eval_validation_parse(const char *text, size_t len, const char *what, struct cJSON **out,
			     struct hb_error *err);

/* List *.hbtrace files of path (a file is itself), sorted; heap strings. */
int hb_replay_list_shards(const char *path, char ***out, size_t *n, struct hb_error *err);
void hb_replay_free_list(char **v, size_t n);

#endif
