/*
 * hb_trace_storage.h: the storage queueing model of hb-trace prefetch-sim.
 *
 * Owns a deterministic discrete-event model of an SSD read path, in integer
 * nanoseconds: `depth` request slots; a request holds a slot for its
 * latency phase (latency_ns, concurrent across slots), then its transfer
 * (transfer_ns = ceil(bytes x 1e9 / bandwidth)) on one shared pipe at full
 * bandwidth, then its check (check_ns, concurrent across slots: the
 * engine's reader verifies the record's SHA-256 after reading it and
 * before anyone may use it), then frees the slot.  Three classes, P0
 * (exact), P1 (near-term), P2 (speculative), with preemptive priority on
 * both resources: an arrival that finds every slot taken takes one from
 * the lowest class below it (that request waits again and repeats its
 * latency phase when it gets a slot back, keeping its transfer and check
 * progress), and a ready transfer preempts a lower class on the pipe (the
 * loser keeps its progress).  Within a class: first come, first served,
 * or, with a shared pipe, every ready transfer of the highest class at
 * once at bandwidth / n each (what a drive given several whole-record
 * reads does: the engine's four readers' records were seen to finish
 * together in its stream traces, not one after another).  Progress is
 * kept in units of 1/HB_TSTORE_UNITS ns of the whole pipe, so n <= 16
 * sharers divide it exactly and no rounding depends on when the model is
 * looked at.
 *
 * Consequence, proved by the unit tests: the completion time of every P0
 * request depends only on the P0 arrivals (time, latency, transfer), never
 * on P1 or P2 traffic.  A promotion to P0 is a P0 arrival at the promotion
 * instant with the request's remaining work; the log callback reports it
 * so that a P0-only replay can check the claim.  It does not own which
 * records to read (hb_trace_prefetch.h) or real I/O (hb_trace_probe.h).
 */
#ifndef HB_TRACE_STORAGE_H
#define HB_TRACE_STORAGE_H

#include "hb_base.h"
#include "hb_err.h"

enum hb_tstore_class { HB_TS_P0 = 0, HB_TS_P1 = 1, HB_TS_P2 = 2, HB_TS_CLASSES = 3 };

struct hb_tstore_params {
	uint64_t latency_ns;
	double bandwidth;   /* bytes per second, > 0 */
	uint32_t depth;     /* slots, >= 1 */
	uint64_t check_ns;  /* a record's check after its transfer (0: none) */
	bool shared;        /* the pipe shared by the top class (depth <= HB_TSTORE_MAX_SHARED) */
	/* hb-run's pool instead of preemptive priority (shared pipe only): a
	 * started read runs to its end (no slot or transfer is taken from it),
	 * P1/P2 hold at most depth - reserved slots, and every transfer in
	 * flight, of any class, shares the pipe.  P0 then does wait on P1/P2
	 * (the P0-isolation claim above is the priority model's) */
	bool engine;
	uint32_t reserved;  /* engine: slots P1/P2 never take (< depth) */
};

#define HB_TSTORE_UNITS 720720u /* lcm(1..16): transfer progress per ns of the whole pipe */
#define HB_TSTORE_MAX_SHARED 16u

/* A request finished at `at`. */
typedef void (*hb_tstore_done_fn)(void *ctx, uint32_t id, uint64_t tag, uint64_t at);
/* Every P0 arrival (fresh or promoted: done false, the work it brings:
 * its transfer in HB_TSTORE_UNITS a ns) and every P0 completion (done
 * true, latency, transfer and check 0). */
typedef void (*hb_tstore_log_fn)(void *ctx, bool done, uint32_t id, uint64_t at, uint64_t latency_ns,
				 uint64_t transfer_units, uint64_t check_ns);

struct hb_tstore;

int hb_tstore_create(struct hb_tstore **out, const struct hb_tstore_params *p, uint32_t max_requests,
		     hb_tstore_done_fn done, void *done_ctx, struct hb_error *err);
void hb_tstore_free(struct hb_tstore *st);
void hb_tstore_set_log(struct hb_tstore *st, hb_tstore_log_fn fn, void *ctx);

uint64_t hb_tstore_transfer_ns(const struct hb_tstore_params *p, uint64_t bytes);
uint64_t hb_tstore_now(const struct hb_tstore *st);

/* Submit at the current time; latency_ns and check_ns are normally p's.
 * HB_ERR_OVERFLOW when max_requests are already in flight. */
int hb_tstore_submit(struct hb_tstore *st, enum hb_tstore_class c, uint64_t latency_ns,
		     uint64_t transfer_ns, uint64_t check_ns, uint64_t tag, uint32_t *id, struct hb_error *err);
/* The same with the transfer in units (what the log reports: a replay). */
int hb_tstore_submit_units(struct hb_tstore *st, enum hb_tstore_class c, uint64_t latency_ns,
			   uint64_t transfer_units, uint64_t check_ns, uint64_t tag, uint32_t *id,
			   struct hb_error *err);
/* Raise an in-flight request to class c (no-op if it is already as high). */
void hb_tstore_promote(struct hb_tstore *st, uint32_t id, enum hb_tstore_class c);
/* Run the model to time t (>= now), reporting completions in time order. */
void hb_tstore_advance(struct hb_tstore *st, uint64_t t);
/* Run until request id completes; returns its completion time. */
uint64_t hb_tstore_wait(struct hb_tstore *st, uint32_t id);
bool hb_tstore_busy(const struct hb_tstore *st, uint32_t id);
/* Run until nothing is in flight; returns the time. */
uint64_t hb_tstore_drain(struct hb_tstore *st);

/* Wall time to read (and check) n requests of transfer_ns each, submitted
 * together on an idle model (what they cost with no prefetch). */
uint64_t hb_tstore_idle_ns(const struct hb_tstore_params *p, uint64_t n, uint64_t transfer_ns);

#endif
