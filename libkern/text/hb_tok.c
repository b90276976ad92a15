/*
 * hb_tok.c: loading tokenizer.json into struct hb_tok, and decoding.
 *
 * Owns the refusal of everything we do not implement (see hb_tok.h for the
 * diagnostic ids) and the tables encode and decode use: the byte-decoded
 * bytes of every id, the id of every single byte, the merge table keyed on
 * id pairs, and the added tokens.  The vocabulary's string keys are needed
 * only while merges are resolved, so their map dies with the load.
 */
#include "hb_base.h"
#include "hb_tok.h"
#include "hb_tok_int.h"
#include "hb_json.h"
#include "hb_unicode.h"

static const char PAT_QWEN2[] =
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char PAT_QWEN35[] =
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const char *hb_tok_pattern_name(int pattern)
{
	return pattern == HB_TOK_PATTERN_QWEN2 ? "qwen2" :
	       pattern == HB_TOK_PATTERN_QWEN35 ? "qwen35" : "unknown";
}

void hb_tok_ids_release(struct hb_tok_ids *v)
{
	if (!v)
		return;
	free(v->ids);
	v->ids = NULL;
	v->len = v->cap = 0;
}

/* ---- byte-level alphabet (GPT-2 bytes_to_unicode) ---- */

/*
 * GPT-2's bytes_to_unicode in closed form: the printable bytes 0x21..0x7E,
 * 0xA1..0xAC and 0xAE..0xFF stand for themselves; the other 68 take
 * U+0100.. in byte order (0x00..0x20, then 0x7F..0xA0, then 0xAD).
 */
static uint32_t byte_to_cp(unsigned b)
{
	if (b <= 0x20)
		return 256 + b;
	if (b >= 0x7F && b <= 0xA0)
		return 256 + 33 + (b - 0x7F);
	if (b == 0xAD)
		return 256 + 33 + 34;
	return b;
}

/* The byte a byte-level code point stands for, or -1. */
static int cp_to_byte(uint32_t cp)
{
	if (cp < 256)
		return byte_to_cp(cp) == cp ? (int)cp : -1;
	if (cp < 256 + 33)
		return (int)(cp - 256);
	if (cp < 256 + 33 + 34)
		return (int)(0x7F + cp - 256 - 33);
	if (cp == 256 + 33 + 34)
		return 0xAD;
	return -1;
}

/* ---- a string -> id map used during load ---- */

struct smap_ent {
	const char *s; /* NULL = empty */
	size_t len;
	int32_t id;
};
struct smap {
	struct smap_ent *e;
	size_t mask;
};

static uint64_t hash_bytes(const void *p, size_t n)
{
	const uint8_t *s = p;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 1099511628211ull;
	}
	return h;
}

static struct smap_ent *smap_slot(struct smap *m, const char *s, size_t len)
{
	size_t i = (size_t)hash_bytes(s, len) & m->mask;
	while (m->e[i].s && (m->e[i].len != len || memcmp(m->e[i].s, s, len) != 0))
		i = (i + 1) & m->mask;
	return &m->e[i];
}

static int smap_get(struct smap *m, const char *s, size_t len, int32_t *id)
{
	struct smap_ent *e = smap_slot(m, s, len);
	if (!e->s)
		return -1;
	*id = e->id;
	return 0;
}

/* ---- merges ---- */

static uint64_t mix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

const struct hb_tok_merge *hb_tok_merge_find(const struct hb_tok *tok,
					     int32_t a, int32_t b)
{
	uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
	size_t i = (size_t)mix64(key) & tok->merge_mask;
	for (;;) {
		const struct hb_tok_merge *m = &tok->merges[i];
		if (m->key == key)
			return m;
		if (m->key == UINT64_MAX)
			return NULL;
		i = (i + 1) & tok->merge_mask;
	}
}

