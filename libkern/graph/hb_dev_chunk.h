/*
 * hb_dev_chunk.h: a whole chunk of the Qwen4Exp graph handed to a device
 * backend in one call (hb_device_ops.chunk), so that its activations never
 * cross the bus: the session (hb_session_dev.c) marshals what the chunk
 * reads and where its results go; the device runs every stage that
 * run_chunk (hb_session.c) runs, in the same order, on its own memory.
 *
 * The session's state stays the host's and stays transactional (AFN-010):
 * the device reads the public bank's recurrent states and the caches' rows
 * before the chunk's first position, and writes the private bank's states
 * and the caches' rows of the chunk (past the public frontier, invisible
 * until publication).  What it writes is then checked and published by the
 * session exactly as after a host chunk.  PLE rows are read on the host,
 * through the verified page snapshots (AFN-003), before the call.
 *
 * A device that cannot take a chunk (a weight it does not hold, a shape it
 * does not run) declines before writing anything, and the graph runs on
 * the host.  A device that fails part-way (a device error, out of memory)
 * fails closed: it reports the chunk not finite, and the session publishes
 * nothing.
 */
#ifndef HB_DEV_CHUNK_H
#define HB_DEV_CHUNK_H

#include "hb_base.h"
#include "hb_model.h"

/* one decoder layer's state; NULL where the layer has none of that kind.
 * At a sequence's first position (pos == base) the public bank is an
 * empty sequence's (hb_session.c, bank_clear: zero recurrences), which a
 * device may make itself rather than read */
struct hb_dev_layer {
	const float *gdn_conv_from, *gdn_S_from; /* the public bank's */
	float *gdn_conv, *gdn_S;                 /* the private bank's, written */
	const float *ple_conv_from;
	float *ple_conv;
	/* the QSA caches, rows indexed by position - base: rows [0, pos - base)
	 * read, rows [pos - base, pos - base + T) written; pooled groups
	 * [0, groups_from) read, [groups_from, *groups) written */
	float *qsa_k, *qsa_v, *qsa_raw, *qsa_pooled;
	uint64_t groups_from;
	uint64_t *groups;
};

struct hb_dev_chunk {
	const struct hb_model *m;
	const int32_t *tokens;
	size_t T;
	uint64_t pos, base;          /* the chunk's first position; the first live one */
	uint64_t cap;                /* the positions the session's caches hold */
	/* the identity of the public state the chunk starts from, and of the
	 * one it leaves if the session publishes it: a device that still holds
	 * epoch_in's state from the chunk before need not be sent it again
	 * (epochs are never reused, across sessions too) */
	uint64_t epoch_in, epoch_out;
	struct hb_dev_layer *layers; /* [num_layers] */
	const float *ple_emb;        /* [PLE layers][T][ple_embed_dim], layer order */
	const double *exp_table;     /* libkern/math's e^x table (hb_expf_table), which a device repeats */
	/* false: the session's last chunk (hb_session_final), whose state
	 * after it no one reads: the private bank's states, the caches' new
	 * rows and *groups need not be written */
	bool keep_state;
	/* outputs */
	float *logits;               /* [T][vocab_physical], or NULL: none wanted */
	int32_t *route_ids;          /* [num_layers][T][k] */
	float *route_w;              /* [num_layers][T][k] */
	bool finite;                 /* every value the chunk would publish is finite */
};

#endif
