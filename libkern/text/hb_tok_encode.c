/*
 * hb_tok_encode.c: text -> ids.
 *
 * The order is upstream's (tokenizers AddedVocabulary then the pipeline):
 * in HB_TOK_PLAIN mode added tokens with normalized=false are split out of
 * the raw text first (leftmost-longest, lstrip/rstrip widening over
 * White_Space); each remaining piece is NFC-normalised on its own, then
 * added tokens with normalized=true are split out of the normalised piece;
 * what remains is cut by the pattern (hb_tok_pretok.c), mapped byte-wise
 * and merged by BPE.  HB_TOK_DATA skips both added-token passes.
 *
 * BPE is upstream's word.rs algorithm: a heap of candidate merges ordered
 * by (rank, position), a merge applied only if the pair it was queued for
 * is still there.  Applying the lowest rank leftmost-first is what makes
 * the result equal to upstream on overlapping pairs ("aaa").
 */
#include "hb_base.h"
#include "hb_tok.h"
#include "hb_tok_int.h"
#include "hb_unicode.h"

struct heap_ent {
	uint32_t rank;
	uint32_t pos;
	int32_t id;
};

struct enc {
	const struct hb_tok *tok;
	struct hb_tok_ids *out;
	const uint8_t *base; /* the piece being pre-tokenized */
	struct hb_error *err;
	/* BPE scratch */
	int32_t *sym;
	int32_t *prev, *next;
	struct heap_ent *heap;
	size_t cap, heap_cap;
};

static int push_id(struct enc *e, int32_t id)
{
	struct hb_tok_ids *v = e->out;
	if (v->len == v->cap) {
		size_t nc = v->cap ? v->cap * 2 : 64;
		int32_t *p = realloc(v->ids, nc * sizeof(int32_t));
		if (!p)
			return hb_error_set(e->err, HB_ERR_NOMEM, "encode", "out of memory");
		v->ids = p;
		v->cap = nc;
	}
	v->ids[v->len++] = id;
	return HB_OK;
}

static bool heap_less(const struct heap_ent *a, const struct heap_ent *b)
{
	return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(struct heap_ent *h, size_t *n, struct heap_ent v)
{
	size_t i = (*n)++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!heap_less(&v, &h[p]))
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = v;
}

static struct heap_ent heap_pop(struct heap_ent *h, size_t *n)
{
	struct heap_ent top = h[0], v = h[--(*n)];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, s = i;
		const struct heap_ent *best = &v;
		if (l < *n && heap_less(&h[l], best)) {
			s = l;
			best = &h[l];
		}
		if (r < *n && heap_less(&h[r], best))
			s = r;
		if (s == i)
			break;
		h[i] = h[s];
		i = s;
	}
	if (*n)
		h[i] = v;
	return top;
}

static int reserve(struct enc *e, size_t n)
{
	if (n <= e->cap)
		return HB_OK;
	size_t nc = e->cap ? e->cap : 64;
	while (nc < n)
		nc *= 2;
	int32_t *a = realloc(e->sym, nc * sizeof(int32_t));
	if (a)
		e->sym = a;
	int32_t *b = a ? realloc(e->prev, nc * sizeof(int32_t)) : NULL;
	if (b)
		e->prev = b;
	int32_t *c = b ? realloc(e->next, nc * sizeof(int32_t)) : NULL;
	if (c)
		e->next = c;
	/* each merge pushes at most 2 candidates, plus n-1 initially */
	struct heap_ent *h = c ? realloc(e->heap, nc * 3 * sizeof(struct heap_ent)) : NULL;
	if (h)
		e->heap = h;
	if (!h)
		return hb_error_set(e->err, HB_ERR_NOMEM, "encode", "out of memory");
	e->cap = nc;
	return HB_OK;
}

static void queue_pair(struct enc *e, size_t *hn, int32_t pos)
{
	int32_t nx = e->next[pos];
	const struct hb_tok_merge *m;
	if (nx < 0)
		return;
	m = hb_tok_merge_find(e->tok, e->sym[pos], e->sym[nx]);
	if (m)
		heap_push(e->heap, hn, (struct heap_ent){ m->rank, (uint32_t)pos, m->id });
}

/* BPE over the bytes s[0..n) of one pre-token. */
static int bpe(struct enc *e, const uint8_t *s, size_t n)
{
	const struct hb_tok *tok = e->tok;
	size_t hn = 0;
	int rc;

	if (n == 1)
		return push_id(e, tok->byte_id[s[0]]);
	if ((rc = reserve(e, n)))
		return rc;
	for (size_t i = 0; i < n; i++) {
		e->sym[i] = tok->byte_id[s[i]];
		e->prev[i] = (int32_t)i - 1;
		e->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
	}
	for (size_t i = 0; i + 1 < n; i++)
		queue_pair(e, &hn, (int32_t)i);
	while (hn) {
		struct heap_ent t = heap_pop(e->heap, &hn);
		int32_t pos = (int32_t)t.pos, nx;
		const struct hb_tok_merge *m;
		if (e->sym[pos] < 0)
			continue; /* merged away */
		nx = e->next[pos];
		if (nx < 0)
			continue;
		m = hb_tok_merge_find(tok, e->sym[pos], e->sym[nx]);
		if (!m || m->id != t.id || m->rank != t.rank)
			continue; /* the pair changed since it was queued */
		e->sym[pos] = t.id;
		e->sym[nx] = -1;
		e->next[pos] = e->next[nx];
		if (e->next[nx] >= 0)
			e->prev[e->next[nx]] = pos;
		if (e->prev[pos] >= 0)
			queue_pair(e, &hn, e->prev[pos]);
		queue_pair(e, &hn, pos);
	}
	for (int32_t i = 0; i >= 0; i = e->next[i])
		if ((rc = push_id(e, e->sym[i])))
			return rc;
	return HB_OK;
}