static void merge_put(struct hb_tok *tok, int32_t a, int32_t b, uint32_t rank, int32_t id)
{
	uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
	size_t i = (size_t)mix64(key) & tok->merge_mask;
	while (tok->merges[i].key != UINT64_MAX && tok->merges[i].key != key)
		i = (i + 1) & tok->merge_mask;
	/* a repeated pair keeps the later rank, as upstream's HashMap insert */
	tok->merges[i].key = key;
	tok->merges[i].rank = rank;
	tok->merges[i].id = id;
}

/* ---- loading ---- */

#define REFUSE(id, code, field, ...) hb_error_diag(err, id, code, field, false, 0, __VA_ARGS__)

static bool is_type(const cJSON *obj, const char *type)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, "type");
	return cJSON_IsString(t) && strcmp(t->valuestring, type) == 0;
}

static bool json_false_or_absent(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	return !v || cJSON_IsFalse(v) || cJSON_IsNull(v);
}

static bool json_empty_or_absent(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	return !v || cJSON_IsNull(v) || (cJSON_IsString(v) && v->valuestring[0] == 0);
}

static int check_pipeline(struct hb_tok *tok, const cJSON *root, struct hb_error *err)
{
	const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
	const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
	const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
	const cJSON *post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
	const cJSON *list, *split, *bl, *pat, *rx;

	if (!norm || cJSON_IsNull(norm))
		tok->nfc = false;
	else if (cJSON_IsObject(norm) && is_type(norm, "NFC"))
		tok->nfc = true;
	else
		return REFUSE("tok-normalizer", HB_ERR_UNSUPPORTED, "normalizer",
			      "only a null or NFC normalizer is implemented");

	list = pre ? cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers") : NULL;
	if (!pre || !is_type(pre, "Sequence") || !cJSON_IsArray(list) ||
	    cJSON_GetArraySize(list) != 2)
		return REFUSE("tok-pretokenizer", HB_ERR_UNSUPPORTED, "pre_tokenizer",
			      "only Sequence[Split, ByteLevel] is implemented");
	split = cJSON_GetArrayItem(list, 0);
	bl = cJSON_GetArrayItem(list, 1);
	if (!is_type(split, "Split") || !is_type(bl, "ByteLevel"))
		return REFUSE("tok-pretokenizer", HB_ERR_UNSUPPORTED, "pre_tokenizer.pretokenizers",
			      "only Sequence[Split, ByteLevel] is implemented");
	{
		const cJSON *beh = cJSON_GetObjectItemCaseSensitive(split, "behavior");
		if (!cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated") != 0 ||
		    !json_false_or_absent(split, "invert"))
			return REFUSE("tok-pretokenizer", HB_ERR_UNSUPPORTED,
				      "pre_tokenizer.pretokenizers[0].behavior",
				      "only an Isolated, non-inverted Split is implemented");
		if (!json_false_or_absent(bl, "add_prefix_space") ||
		    !json_false_or_absent(bl, "use_regex"))
			return REFUSE("tok-pretokenizer", HB_ERR_UNSUPPORTED,
				      "pre_tokenizer.pretokenizers[1]",
				      "only ByteLevel without prefix space or regex is implemented");
	}
	pat = cJSON_GetObjectItemCaseSensitive(split, "pattern");
	rx = pat ? cJSON_GetObjectItemCaseSensitive(pat, "Regex") : NULL;
	if (!cJSON_IsString(rx))
		return REFUSE("tok-pattern", HB_ERR_UNSUPPORTED,
			      "pre_tokenizer.pretokenizers[0].pattern",
			      "the Split pattern is not a known Qwen regex");
	if (strcmp(rx->valuestring, PAT_QWEN2) == 0)
		tok->pattern = HB_TOK_PATTERN_QWEN2;
	else if (strcmp(rx->valuestring, PAT_QWEN35) == 0)
		tok->pattern = HB_TOK_PATTERN_QWEN35;
	else
		return REFUSE("tok-pattern", HB_ERR_UNSUPPORTED,
			      "pre_tokenizer.pretokenizers[0].pattern.Regex",
			      "the Split pattern is not a known Qwen regex");

	if (!dec || !is_type(dec, "ByteLevel"))
		return REFUSE("tok-decoder", HB_ERR_UNSUPPORTED, "decoder",
			      "only the ByteLevel decoder is implemented");
	if (post && !cJSON_IsNull(post) && !is_type(post, "ByteLevel"))
		return REFUSE("tok-postprocessor", HB_ERR_UNSUPPORTED, "post_processor",
			      "only a null or ByteLevel post-processor is implemented");
	return HB_OK;
}

