/*
 * hb_stream_stats.c: the latency histogram, AFN-019's metrics from the
 * counters, and their JSON form for --json.
 *
 * Definitions (AFN-019 "Measurements that decide the hypothesis"), each
 * computed from tickets and wants, never from hit rate alone:
 *   timely recall        exact wants whose record was valid when the router
 *                        named it / exact wants.  The deadline of an exact
 *                        want is that moment: anything later can be exposed.
 *   useful-prefetch      physical bytes of predicted reads that an exact
 *   ratio                want consumed / physical bytes of predicted reads.
 *   byte amplification   physical bytes read (every class, alignment
 *                        included) / logical bytes of the reads an exact
 *                        want consumed: 1 when nothing is read in vain.
 *   hidden fraction      1 - exposed wait / exact I/O wall time, the wall
 *                        time being issue-to-ready of each read an exact
 *                        want consumed (counted once per read).  Waits for
 *                        a slot count as exposed too, so a budget too small
 *                        for the wave shows as a negative fraction rather
 *                        than being hidden.
 */
#include "hb_base.h"
#include "hb_json.h"
#include "hb_stream.h"

#include <math.h>

static unsigned bucket(uint64_t v)
{
	unsigned e;

	if (v < 16)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	return 16 + (e - 4) * 8 + (unsigned)((v >> (e - 3)) & 7);
}

static uint64_t lower_bound(unsigned idx)
{
	unsigned e, sub;

	if (idx < 16)
		return idx;
	e = (idx - 16) / 8 + 4;
	sub = (idx - 16) % 8;
	return (uint64_t)(8 + sub) << (e - 3);
}

void hb_xs_hist_add(struct hb_xs_hist *h, uint64_t v)
{
	h->count[bucket(v)]++;
	h->n++;
}

uint64_t hb_xs_hist_quantile(const struct hb_xs_hist *h, double p)
{
	uint64_t want, acc = 0;

	if (!h->n || !(p > 0))
		return 0;
	if (p > 1)
		p = 1;
	want = (uint64_t)ceil(p * (double)h->n);
	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < HB_XS_HIST_BUCKETS; i++) {
		acc += h->count[i];
		if (acc >= want)
			return lower_bound(i);
	}
	return lower_bound(HB_XS_HIST_BUCKETS - 1);
}

static double ratio(double num, double den)
{
	return den > 0 ? num / den : NAN;
}

void hb_xs_metrics_get(const struct hb_xs_stats *st, struct hb_xs_metrics *m)
{
	m->timely_recall = ratio((double)st->hits, (double)st->wants);
	m->useful_prefetch_ratio = ratio((double)st->bytes_useful, (double)st->bytes_predicted);
	m->byte_amplification = ratio((double)st->bytes_physical, (double)st->bytes_served);
	m->hidden_fraction = st->exact_io_ns ? 1.0 - (double)st->exposed_ns / (double)st->exact_io_ns : NAN;
	m->exposed_per_token_ns = ratio((double)st->exposed_ns, (double)st->tokens);
	m->ready_p50_ns = hb_xs_hist_quantile(&st->ready, 0.50);
	m->ready_p95_ns = hb_xs_hist_quantile(&st->ready, 0.95);
	m->ready_p99_ns = hb_xs_hist_quantile(&st->ready, 0.99);
	m->record_bps = ratio((double)(st->probe_record_bytes + st->record_read_bytes) * 1e9,
			      (double)(st->probe_record_ns + st->record_read_ns));
	m->extent_bps = ratio((double)(st->probe_extent_bytes + st->extent_bytes) * 1e9,
			      (double)(st->probe_extent_ns + st->extent_read_ns));
}

void hb_xs_stats_since(const struct hb_xs_stats *now, const struct hb_xs_stats *before, struct hb_xs_stats *out)
{
	*out = *now;
#define XS_SUB(f) out->f = now->f - before->f
	XS_SUB(wants), XS_SUB(hits), XS_SUB(joined), XS_SUB(misses), XS_SUB(slot_waits);
	XS_SUB(promoted), XS_SUB(prefetch_hits), XS_SUB(prefetch_joined), XS_SUB(prefetch_rejected);
	XS_SUB(bytes_physical), XS_SUB(bytes_logical), XS_SUB(bytes_exact), XS_SUB(bytes_predicted);
	XS_SUB(bytes_useful), XS_SUB(bytes_rejected), XS_SUB(bytes_served);
	XS_SUB(completed), XS_SUB(failed_io), XS_SUB(failed_short), XS_SUB(failed_digest), XS_SUB(failed_alloc);
	XS_SUB(cancelled_queued), XS_SUB(cancelled_inflight), XS_SUB(stale_discards), XS_SUB(slot_releases);
	XS_SUB(evictions), XS_SUB(evictions_unused), XS_SUB(leases_taken), XS_SUB(leases_released);
	XS_SUB(lease_refusals), XS_SUB(deadlines), XS_SUB(late), XS_SUB(slack_sum_ns), XS_SUB(exposed_ns);
	XS_SUB(exact_io_ns), XS_SUB(tokens);
	XS_SUB(extent_reads), XS_SUB(extent_records), XS_SUB(extent_bytes), XS_SUB(extent_gap_bytes);
	XS_SUB(extent_read_ns), XS_SUB(record_reads), XS_SUB(record_read_bytes), XS_SUB(record_read_ns);
	for (int w = 0; w < HB_XS_WHYS; w++)
		XS_SUB(extent_why[w]);
	for (int p = 0; p < HB_XS_PRIOS; p++)
		XS_SUB(tickets[p]);
	XS_SUB(ready.n);
	for (unsigned i = 0; i < HB_XS_HIST_BUCKETS; i++)
		XS_SUB(ready.count[i]);
#undef XS_SUB
}

