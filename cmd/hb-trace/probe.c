/*
 * hb-trace/probe.c: hb-trace probe: a file's read latency and bandwidth
 * (hb-trace/analysis/hb_trace_probe.h).
 */
#include "hb_base.h"
#include "hb_trace_cli.h"
#include "hb_json.h"

int trace_probe(const struct cli *c, struct hb_error *err)
{
	struct hb_tprobe_result R;
	int rc = hb_tprobe_run(c->file, c->read_bytes, &R, err);

	if (rc)
		return rc;
	if (c->json) {
		cJSON *j = cJSON_CreateObject(), *a = cJSON_CreateArray();
		hb_json_add_str(j, "file", c->file ? c->file : "(temporary)");
		hb_json_add_u64(j, "file_bytes", R.file_bytes);
		hb_json_add_bool(j, "direct", R.direct);
		trace_jnum(j, "latency_s", R.latency_s);
		hb_json_add_u64(j, "read_bytes", R.read_bytes);
		for (int d = 0; d < HB_TPROBE_DEPTHS; d++) {
			cJSON *o = cJSON_CreateObject();
			hb_json_add_u64(o, "depth", R.depths[d]);
			trace_jnum(o, "bandwidth", R.bandwidth[d]);
			cJSON_AddItemToArray(a, o);
		}
		cJSON_AddItemToObject(j, "by_depth", a);
		trace_jnum(j, "bandwidth", R.best_bandwidth);
		hb_json_add_u64(j, "depth", R.depth);
		trace_print_json(j);
		return HB_OK;
	}
	printf("%s: %" PRIu64 " bytes, %s\n", c->file ? c->file : "temporary file", R.file_bytes,
	       R.direct ? "O_DIRECT" : "buffered (O_DIRECT refused: page-cache figures)");
	printf("latency %.1f us (median 4 KiB random read)\n", R.latency_s * 1e6);
	for (int d = 0; d < HB_TPROBE_DEPTHS; d++)
		printf("depth %2u: %.1f MB/s (%" PRIu64 "-byte random reads)\n", R.depths[d], R.bandwidth[d] / 1e6,
		       R.read_bytes);
	printf("model: --latency %.9f --bandwidth %.0f --depth %u\n", R.latency_s, R.best_bandwidth, R.depth);
	return HB_OK;
}