/* Byte-level decode of a token string: every char through the alphabet,
 * or, if one char is outside it, the raw UTF-8 (upstream's ByteLevel
 * decoder does the same per token). */
static size_t token_bytes(const char *s, size_t len, uint8_t *out)
{
	size_t i = 0, o = 0;
	while (i < len) {
		uint32_t cp;
		size_t r = hb_utf8_decode((const uint8_t *)s + i, len - i, &cp);
		int b = r ? cp_to_byte(cp) : -1;
		if (b < 0) {
			memcpy(out, s, len);
			return len;
		}
		out[o++] = (uint8_t)b;
		i += r;
	}
	return o;
}

static int load_model(struct hb_tok *tok, const cJSON *root, struct smap *map,
		      const cJSON **vocab_out, struct hb_error *err)
{
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
	const cJSON *vocab;

	if (!cJSON_IsObject(model) || !is_type(model, "BPE"))
		return REFUSE("tok-model", HB_ERR_UNSUPPORTED, "model.type",
			      "only a BPE model is implemented");
	if (!json_false_or_absent(model, "dropout") || !json_empty_or_absent(model, "unk_token") ||
	    !json_empty_or_absent(model, "continuing_subword_prefix") ||
	    !json_empty_or_absent(model, "end_of_word_suffix") ||
	    !json_false_or_absent(model, "byte_fallback") ||
	    !json_false_or_absent(model, "ignore_merges"))
		return REFUSE("tok-model", HB_ERR_UNSUPPORTED, "model",
			      "BPE options other than the byte-level defaults are not implemented");
	vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
	if (!cJSON_IsObject(vocab))
		return REFUSE("tok-json", HB_ERR_FORMAT, "model.vocab", "not an object");
	*vocab_out = vocab;
	return HB_OK;
}

static int id_of(const cJSON *v, const char *field, uint32_t *id, struct hb_error *err)
{
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= (double)HB_TOK_MAX_IDS ||
	    v->valuedouble != (double)(int64_t)v->valuedouble)
		return REFUSE("tok-vocab", HB_ERR_FORMAT, field, "id is not an integer in [0, 2^22)");
	*id = (uint32_t)v->valuedouble;
	return HB_OK;
}

static int load_added(struct hb_tok *tok, const cJSON *root, struct hb_error *err);
static int load_merges(struct hb_tok *tok, const cJSON *root, struct smap *map,
		       struct hb_error *err);

