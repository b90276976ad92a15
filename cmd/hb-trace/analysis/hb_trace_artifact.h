/*
 * hb_trace_artifact.h: what hb-trace needs from an artifact: the expert
 * store's record bytes and geometry, and the artifact identity digest that
 * hb-run writes into a trace header, to refuse a trace of another artifact.
 *
 * The identity is SHA-256(the GGUF header region [0, data_start) || expert
 * payload SHA-256 || expert manifest SHA-256 || PLE payload SHA-256 || PLE
 * manifest SHA-256 (the PLE pair only when the artifact has a PLE store)),
 * the definition libkern's model loader uses.  Only header and store
 * metadata are read, never the payloads.  It does not admit the artifact.
 */
#ifndef HB_TRACE_ARTIFACT_H
#define HB_TRACE_ARTIFACT_H

#include "hb_base.h"
#include "hb_err.h"
#include "hb_sha256.h"
#include "trace/hb_trace.h"

struct hb_trace_artifact {
	uint64_t record_bytes;
	uint32_t layers, experts, top_k;
	uint8_t identity[HB_SHA256_BYTES];
};

int hb_trace_artifact_read(const char *path, struct hb_trace_artifact *out, struct hb_error *err);
/* trace-artifact unless geometry and identity match the trace header. */
int hb_trace_artifact_check(const struct hb_trace_artifact *a, const struct hb_trace_header *h,
			    const char *path, struct hb_error *err);

#endif
