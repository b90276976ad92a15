/*
 * hb_stream.h: routed experts streamed from the artifact under a fixed
 * memory budget (AFN-019), the foundation of hb-run's --expert-cache.
 *
 * Owns three things, one engine:
 *   the record cache  a fixed number of aligned slots, each holding one
 *                     whole ExpertMajor record (gate|up|down) of the store;
 *                     slot states free, reading, valid, leased, draining;
 *                     leases released exactly once; a generation per slot
 *                     so that a stale completion never publishes into a
 *                     reused slot; eviction by LRU (the control) or by the
 *                     score stall-removed-per-byte with frequency and layer
 *                     distance; the budget is exact (slots x slot bytes <=
 *                     budget, no slot memory outside it).
 *   the I/O engine    worker threads doing pread (io_uring through Debian's
 *                     liburing-dev 2.3 is a later, optional path behind the
 *                     same queues, kept only if it measures faster), O_DIRECT where the file
 *                     system takes it (buffered otherwise, and the engine
 *                     says which), at a bounded depth, from three queues:
 *                     P0 exact (router misses), P1 near-term predicted, P2
 *                     speculative.  A P0 is dispatched before any queued
 *                     P1/P2, and `reserved_p0` of the depth is never given
 *                     to P1/P2; a prediction is admitted only if it leaves
 *                     `reserve_slots` slots obtainable by P0.  Each record's
 *                     SHA-256 (the artifact's hebrus.experts.record_sha256)
 *                     is checked on arrival; a record that fails is never
 *                     valid (fail closed, the record named in the error).
 *   the tickets       every read is a struct hb_xs_ticket carrying AFN-019's
 *                     scheduler contract; the counters and the AFN-019
 *                     metrics (timely recall, useful-prefetch ratio, byte
 *                     amplification, hidden fraction) come from them.
 *
 * It does not own: the model or the graph (it never computes; the views of
 * hb_stream_expert.c hand a leased record to the backend), PLE pages (they
 * keep the PLE store's single-snapshot read, AFN-003; a later PLE ticket
 * kind joins the same P0 queue), the admission of the artifact (the caller
 * admits first; the engine trusts the layout and the digest table it is
 * given and checks every record against that table), or printing.
 *
 * Threads: every function may be called from any thread; one mutex guards
 * the engine's state, and reads and digests run outside it.  With
 * threads == 0 there are no workers: a wait runs the reads itself, in the
 * order the test seam chooses (hb_stream_test.h), which is how the tests
 * force arbitrary completion orders deterministically.
 *
 * The graph's use (libkern/graph; hb-run and hb-replay label --expert-cache):
 *   hb_model_stream keeps the mapping for dense tensors and, when the
 *   budget is not `all`, opens an engine over hb_xs_source_open(path);
 *   hb_model_expert is then never called for routed experts.
 *   hb_moe_forward, after its router top-k, calls hb_xs_set_position, then
 *   hb_xs_route_begin with the chunk's distinct experts in ascending id,
 *   then the predictor's hints, then hb_xs_route_next until HB_XS_DONE:
 *   each lease becomes gate/up/down views (hb_xs_expert_views), hb_swiglu
 *   runs for that expert's gathered tokens into their (token, rank) rows
 *   of s->experts, and the lease is released.  A decode step runs those
 *   calls from several pool threads at once (one lease each; the budget
 *   must then hold more records than there are threads).  The weighted
 *   sum stays after, in route-rank order, so the result does not depend on
 *   arrival order (tests/unit/test_stream_graph.c, bit for bit against the
 *   resident run).  A route_next error fails the chunk before anything
 *   publishes (AFN-010: the session's private bank is discarded), and
 *   hb_xs_route_end always runs.  Predictors issue hb_xs_prefetch:
 *   router-ahead (layer L+1's router on layer L's post-attention state)
 *   as P1, the previous token's same-layer route as P2; they never change
 *   which experts execute.
 */
#ifndef HB_STREAM_H
#define HB_STREAM_H

#include "hb_base.h"
#include "hb_err.h"
#include "expert/hb_expert_store.h"

#include <cJSON.h>

/* The priority classes, best first. */
enum hb_xs_prio { HB_XS_P0 = 0, HB_XS_P1 = 1, HB_XS_P2 = 2 };
#define HB_XS_PRIOS 3

