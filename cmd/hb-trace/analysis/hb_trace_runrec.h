/*
 * hb_trace_runrec.h: an hb-run --json record read as the model's compute
 * time per layer and token (prefetch-sim and plot --timings).
 *
 * Owns: the record's checks (a strict JSON object; a streamed run refused,
 * its decode time already holding the read waits the model adds; an exact
 * generated_tokens of at least 2; a finite decode_seconds of at least 0).
 * It does not read the file: the caller does, so the fuzz target drives the
 * same code on bytes.
 */
#ifndef HB_TRACE_RUNREC_H
#define HB_TRACE_RUNREC_H

#include "hb_base.h"
#include "hb_err.h"

/* The largest record read: an hb-run --json record is a few kilobytes. */
#define HB_TRACE_RUNREC_MAX (1u << 20)

/* *seconds = decode_seconds / (generated_tokens - 1) / layers (layers >= 1);
 * what names the record in diagnostics; *seconds untouched on failure. */
int hb_trace_layer_time_parse(const char *text, size_t len, const char *what, uint32_t layers, double *seconds,
			      struct hb_error *err);

#endif
