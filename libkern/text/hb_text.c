/*
 * hb_text.c: prompt text to ids with provenance (hb_text.h).
 *
 * Owns the DATA / TRUSTED_CONTROL rule at the id level; rendering is
 * hb_chat.c's, BPE hb_tok*.c's.  Everything is built into local vectors
 * and handed over only when the whole prompt encoded, so a failure leaves
 * the caller's tokens as they were.
 *
 * A TRUSTED_CONTROL segment may hold several atoms: the renderer merges
 * adjacent segments of one kind, so "</tool_call><|im_end|>" arrives as one
 * segment.  It is split into added tokens by longest match at each byte and
 * must be covered exactly; a segment that is not (a template atom the
 * tokenizer lacks, or stray bytes) is refused, never encoded as data,
 * because a control byte sequence that is tokenized as text would silently
 * change what the model is told.
 */
#include "hb_text.h"

#define HB_TEXT_DIAG_STR(e, s) s,
static const char *const text_diag_ids[] = { HB_TEXT_DIAG_LIST(HB_TEXT_DIAG_STR) };
#undef HB_TEXT_DIAG_STR

const char *hb_text_diag_id(int diag)
{
	return diag >= 0 && diag < HB_TEXT_DIAG_COUNT ? text_diag_ids[diag] : NULL;
}

const char *hb_text_prov_name(int prov)
{
	switch (prov) {
	case HB_TEXT_DATA: return "DATA";
	case HB_TEXT_CONTROL: return "TRUSTED_CONTROL";
	default: return NULL;
	}
}

void hb_text_tokens_release(struct hb_text_tokens *t)
{
	if (!t)
		return;
	free(t->ids);
	free(t->prov);
	memset(t, 0, sizeof(*t));
}

/* Provenance marks kept beside a hb_tok_ids vector, grown to its length. */
struct build {
	struct hb_tok_ids ids;
	uint8_t *prov;
	size_t prov_cap;
};

static int mark(struct build *b, size_t from, uint8_t prov, struct hb_error *err)
{
	if (b->ids.len > b->prov_cap) {
		size_t cap = b->prov_cap ? b->prov_cap : 64;
		uint8_t *g;
		while (cap < b->ids.len) {
			if (cap > SIZE_MAX / 2)
				return hb_error_set(err, HB_ERR_OVERFLOW, "tokens", "too many tokens");
			cap *= 2;
		}
		g = realloc(b->prov, cap);
		if (!g)
			return hb_error_set(err, HB_ERR_NOMEM, "tokens", "out of memory");
		b->prov = g;
		b->prov_cap = cap;
	}
	if (b->ids.len > from)
		memset(b->prov + from, prov, b->ids.len - from);
	return HB_OK;
}

static int push_id(struct build *b, int32_t id, struct hb_error *err)
{
	if (b->ids.len == b->ids.cap) {
		size_t cap = b->ids.cap ? b->ids.cap * 2 : 64;
		int32_t *g;
		if (cap > SIZE_MAX / sizeof(int32_t))
			return hb_error_set(err, HB_ERR_OVERFLOW, "tokens", "too many tokens");
		g = realloc(b->ids.ids, cap * sizeof(int32_t));
		if (!g)
			return hb_error_set(err, HB_ERR_NOMEM, "tokens", "out of memory");
		b->ids.ids = g;
		b->ids.cap = cap;
	}
	b->ids.ids[b->ids.len++] = id;
	return HB_OK;
}

static int data(struct build *b, const struct hb_tok *tok, const uint8_t *s, size_t n,
		struct hb_error *err)
{
	size_t from = b->ids.len;
	int rc = hb_tok_encode(tok, s, n, HB_TOK_DATA, &b->ids, err);
	return rc ? rc : mark(b, from, HB_TEXT_DATA, err);
}

/* The longest added token whose content is a prefix of s[0..n); 0 if none. */
static size_t longest_atom(const struct hb_tok *tok, const uint8_t *s, size_t n, int32_t *id)
{
	size_t best = 0, count = hb_tok_added_count(tok);

	for (size_t i = 0; i < count; i++) {
		const char *content;
		int32_t aid;
		bool special;
		size_t len;
		if (hb_tok_added_get(tok, i, &aid, &content, &special) || !content)
			continue;
		len = strlen(content);
		if (len > best && len <= n && !memcmp(content, s, len)) {
			best = len;
			*id = aid;
		}
	}
	return best;
}

