/*
 * hb_unicode.c: UTF-8, code-point classes and NFC over the generated UCD
 * tables (hb_unicode_tables.c).
 *
 * Owns the algorithms; the data is generated.  NFC is the textbook one
 * (UAX #15): full canonical decomposition (Hangul algorithmic), canonical
 * ordering by a stable sort on Canonical_Combining_Class, then canonical
 * composition with Full_Composition_Exclusion already removed from the pair
 * table.  A quick check (NFC_QC and ccc order) skips all of it for text that
 * is already NFC, which is nearly all text.
 */
#include "hb_base.h"
#include "hb_unicode.h"
#include "hb_unicode_int.h"

#define SBASE 0xAC00u
#define LBASE 0x1100u
#define VBASE 0x1161u
#define TBASE 0x11A7u
#define LCOUNT 19u
#define VCOUNT 21u
#define TCOUNT 28u
#define NCOUNT (VCOUNT * TCOUNT)
#define SCOUNT (LCOUNT * NCOUNT)

const char *hb_unicode_version(void)
{
	return hb_uc_version;
}

unsigned hb_unicode_flags(uint32_t cp)
{
	if (cp >= 0x110000)
		return 0;
	return hb_uc_flags_blocks[((size_t)hb_uc_flags_index[cp >> HB_UC_SHIFT] << HB_UC_SHIFT) +
				  (cp & ((1u << HB_UC_SHIFT) - 1))];
}

unsigned hb_unicode_ccc(uint32_t cp)
{
	if (cp >= 0x110000)
		return 0;
	return hb_uc_ccc_blocks[((size_t)hb_uc_ccc_index[cp >> HB_UC_SHIFT] << HB_UC_SHIFT) +
				(cp & ((1u << HB_UC_SHIFT) - 1))];
}

/*
 * Length of the valid prefix of a UTF-8 sequence starting at s[0]: returns
 * the full length (1..4) with *cp set when valid, else the negative length
 * of the maximal subpart (-1..-3) that a lossy decoder replaces by one
 * U+FFFD.
 */
static int utf8_step(const uint8_t *s, size_t n, uint32_t *cp)
{
	uint8_t b = s[0];
	uint8_t lo = 0x80, hi = 0xBF;
	int len;
	uint32_t v;

	if (b < 0x80) {
		*cp = b;
		return 1;
	}
	if (b >= 0xC2 && b <= 0xDF) {
		len = 2;
		v = b & 0x1F;
	} else if (b >= 0xE0 && b <= 0xEF) {
		len = 3;
		v = b & 0x0F;
		if (b == 0xE0)
			lo = 0xA0;
		else if (b == 0xED)
			hi = 0x9F;
	} else if (b >= 0xF0 && b <= 0xF4) {
		len = 4;
		v = b & 0x07;
		if (b == 0xF0)
			lo = 0x90;
		else if (b == 0xF4)
			hi = 0x8F;
	} else {
		return -1;
	}
	for (int i = 1; i < len; i++) {
		if ((size_t)i >= n || s[i] < lo || s[i] > hi)
			return -i;
		v = (v << 6) | (s[i] & 0x3F);
		lo = 0x80;
		hi = 0xBF;
	}
	*cp = v;
	return len;
}

size_t hb_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp)
{
	int r;

	if (n == 0)
		return 0;
	r = utf8_step(s, n, cp);
	return r > 0 ? (size_t)r : 0;
}

