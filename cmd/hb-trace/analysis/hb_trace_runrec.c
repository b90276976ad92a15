/*
 * hb_trace_runrec.c: an hb-run --json record as a layer time (see
 * hb_trace_runrec.h).
 */
#include "hb_trace_runrec.h"
#include "hb_json.h"

#include <math.h>

int hb_trace_layer_time_parse(const char *text, size_t len, const char *what, uint32_t layers, double *seconds,
			      struct hb_error *err)
{
	cJSON *j = NULL;
	const cJSON *xc, *mode;
	double dec = 0, t;
	uint64_t gen = 0;
	int rc;

	if (!layers)
		return hb_error_set(err, HB_ERR_INVALID, what, "the trace has no layers");
	if ((rc = hb_json_parse(text, len, what, &j, err)))
		return rc;
	if (!cJSON_IsObject(j)) {
		rc = hb_error_set(err, HB_ERR_FORMAT, what, "is not an hb-run --json record (not an object)");
		goto out;
	}
	/* a streamed run's decode time holds its read waits: the model would add them again */
	if ((xc = cJSON_GetObjectItemCaseSensitive(j, "expert_cache"))) {
		mode = cJSON_GetObjectItemCaseSensitive(xc, "mode");
		if (!cJSON_IsObject(xc) || !cJSON_IsString(mode) || !mode->valuestring) {
			rc = hb_error_set(err, HB_ERR_FORMAT, what, "expert_cache.mode is not a string");
			goto out;
		}
		if (strcmp(mode->valuestring, "all")) {
			rc = hb_error_set(err, HB_ERR_UNSUPPORTED, what,
					  "is a streamed run (expert_cache mode %.64s): its decode time includes the waits "
					  "the model adds; give its --stream-trace instead",
					  mode->valuestring);
			goto out;
		}
	}
	if ((rc = hb_json_f64(j, "decode_seconds", what, &dec, err)) ||
	    (rc = hb_json_u64(j, "generated_tokens", what, &gen, err)))
		goto out;
	if (gen < 2 || !(dec >= 0)) {
		rc = hb_error_set(err, HB_ERR_INVALID, what,
				  "needs generated_tokens >= 2 and decode_seconds >= 0 (found %" PRIu64 ")", gen);
		goto out;
	}
	t = dec / (double)(gen - 1) / layers;
	if (!isfinite(t)) {
		rc = hb_error_set(err, HB_ERR_INVALID, what, "decode_seconds per layer and token is not finite");
		goto out;
	}
	*seconds = t;
out:
	cJSON_Delete(j);
	return rc;
}