enum hb_xs_phase {
	HB_XS_PHASE_PREFILL = 0,
	HB_XS_PHASE_DECODE = 1,
	HB_XS_PHASE_VERIFY = 2, /* a draft block under verification (AFN-020) */
	HB_XS_PHASE_WARM = 3,   /* cache warming, no request waiting */
};

enum hb_xs_slot_state {
	HB_XS_SLOT_FREE = 0,     /* no record */
	HB_XS_SLOT_READING = 1,  /* a ticket owns it; bytes arriving */
	HB_XS_SLOT_VALID = 2,    /* a verified record, evictable */
	HB_XS_SLOT_LEASED = 3,   /* a verified record held by a lease or a waiting want */
	HB_XS_SLOT_DRAINING = 4, /* its ticket was cancelled in flight: the read
				  * finishes into it, publishes nothing, and the
				  * slot becomes free only then */
};

enum hb_xs_ticket_state {
	HB_XS_T_QUEUED = 0,
	HB_XS_T_INFLIGHT = 1,
	HB_XS_T_DONE = 2,      /* verified and published */
	HB_XS_T_FAILED = 3,    /* read, short read, digest or allocation failure */
	HB_XS_T_CANCELLED = 4, /* cancelled, or completed stale: nothing published */
};

/*
 * One read, with AFN-019's scheduler contract.  Observers and the test seam
 * see it; the engine keeps one per live read (at most one per slot).
 */
struct hb_xs_ticket {
	uint64_t id;                  /* unique in the engine, from 1, never reused */
	uint8_t store_sha256[HB_SHA256_BYTES]; /* the store's payload digest */
	uint64_t owner;               /* the owner request (a session) */
	uint64_t owner_gen;           /* the owner's generation at issue */
	uint8_t phase;                /* enum hb_xs_phase */
	uint32_t layer;
	uint64_t token_pos;           /* first token of the mask */
	uint64_t token_mask;          /* bit i: token token_pos + i needs it */
	uint32_t expert;
	int32_t component;            /* HB_EM_RECORD: the whole record */
	bool exact;                   /* issued exact (router), else predicted */
	float confidence;             /* 1 for exact */
	uint8_t prio;                 /* class now (an exact want promotes it to P0) */
	uint8_t prio_issued;          /* class at issue */
	uint64_t issue_ns, start_ns, ready_ns;
	uint64_t deadline_ns;         /* consumption deadline, 0 for none */
	uint64_t file_offset;         /* first byte read (aligned) */
	uint64_t bytes;               /* the record's bytes */
	uint64_t bytes_physical;      /* the aligned span read */
	uint32_t slot, slot_gen;      /* destination and its generation */
	uint32_t leases;              /* exact wants joined on this read */
	bool extent;                  /* read in a prefill extent window (H5) */
	uint64_t completion_seq;      /* 0 until it completes, then 1, 2, ... */
	uint8_t state;                /* enum hb_xs_ticket_state */
	int result;                   /* 0 or the hb_err it failed with */
};

enum hb_xs_event {
	HB_XS_EV_ISSUE = 0,
	HB_XS_EV_DISPATCH = 1, /* a worker (or the pump) starts reading it */
	HB_XS_EV_COMPLETE = 2, /* done, failed or discarded: see state */
	HB_XS_EV_CANCEL = 3,
	HB_XS_EV_PROMOTE = 4,  /* an exact want joined a predicted ticket */
};
/* Called under the engine's lock: it must not call back into the engine. */
typedef void (*hb_xs_observe_fn)(void *ctx, enum hb_xs_event ev, const struct hb_xs_ticket *t);

enum hb_xs_direct {
	HB_XS_DIRECT_AUTO = 0, /* O_DIRECT where the file system takes it */
	HB_XS_DIRECT_ON = 1,   /* O_DIRECT or refuse to open */
	HB_XS_DIRECT_OFF = 2,  /* buffered (page cache advised to drop the span) */
};

enum hb_xs_policy { HB_XS_POLICY_LRU = 0, HB_XS_POLICY_SCORE = 1 };

/*
 * Prefill extent streaming (AFN-019 H5, hb_stream_extent.c).  When a
 * prefill chunk's misses in a layer are dense, reading the layer's extent
 * from its first to its last missing record in large sequential reads
 * (gaps included) costs less than one read per record.  The reads go
 * through a ring of two window buffers (one window streams while the last
 * one's records are verified and handed over; with two I/O threads both
 * stream); each record is copied from the window into its own cache slot
 * and its SHA-256 checked there before any want sees it, so a record's
 * life after arrival is the record path's.  The ring is counted in the
 * budget: slots = (budget - ring bytes) / slot bytes.
 *   off     never (no ring; the budget is all slots)
 *   auto    per prefill layer, by hb_xs_extent_decide on measured rates
 *   always  every prefill layer with two misses or more
 * Decode and verify steps always read records.
 */
