/*
 * fuzz_timely.c: fuzz target of the deadlines reader, hb_timely_load (the
 * hebrus-deadlines/1 files hb-run --deadlines writes, read by hb-replay
 * eval --deadlines for Gate 4's timely recall; hb-run(1) DECODE CAPTURES).
 *
 * Input: one deadlines file (JSON text), given as a path through a memfd
 * (/proc/self/fd/N).  The reader is run with no --read-ns, and again with
 * one.
 *
 * Invariants: a refusal carries a "replay-" id; reading twice gives the
 * same outcome and id; an accepted file's read latency is finite and not
 * negative, its depth at least 1, and every record the file lists (parsed
 * again here with cJSON) is found by hb_timely_find at its sequence,
 * position and layer, whole numbers equal to the file's, with finite
 * times; decode steps are the positions at or past prompt_tokens.  UBSan
 * catches a number cast past its type.  This file owns only the harness;
 * the reader is cmd/hb-replay/dataset/hb_replay_timely.c.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "hb-replay/dataset/hb_replay_int.h"

#include <cJSON.h>
#include <math.h>

static int load(int fd, double read_ns, struct hb_timely **t, struct hb_error *err)
{
	char path[64];
	const char *files[1] = {path};

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	hb_error_clear(err);
	return hb_timely_load(files, 1, read_ns, t, err);
}

/* Every record of the text is found at its keys (the text was accepted). */
static void check_records(const struct hb_timely *t, const uint8_t *data, size_t size)
{
	cJSON *j = cJSON_ParseWithLength((const char *)data, size), *a, *e, *x;
	double seq, prompt = 0;

	if (!j)
		return; /* out of memory in cJSON: the reader parsed it */
	x = cJSON_GetObjectItem(j, "sequence");
	HB_FUZZ_ASSERT(cJSON_IsNumber(x));
	seq = x->valuedouble;
	HB_FUZZ_ASSERT(seq >= 0 && seq == floor(seq) && seq <= 0x1p53);
	if ((x = cJSON_GetObjectItem(j, "prompt_tokens"))) {
		HB_FUZZ_ASSERT(cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble <= 0x1p53);
		prompt = x->valuedouble;
	}
	a = cJSON_GetObjectItem(j, "records");
	HB_FUZZ_ASSERT(cJSON_IsArray(a));
	cJSON_ArrayForEach(e, a) {
		const cJSON *p = cJSON_GetArrayItem(e, 0), *l = cJSON_GetArrayItem(e, 1);
		const struct hb_timely_rec *r;

		HB_FUZZ_ASSERT(cJSON_IsArray(e) && cJSON_GetArraySize(e) == 5 && cJSON_IsNumber(p) && cJSON_IsNumber(l));
		HB_FUZZ_ASSERT(p->valuedouble >= 0 && p->valuedouble == floor(p->valuedouble) && p->valuedouble <= 0x1p53);
		HB_FUZZ_ASSERT(l->valuedouble >= 0 && l->valuedouble == floor(l->valuedouble) &&
			       l->valuedouble <= UINT32_MAX);
		r = hb_timely_find(t, (uint64_t)seq, (uint64_t)p->valuedouble, (uint32_t)l->valuedouble);
		HB_FUZZ_ASSERT(r != NULL);
		HB_FUZZ_ASSERT(r->seq == (uint64_t)seq && r->pos == (uint64_t)p->valuedouble &&
			       r->layer == (uint32_t)l->valuedouble);
		HB_FUZZ_ASSERT(isfinite(r->pre_attn_ns) && isfinite(r->pre_moe_ns) && isfinite(r->need_ns));
		HB_FUZZ_ASSERT(hb_timely_decode_step(t, (uint64_t)seq, r->pos) == (p->valuedouble >= prompt));
	}
	cJSON_Delete(j);
}

int hb_fuzz_timely(const uint8_t *data, size_t size)
{
	struct hb_timely *t = NULL, *t2 = NULL;
	struct hb_error err, err2;
	int fd, rc, rc2, out = HB_FUZZ_REFUSED;

	if (size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	fd = hb_fuzz_memfd(data, size, 0, size);
	if (fd < 0)
		return HB_FUZZ_REFUSED;
	rc = load(fd, 0, &t, &err);
	rc2 = load(fd, 0, &t2, &err2);
	if (rc == HB_ERR_NOMEM || rc2 == HB_ERR_NOMEM)
		goto done;
	HB_FUZZ_ASSERT(rc == rc2 && hb_fuzz_same_id(err.id, err2.id));
	HB_FUZZ_ASSERT((rc == HB_OK) == (t != NULL));
	hb_timely_free(t2);
	t2 = NULL;
	if (rc != HB_OK) {
		HB_FUZZ_ASSERT(err.id && !strncmp(err.id, "replay-", 7));
		/* a resident run's file (no read measured) is taken with --read-ns */
		if (!strcmp(err.field, "read-ns") && load(fd, 1000, &t2, &err2) == HB_OK)
			HB_FUZZ_ASSERT(hb_timely_read_ns(t2) == 1000);
		goto done;
	}
	HB_FUZZ_ASSERT(isfinite(hb_timely_read_ns(t)) && hb_timely_read_ns(t) >= 0);
	HB_FUZZ_ASSERT(hb_timely_depth(t) >= 1);
	check_records(t, data, size);
	/* --read-ns wins over the measured latency */
	if (load(fd, 250, &t2, &err2) == HB_OK)
		HB_FUZZ_ASSERT(hb_timely_read_ns(t2) == 250);
	out = HB_FUZZ_ACCEPTED;
done:
	hb_timely_free(t);
	hb_timely_free(t2);
	close(fd);
	return out;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_timely(data, size);
	return 0;
}
#endif
