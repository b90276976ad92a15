/*
 * hb_trace_cache_int.h: one simulated cache (policy x budget), shared by
 * the driver (hb_trace_cache.c) and the policies (hb_trace_cache_sim.c).
 */
#ifndef HB_TRACE_CACHE_INT_H
#define HB_TRACE_CACHE_INT_H

#include "hb_trace_cache.h"

#define HB_TC_NEVER UINT64_MAX

struct hb_tc_sim {
	enum hb_tcache_policy policy;
	uint32_t scopes;          /* 1 (global) or layers */
	uint32_t keys_per_scope;  /* experts (per layer) or layers x experts */
	uint64_t cap;             /* records per scope */
	double half_life;         /* accesses per scope (lfu-decay) */
	double stall_per_byte;    /* score: (latency + bytes / bandwidth) / bytes */
	uint64_t rng;
	uint64_t hits, accesses;
	/* per key */
	int32_t *pos;             /* index in its scope's heap/list, -1 if absent */
	double *pri;
	uint64_t *tie;            /* last use (scope clock) */
	double *cnt;              /* uses, decayed uses (log2), or mean gap */
	uint32_t *prev, *next;    /* lru list */
	/* per scope */
	uint32_t *heap;           /* scopes x cap keys */
	uint64_t *size, *clock;
	uint32_t *head, *tail;    /* lru: most / least recent, UINT32_MAX if empty */
};

int hb_tc_sim_init(struct hb_tc_sim *s, enum hb_tcache_policy p, uint64_t budget,
		   const struct hb_trace_header *h, const struct hb_tcache_opts *o);
void hb_tc_sim_release(struct hb_tc_sim *s);
/* One access of key (scope = its layer when per layer, else 0); nu is the
 * access's next-use index (Belady only). */
void hb_tc_sim_access(struct hb_tc_sim *s, uint32_t key, uint32_t scope, uint64_t nu);

#endif
