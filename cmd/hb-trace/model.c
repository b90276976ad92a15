/*
 * hb-trace/model.c: the storage and compute model that prefetch-sim
 * and plot replay a trace against: layer time from --layer-time or an
 * hb-run --json record, storage from the options or a probe.
 */
#include "hb_base.h"
#include "hb_trace_cli.h"
#include "hb_io.h"
#include "hb-trace/analysis/hb_trace_runrec.h"

#include <math.h>

/* the chunk hb-run's stream readers read and hash at a time (XS_CHUNK) */
#define HB_TRACE_ENGINE_CHUNK (512u << 10)

static int layer_time_from_run(const char *path, uint32_t layers, double *out, struct hb_error *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	if ((rc = hb_read_file(path, HB_TRACE_RUNREC_MAX, &text, &len, err)))
		return rc;
	rc = hb_trace_layer_time_parse(text, len, path, layers, out, err);
	free(text);
	return rc;
}

int trace_model_for(const struct cli *c, struct hb_trace_set *s, struct trace_model *m, struct hb_error *err)
{
	struct trace_rb r = { c, {0}, false };
	int rc;

	memset(m, 0, sizeof(*m));
	if ((rc = trace_peek_header(s, err)) || (rc = trace_record_bytes(&r, &s->h, &m->rbytes, err)))
		return rc;
	if (!m->rbytes)
		return hb_error_set(err, HB_ERR_INVALID, "--record-bytes", "give --artifact or --record-bytes");
	if (c->stream_trace) { /* compute only: the measured span less its exposed wait */
		struct trace_stream_model sm;
		if ((rc = trace_stream_model(c, c->stream_trace, &sm, err)))
			return rc;
		if (memcmp(sm.h.artifact, s->h.artifact, HB_SHA256_BYTES))
			return hb_error_diag(err, hb_trace_input_diag_id(HB_TRI_MISMATCH), HB_ERR_CONTRACT, c->stream_trace,
					     false, 0, "names another artifact than the route trace");
		m->layer_time = sm.layer_time;
		m->measured = sm;
		m->have_measured = true;
	} else if (c->timings) {
		if ((rc = layer_time_from_run(c->timings, s->h.layers, &m->layer_time, err)))
			return rc;
	} else if (c->have_layer_time) {
		m->layer_time = c->layer_time;
	} else {
		return hb_error_set(err, HB_ERR_INVALID, "--layer-time", "give --layer-time or --timings");
	}
	m->storage_source = "given";
	if (m->have_measured && !c->have_latency && !c->have_bandwidth && !c->have_depth) {
		/* the run's own decode reads: what the engine delivered (checks included) */
		if (!(m->measured.delivered_bw > 0))
			return hb_error_set(err, HB_ERR_UNSUPPORTED, c->stream_trace,
					    "holds no decode read to measure the storage from; give --latency, "
					    "--bandwidth and --depth");
		m->storage_source = "stream-trace";
		m->storage.latency_ns = 0;
		m->storage.bandwidth = m->measured.delivered_bw;
		m->storage.depth = m->measured.h.depth;
	} else if (!c->have_latency || !c->have_bandwidth || !c->have_depth) {
		const char *f = c->probe_file ? c->probe_file : c->artifact;
		if ((rc = hb_tprobe_run(f, m->rbytes, &m->probe, err)))
			return rc;
		m->storage_source = "probe";
		m->storage.latency_ns = (uint64_t)llround(m->probe.latency_s * 1e9);
		m->storage.bandwidth = m->probe.best_bandwidth;
		m->storage.depth = m->probe.depth;
	}
	if (c->have_latency)
		m->storage.latency_ns = (uint64_t)llround(c->latency * 1e9);
	if (c->have_bandwidth)
		m->storage.bandwidth = c->bandwidth;
	if (c->have_depth)
		m->storage.depth = (uint32_t)c->depth;
	m->storage.shared = !c->pipe_fifo;
	if (m->storage.shared && m->storage.depth > HB_TSTORE_MAX_SHARED) /* a probe's or a trace's depth */
		m->storage.depth = HB_TSTORE_MAX_SHARED;
	/* hb-run's reserve: one slot of the depth for exact reads (hb_xs_config_default) */
	m->storage.engine = c->discipline_engine;
	m->storage.reserved = c->discipline_engine && m->storage.depth > 1 ? 1 : 0;
	/* a reader holds its slot while it checks the record's SHA-256 after
	 * reading it and before the record is ready (libkern/stream): the
	 * model's check phase, after the transfer */
	if (c->have_verify) {
		/* hb-run's readers hash each chunk as it arrives (libkern/stream,
		 * XS_CHUNK): the rest of the check overlaps the transfer, whose
		 * per-reader share of the bandwidth it outpaces */
		uint64_t chunk = c->have_verify_chunk ? c->verify_chunk : HB_TRACE_ENGINE_CHUNK;
		uint64_t tail = chunk && chunk < m->rbytes ? chunk : m->rbytes;
		m->verify_ns = (uint64_t)ceil((double)tail * 1e9 / c->verify_bw);
		m->storage.check_ns = m->verify_ns;
	}
	return HB_OK;
}