static int control(struct build *b, const struct hb_tok *tok, const uint8_t *s, size_t n, size_t seg,
		   struct hb_error *err)
{
	char field[48];
	size_t from = b->ids.len, pos = 0;
	int rc;

	snprintf(field, sizeof(field), "segments[%zu]", seg);
	while (pos < n) {
		int32_t id = -1;
		size_t len = longest_atom(tok, s + pos, n - pos, &id);
		if (!len || id < 0)
			return hb_error_diag(err, hb_text_diag_id(HB_TEXT_E_CONTROL), HB_ERR_CONTRACT, field,
					     false, 0, "trusted control text '%.*s' is not an added token of the tokenizer",
					     (int)((n - pos) > 64 ? 64 : (n - pos)), (const char *)s + pos);
		if ((rc = push_id(b, id, err)))
			return rc;
		pos += len;
	}
	return mark(b, from, HB_TEXT_CONTROL, err);
}

static int finish(struct build *b, struct hb_text_tokens *out, struct hb_error *err)
{
	int rc = mark(b, b->ids.len, HB_TEXT_DATA, err); /* sizes prov even for n = 0 */
	if (rc)
		return rc;
	if (!b->prov && !(b->prov = malloc(1)))
		return hb_error_set(err, HB_ERR_NOMEM, "tokens", "out of memory");
	if (!b->ids.ids && !(b->ids.ids = malloc(sizeof(int32_t))))
		return hb_error_set(err, HB_ERR_NOMEM, "tokens", "out of memory");
	hb_text_tokens_release(out);
	out->ids = b->ids.ids;
	out->prov = b->prov;
	out->n = b->ids.len;
	memset(b, 0, sizeof(*b));
	return HB_OK;
}

static void discard(struct build *b)
{
	hb_tok_ids_release(&b->ids);
	free(b->prov);
	memset(b, 0, sizeof(*b));
}

int hb_text_encode_plain(const struct hb_tok *tok, const uint8_t *s, size_t n,
			 struct hb_text_tokens *out, struct hb_error *err)
{
	struct build b;
	int rc;

	if (!tok || (!s && n) || !out)
		return hb_error_set(err, HB_ERR_INVALID, "text", "null argument");
	memset(&b, 0, sizeof(b));
	if ((rc = data(&b, tok, s, n, err)) || (rc = finish(&b, out, err)))
		discard(&b);
	return rc;
}

/* Segments non-empty, in order, contiguous from 0 to len, kinds known. */
static int check_tiling(const struct hb_chat_render *r, struct hb_error *err)
{
	size_t pos = 0;

	if (r->len && (!r->bytes || !r->segs))
		return hb_error_diag(err, hb_text_diag_id(HB_TEXT_E_SEGMENTS), HB_ERR_INVALID, "segments", false, 0,
				     "a non-empty rendering without bytes or segments");
	for (size_t i = 0; i < r->nsegs; i++) {
		const struct hb_chat_segment *s = &r->segs[i];
		if (s->off != pos || !s->len || s->len > r->len - pos ||
		    (s->kind != HB_CHAT_DATA && s->kind != HB_CHAT_TRUSTED_CONTROL))
			return hb_error_diag(err, hb_text_diag_id(HB_TEXT_E_SEGMENTS), HB_ERR_INVALID, "segments",
					     false, 0, "segment %zu does not continue the tiling at byte %zu", i, pos);
		pos += s->len;
	}
	if (pos != r->len)
		return hb_error_diag(err, hb_text_diag_id(HB_TEXT_E_SEGMENTS), HB_ERR_INVALID, "segments", false, 0,
				     "segments cover %zu of %zu bytes", pos, r->len);
	return HB_OK;
}

int hb_text_encode_chat(const struct hb_tok *tok, const struct hb_chat_render *r,
			struct hb_text_tokens *out, struct hb_error *err)
{
	struct build b;
	int rc;

	if (!tok || !r || !out)
		return hb_error_set(err, HB_ERR_INVALID, "text", "null argument");
	if ((rc = check_tiling(r, err)))
		return rc;
	memset(&b, 0, sizeof(b));
	for (size_t i = 0; i < r->nsegs && !rc; i++) {
		const struct hb_chat_segment *s = &r->segs[i];
		const uint8_t *p = (const uint8_t *)r->bytes + s->off;
		rc = s->kind == HB_CHAT_TRUSTED_CONTROL ? control(&b, tok, p, s->len, i, err)
							: data(&b, tok, p, s->len, err);
	}
	if (rc || (rc = finish(&b, out, err)))
		discard(&b);
	return rc;
}
