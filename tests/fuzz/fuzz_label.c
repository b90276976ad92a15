/*
 * fuzz_label.c: fuzz target of hb-replay's label-shard reader: the shard
 * manifests, the shards they describe and the merge proof over them
 * (hb_merge_run), and, through a round trip, of the label writer behind
 * `hb-replay merge -o` (hb_merge_write, which re-cuts the labels with
 * hb_label_run's writer).
 *
 * Input: one flags byte, then up to five files separated by HB_FUZZ_SEP
 * (fuzz_dir.h): labels-0000-of-0001-000000.json, its .hbtrace,
 * labels-0000-of-0001-000001.json, its .hbtrace (in L/), and the
 * transcripts (JSON lines, beside L/; absent: the proof runs without them).
 *   bit 0  reseal: set each manifest's "bytes" and "sha256" to its shard's,
 *          so that mutated shards and ranges reach the coverage checks
 *          behind the digests instead of all failing replay-manifest.
 *
 * Invariants: a refusal names an id of the replay, trace or JSON tables,
 * and a second proof gives the same outcome, id, field and counts; the
 * report is JSON whatever the outcome; an accepted set with transcripts,
 * merged into M/ by hb_merge_write, proves coverage on its own with the
 * same counts, and merged again from M/ gives the same files byte for byte
 * (the writer is a function of the labels).  This file owns only the
 * harness; the readers are cmd/hb-replay/dataset/hb_replay_manifest.c and
 * hb_replay_merge.c, the writer hb_replay_label.c.
 */
#include "hb_base.h"
#include "fuzz_dir.h"
#include "hb_json.h"
#include "hb_sha256.h"
#include "hb-replay/dataset/hb_replay.h"

#include <dirent.h>
#include <sys/stat.h>

#define FLAG_RESEAL 1u

static const char *const names[] = {"L/labels-0000-of-0001-000000.json", "L/labels-0000-of-0001-000000.hbtrace",
				    "L/labels-0000-of-0001-000001.json", "L/labels-0000-of-0001-000001.hbtrace",
				    "t.jsonl"};
static const char *const ids[] = {"replay-", "trace-", "json", "io"};

static void reseal_one(const char *dir, const char *manifest, const char *shard)
{
	uint8_t *text, *f;
	size_t len, flen;
	cJSON *root;
	uint8_t sha[32];
	char hex[65], *out;

	if (hb_fuzz_get(dir, manifest, HB_FUZZ_MAX_INPUT, &text, &len))
		return;
	root = cJSON_ParseWithLength((const char *)text, len);
	free(text);
	if (!cJSON_IsObject(root) || hb_fuzz_get(dir, shard, HB_FUZZ_MAX_INPUT, &f, &flen)) {
		cJSON_Delete(root);
		return;
	}
	hb_sha256_buf(f, flen, sha);
	free(f);
	hb_hex_encode(sha, 32, hex);
	cJSON_DeleteItemFromObjectCaseSensitive(root, "bytes");
	cJSON_DeleteItemFromObjectCaseSensitive(root, "sha256");
	cJSON_AddNumberToObject(root, "bytes", (double)flen);
	cJSON_AddStringToObject(root, "sha256", hex);
	if ((out = cJSON_PrintUnformatted(root))) {
		hb_fuzz_put(dir, manifest, out, strlen(out));
		free(out);
	}
	cJSON_Delete(root);
}

/* The report is one JSON object. */
static void check_report(const char *report)
{
	cJSON *r;

	HB_FUZZ_ASSERT(report != NULL);
	r = cJSON_Parse(report);
	HB_FUZZ_ASSERT(cJSON_IsObject(r));
	cJSON_Delete(r);
}

/* Every regular file of a/ is in b/ with the same bytes, and b/ has no other. */
static bool same_dir(const char *a, const char *b)
{
	DIR *d = opendir(a);
	struct dirent *e;
	size_t na = 0, nb = 0;
	bool ok = d != NULL;

	while (ok && (e = readdir(d))) {
		uint8_t *x, *y;
		size_t lx, ly;

		if (e->d_name[0] == '.')
			continue;
		na++;
		if (hb_fuzz_get(a, e->d_name, 64u << 20, &x, &lx))
			return closedir(d), false;
		if (hb_fuzz_get(b, e->d_name, 64u << 20, &y, &ly)) {
			free(x);
			return closedir(d), false;
		}
		ok = lx == ly && !memcmp(x, y, lx);
		free(x);
		free(y);
	}
	if (d)
		closedir(d);
	if (!ok || !(d = opendir(b)))
		return false;
	while ((e = readdir(d)))
		nb += e->d_name[0] != '.';
	closedir(d);
	return na == nb;
}

