/*
 * fuzz_predictor.c: fuzz target of the predictor checkpoint reader
 * (hb_predictor_load, a safetensors file) and, through a round trip, of
 * hb_predictor_save.
 *
 * The input is a whole checkpoint file, read through a memfd's
 * /proc/self/fd path.  Invariants: a refusal names an id of the predictor
 * or safetensors tables and a second read gives the same outcome; an
 * accepted checkpoint has its train threads sorted and unique and its
 * geometry inside the loader's caps, scores every expert of a zero row
 * without fault, and saved again reads back to the same weights, identity,
 * threads and training text bit for bit, a second save giving the same
 * bytes; and the identity check a consumer runs before it uses the
 * checkpoint (hb_predictor_check, as hb_learned_open checks a run and
 * hb-replay predict a feature set) accepts a run of the predictor's own
 * identity cut by another split, refuses every thread it trained on
 * (predictor-leak) and any other split id or layer count.  This file owns
 * only the harness; the reader and writer are
 * libstore/predict/hb_predictor.c.
 */
#include "hb_base.h"
#include "fuzz_dir.h"
#include "predict/hb_predict.h"

static const char *const ids[] = {"predictor-", "feature-", "st-", "io"};

static bool same(const struct hb_predictor *a, const struct hb_predictor *b)
{
	size_t r = a->rank;

	if (a->width != b->width || a->rank != b->rank || a->layers != b->layers || a->experts != b->experts ||
	    a->top_k != b->top_k || a->n_train_threads != b->n_train_threads || strcmp(a->training, b->training))
		return false;
	if (memcmp(&a->id, &b->id, sizeof(a->id)))
		return false;
	return !memcmp(a->trunk, b->trunk, r * a->width * sizeof(float)) &&
	       !memcmp(a->layer, b->layer, (size_t)a->layers * r * sizeof(float)) &&
	       !memcmp(a->head, b->head, (size_t)a->experts * r * sizeof(float)) &&
	       !memcmp(a->bias, b->bias, a->experts * sizeof(float)) &&
	       !memcmp(a->train_threads, b->train_threads, a->n_train_threads * sizeof(uint64_t));
}

static void exercise(const struct hb_predictor *p)
{
	float *x = calloc(p->width, sizeof(float)), *z = calloc(p->rank ? p->rank : 1, sizeof(float));
	float *s = calloc(p->experts ? p->experts : 1, sizeof(float));
	uint32_t *idx = calloc(p->experts ? p->experts : 1, sizeof(uint32_t));

	for (size_t i = 1; i < p->n_train_threads; i++)
		HB_FUZZ_ASSERT(p->train_threads[i - 1] < p->train_threads[i]);
	HB_FUZZ_ASSERT(p->experts <= (1u << 16) && p->top_k <= 64 && p->rank <= 4096);
	HB_FUZZ_ASSERT(p->width == p->id.width && p->layers == p->id.layers && p->training);
	if (x && z && s && idx && p->layers) {
		hb_predictor_scores(p, x, p->layers - 1, z, s);
		hb_predict_top(s, p->experts, p->experts < p->top_k ? p->experts : p->top_k, idx);
		for (uint32_t i = 0; i < p->top_k && i < p->experts; i++)
			HB_FUZZ_ASSERT(idx[i] < p->experts);
	}
	free(x);
	free(z);
	free(s);
	free(idx);
}

