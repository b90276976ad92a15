/*
 * hb-trace/common.c: what several subcommands share: JSON and table
 * number output, the trace header, record bytes from --artifact or
 * --record-bytes, cache budgets, and the header read before an analysis.
 */
#include "hb_base.h"
#include "hb_trace_cli.h"
#include "hb_json.h"

#include <math.h>

void trace_jnum(cJSON *o, const char *key, double v)
{
	if (isfinite(v))
		cJSON_AddNumberToObject(o, key, v);
	else
		cJSON_AddNullToObject(o, key);
}

void trace_print_json(cJSON *j)
{
	(void)hb_cli_print_json(prog, j); /* a failure is remembered for the exit status */
}

void trace_header_json(cJSON *j, const struct hb_trace_header *h, uint64_t records, uint64_t tokens)
{
	char a[65];
	hb_hex_encode(h->artifact, 32, a);
	hb_json_add_u64(j, "records", records);
	hb_json_add_u64(j, "tokens", tokens);
	hb_json_add_u64(j, "top_k", h->top_k);
	hb_json_add_u64(j, "layers", h->layers);
	hb_json_add_u64(j, "experts", h->experts);
	hb_json_add_str(j, "artifact", a);
}

int trace_record_bytes(struct trace_rb *r, const struct hb_trace_header *h, uint64_t *out, struct hb_error *err)
{
	int rc;
	*out = r->c->record_bytes;
	if (!r->c->artifact)
		return HB_OK;
	if (!r->have_art) {
		if ((rc = hb_trace_artifact_read(r->c->artifact, &r->art, err)))
			return rc;
		r->have_art = true;
	}
	if ((rc = hb_trace_artifact_check(&r->art, h, r->c->artifact, err)))
		return rc;
	*out = r->art.record_bytes;
	return HB_OK;
}

static double parse_unit(const char *u)
{
	static const struct { const char *s; double m; } units[] = {
		{"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	};
	for (size_t i = 0; i < HB_ARRAY_LEN(units); i++)
		if (!strcmp(u, units[i].s))
			return units[i].m;
	return 0;
}

/* Budgets in records: N, N%, or bytes with a unit (needs record bytes). */
int trace_budgets(const char *list, const struct hb_trace_header *h, uint64_t rbytes, uint64_t *out,
		       size_t *n, struct hb_error *err)
{
	char buf[1024], *save = NULL;
	*n = 0;
	/* a list cut short would lose or change its last budget: refuse it */
	if (strlen(list) >= sizeof(buf))
		return hb_error_set(err, HB_ERR_INVALID, "--budget", "the list is longer than %zu bytes", sizeof(buf) - 1);
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end = NULL;
		double v = strtod(t, &end), m;
		if (end == t || !(v >= 0) || !isfinite(v) || *n == MAX_LIST)
			return hb_error_set(err, HB_ERR_INVALID, "--budget", "'%s' is not a budget (or more than %d)", t, MAX_LIST);
		if (!*end) {
			if (v != floor(v))
				return hb_error_set(err, HB_ERR_INVALID, "--budget", "'%s': records are whole", t);
			out[(*n)++] = (uint64_t)v;
		} else if (!strcmp(end, "%")) {
			out[(*n)++] = (uint64_t)floor(v / 100.0 * h->layers * h->experts);
		} else if ((m = parse_unit(end)) > 0) {
			if (!rbytes)
				return hb_error_set(err, HB_ERR_INVALID, "--budget",
						    "'%s' is in bytes: give --artifact or --record-bytes", t);
			out[(*n)++] = (uint64_t)floor(v * m / (double)rbytes);
		} else {
			return hb_error_set(err, HB_ERR_INVALID, "--budget", "'%s': unknown unit '%s'", t, end);
		}
	}
	if (!*n)
		return hb_error_set(err, HB_ERR_INVALID, "--budget", "no budget given");
	return HB_OK;
}

/* The header, before any analysis: scan until the first record. */
static int stop_first(void *ctx, size_t shard, uint64_t index, const struct hb_trace_header *h,
		      const struct hb_route *r)
{
	return 1;
}

int trace_peek_header(struct hb_trace_set *s, struct hb_error *err)
{
	int rc = hb_trace_set_spool(s, err);
	if (rc)
		return rc;
	rc = hb_trace_set_scan(s, stop_first, NULL, NULL, err);
	return rc == 1 ? HB_OK : rc;
}

void trace_fnum(char *s, size_t n, double v, int prec)
{
	if (isfinite(v))
		snprintf(s, n, "%.*f", prec, v);
	else
		snprintf(s, n, "-");
}