int hb_tok_load(const char *json, size_t len, struct hb_tok **out, struct hb_error *err)
{
	cJSON *root = NULL;
	struct hb_tok *tok = NULL;
	struct smap map = { 0 };
	const cJSON *vocab = NULL, *added, *it;
	uint32_t max_id = 0;
	size_t n_vocab = 0, total = 0;
	int rc;

	*out = NULL;
	rc = hb_json_parse(json, len, "tokenizer.json", &root, err);
	if (rc) {
		if (err) /* the tokenizer's own id for what hb_json calls json-syntax */
			err->id = "tok-json";
		return rc;
	}
	tok = calloc(1, sizeof(*tok));
	if (!tok) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "tokenizer", "out of memory");
		goto done;
	}
	if ((rc = check_pipeline(tok, root, err)) || (rc = load_model(tok, root, &map, &vocab, err)))
		goto done;

	/* sizes: the largest id over vocab and added tokens */
	cJSON_ArrayForEach(it, vocab) {
		uint32_t id;
		if ((rc = id_of(it, "model.vocab", &id, err)))
			goto done;
		if (id > max_id)
			max_id = id;
		n_vocab++;
		total += strlen(it->string);
	}
	added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
	if (added && !cJSON_IsArray(added)) {
		rc = REFUSE("tok-json", HB_ERR_FORMAT, "added_tokens", "not an array");
		goto done;
	}
	cJSON_ArrayForEach(it, added) {
		uint32_t id;
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
		if ((rc = id_of(cJSON_GetObjectItemCaseSensitive(it, "id"), "added_tokens[].id", &id, err)))
			goto done;
		if (!cJSON_IsString(c)) {
			rc = REFUSE("tok-added", HB_ERR_FORMAT, "added_tokens[].content", "not a string");
			goto done;
		}
		if (id > max_id)
			max_id = id;
		/* decoded from the NFC'd content, which UAX #15 bounds at 3x */
		total += 3 * strlen(c->valuestring);
	}
	tok->n_ids = max_id + 1;
	tok->off = calloc((size_t)tok->n_ids + 1, sizeof(uint32_t));
	tok->is_special = calloc(tok->n_ids, 1);
	tok->bytes = malloc(total + 1);
	for (size_t k = 1; n_vocab * 2 > k; k <<= 1)
		map.mask = (k << 1) - 1;
	if (map.mask < 1)
		map.mask = 1;
	map.e = calloc(map.mask + 1, sizeof(*map.e));
	if (!tok->off || !tok->is_special || !tok->bytes || !map.e || total > UINT32_MAX) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "tokenizer", "out of memory");
		goto done;
	}
	{
		/* lengths first (off[id+1] = length), then prefix sums */
		uint8_t *tmp = malloc(total + 1);
		uint32_t *len_of = calloc(tok->n_ids, sizeof(uint32_t));
		uint8_t *seen = calloc(tok->n_ids, 1);
		size_t o = 0;
		if (!tmp || !len_of || !seen) {
			free(tmp);
			free(len_of);
			free(seen);
			rc = hb_error_set(err, HB_ERR_NOMEM, "tokenizer", "out of memory");
			goto done;
		}
		/* store each id's bytes in tmp in vocab order, remember where */
		uint32_t *at = calloc(tok->n_ids, sizeof(uint32_t));
		if (!at) {
			free(tmp);
			free(len_of);
			free(seen);
			rc = hb_error_set(err, HB_ERR_NOMEM, "tokenizer", "out of memory");
			goto done;
		}
		cJSON_ArrayForEach(it, vocab) {
			uint32_t id = (uint32_t)it->valuedouble;
			size_t sl = strlen(it->string);
			struct smap_ent *e;
			if (seen[id]) {
				rc = hb_error_diag(err, "tok-vocab", HB_ERR_FORMAT, "model.vocab", false, 0,
						   "id %" PRIu32 " is assigned twice", id);
				break;
			}
			e = smap_slot(&map, it->string, sl);
			if (e->s) {
				rc = REFUSE("tok-vocab", HB_ERR_FORMAT, "model.vocab", "duplicate token");
				break;
			}
			e->s = it->string;
			e->len = sl;
			e->id = (int32_t)id;
			seen[id] = 1;
			at[id] = (uint32_t)o;
			len_of[id] = (uint32_t)token_bytes(it->string, sl, tmp + o);
			o += len_of[id];
		}
		if (!rc)
			rc = load_added(tok, root, err);
		if (!rc) {
			/*
			 * Upstream ignores the "id" written in added_tokens and assigns
			 * its own (tokenizers AddedVocabulary::add_tokens): in file order,
			 * the vocabulary's id when the content is a vocabulary token,
			 * else one past the largest id assigned so far but at least
			 * len(vocab).  A file whose ids disagree is ambiguous; refuse it.
			 */
			int64_t max_added = -1;
			for (size_t k = 0; k < tok->n_added; k++) {
				struct hb_tok_added *a = &tok->added[k];
				uint32_t id = (uint32_t)a->id;
				size_t rl = strlen(a->raw);
				int32_t vid = -1;
				int64_t expect;
				for (size_t q = 0; q < k; q++)
					if (strcmp(tok->added[q].raw, a->raw) == 0)
						rc = hb_error_diag(err, "tok-added", HB_ERR_FORMAT, "added_tokens",
								   false, 0, "added token %zu repeats an earlier one", k);
				if (rc)
					break;
				if (!smap_get(&map, a->raw, rl, &vid))
					expect = vid;
				else if (max_added < 0 || max_added < (int64_t)n_vocab)
					expect = (int64_t)n_vocab;
				else
					expect = max_added + 1;
				if (expect > max_added)
					max_added = expect;
				if ((int64_t)id != expect) {
					rc = hb_error_diag(err, "tok-added", HB_ERR_FORMAT, "added_tokens",
							   false, 0, "added token %zu declares id %" PRIu32
							   " but upstream assigns %" PRId64, k, id, expect);
					break;
				}
				if (seen[id] == 2) {
					rc = hb_error_diag(err, "tok-added", HB_ERR_FORMAT, "added_tokens", false, 0,
							   "id %" PRIu32 " is added twice", id);
					break;
				}
				if (seen[id] == 1 && (smap_get(&map, a->raw, rl, &vid) || vid != a->id)) {
					rc = hb_error_diag(err, "tok-added", HB_ERR_FORMAT, "added_tokens",
							   false, 0, "id %" PRIu32 " clashes with the vocabulary", id);
					break;
				}
				seen[id] = 2;
				tok->is_special[id] = a->special;
				at[id] = (uint32_t)o;
				/* upstream decodes a normalized token from its normalised
				 * content (captured: "e\u0301x" decodes as "\u00e9x") */
				len_of[id] = (uint32_t)token_bytes(a->content, a->len, tmp + o);
				o += len_of[id];
			}
		}
		if (!rc) {
			uint32_t p = 0;
			for (uint32_t id = 0; id < tok->n_ids; id++) {
				tok->off[id] = p;
				memcpy(tok->bytes + p, tmp + at[id], len_of[id]);
				p += len_of[id];
			}
			tok->off[tok->n_ids] = p;
		}
		free(tmp);
		free(len_of);
		free(seen);
		free(at);
		if (rc)
			goto done;
	}
	for (unsigned b = 0; b < 256; b++) {
		uint8_t u[4];
		size_t ul = hb_utf8_encode(byte_to_cp(b), u);
		if (smap_get(&map, (const char *)u, ul, &tok->byte_id[b])) {
			rc = hb_error_diag(err, "tok-vocab", HB_ERR_FORMAT, "model.vocab", false, 0,
					   "byte 0x%02x has no token", b);
			goto done;
		}
	}
	rc = load_merges(tok, root, &map, err);