enum hb_xs_extent { HB_XS_EXTENT_OFF = 0, HB_XS_EXTENT_AUTO = 1, HB_XS_EXTENT_ALWAYS = 2 };
/* --prefill-extent: "off", "auto" or "always" (field "prefill_extent"). */
int hb_xs_extent_parse(const char *name, enum hb_xs_extent *out, struct hb_error *err);
const char *hb_xs_extent_name(enum hb_xs_extent e);

/* Why a layer of a chunk read records or its extent. */
enum hb_xs_extent_why {
	HB_XS_WHY_OFF = 0,         /* --prefill-extent off */
	HB_XS_WHY_NO_RING = 1,     /* the budget is too small for the ring */
	HB_XS_WHY_NOT_PREFILL = 2, /* a decode or verify step */
	HB_XS_WHY_FEW = 3,         /* fewer than two misses */
	HB_XS_WHY_UNMEASURED = 4,  /* no bandwidth measured for one of the two */
	HB_XS_WHY_DEARER = 5,      /* records cost less (auto) */
	HB_XS_WHY_CHEAPER = 6,     /* the extent costs less (auto) */
	HB_XS_WHY_ALWAYS = 7,      /* --prefill-extent always */
};
#define HB_XS_WHYS 8
const char *hb_xs_extent_why_name(enum hb_xs_extent_why w);

struct hb_xs_extent_in {
	enum hb_xs_extent mode;
	bool ring;            /* the engine has its ring */
	uint8_t phase;        /* enum hb_xs_phase of the chunk */
	uint32_t misses;      /* unique records of the layer to read */
	uint64_t miss_bytes;  /* their aligned spans, summed */
	uint64_t span_bytes;  /* the extent read: first missing record's aligned start to the last's end */
	double record_bps;    /* measured bytes/s of one record-sized read */
	double extent_bps;    /* measured bytes/s of one window-sized sequential read */
};
struct hb_xs_extent_out {
	bool extent;          /* read the extent */
	enum hb_xs_extent_why why;
	double record_s, extent_s; /* the two estimated costs (NaN when unmeasured) */
};
/*
 * The crossover: the extent when span_bytes / extent_bps < miss_bytes /
 * record_bps.  Both kinds of read run at the same depth, so the depth
 * cancels; the rates are per read, as the engine measures them (a start-up
 * probe, then every read's service time).  Pure: no engine needed.
 */
void hb_xs_extent_decide(const struct hb_xs_extent_in *in, struct hb_xs_extent_out *out);
/* --expert-evict: "lru" or "score" (field "expert_evict" on refusal). */
int hb_xs_policy_parse(const char *name, enum hb_xs_policy *out, struct hb_error *err);
const char *hb_xs_policy_name(enum hb_xs_policy p);

#define HB_XS_AUTO UINT32_MAX

struct hb_xs_config {
	uint64_t budget_bytes;  /* slot memory; slots = budget / slot bytes */
	unsigned threads;       /* I/O workers; 0: the waits run the reads */
	unsigned depth;         /* reads in flight at most (>= 1; with workers, <= threads) */
	unsigned reserved_p0;   /* of depth, never given to P1/P2 (< depth unless depth is 1) */
	unsigned reserve_slots; /* slots a prediction leaves obtainable by P0;
				 * HB_XS_AUTO: experts used per token, at most slots - 1 */
	enum hb_xs_direct direct;
	enum hb_xs_policy policy;
	unsigned freq_halflife; /* tokens over which a use counts half (score policy) */
	enum hb_xs_extent extent; /* prefill extent streaming (H5), default off */
	uint64_t extent_window;   /* bytes of one ring buffer; 0: 32 MiB.  Clamped to
				   * at least two slots and at most budget / 4; below
				   * that the engine has no ring (HB_XS_WHY_NO_RING) */
	hb_xs_observe_fn observe;
	void *observe_ctx;
};

/* threads 8, depth 8, reserved 1, reserve slots auto, direct auto, score
 * policy, half-life 16 tokens, budget 0 (the caller sets it). */
void hb_xs_config_default(struct hb_xs_config *c);

