/*
 * hb_trace_svg.h: SVG 1.1 charts of hb-trace's results (hb-trace plot).
 *
 * Owns the drawing: self-contained SVG text (no scripts, no external fonts
 * or styles), axes with ticks and labels, and a legend.  The caller writes
 * the text where it wants.  It computes no statistic.
 *   overlap   mean previous-token and adjacent-layer overlap by layer
 *   hitrate   hit rate against budget, one line per cache policy, Belady
 *             drawn last and thickest
 *   timeline  a window of tokens of a decode, simulated (prefetch-sim's
 *             events) or measured (an hb-run --stream-trace): a lane per
 *             compute stage (mixer, router, experts with the exposed wait
 *             on top), a lane per I/O class (each read queued then served,
 *             promoted ones outlined), and the reads in flight
 */
#ifndef HB_TRACE_SVG_H
#define HB_TRACE_SVG_H

#include "hb_base.h"
#include "hb_err.h"
#include "hb_trace_cache.h"
#include "hb_trace_prefetch.h"
#include "hb_trace_stats.h"

/* *out is malloc'ed, NUL-terminated; *len excludes the NUL. */
int hb_tsvg_overlap(const struct hb_tstats_result *r, char **out, size_t *len, struct hb_error *err);
int hb_tsvg_hitrate(const struct hb_tcache_result *r, bool per_layer, uint64_t record_bytes,
		    char **out, size_t *len, struct hb_error *err);

/* Collects the events of a run for tokens [first, first + count) (by
 * token ordinal), or with first HB_TSVG_AUTO the latest steps and reads
 * (bounded rings), of which the render draws the first count tokens of the
 * trace's token-major tail (its decode).  Memory is bounded either way. */
#define HB_TSVG_AUTO UINT64_MAX
struct hb_tsvg_timeline;
int hb_tsvg_timeline_create(struct hb_tsvg_timeline **out, uint64_t first, uint64_t count,
			    struct hb_error *err);
void hb_tsvg_timeline_event(void *timeline, const struct hb_tpf_event *ev);
int hb_tsvg_timeline_render(const struct hb_tsvg_timeline *t, const char *title, char **out, size_t *len,
			    struct hb_error *err);
void hb_tsvg_timeline_free(struct hb_tsvg_timeline *t);

#endif