static void round_trip(const char *dir, const struct hb_transcripts *ts, const struct hb_merge_stats *st)
{
	char L[4200], M[4200], M2[4200], *report = NULL;
	const char *dirs[1];
	struct hb_merge_stats ms, ms2;
	struct hb_label_stats ls;
	struct hb_error err;
	int rc;

	snprintf(L, sizeof(L), "%s/L", dir);
	snprintf(M, sizeof(M), "%s/M", dir);
	snprintf(M2, sizeof(M2), "%s/M2", dir);
	dirs[0] = L;
	hb_error_clear(&err);
	rc = hb_merge_write(dirs, 1, ts, M, &report, &ms, &ls, &err);
	free(report);
	report = NULL;
	if (rc == HB_ERR_NOMEM || rc == HB_ERR_IO)
		return;
	if (rc != HB_OK) {
		/* what merge -o refuses beyond the proof: geometry or shard
		 * sizes that disagree, a hidden-state sidecar */
		HB_FUZZ_ASSERT(hb_fuzz_same_id(err.id, hb_replay_diag_id(HB_RPD_MANIFEST)));
		return;
	}
	HB_FUZZ_ASSERT(ms.sequences == st->sequences && ms.positions == st->positions && ms.records == st->records);
	dirs[0] = M;
	HB_FUZZ_ASSERT(hb_merge_run(dirs, 1, ts, &report, &ms2, &err) == HB_OK);
	free(report);
	report = NULL;
	HB_FUZZ_ASSERT(ms2.sequences == st->sequences && ms2.positions == st->positions && ms2.records == st->records);
	HB_FUZZ_ASSERT(hb_merge_write(dirs, 1, ts, M2, &report, &ms2, &ls, &err) == HB_OK);
	free(report);
	HB_FUZZ_ASSERT(same_dir(M, M2));
}

int hb_fuzz_label(const uint8_t *data, size_t size)
{
	struct hb_transcripts ts = {0};
	struct hb_merge_stats s1, s2;
	struct hb_error e1, e2;
	const char *dir, *dirs[1];
	char L[4200], *r1 = NULL, *r2 = NULL;
	uint8_t *text;
	size_t len;
	bool have_ts = false;
	int rc1, rc2, ret = HB_FUZZ_REFUSED;

	if (size < 1 || size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	if (!(dir = hb_fuzz_scratch()))
		return HB_FUZZ_REFUSED;
	snprintf(L, sizeof(L), "%s/L", dir);
	if (mkdir(L, 0700) || !(dir = hb_fuzz_unpack_into(data + 1, size - 1, names, 5)))
		return HB_FUZZ_REFUSED;
	if (data[0] & FLAG_RESEAL) {
		reseal_one(dir, names[0], names[1]);
		reseal_one(dir, names[2], names[3]);
	}
	if (!hb_fuzz_get(dir, names[4], HB_FUZZ_MAX_INPUT, &text, &len)) {
		hb_error_clear(&e1);
		have_ts = hb_transcripts_parse((const char *)text, len, "t.jsonl", &ts, &e1) == HB_OK;
		free(text);
		if (!have_ts)
			return HB_FUZZ_REFUSED; /* the transcripts target's business */
	}
	dirs[0] = L;
	hb_error_clear(&e1);
	hb_error_clear(&e2);
	memset(&s1, 0, sizeof(s1));
	memset(&s2, 0, sizeof(s2));
	rc1 = hb_merge_run(dirs, 1, have_ts ? &ts : NULL, &r1, &s1, &e1);
	rc2 = hb_merge_run(dirs, 1, have_ts ? &ts : NULL, &r2, &s2, &e2);
	if (rc1 == HB_ERR_NOMEM || rc2 == HB_ERR_NOMEM)
		goto out;
	HB_FUZZ_ASSERT(rc1 == rc2 && !memcmp(&s1, &s2, sizeof(s1)));
	HB_FUZZ_ASSERT(hb_fuzz_same_id(r1 ? "" : NULL, r2 ? "" : NULL));
	if (r1 && r2)
		HB_FUZZ_ASSERT(!strcmp(r1, r2));
	if (rc1 != HB_OK) {
		hb_fuzz_same_refusal(rc1, &e1, &e2, ids, sizeof(ids) / sizeof(ids[0]));
		if (r1)
			check_report(r1);
		goto out;
	}
	check_report(r1);
	if (have_ts)
		round_trip(dir, &ts, &s1);
	ret = HB_FUZZ_ACCEPTED;
out:
	free(r1);
	free(r2);
	if (have_ts)
		hb_transcripts_release(&ts);
	return ret;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_label(data, size);
	return 0;
}
#endif