/* What the engine reads: the store inside an admitted artifact. */
struct hb_xs_source {
	char *path;                 /* the artifact file */
	uint64_t base;              /* file offset of the store's first byte */
	struct hb_em_layout layout; /* parsed store */
	uint8_t *record_sha;        /* 32 bytes per record, layer-major, expert-minor */
};

/*
 * Read the source from an artifact (which the caller has admitted): the
 * GGUF header region, the store's header and descriptors, and the record
 * digest table.  No payload byte is read.  Release with
 * hb_xs_source_release (also after a failure).
 */
int hb_xs_source_open(const char *path, struct hb_xs_source *src, struct hb_error *err);
void hb_xs_source_release(struct hb_xs_source *src);

/* The slot size a source needs: the largest aligned span of any record
 * (the record bytes when every record starts and ends on 4096). */
uint64_t hb_xs_slot_bytes(const struct hb_xs_source *src);

/*
 * --expert-cache SIZE: "all" (*all set: every record resident, bytes =
 * records x slot bytes), "N%" of that (N decimal, 0 < N <= 100), or bytes
 * (digits, optional suffix K, M, G, KiB, MiB, GiB: powers of 1024).  The
 * result is rounded down to whole slots; less than one slot is refused
 * (field "expert_cache").
 */
int hb_xs_budget_parse(const char *s, const struct hb_xs_source *src, uint64_t *bytes, bool *all,
		       struct hb_error *err);
/* The form of SIZE alone, before any source is open (a command line
 * refuses a malformed value before loading anything); 0 bytes is refused. */
int hb_xs_budget_check(const char *s, struct hb_error *err);

struct hb_xs;

/* Open an engine over src (copied: src may be released afterwards). */
int hb_xs_open(const struct hb_xs_source *src, const struct hb_xs_config *cfg, struct hb_xs **out,
	       struct hb_error *err);
/* Joins the workers (reads in flight finish first) and frees everything. */
void hb_xs_close(struct hb_xs *s);

/* "direct", or "buffered (...)" with the reason: configuration, or the
 * errno with which the file system refused O_DIRECT. */
const char *hb_xs_io_mode(const struct hb_xs *s);
uint32_t hb_xs_slots(const struct hb_xs *s);
enum hb_xs_policy hb_xs_policy_of(const struct hb_xs *s);

/* Where the forward pass is: the eviction score's layer distance, the
 * expiry of predictions, and exposed wait per token follow it. */
void hb_xs_set_position(struct hb_xs *s, uint64_t token_pos, uint32_t layer);

/* ------------------------------------------------------------ leases */

struct hb_xs_lease {
	uint64_t id;             /* 0: not held */
	uint32_t slot, gen;
	uint32_t layer, expert;
	const uint8_t *record;   /* the verified record, valid until release */
	uint64_t bytes;
};

/* Give a lease back.  Exactly once: a second release of the same id (or a
 * copy of it) is HB_ERR_INVALID and changes nothing.  Clears l->id. */
int hb_xs_release(struct hb_xs *s, struct hb_xs_lease *l, struct hb_error *err);

/* ------------------------------------------------------------ exact wants */

enum hb_xs_want_state {
	HB_XS_W_SLOT = 0,  /* waits for a slot (the budget is held) */
	HB_XS_W_READ = 1,  /* its read is queued or in flight */
	HB_XS_W_READY = 2, /* the record is valid and held for it */
	HB_XS_W_TAKEN = 3, /* handed to the caller as a lease */
	HB_XS_W_FAILED = 4,
};
enum hb_xs_how { HB_XS_HIT = 0, HB_XS_JOINED = 1, HB_XS_MISS = 2 };

struct hb_xs_want {
	uint32_t expert;
	uint8_t state;     /* enum hb_xs_want_state */
	uint8_t how;       /* enum hb_xs_how, decided when the router named it */
	uint32_t slot, gen;
	uint64_t ticket_id;
	uint64_t need_ns;  /* when the router named it (its deadline) */
	uint64_t ready_seq;
};

/*
 * The exact experts of one layer for one chunk (the router's union), in
 * the caller's storage.  Experts arrive in any order; a caller that needs
 * an order-independent result reduces by its own rank (the graph does).
 */
struct hb_xs_route {
	uint32_t layer;
	uint64_t owner, owner_gen;
	uint8_t phase;
	uint64_t token_pos, token_mask;
	struct hb_xs_want *w;
	size_t n, cap, taken;
	uint64_t group;            /* its misses' extent group, 0: records */
	struct hb_xs_extent_out extent; /* what route_begin decided, and why */
	struct hb_error err;       /* the first failure, naming the record */
	bool active;
	struct hb_xs_route *next;  /* the engine's list of active routes */
};