done:
	free(map.e);
	cJSON_Delete(root);
	if (rc) {
		hb_tok_free(tok);
		return rc;
	}
	*out = tok;
	return HB_OK;
}

static int load_merges(struct hb_tok *tok, const cJSON *root, struct smap *map,
		       struct hb_error *err)
{
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
	const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
	const cJSON *it;
	size_t n, cap = 2, i = 0;
	char *buf = NULL;
	size_t bufcap = 0;
	int rc = HB_OK;

	if (!cJSON_IsArray(merges))
		return REFUSE("tok-json", HB_ERR_FORMAT, "model.merges", "not an array");
	n = (size_t)cJSON_GetArraySize(merges);
	while (cap < n * 2)
		cap <<= 1;
	tok->merges = malloc(cap * sizeof(*tok->merges));
	if (!tok->merges)
		return hb_error_set(err, HB_ERR_NOMEM, "tokenizer", "out of memory");
	for (size_t k = 0; k < cap; k++)
		tok->merges[k].key = UINT64_MAX;
	tok->merge_mask = cap - 1;
	cJSON_ArrayForEach(it, merges) {
		const char *a, *b;
		size_t al, bl;
		int32_t ia, ib, im;
		if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 &&
		    cJSON_IsString(cJSON_GetArrayItem(it, 0)) && cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
			a = cJSON_GetArrayItem(it, 0)->valuestring;
			b = cJSON_GetArrayItem(it, 1)->valuestring;
			al = strlen(a);
			bl = strlen(b);
		} else if (cJSON_IsString(it)) {
			/* the older "a b" form: exactly one space */
			const char *sp = strchr(it->valuestring, ' ');
			if (!sp || strchr(sp + 1, ' ')) {
				rc = hb_error_diag(err, "tok-merge", HB_ERR_FORMAT, "model.merges", false, 0,
						   "merge %zu is not two tokens", i);
				break;
			}
			a = it->valuestring;
			al = (size_t)(sp - a);
			b = sp + 1;
			bl = strlen(b);
		} else {
			rc = hb_error_diag(err, "tok-merge", HB_ERR_FORMAT, "model.merges", false, 0,
					   "merge %zu is not a pair of strings", i);
			break;
		}
		if (al + bl + 1 > bufcap) {
			char *nb = realloc(buf, (al + bl + 1) * 2);
			if (!nb) {
				rc = hb_error_set(err, HB_ERR_NOMEM, "tokenizer", "out of memory");
				break;
			}
			buf = nb;
			bufcap = (al + bl + 1) * 2;
		}
		memcpy(buf, a, al);
		memcpy(buf + al, b, bl);
		if (smap_get(map, a, al, &ia) || smap_get(map, b, bl, &ib) ||
		    smap_get(map, buf, al + bl, &im)) {
			rc = hb_error_diag(err, "tok-merge", HB_ERR_FORMAT, "model.merges", false, 0,
					   "merge %zu names a token not in the vocabulary", i);
			break;
		}
		merge_put(tok, ia, ib, (uint32_t)i, im);
		i++;
	}
	free(buf);
	return rc;
}