static int emit_pretoken(void *ctx, size_t start, size_t end)
{
	struct enc *e = ctx;
	return bpe(e, e->base + start, end - start);
}

static int model_piece(struct enc *e, const uint8_t *s, size_t n)
{
	const uint8_t *save = e->base;
	int rc;
	e->base = s;
	rc = hb_tok_pretokenize(e->tok->pattern, s, n, emit_pretoken, e, e->err);
	e->base = save;
	return rc;
}

/* The longest added token of the given kind at s[i..n), or NULL. */
static const struct hb_tok_added *added_at(const struct hb_tok *tok, const uint8_t *s,
					   size_t i, size_t n, bool normalized)
{
	if (!(tok->added_first[s[i]] & (normalized ? 2 : 1)))
		return NULL;
	for (size_t k = 0; k < tok->n_added; k++) {
		const struct hb_tok_added *a = &tok->added[tok->added_order[k]];
		if (a->normalized != normalized)
			continue;
		if (a->len <= n - i && memcmp(s + i, a->content, a->len) == 0)
			return a;
	}
	return NULL;
}

static size_t ws_before(const uint8_t *s, size_t lo, size_t at)
{
	/* step back over whole White_Space code points, not below lo */
	while (at > lo) {
		size_t b = at - 1;
		uint32_t cp;
		while (b > lo && (s[b] & 0xC0) == 0x80)
			b--;
		if (hb_utf8_decode(s + b, at - b, &cp) != at - b || !(hb_unicode_flags(cp) & HB_UC_WS))
			break;
		at = b;
	}
	return at;
}

static size_t ws_after(const uint8_t *s, size_t at, size_t n)
{
	while (at < n) {
		uint32_t cp;
		size_t r = hb_utf8_decode(s + at, n - at, &cp);
		if (!r || !(hb_unicode_flags(cp) & HB_UC_WS))
			break;
		at += r;
	}
	return at;
}

typedef int (*piece_fn)(struct enc *e, const uint8_t *s, size_t n);

/*
 * Split s[0..n) on added tokens of one kind: gaps go to gap(), matches are
 * emitted as their id.
 */
static int split_added(struct enc *e, const uint8_t *s, size_t n, bool normalized, piece_fn gap)
{
	const struct hb_tok *tok = e->tok;
	size_t done = 0, i = 0;
	int rc;

	while (i < n) {
		const struct hb_tok_added *a = added_at(tok, s, i, n, normalized);
		if (!a) {
			i++;
			continue;
		}
		size_t start = i, stop = i + a->len;
		if (a->lstrip)
			start = ws_before(s, done, start);
		if (a->rstrip)
			stop = ws_after(s, stop, n);
		if (start > done && (rc = gap(e, s + done, start - done)))
			return rc;
		if ((rc = push_id(e, a->id)))
			return rc;
		done = i = stop;
	}
	if (n > done)
		return gap(e, s + done, n - done);
	return HB_OK;
}

static int normalized_gap(struct enc *e, const uint8_t *s, size_t n)
{
	return split_added(e, s, n, true, model_piece);
}

static int raw_gap(struct enc *e, const uint8_t *s, size_t n)
{
	uint8_t *nf = NULL;
	size_t nl;
	int rc;

	if (!e->tok->nfc || hb_unicode_nfc_quick(s, n))
		return normalized_gap(e, s, n);
	if ((rc = hb_unicode_nfc(s, n, &nf, &nl, e->err)))
		return rc;
	rc = normalized_gap(e, nf, nl);
	free(nf);
	return rc;
}

static int data_piece(struct enc *e, const uint8_t *s, size_t n)
{
	uint8_t *nf = NULL;
	size_t nl;
	int rc;

	if (!e->tok->nfc || hb_unicode_nfc_quick(s, n))
		return model_piece(e, s, n);
	if ((rc = hb_unicode_nfc(s, n, &nf, &nl, e->err)))
		return rc;
	rc = model_piece(e, nf, nl);
	free(nf);
	return rc;
}

int hb_tok_encode(const struct hb_tok *tok, const uint8_t *text, size_t n,
		  int mode, struct hb_tok_ids *out, struct hb_error *err)
{
	struct enc e = { .tok = tok, .out = out, .err = err };
	size_t old = out->len;
	int rc;

	if (mode != HB_TOK_PLAIN && mode != HB_TOK_DATA)
		return hb_error_set(err, HB_ERR_INVALID, "mode", "unknown encode mode %d", mode);
	if (n > UINT32_MAX / 4)
		return hb_error_set(err, HB_ERR_OVERFLOW, "text", "text too large");
	if (!hb_utf8_valid(text, n)) {
		size_t i = 0;
		uint32_t cp;
		while (i < n) {
			size_t r = hb_utf8_decode(text + i, n - i, &cp);
			if (!r)
				break;
			i += r;
		}
		return hb_error_diag(err, "utf8-invalid", HB_ERR_FORMAT, "text", true, i,
				     "invalid UTF-8");
	}
	if (n == 0)
		return HB_OK;
	rc = mode == HB_TOK_DATA ? data_piece(&e, text, n) : split_added(&e, text, n, false, raw_gap);
	free(e.sym);
	free(e.prev);
	free(e.next);
	free(e.heap);
	if (rc)
		out->len = old;
	return rc;
}