void hb_xs_route_init(struct hb_xs_route *r, struct hb_xs_want *storage, size_t cap);
/*
 * Name the exact experts (distinct, < the store's expert count; at most
 * cap): each is a hit, joins a read in flight (promoting it to P0), or is
 * a miss and gets a P0 read now, or as soon as a slot frees.
 */
int hb_xs_route_begin(struct hb_xs *s, struct hb_xs_route *r, uint32_t layer, const uint32_t *experts,
		      size_t n, struct hb_error *err);
/*
 * The next expert whose record is ready, in arrival order: *index (into
 * the experts given to begin) and a lease.  Blocks while none is ready.
 * Returns 0, HB_XS_DONE when every expert has been handed out, or the
 * failure of a read (the record named: field "expert_store.layer[L].expert[E]"),
 * or HB_ERR_UNSUPPORTED ("expert_cache") when the budget cannot hold the
 * wave while the caller holds its leases.
 */
#define HB_XS_DONE 1
int hb_xs_route_next(struct hb_xs *s, struct hb_xs_route *r, size_t *index, struct hb_xs_lease *l,
		     struct hb_error *err);
/* Always, also after a failure: unpins what was not handed out.  The reads
 * it started go on and become ordinary cache entries. */
void hb_xs_route_end(struct hb_xs *s, struct hb_xs_route *r);

/* One expert, blocking: a route of one. */
int hb_xs_acquire(struct hb_xs *s, uint32_t layer, uint32_t expert, struct hb_xs_lease *l,
		  struct hb_error *err);

/* ------------------------------------------------------------ predictions */

struct hb_xs_hint {
	uint32_t layer, expert;
	uint8_t prio;          /* HB_XS_P1 or HB_XS_P2 */
	float confidence;      /* 0..1 */
	uint64_t deadline_ns;  /* 0 for none */
	uint64_t owner, owner_gen;
	uint8_t phase;
	uint64_t token_pos, token_mask; /* the token(s) it is predicted for */
};

enum hb_xs_outcome {
	HB_XS_PF_HIT = 0,      /* already valid: marked as predicted */
	HB_XS_PF_JOINED = 1,   /* a read is already queued or in flight */
	HB_XS_PF_ISSUED = 2,   /* a new ticket */
	HB_XS_PF_REJECTED = 3, /* no slot it may take (P0's reserve, or leased) */
};

struct hb_xs_handle {
	uint32_t index;
	uint64_t id;
};

/* Returns an hb_xs_outcome (>= 0) or a negative hb_err for a bad hint;
 * *h (may be NULL) names the ticket when one was issued or joined. */
int hb_xs_prefetch(struct hb_xs *s, const struct hb_xs_hint *hint, struct hb_xs_handle *h,
		   struct hb_error *err);
/*
 * Cancel a predicted ticket no exact want waits on.  Queued: its slot is
 * free at once.  In flight: the slot drains (the read finishes, publishes
 * nothing) and is free when it ends.  Exactly once: a second cancel, or a
 * handle whose ticket has completed, is HB_ERR_INVALID and changes nothing.
 */
int hb_xs_cancel(struct hb_xs *s, const struct hb_xs_handle *h, struct hb_error *err);
/* Cancel every predicted ticket of owner with owner_gen < below_gen (a
 * rejected draft suffix, a rolled-back chunk); returns how many. */
size_t hb_xs_cancel_owner(struct hb_xs *s, uint64_t owner, uint64_t below_gen);

/* ------------------------------------------------------------ introspection */

struct hb_xs_slot_info {
	uint8_t state;          /* enum hb_xs_slot_state */
	uint32_t gen;
	int32_t layer, expert;  /* -1 when free */
	uint32_t leases, pins;
	bool predicted;         /* read by a prediction */
	bool used;              /* an exact want has consumed it */
};
int hb_xs_slot_get(struct hb_xs *s, uint32_t slot, struct hb_xs_slot_info *out);

/* Latency histogram: log-linear, 8 sub-buckets per power of two, so a
 * percentile is the lower bound of its bucket, within 12.5% below. */