static int load_added(struct hb_tok *tok, const cJSON *root, struct hb_error *err)
{
	const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
	const cJSON *it;
	size_t n = added ? (size_t)cJSON_GetArraySize(added) : 0, k = 0;

	tok->added = calloc(n ? n : 1, sizeof(*tok->added));
	tok->added_order = calloc(n ? n : 1, sizeof(size_t));
	if (!tok->added || !tok->added_order)
		return hb_error_set(err, HB_ERR_NOMEM, "tokenizer", "out of memory");
	cJSON_ArrayForEach(it, added) {
		struct hb_tok_added *a = &tok->added[k];
		const char *c = cJSON_GetObjectItemCaseSensitive(it, "content")->valuestring;
		bool sw = false;
		a->id = (int32_t)cJSON_GetObjectItemCaseSensitive(it, "id")->valuedouble;
		if (hb_json_bool(it, "special", "added_tokens[].special", &a->special, err) ||
		    hb_json_bool(it, "normalized", "added_tokens[].normalized", &a->normalized, err) ||
		    hb_json_bool(it, "lstrip", "added_tokens[].lstrip", &a->lstrip, err) ||
		    hb_json_bool(it, "rstrip", "added_tokens[].rstrip", &a->rstrip, err) ||
		    hb_json_bool(it, "single_word", "added_tokens[].single_word", &sw, err)) {
			if (err)
				err->id = "tok-added";
			return err ? err->code : HB_ERR_FORMAT;
		}
		if (sw)
			return REFUSE("tok-added", HB_ERR_UNSUPPORTED, "added_tokens[].single_word",
				      "single_word added tokens are not implemented");
		if (!c[0])
			return REFUSE("tok-added", HB_ERR_FORMAT, "added_tokens[].content", "empty");
		if (!hb_utf8_valid((const uint8_t *)c, strlen(c)))
			return REFUSE("tok-added", HB_ERR_FORMAT, "added_tokens[].content", "not UTF-8");
		a->raw = strdup(c);
		if (!a->raw)
			return hb_error_set(err, HB_ERR_NOMEM, "tokenizer", "out of memory");
		k++;
		tok->n_added = k;
		if (a->normalized && tok->nfc) {
			uint8_t *nf;
			size_t nl;
			int rc = hb_unicode_nfc((const uint8_t *)c, strlen(c), &nf, &nl, err);
			if (rc)
				return rc;
			a->content = (char *)nf;
			a->len = nl;
		} else {
			a->content = strdup(c);
			if (!a->content)
				return hb_error_set(err, HB_ERR_NOMEM, "tokenizer", "out of memory");
			a->len = strlen(c);
		}
		tok->added_first[(uint8_t)a->content[0]] |= a->normalized ? 2 : 1;
	}
	/* longest first, so the first match at a position is the longest */
	for (size_t i = 0; i < n; i++)
		tok->added_order[i] = i;
	for (size_t i = 1; i < n; i++) {
		size_t v = tok->added_order[i], j = i;
		while (j > 0 && tok->added[tok->added_order[j - 1]].len < tok->added[v].len) {
			tok->added_order[j] = tok->added_order[j - 1];
			j--;
		}
		tok->added_order[j] = v;
	}
	return HB_OK;
}

