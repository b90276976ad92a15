/*
 * fuzz_transcripts.c: fuzz target of the transcript reader (JSON lines,
 * hb-replay(1) TRANSCRIPTS), hb_transcripts_parse.
 *
 * Invariants: a refusal carries a replay- id; an accepted set renders line
 * by line (hb_transcript_render) to text that parses again to the same
 * transcripts: the same count, and per line the same sequence, owner,
 * thread (ids and names), turn, generation, time, runtime flag, window,
 * boundaries and token ids.  This file owns only the harness; the reader is
 * cmd/hb-replay/dataset/hb_replay_transcript.c.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "hb-replay/dataset/hb_replay.h"

static bool same_name(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static void same_transcript(const struct hb_transcript *a, const struct hb_transcript *b)
{
	HB_FUZZ_ASSERT(a->sequence == b->sequence && a->owner == b->owner && a->thread == b->thread);
	HB_FUZZ_ASSERT(a->turn == b->turn && a->generation == b->generation && a->runtime == b->runtime);
	HB_FUZZ_ASSERT(a->has_time == b->has_time && (!a->has_time || a->time == b->time));
	HB_FUZZ_ASSERT(a->has_window == b->has_window &&
		       (!a->has_window || (a->window[0] == b->window[0] && a->window[1] == b->window[1])));
	HB_FUZZ_ASSERT(same_name(a->owner_name, b->owner_name) && same_name(a->thread_name, b->thread_name));
	HB_FUZZ_ASSERT(a->n_tokens == b->n_tokens && a->n_bounds == b->n_bounds);
	HB_FUZZ_ASSERT(!a->n_tokens || !memcmp(a->tokens, b->tokens, a->n_tokens * sizeof(a->tokens[0])));
	for (size_t i = 0; i < a->n_bounds; i++)
		HB_FUZZ_ASSERT(a->bounds[i].at == b->bounds[i].at &&
			       !strcmp(a->bounds[i].role, b->bounds[i].role));
}

int hb_fuzz_transcripts(const uint8_t *data, size_t size)
{
	struct hb_transcripts ts = {0}, again = {0};
	struct hb_error err;
	char *text = NULL;
	size_t len = 0, cap = 0;
	int rc;

	if (size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	hb_error_clear(&err);
	rc = hb_transcripts_parse((const char *)data, size, "fuzz", &ts, &err);
	if (rc) {
		HB_FUZZ_ASSERT(err.id && !strncmp(err.id, "replay-", 7));
		return HB_FUZZ_REFUSED;
	}
	for (size_t i = 0; i < ts.n; i++) {
		char *line = hb_transcript_render(&ts.t[i]);
		size_t n;

		if (!line)
			goto out; /* out of memory: not a finding */
		n = strlen(line);
		if (len + n + 2 > cap) {
			char *g = realloc(text, cap = 2 * (len + n + 2));
			if (!g) {
				free(line);
				goto out;
			}
			text = g;
		}
		memcpy(text + len, line, n);
		len += n;
		text[len++] = '\n';
		free(line);
	}
	rc = hb_transcripts_parse(text ? text : "", len, "rendered", &again, &err);
	HB_FUZZ_ASSERT(rc == HB_OK && again.n == ts.n);
	for (size_t i = 0; i < ts.n; i++)
		same_transcript(&ts.t[i], &again.t[i]);
out:
	free(text);
	hb_transcripts_release(&again);
	hb_transcripts_release(&ts);
	return HB_FUZZ_ACCEPTED;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_transcripts(data, size);
	return 0;
}
#endif