#define HB_XS_HIST_BUCKETS 496
struct hb_xs_hist {
	uint64_t n;
	uint64_t count[HB_XS_HIST_BUCKETS];
};
void hb_xs_hist_add(struct hb_xs_hist *h, uint64_t v);
/* The p-quantile (0 < p <= 1): the smallest bucket whose cumulative count
 * reaches ceil(p n), as its lower bound; 0 for an empty histogram. */
uint64_t hb_xs_hist_quantile(const struct hb_xs_hist *h, double p);

struct hb_xs_stats {
	/* configuration as it came out */
	uint64_t budget_bytes, slot_bytes, resident_bytes, meta_bytes;
	uint32_t slots;
	/* exact wants */
	uint64_t wants, hits, joined, misses, slot_waits;
	/* tickets by the class they were issued in */
	uint64_t tickets[HB_XS_PRIOS], promoted;
	uint64_t prefetch_hits, prefetch_joined, prefetch_rejected;
	/* bytes (physical: the aligned spans read) */
	uint64_t bytes_physical, bytes_logical;
	uint64_t bytes_exact;      /* read by tickets issued P0 */
	uint64_t bytes_predicted;  /* read by tickets issued P1/P2 */
	uint64_t bytes_useful;     /* predicted reads an exact want consumed */
	uint64_t bytes_rejected;   /* predicted reads evicted, cancelled or discarded unused */
	uint64_t bytes_served;     /* logical bytes of reads an exact want consumed */
	/* outcomes */
	uint64_t completed, failed_io, failed_short, failed_digest, failed_alloc;
	uint64_t cancelled_queued, cancelled_inflight, stale_discards, slot_releases;
	uint64_t evictions, evictions_unused;
	uint64_t leases_taken, leases_released, lease_refusals;
	/* time */
	struct hb_xs_hist ready;   /* issue-to-ready of every completed read */
	uint64_t deadlines, late;  /* reads with a deadline; ready after it */
	int64_t slack_min_ns;
	int64_t slack_sum_ns;
	uint64_t exposed_ns;       /* time exact wants blocked */
	uint64_t exact_io_ns;      /* issue-to-ready of reads an exact want consumed */
	uint64_t tokens, exposed_max_token_ns;
	/* prefill extent streaming (H5) */
	uint8_t extent_mode;        /* enum hb_xs_extent, as configured */
	uint64_t ring_bytes;        /* the ring's share of the budget (0: no ring) */
	uint64_t extent_why[HB_XS_WHYS]; /* layer routes with misses, by decision */
	uint64_t extent_reads;      /* window reads */
	uint64_t extent_records;    /* records delivered by them */
	uint64_t extent_bytes;      /* physical bytes they read, gaps included */
	uint64_t extent_gap_bytes;  /* of which no wanted record */
	uint64_t extent_read_ns;    /* their service time, summed */
	uint64_t record_reads;      /* single-record reads */
	uint64_t record_read_bytes, record_read_ns;
	uint64_t probe_record_bytes, probe_record_ns, probe_extent_bytes, probe_extent_ns;
	/* the last failure, for a report */
	struct hb_error last_failure;
};

/* A consistent snapshot. */
void hb_xs_stats_get(struct hb_xs *s, struct hb_xs_stats *out);
/* The counters of what happened between two snapshots of one engine
 * (before taken first): every count, byte total, time sum and the latency
 * histogram are differences; configuration, resident_bytes, slack_min_ns,
 * exposed_max_token_ns and last_failure are now's (over the whole run). */
void hb_xs_stats_since(const struct hb_xs_stats *now, const struct hb_xs_stats *before, struct hb_xs_stats *out);

/* AFN-019's metrics, from the counters (NaN where the denominator is 0). */
struct hb_xs_metrics {
	double timely_recall;          /* hits / wants: valid when the router named it */
	double useful_prefetch_ratio;  /* bytes_useful / bytes_predicted */
	double byte_amplification;     /* bytes_physical / bytes_served */
	double hidden_fraction;        /* 1 - exposed_ns / exact_io_ns */
	double exposed_per_token_ns;   /* exposed_ns / tokens */
	double record_bps, extent_bps; /* per-read rates: probe plus every read so far */
	uint64_t ready_p50_ns, ready_p95_ns, ready_p99_ns;
};
void hb_xs_metrics_get(const struct hb_xs_stats *st, struct hb_xs_metrics *m);
/* The counters and metrics as members of obj (NaN as null); 0 or NOMEM. */
int hb_xs_stats_json(const struct hb_xs_stats *st, cJSON *obj);

#endif