size_t hb_utf8_encode(uint32_t cp, uint8_t out[4])
{
	if (cp < 0x80) {
		out[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (uint8_t)(0xC0 | (cp >> 6));
		out[1] = (uint8_t)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (uint8_t)(0xE0 | (cp >> 12));
		out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (uint8_t)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (uint8_t)(0xF0 | (cp >> 18));
	out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (uint8_t)(0x80 | (cp & 0x3F));
	return 4;
}

bool hb_utf8_valid(const uint8_t *s, size_t n)
{
	size_t i = 0;
	uint32_t cp;

	while (i < n) {
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		int r = utf8_step(s + i, n - i, &cp);
		if (r <= 0)
			return false;
		i += (size_t)r;
	}
	return true;
}

int hb_utf8_lossy(const uint8_t *s, size_t n, uint8_t **out, size_t *out_len,
		  struct hb_error *err)
{
	/* each invalid byte becomes at most 3 bytes */
	uint8_t *buf;
	size_t o = 0, i = 0;
	uint32_t cp;

	if (n > (SIZE_MAX - 1) / 3)
		return hb_error_set(err, HB_ERR_OVERFLOW, "utf8", "input too large");
	buf = malloc(n * 3 + 1);
	if (!buf)
		return hb_error_set(err, HB_ERR_NOMEM, "utf8", "out of memory");
	while (i < n) {
		int r = utf8_step(s + i, n - i, &cp);
		if (r > 0) {
			memcpy(buf + o, s + i, (size_t)r);
			o += (size_t)r;
			i += (size_t)r;
		} else {
			buf[o++] = 0xEF;
			buf[o++] = 0xBF;
			buf[o++] = 0xBD;
			i += (size_t)(-r);
		}
	}
	buf[o] = 0;
	*out = buf;
	*out_len = o;
	return HB_OK;
}

bool hb_unicode_nfc_quick(const uint8_t *s, size_t n)
{
	size_t i = 0;
	unsigned last = 0;
	uint32_t cp;

	while (i < n) {
		if (s[i] < 0x80) {
			last = 0;
			i++;
			continue;
		}
		size_t r = hb_utf8_decode(s + i, n - i, &cp);
		if (!r)
			return false;
		i += r;
		if (hb_unicode_flags(cp) & HB_UC_NQC)
			return false;
		unsigned c = hb_unicode_ccc(cp);
		if (c != 0 && c < last)
			return false;
		last = c;
	}
	return true;
}

static const struct hb_uc_decomp *find_decomp(uint32_t cp)
{
	size_t lo = 0, hi = hb_uc_decomp_count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (hb_uc_decomp[mid].cp < cp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < hb_uc_decomp_count && hb_uc_decomp[lo].cp == cp ? &hb_uc_decomp[lo] : NULL;
}

/* The primary composite of a + b, or 0 when there is none. */
static uint32_t compose(uint32_t a, uint32_t b)
{
	size_t lo = 0, hi = hb_uc_comp_count;

	if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
		return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
	if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 &&
	    b > TBASE && b < TBASE + TCOUNT)
		return a + (b - TBASE);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct hb_uc_comp *c = &hb_uc_comp[mid];
		if (c->first < a || (c->first == a && c->second < b))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < hb_uc_comp_count && hb_uc_comp[lo].first == a && hb_uc_comp[lo].second == b)
		return hb_uc_comp[lo].composite;
	return 0;
}

int hb_unicode_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_len,
		   struct hb_error *err)
{
	uint32_t *cps;
	size_t cap, m = 0, i = 0;
	uint8_t *buf;

	/* no code point decomposes into more than 4 (18 for U+FDFA is NFKD only) */
	if (n > SIZE_MAX / (8 * sizeof(uint32_t)) - 1)
		return hb_error_set(err, HB_ERR_OVERFLOW, "nfc", "input too large");
	cap = n * 4 + 1;
	cps = malloc(cap * sizeof(uint32_t));
	if (!cps)
		return hb_error_set(err, HB_ERR_NOMEM, "nfc", "out of memory");
	while (i < n) {
		uint32_t cp;
		size_t r = hb_utf8_decode(s + i, n - i, &cp);
		if (!r) {
			free(cps);
			return hb_error_diag(err, "utf8-invalid", HB_ERR_FORMAT, "text", true,
					     i, "invalid UTF-8");
		}
		i += r;
		if (cp >= SBASE && cp < SBASE + SCOUNT) {
			uint32_t si = cp - SBASE;
			cps[m++] = LBASE + si / NCOUNT;
			cps[m++] = VBASE + (si % NCOUNT) / TCOUNT;
			if (si % TCOUNT)
				cps[m++] = TBASE + si % TCOUNT;
			continue;
		}
		const struct hb_uc_decomp *d = cp >= 0xC0 ? find_decomp(cp) : NULL;
		if (d) {
			/* r bytes of input give at most r*4/... the bound n*4 holds:
			 * every decomposition is at most 4 code points per input byte */
			memcpy(cps + m, hb_uc_decomp_pool + d->off, d->len * sizeof(uint32_t));
			m += d->len;
		} else {
			cps[m++] = cp;
		}
	}
	/* canonical ordering: stable insertion sort of each non-starter run */
	for (size_t k = 1; k < m; k++) {
		unsigned c = hb_unicode_ccc(cps[k]);
		if (c == 0)
			continue;
		size_t j = k;
		uint32_t v = cps[k];
		while (j > 0) {
			unsigned pc = hb_unicode_ccc(cps[j - 1]);
			if (pc == 0 || pc <= c)
				break;
			cps[j] = cps[j - 1];
			j--;
		}
		cps[j] = v;
	}
	/* canonical composition */
	if (m > 0) {
		size_t starter = 0, w = 1;
		uint32_t sch = cps[0];
		unsigned last = hb_unicode_ccc(sch) ? 256 : 0;
		for (size_t k = 1; k < m; k++) {
			uint32_t ch = cps[k];
			unsigned c = hb_unicode_ccc(ch);
			uint32_t comp = last == 256 ? 0 : compose(sch, ch);
			if (comp && (last < c || last == 0)) {
				cps[starter] = comp;
				sch = comp;
				continue;
			}
			if (c == 0) {
				starter = w;
				sch = ch;
			}
			last = c;
			cps[w++] = ch;
		}
		m = w;
	}
	buf = malloc(m * 4 + 1);
	if (!buf) {
		free(cps);
		return hb_error_set(err, HB_ERR_NOMEM, "nfc", "out of memory");
	}
	size_t o = 0;
	for (size_t k = 0; k < m; k++)
		o += hb_utf8_encode(cps[k], buf + o);
	buf[o] = 0;
	free(cps);
	*out = buf;
	*out_len = o;
	return HB_OK;
}