void hb_tok_free(struct hb_tok *tok)
{
	if (!tok)
		return;
	for (size_t k = 0; k < tok->n_added; k++) {
		free(tok->added[k].content);
		free(tok->added[k].raw);
	}
	free(tok->added);
	free(tok->added_order);
	free(tok->off);
	free(tok->bytes);
	free(tok->is_special);
	free(tok->merges);
	free(tok);
}

int hb_tok_pattern(const struct hb_tok *tok)
{
	return tok->pattern;
}

uint32_t hb_tok_vocab_size(const struct hb_tok *tok)
{
	return tok->n_ids;
}

size_t hb_tok_added_count(const struct hb_tok *tok)
{
	return tok->n_added;
}

int hb_tok_added_get(const struct hb_tok *tok, size_t i, int32_t *id,
		     const char **content, bool *special)
{
	if (i >= tok->n_added)
		return HB_ERR_NOTFOUND;
	*id = tok->added[i].id;
	*content = tok->added[i].raw;
	*special = tok->added[i].special;
	return HB_OK;
}

int hb_tok_control_id(const struct hb_tok *tok, const uint8_t *s, size_t n, int32_t *id)
{
	for (size_t k = 0; k < tok->n_added; k++) {
		const char *raw = tok->added[k].raw;
		if (strlen(raw) == n && memcmp(raw, s, n) == 0) {
			*id = tok->added[k].id;
			return HB_OK;
		}
	}
	return HB_ERR_NOTFOUND;
}

const uint8_t *hb_tok_id_bytes(const struct hb_tok *tok, int32_t id, size_t *len)
{
	if (id < 0 || (uint32_t)id >= tok->n_ids || tok->off[id] == tok->off[id + 1]) {
		*len = 0;
		return NULL;
	}
	*len = tok->off[id + 1] - tok->off[id];
	return tok->bytes + tok->off[id];
}

int hb_tok_decode(const struct hb_tok *tok, const int32_t *ids, size_t n,
		  unsigned flags, uint8_t **out, size_t *out_len, struct hb_error *err)
{
	size_t total = 0, o = 0;
	uint8_t *buf;

	for (size_t i = 0; i < n; i++) {
		size_t l;
		if (ids[i] < 0)
			return hb_error_diag(err, "tok-id", HB_ERR_INVALID, "ids", true, i,
					     "negative id %" PRId32, ids[i]);
		hb_tok_id_bytes(tok, ids[i], &l);
		total += l; /* bounded by n * the longest token: no overflow */
	}
	buf = malloc(total + 1);
	if (!buf)
		return hb_error_set(err, HB_ERR_NOMEM, "decode", "out of memory");
	for (size_t i = 0; i < n; i++) {
		size_t l;
		const uint8_t *p = hb_tok_id_bytes(tok, ids[i], &l);
		if (!l)
			continue;
		if ((flags & HB_TOK_SKIP_SPECIAL) && tok->is_special[ids[i]])
			continue;
		memcpy(buf + o, p, l);
		o += l;
	}
	buf[o] = 0;
	*out = buf;
	*out_len = o;
	return HB_OK;
}
