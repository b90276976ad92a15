/*
 * fuzz_prompt_ids.c: fuzz target of the prompt-id reader, hb_parse_id_list
 * (hb-run --tokens and --tokens-file: a file of token ids from a script or
 * another program, read as it is).
 *
 * Input: the text, every byte of it (NULs included: the reader takes a
 * length, not a C string).
 *
 * Invariants: the reader agrees with a second reading written here in
 * another way (split at commas; every field, trimmed of white space, is one
 * or more white-space-separated decimal numbers up to INT32_MAX; no other
 * byte anywhere), in verdict and in every id.  A refusal names the first
 * byte no accepted text could have there: the text cut at that offset and
 * completed with " 0" is accepted by both readings, and the text cut one
 * byte later and completed so is refused by the second, unless the byte is
 * a digit, which then begins a number past INT32_MAX.  The ids of an
 * accepted text, written back with separators chosen from the input's own
 * bytes and read again, are the same ids.  This file owns only
 * the harness; the reader is libcore/hb_parse.c.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "hb_err.h"
#include "hb_parse.h"

static bool sp(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Field [a, b) (between commas): one or more numbers apart by white space,
 * appended to out (room for every digit of the text); false if it is not. */
static bool field_ids(const uint8_t *t, size_t a, size_t b, int32_t *out, size_t *n)
{
	size_t i = a, before = *n;

	while (i < b) {
		if (sp(t[i])) {
			i++;
			continue;
		}
		uint64_t v = 0;
		size_t s = i;
		while (i < b && t[i] >= '0' && t[i] <= '9') {
			v = v * 10 + (uint64_t)(t[i] - '0');
			if (v > INT32_MAX)
				return false;
			i++;
		}
		if (i == s || (i < b && !sp(t[i])))
			return false;
		out[(*n)++] = (int32_t)v;
	}
	return *n > before;
}

/* The reference reading; returns the count, or -1 when refused. */
static long reference(const uint8_t *t, size_t len, int32_t *out)
{
	size_t n = 0, a = 0;

	for (size_t i = 0; i <= len; i++) {
		if (i < len && t[i] != ',')
			continue;
		if (!field_ids(t, a, i, out, &n))
			return -1;
		a = i + 1;
	}
	return (long)n;
}

/* Whether text[0, cut) + " 0" is accepted, by both readings alike. */
static bool completes(const uint8_t *t, size_t cut, int32_t *ref)
{
	uint8_t *buf = malloc(cut + 2);
	int32_t *ids = NULL;
	size_t n = 0;
	long want;
	int rc;

	if (!buf)
		return true; /* out of memory: nothing to say */
	memcpy(buf, t, cut);
	buf[cut] = ' ';
	buf[cut + 1] = '0';
	want = reference(buf, cut + 2, ref);
	rc = hb_parse_id_list((const char *)buf, cut + 2, &ids, &n, NULL);
	free(buf);
	if (rc == HB_ERR_NOMEM)
		return want >= 0;
	HB_FUZZ_ASSERT((rc == HB_OK) == (want >= 0) && (rc || (size_t)want == n));
	if (rc == HB_OK)
		HB_FUZZ_ASSERT(ids[n - 1] == 0 && !memcmp(ids, ref, n * sizeof(int32_t)));
	free(ids);
	return want >= 0;
}

/* The refusal at byte at is the first byte that could not be there. */
static void check_stop(const uint8_t *t, size_t size, size_t at, int32_t *ref)
{
	HB_FUZZ_ASSERT(completes(t, at, ref));
	if (at == size)
		return; /* the text ended where an id was wanted */
	if (t[at] >= '0' && t[at] <= '9') {
		uint64_t v = 0;
		for (size_t i = at; i < size && t[i] >= '0' && t[i] <= '9' && v <= INT32_MAX; i++)
			v = v * 10 + (uint64_t)(t[i] - '0');
		HB_FUZZ_ASSERT(v > INT32_MAX);
		return;
	}
	HB_FUZZ_ASSERT(!completes(t, at + 1, ref));
}

int hb_fuzz_prompt_ids(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	int32_t *ids = NULL, *ref, *again = NULL;
	size_t n = 0, m = 0, at = SIZE_MAX, digits = 0;
	long want;
	int rc;

	if (size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	for (size_t i = 0; i < size; i++)
		digits += data[i] >= '0' && data[i] <= '9';
	if (!(ref = malloc((digits + 1) * sizeof(int32_t))))
		return HB_FUZZ_REFUSED;
	want = reference(data, size, ref);
	rc = hb_parse_id_list(text, size, &ids, &n, &at);
	if (rc == HB_ERR_NOMEM) {
		free(ref);
		return HB_FUZZ_REFUSED;
	}
	if (rc) {
		HB_FUZZ_ASSERT(rc == HB_ERR_INVALID && want < 0 && at <= size);
		check_stop(data, size, at, ref);
		free(ref);
		return HB_FUZZ_REFUSED;
	}
	HB_FUZZ_ASSERT(want >= 1 && (size_t)want == n && at == SIZE_MAX);
	for (size_t i = 0; i < n; i++)
		HB_FUZZ_ASSERT(ids[i] == ref[i] && ids[i] >= 0);

	/* written back, separators taken from the input's bytes, read again */
	{
		/* an id is at most 10 digits, a separator at most 4 bytes */
		size_t cap = n * 14 + 1;
		char *w = malloc(cap);
		size_t k = 0;
		if (w) {
			for (size_t i = 0; i < n; i++) {
				static const char *const seps[] = {",", " ", ", ", "\n", "\t,\r\n"};
				const char *sep = i ? seps[data[i % size] % 5] : "";
				int used = snprintf(w + k, cap - k, "%s%" PRId32, sep, ids[i]);
				HB_FUZZ_ASSERT(used > 0 && (size_t)used < cap - k);
				k += (size_t)used;
			}
			rc = hb_parse_id_list(w, k, &again, &m, NULL);
			HB_FUZZ_ASSERT(rc == HB_OK || rc == HB_ERR_NOMEM);
			if (rc == HB_OK) {
				HB_FUZZ_ASSERT(m == n && !memcmp(again, ids, n * sizeof(int32_t)));
				free(again);
			}
			free(w);
		}
	}
	free(ids);
	free(ref);
	return HB_FUZZ_ACCEPTED;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_prompt_ids(data, size);
	return 0;
}
#endif
