/*
 * bench/tokenize.c: hb_tok encode throughput on the tokenizer oracle's
 * corpus; bench/tokenize.sh drives it.
 *
 * usage: tokenize TOKENIZER_JSON ORACLE_JSON [REPS]
 *
 * Loads the tokenizer, takes the corpus texts from the oracle fixture
 * (tests/fixtures/tokenizer/qwen3-tokenizer-oracle.json), and encodes all of
 * them REPS times (default: the reps the upstream capture used) in
 * HB_TOK_PLAIN mode, best of 3, on one thread, as capture_tokenizer.py times
 * upstream's Tokenizer.encode.  Prints
 *   load <seconds>
 *   corpus <texts> <tokens per pass> <reps>
 *   hebrus <tokens> <seconds> <tokens/s>
 *   upstream <tokens> <seconds> <tokens/s>
 * the last line copied from the fixture.  Exits 1 if the token count per
 * pass differs from upstream's (the ids themselves are the unit test's job).
 */
#include "hb_base.h"
#include "hb_err.h"
#include "hb_io.h"
#include "hb_json.h"
#include "text/hb_tok.h"

#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint8_t *unhex(const char *hex, size_t *n)
{
	size_t len = strlen(hex) / 2;
	uint8_t *b = malloc(len + 1);
	for (size_t i = 0; b && i < len; i++) {
		unsigned v = 0;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
			free(b);
			return NULL;
		}
		b[i] = (uint8_t)v;
	}
	*n = len;
	return b;
}

int main(int argc, char **argv)
{
	char *json = NULL, buf[512];
	size_t jl = 0, nt = 0;
	struct hb_tok *tok = NULL;
	struct hb_error err;
	cJSON *root = NULL;
	const cJSON *c, *bench;
	uint8_t **texts;
	size_t *lens;
	double t0, best = 0, up_rate = 0, up_s = 0;
	uint64_t reps = 0, up_tokens = 0, ntok = 0;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: tokenize TOKENIZER_JSON ORACLE_JSON [REPS]\n");
		return 2;
	}
	hb_error_clear(&err);
	if (hb_read_file(argv[1], 64u << 20, &json, &jl, &err) ||
	    hb_json_parse_file(argv[2], 64u << 20, &root, &err)) {
		fprintf(stderr, "tokenize: %s\n", hb_error_format(&err, buf, sizeof(buf)));
		return 2;
	}
	t0 = now();
	if (hb_tok_load(json, jl, &tok, &err)) {
		fprintf(stderr, "tokenize: %s\n", hb_error_format(&err, buf, sizeof(buf)));
		return 2;
	}
	printf("load %.3f\n", now() - t0);
	free(json);
	bench = cJSON_GetObjectItemCaseSensitive(root, "bench");
	if (hb_json_u64(bench, "reps", "bench.reps", &reps, &err) ||
	    hb_json_u64(bench, "corpus_tokens", "bench.corpus_tokens", &up_tokens, &err) ||
	    hb_json_f64(bench, "tokens_per_second", "bench.tokens_per_second", &up_rate, &err) ||
	    hb_json_f64(bench, "best_seconds", "bench.best_seconds", &up_s, &err)) {
		fprintf(stderr, "tokenize: %s\n", hb_error_format(&err, buf, sizeof(buf)));
		return 2;
	}
	if (argc == 4)
		reps = strtoull(argv[3], NULL, 10);
	c = cJSON_GetObjectItemCaseSensitive(root, "cases");
	texts = calloc((size_t)cJSON_GetArraySize(c) + 1, sizeof(*texts));
	lens = calloc((size_t)cJSON_GetArraySize(c) + 1, sizeof(*lens));
	if (!texts || !lens)
		return 2;
	for (const cJSON *it = c->child; it; it = it->next) {
		texts[nt] = unhex(cJSON_GetObjectItemCaseSensitive(it, "utf8_hex")->valuestring, &lens[nt]);
		if (!texts[nt])
			return 2;
		nt++;
	}
	{
		struct hb_tok_ids v = { 0 };
		for (int round = 0; round < 3; round++) {
			double t;
			ntok = 0;
			t0 = now();
			for (uint64_t r = 0; r < reps; r++)
				for (size_t i = 0; i < nt; i++) {
					v.len = 0;
					if (hb_tok_encode(tok, texts[i], lens[i], HB_TOK_PLAIN, &v, &err)) {
						fprintf(stderr, "tokenize: %s\n",
							hb_error_format(&err, buf, sizeof(buf)));
						return 2;
					}
					ntok += v.len;
				}
			t = now() - t0;
			if (round == 0 || t < best)
				best = t;
		}
		hb_tok_ids_release(&v);
	}
	printf("corpus %zu %" PRIu64 " %" PRIu64 "\n", nt, reps ? ntok / reps : 0, reps);
	printf("hebrus %" PRIu64 " %.6f %.0f\n", ntok, best, (double)ntok / best);
	printf("upstream %" PRIu64 " %.6f %.0f\n", up_tokens * reps, up_s, up_rate);
	for (size_t i = 0; i < nt; i++)
		free(texts[i]);
	free(texts);
	free(lens);
	cJSON_Delete(root);
	hb_tok_free(tok);
	return reps && ntok / reps != up_tokens ? 1 : 0;
}
