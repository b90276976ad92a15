/*
 * hb_stream_test.h: test seams of the streaming engine (AFN-013: no binary
 * exposes them).
 *
 * A test drives a caller-driven engine (threads == 0) as the device: it
 * dispatches reads as the scheduler would choose them and completes them
 * in any order it likes, on a clock it sets.  It arms faults per engine
 * (like libcore's hb_fault, but local, so that engines in one process do
 * not interfere) and audits that no valid slot holds wrong bytes.
 */
#ifndef HB_STREAM_TEST_H
#define HB_STREAM_TEST_H

#include "hb_base.h"

struct hb_xs;
struct hb_xs_ticket;

enum hb_xs_fault {
	HB_XS_FAULT_EIO = 0,    /* the pread fails with EIO */
	HB_XS_FAULT_SHORT = 1,  /* the pread stops half way, then meets end of file */
	HB_XS_FAULT_DIGEST = 2, /* one byte of the arrived record is flipped */
	HB_XS_FAULT_ALLOC = 3,  /* the slot's buffer cannot be allocated */
};
#define HB_XS_FAULT_KINDS 4

/* The nth read (1-based) from now that reaches the site fails that way. */
void hb_xs_test_fault_arm(struct hb_xs *s, enum hb_xs_fault kind, unsigned nth);
void hb_xs_test_fault_reset(struct hb_xs *s);
unsigned hb_xs_test_fault_calls(struct hb_xs *s, enum hb_xs_fault kind);

typedef uint64_t (*hb_xs_clock_fn)(void *ctx);
/* Replace CLOCK_MONOTONIC (ns) by fn; NULL restores it. */
void hb_xs_test_set_clock(struct hb_xs *s, hb_xs_clock_fn fn, void *ctx);

/* The pump (waits of a caller-driven engine) completes a random in-flight
 * read, from this seed, instead of the oldest. */
void hb_xs_test_random_order(struct hb_xs *s, uint64_t seed);

/* A record's read issued (and hashed) in chunks of `bytes`, a multiple of
 * 4096 (0: the engine's own size), so that small test records take
 * several. */
void hb_xs_test_read_chunk(struct hb_xs *s, uint64_t bytes);

/* Dispatch the ticket the scheduler picks for a free reader: 0 and *out,
 * or 1 when none may start (depth, reserve, or empty queues). */
int hb_xs_test_dispatch(struct hb_xs *s, struct hb_xs_ticket *out);
/* Read, verify and complete the in-flight ticket id: 0, or HB_ERR_INVALID
 * when no such ticket is in flight. */
int hb_xs_test_complete(struct hb_xs *s, uint64_t id);
/* Ids of the tickets in flight, oldest dispatch first; returns the count. */
size_t hb_xs_test_inflight(struct hb_xs *s, uint64_t *ids, size_t cap);
/* Queued tickets per class (P0, P1, P2). */
void hb_xs_test_queued(struct hb_xs *s, unsigned out[3]);
/*
 * Complete the in-flight ticket id as if its slot had been reassigned
 * meanwhile (its generation is off by one): the completion must discard.
 * Returns 1 when it was discarded, 0 when it published (a defect), or
 * HB_ERR_INVALID.  The slot is left free.
 */
int hb_xs_test_complete_stale(struct hb_xs *s, uint64_t id);
/* Valid or leased slots whose bytes do not hash to their record's digest,
 * or whose key index disagrees: 0 for a sound cache. */
size_t hb_xs_test_audit(struct hb_xs *s);
/* Flip one byte of the valid slot holding (layer, expert): proves the
 * audit can fail.  HB_ERR_NOTFOUND when it is not valid. */
int hb_xs_test_corrupt(struct hb_xs *s, uint32_t layer, uint32_t expert);
/* The slot holding (layer, expert), or -1. */
int32_t hb_xs_test_slot_of(struct hb_xs *s, uint32_t layer, uint32_t expert);

#endif