static int add_f64(cJSON *obj, const char *key, double v)
{
	cJSON *item = isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();

	if (!item || !cJSON_AddItemToObject(obj, key, item)) {
		cJSON_Delete(item);
		return HB_ERR_NOMEM;
	}
	return HB_OK;
}

/* "prefill_extent": H5's decisions, reads and the two measured rates. */
static int extent_json(const struct hb_xs_stats *st, const struct hb_xs_metrics *m, cJSON *obj)
{
	cJSON *o = cJSON_AddObjectToObject(obj, "prefill_extent"), *why;
	const struct {
		const char *key;
		uint64_t v;
	} u[] = {
		{"ring_bytes", st->ring_bytes},         {"reads", st->extent_reads},
		{"records", st->extent_records},        {"bytes", st->extent_bytes},
		{"gap_bytes", st->extent_gap_bytes},    {"read_ns", st->extent_read_ns},
		{"record_reads", st->record_reads},     {"record_read_bytes", st->record_read_bytes},
		{"record_read_ns", st->record_read_ns}, {"probe_record_bytes", st->probe_record_bytes},
		{"probe_record_ns", st->probe_record_ns}, {"probe_extent_bytes", st->probe_extent_bytes},
		{"probe_extent_ns", st->probe_extent_ns},
	};
	int rc = HB_OK;

	if (!o)
		return HB_ERR_NOMEM;
	rc = hb_json_add_str(o, "mode", hb_xs_extent_name((enum hb_xs_extent)st->extent_mode));
	for (size_t i = 0; i < HB_ARRAY_LEN(u) && !rc; i++)
		rc = hb_json_add_u64(o, u[i].key, u[i].v);
	if (!rc)
		rc = add_f64(o, "record_bps", m->record_bps);
	if (!rc)
		rc = add_f64(o, "extent_bps", m->extent_bps);
	if (rc)
		return rc;
	if (!(why = cJSON_AddObjectToObject(o, "decisions")))
		return HB_ERR_NOMEM;
	for (int w = 0; w < HB_XS_WHYS && !rc; w++)
		rc = hb_json_add_u64(why, hb_xs_extent_why_name((enum hb_xs_extent_why)w), st->extent_why[w]);
	return rc;
}

int hb_xs_stats_json(const struct hb_xs_stats *st, cJSON *obj)
{
	struct hb_xs_metrics m;
	const struct {
		const char *key;
		uint64_t v;
	} u[] = {
		{"budget_bytes", st->budget_bytes}, {"slot_bytes", st->slot_bytes},
		{"slots", st->slots}, {"resident_bytes", st->resident_bytes},
		{"meta_bytes", st->meta_bytes}, {"wants", st->wants}, {"hits", st->hits},
		{"joined", st->joined}, {"misses", st->misses}, {"slot_waits", st->slot_waits},
		{"tickets_p0", st->tickets[HB_XS_P0]}, {"tickets_p1", st->tickets[HB_XS_P1]},
		{"tickets_p2", st->tickets[HB_XS_P2]}, {"promoted", st->promoted},
		{"prefetch_hits", st->prefetch_hits}, {"prefetch_joined", st->prefetch_joined},
		{"prefetch_rejected", st->prefetch_rejected}, {"bytes_physical", st->bytes_physical},
		{"bytes_logical", st->bytes_logical}, {"bytes_exact", st->bytes_exact},
		{"bytes_predicted", st->bytes_predicted}, {"bytes_useful", st->bytes_useful},
		{"bytes_rejected", st->bytes_rejected}, {"bytes_served", st->bytes_served},
		{"completed", st->completed}, {"failed_io", st->failed_io},
		{"failed_short", st->failed_short}, {"failed_digest", st->failed_digest},
		{"failed_alloc", st->failed_alloc}, {"cancelled_queued", st->cancelled_queued},
		{"cancelled_inflight", st->cancelled_inflight}, {"stale_discards", st->stale_discards},
		{"evictions", st->evictions}, {"evictions_unused", st->evictions_unused},
		{"deadlines", st->deadlines}, {"late", st->late}, {"exposed_ns", st->exposed_ns},
		{"exact_io_ns", st->exact_io_ns}, {"tokens", st->tokens},
		{"exposed_max_token_ns", st->exposed_max_token_ns},
	};
	int rc = HB_OK;

	hb_xs_metrics_get(st, &m);
	for (size_t i = 0; i < HB_ARRAY_LEN(u) && !rc; i++)
		rc = hb_json_add_u64(obj, u[i].key, u[i].v);
	if (!rc)
		rc = hb_json_add_u64(obj, "ready_p50_ns", m.ready_p50_ns);
	if (!rc)
		rc = hb_json_add_u64(obj, "ready_p95_ns", m.ready_p95_ns);
	if (!rc)
		rc = hb_json_add_u64(obj, "ready_p99_ns", m.ready_p99_ns);
	if (!rc)
		rc = add_f64(obj, "slack_min_ns", st->deadlines ? (double)st->slack_min_ns : NAN);
	if (!rc)
		rc = add_f64(obj, "slack_mean_ns", ratio((double)st->slack_sum_ns, (double)st->deadlines));
	if (!rc)
		rc = add_f64(obj, "timely_recall", m.timely_recall);
	if (!rc)
		rc = add_f64(obj, "useful_prefetch_ratio", m.useful_prefetch_ratio);
	if (!rc)
		rc = add_f64(obj, "byte_amplification", m.byte_amplification);
	if (!rc)
		rc = add_f64(obj, "hidden_fraction", m.hidden_fraction);
	if (!rc)
		rc = add_f64(obj, "exposed_per_token_ns", m.exposed_per_token_ns);
	return rc ? rc : extent_json(st, &m, obj);
}
