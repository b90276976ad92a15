/*
 * hb_stream_expert.h: a leased record as the backend's weight views, the
 * one point where the streaming engine meets the kernel seam.
 *
 * The graph (libkern/graph, a later change) calls this where the resident
 * path calls hb_model_expert: the views point into the leased slot exactly
 * as hb_model_expert's point into the mapping (same type, rows, columns,
 * row bytes), so hb_swiglu computes the same bits from the same bytes.
 * The views are valid until the lease is released.
 */
#ifndef HB_STREAM_EXPERT_H
#define HB_STREAM_EXPERT_H

#include "hb_base.h"
#include "hb_err.h"
#include "backend/hb_backend.h"
#include "hb_stream.h"

/* gate, up, down of the leased record; HB_ERR_INVALID for a lease not held
 * (id 0).  The engine does not check that the lease is still held here:
 * a released lease's views are the caller's defect, as with any lease. */
int hb_xs_expert_views(const struct hb_xs *s, const struct hb_xs_lease *l, struct hb_wmat *gate,
		       struct hb_wmat *up, struct hb_wmat *down, struct hb_error *err);

#endif
