/*
 * hb_stream_int.h: the engine's state, shared by the files of
 * libkern/stream/ and nothing else.
 *
 * One mutex (mu) guards everything below except the bytes of a slot whose
 * ticket is in flight: those belong to the one worker (or pump) reading it,
 * which touches no other field until it takes mu again to complete.  The
 * fault seam's counters are atomics, read outside mu.
 */
#ifndef HB_STREAM_INT_H
#define HB_STREAM_INT_H

#include "hb_base.h"
#include "hb_stream.h"
#include "hb_stream_test.h"

#include <pthread.h>
#include <stdatomic.h>

#define XS_ALIGN 4096u
#define XS_NONE (-1)
#define XS_NO_PRED 0xffu

struct xs_slot {
	uint8_t state;       /* enum hb_xs_slot_state */
	uint32_t gen;        /* bumped at every assignment and every release */
	int32_t key;         /* layer * experts + expert, or XS_NONE */
	int32_t ticket;      /* index of the ticket reading into it, or XS_NONE */
	uint32_t leases;     /* caller leases */
	uint32_t pins;       /* wants waiting on its read, or ready and not yet taken */
	uint8_t *buf;        /* slot_bytes, XS_ALIGN-aligned; NULL until first read */
	uint32_t rec_off;    /* where the record starts in buf */
	uint64_t last_use;   /* LRU stamp */
	uint64_t read_ns;    /* issue-to-ready of the read that filled it */
	uint64_t phys;       /* physical bytes of that read */
	bool predicted;      /* filled by a ticket issued P1/P2 */
	bool used;           /* an exact want has consumed it */
	uint8_t pred_prio;   /* a pending prediction's class, XS_NO_PRED for none */
	float pred_conf;
	uint64_t pred_token; /* the pending prediction is for this token */
};

struct xs_ticket {
	struct hb_xs_ticket t;
	bool live;           /* queued or in flight */
	bool cancelled;      /* cancelled in flight: discard at completion */
	bool low_inflight;   /* counted in inflight_low */
	bool pumping;        /* a caller-driven wait is reading it now */
	int32_t qnext;       /* queue link */
	uint64_t group;      /* extent group (H5), 0: a record read */
	int32_t lead;        /* a window's member: the index of its lead, else XS_NONE */
	int32_t mnext;       /* the lead's chain of members, in file order */
	int8_t ring;         /* a lead: the ring buffer its window reads into, else -1 */
	uint64_t start_seq;  /* dispatch order, for the pump's FIFO */
};

struct xs_lease_rec {
	uint64_t id;         /* 0: free entry */
	uint32_t slot, gen;
	uint64_t owner;
};

struct hb_xs {
	pthread_mutex_t mu;
	pthread_cond_t work_cv;  /* workers: a ticket may be dispatchable */
	pthread_cond_t done_cv;  /* waiters: something completed or was released */
	pthread_t *workers;
	unsigned n_workers;
	bool stop;

	struct hb_xs_config cfg;
	/* the source */
	char *path;
	int fd;                  /* O_DIRECT when direct */
	int fd_buffered;
	bool direct;
	char io_mode[96];
	uint64_t base;
	struct hb_em_layout em;  /* own copy */
	uint8_t *record_sha;
	uint32_t layers, experts, used;
	uint64_t record_bytes, slot_bytes;

	/* the cache */
	uint32_t nslots;
	struct xs_slot *slots;
	int32_t *where;          /* [layers * experts]: slot of a key, or XS_NONE */
	double *freq;            /* [layers * experts]: decayed exact uses */
	uint64_t *freq_tok;      /* [layers * experts]: token of the last decay */
	uint64_t use_clock;
	uint32_t reserve_slots;
	uint64_t cur_token;
	uint32_t cur_layer;
	bool have_token;
	uint64_t token_exposed;  /* exposed wait of the current token */
	double mean_miss_ns;     /* running mean of P0 issue-to-ready */
	uint64_t miss_samples;

	/* tickets: one per slot at most */
	struct xs_ticket *tickets;
	int32_t ticket_free;     /* free list through qnext */
	int32_t qhead[HB_XS_PRIOS];
	unsigned queued[HB_XS_PRIOS];
	unsigned inflight, inflight_low;
	unsigned pumping;        /* tickets caller-driven waits are reading now */
	uint64_t next_ticket_id, completion_seq, start_seq;

	/* leases */
	struct xs_lease_rec *leases;
	uint32_t lease_cap;
	uint64_t next_lease_id;

	struct hb_xs_route *routes; /* active routes */
	uint64_t ready_seq;

	struct hb_xs_stats st;

	/* prefill extent streaming (hb_stream_extent.c) */
	uint64_t ring_win;       /* bytes of one ring buffer; 0: no ring */
	uint8_t *ring[2];
	bool ring_busy[2];
	uint64_t next_group;