/* hb_predictor_check over runs built from p's own identity. */
static void check_runs(const struct hb_predictor *p)
{
	struct hb_feature_set run;
	struct hb_error err;
	uint64_t thread = 0;

	memset(&run, 0, sizeof(run));
	run.id = p->id;
	snprintf(run.id.split, sizeof(run.id.split), "%s", strcmp(p->id.split, "runtime") ? "runtime" : "heldout");
	run.thread = &thread;
	hb_error_clear(&err);
	HB_FUZZ_ASSERT(hb_predictor_check(p, &run, "run", &err) == HB_OK);
	for (size_t i = 0; i < p->n_train_threads; i++) {
		thread = p->train_threads[i];
		run.n = 1;
		hb_error_clear(&err);
		HB_FUZZ_ASSERT(hb_predictor_check(p, &run, "run", &err) != HB_OK);
		HB_FUZZ_ASSERT(err.id && !strcmp(err.id, "predictor-leak"));
		/* a thread between two trained ones is not one of them */
		if (i + 1 < p->n_train_threads && p->train_threads[i] + 1 < p->train_threads[i + 1]) {
			thread = p->train_threads[i] + 1;
			HB_FUZZ_ASSERT(hb_predictor_check(p, &run, "run", &err) == HB_OK);
		}
	}
	run.n = 0;
	snprintf(run.id.split, sizeof(run.id.split), "%s", p->id.split);
	HB_FUZZ_ASSERT(hb_predictor_check(p, &run, "run", &err) != HB_OK);
	snprintf(run.id.split, sizeof(run.id.split), "runtime-x");
	run.id.split_id[0] ^= 1;
	HB_FUZZ_ASSERT(hb_predictor_check(p, &run, "run", &err) != HB_OK);
	run.id.split_id[0] ^= 1;
	run.id.layers++;
	HB_FUZZ_ASSERT(hb_predictor_check(p, &run, "run", &err) != HB_OK);
}

static void round_trip(const struct hb_predictor *p)
{
	const char *dir = hb_fuzz_scratch();
	char path[4200], path2[4200];
	struct hb_predictor back;
	struct hb_error err;
	uint8_t *b1, *b2;
	size_t l1, l2;
	int rc;

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/p.safetensors", dir);
	snprintf(path2, sizeof(path2), "%s/p2.safetensors", dir);
	hb_error_clear(&err);
	rc = hb_predictor_save(path, p, &err);
	if (rc == HB_ERR_NOMEM || rc == HB_ERR_IO)
		return;
	HB_FUZZ_ASSERT(rc == HB_OK);
	rc = hb_predictor_load(path, &back, &err);
	if (rc == HB_ERR_NOMEM)
		return;
	HB_FUZZ_ASSERT(rc == HB_OK);
	HB_FUZZ_ASSERT(same(p, &back));
	HB_FUZZ_ASSERT(hb_predictor_save(path2, &back, &err) == HB_OK);
	HB_FUZZ_ASSERT(!hb_fuzz_get(dir, "p.safetensors", 256u << 20, &b1, &l1));
	HB_FUZZ_ASSERT(!hb_fuzz_get(dir, "p2.safetensors", 256u << 20, &b2, &l2));
	HB_FUZZ_ASSERT(l1 == l2 && !memcmp(b1, b2, l1));
	free(b1);
	free(b2);
	hb_predictor_release(&back);
}

int hb_fuzz_predictor(const uint8_t *data, size_t size)
{
	struct hb_predictor p1, p2;
	struct hb_error e1, e2;
	char path[64];
	int fd, rc1, rc2;

	if (size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	fd = hb_fuzz_memfd(data, size, 0, size);
	if (fd < 0)
		return HB_FUZZ_REFUSED;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	hb_error_clear(&e1);
	hb_error_clear(&e2);
	rc1 = hb_predictor_load(path, &p1, &e1);
	rc2 = hb_predictor_load(path, &p2, &e2);
	close(fd);
	if (rc1 == HB_ERR_NOMEM || rc2 == HB_ERR_NOMEM) {
		if (!rc1)
			hb_predictor_release(&p1);
		if (!rc2)
			hb_predictor_release(&p2);
		return HB_FUZZ_REFUSED;
	}
	HB_FUZZ_ASSERT(rc1 == rc2);
	if (rc1 != HB_OK) {
		hb_fuzz_same_refusal(rc1, &e1, &e2, ids, sizeof(ids) / sizeof(ids[0]));
		return HB_FUZZ_REFUSED;
	}
	HB_FUZZ_ASSERT(same(&p1, &p2));
	hb_predictor_release(&p2);
	exercise(&p1);
	check_runs(&p1);
	round_trip(&p1);
	hb_predictor_release(&p1);
	return HB_FUZZ_ACCEPTED;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_predictor(data, size);
	return 0;
}
#endif