	/* test seam */
	hb_xs_clock_fn clock;
	void *clock_ctx;
	bool random_order;
	uint64_t rng;
	uint64_t read_chunk;   /* a record's read in chunks of this (0: XS_CHUNK) */
	atomic_uint fault_calls[HB_XS_FAULT_KINDS];
	atomic_uint fault_at[HB_XS_FAULT_KINDS];
};

/* hb_stream.c */
uint64_t xs_now(struct hb_xs *s);
void xs_emit(struct hb_xs *s, enum hb_xs_event ev, const struct hb_xs_ticket *t);
void xs_name_record(char *buf, size_t len, uint32_t layer, uint32_t expert);

/* hb_stream_cache.c */
/* Take a slot for a new read of key by class prio; XS_NONE when none may be
 * taken.  Predictions (prio > P0) must leave reserve_slots obtainable. */
int32_t xs_slot_take(struct hb_xs *s, uint8_t prio);
/* Release a slot to free: drop its key, bump its generation. */
void xs_slot_free(struct hb_xs *s, int32_t slot);
/* Slots P0 could obtain now (free, evictable, or held by queued predictions). */
uint32_t xs_slots_obtainable(struct hb_xs *s);
/* An exact want consumed slot (hit, or its read completed): frequency,
 * LRU stamp, and the first-use accounting of AFN-019's metrics. */
void xs_slot_consume(struct hb_xs *s, int32_t slot);
void xs_slot_refresh_state(struct xs_slot *sl);
int xs_lease_add(struct hb_xs *s, int32_t slot, uint64_t owner, struct hb_xs_lease *l,
		 struct hb_error *err);
bool xs_leases_of_others(struct hb_xs *s, uint64_t owner);

/* hb_stream_extent.c */
/* Size and allocate the ring (before the slots are counted): 0 or NOMEM. */
int xs_ring_open(struct hb_xs *s, struct hb_error *err);
void xs_ring_close(struct hb_xs *s);
/* The start-up probe of the two read rates (auto with a ring). */
void xs_extent_probe(struct hb_xs *s);
/* After route_begin placed the wants: decide, and group the misses. */
void xs_extent_route(struct hb_xs *s, struct hb_xs_route *r);
/* At dispatch of ti (in flight already): gather queued tickets of its
 * group into one window read, when a ring buffer is free. */
void xs_extent_gather(struct hb_xs *s, int32_t ti);
/* Read, copy, verify and complete a window led by ti (mu held on entry,
 * dropped and retaken). */
bool xs_extent_run(struct hb_xs *s, int32_t ti, uint32_t gen_skew);

/* hb_stream_io.c */
bool xs_fault(struct hb_xs *s, enum hb_xs_fault kind);
void xs_queue_remove(struct hb_xs *s, int32_t ti);
/* Complete ticket ti with a read's result (publish, fail or discard). */
bool xs_complete(struct hb_xs *s, int32_t ti, int rc, const struct hb_error *err, uint32_t gen_skew);
/* Check a record's bytes against its digest; HB_ERR_DIGEST names it at off
 * (how: words after the digest in the message, "" for none). */
int xs_verify(const struct hb_xs *s, const uint8_t *rec, const uint8_t *want, const char *name, uint64_t off,
	      const char *how, struct hb_error *err);
/* Read [off, off + span) into buf (need: bytes that must arrive), named;
 * direct is s->direct as read under mu (mu not held here). */
int xs_read_span(struct hb_xs *s, bool direct, uint8_t *buf, uint64_t off, uint64_t span, uint64_t need,
		 const char *name, struct hb_error *err);
int32_t xs_ticket_new(struct hb_xs *s, uint8_t prio, int32_t slot, uint32_t layer, uint32_t expert);
void xs_ticket_enqueue(struct hb_xs *s, int32_t ti);
void xs_ticket_promote(struct hb_xs *s, int32_t ti);
/* Move a queued prediction to a better class (a later hint ranked it higher). */
void xs_ticket_upgrade(struct hb_xs *s, int32_t ti, uint8_t prio);
/* Cancel a live ticket: queued frees the slot now, in flight drains it. */
void xs_ticket_cancel(struct hb_xs *s, int32_t ti);
/* Pick the next ticket a free reader may start; XS_NONE for none. */
int32_t xs_dispatch(struct hb_xs *s);
/* Read and verify one dispatched ticket without mu held, then complete it
 * under mu (mu must be held on entry; it is dropped and retaken). */
void xs_run_ticket(struct hb_xs *s, int32_t ti);
/* Caller-driven engines: dispatch up to depth, then run one in-flight
 * ticket (FIFO, or random under the seam).  false when nothing could run. */
bool xs_pump(struct hb_xs *s);
int xs_workers_start(struct hb_xs *s, struct hb_error *err);
void xs_workers_stop(struct hb_xs *s);

#endif
