/*
 * hb_tok_pretok.c: the Qwen pre-tokenizer patterns, hand-compiled.
 *
 * The two patterns accepted (hb_tok.c compares their exact text) are
 *
 *   Qwen2/3:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
 *             | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   Qwen3.5+: the same with \p{L}+ widened to [\p{L}\p{M}]+ and \p{M}
 *             added to the negated class of the fourth branch.
 *
 * Upstream runs them with Oniguruma (leftmost-first alternation,
 * backtracking) through Split(behavior=Isolated); every code point is
 * matched by some branch, so the pieces are exactly the successive matches.
 * Each branch below says what the backtracking engine would do at the
 * current position; a regex engine was rejected because the repo has none
 * and a general one would be the larger thing to get wrong.  Classes: \s is
 * White_Space; (?i) folds 's' with 'S' and U+017F LATIN SMALL LETTER LONG S
 * (CaseFolding.txt), no other letter of the contractions has a fold.
 */
#include "hb_base.h"
#include "hb_tok_int.h"
#include "hb_unicode.h"

struct cpinfo {
	uint32_t cp;
	uint32_t off;
	uint8_t fl;
};

static bool is_crlf(uint32_t c)
{
	return c == '\r' || c == '\n';
}

/* length in code points of a contraction at k, or 0 */
static size_t contraction(const struct cpinfo *c, size_t k, size_t m)
{
	uint32_t a, b;

	if (c[k].cp != '\'' || k + 1 >= m)
		return 0;
	a = c[k + 1].cp;
	if (a == 's' || a == 'S' || a == 0x17F || a == 't' || a == 'T' || a == 'm' || a == 'M' ||
	    a == 'd' || a == 'D')
		return 2;
	if (k + 2 >= m)
		return 0;
	b = c[k + 2].cp;
	if ((a == 'r' || a == 'R' || a == 'v' || a == 'V') && (b == 'e' || b == 'E'))
		return 3;
	if ((a == 'l' || a == 'L') && (b == 'l' || b == 'L'))
		return 3;
	return 0;
}

static size_t match_at(int pattern, const struct cpinfo *c, size_t k, size_t m)
{
	const unsigned LET = pattern == HB_TOK_PATTERN_QWEN35 ? (HB_UC_L | HB_UC_M) : HB_UC_L;
	/* fourth branch's class: not \s, not L, not N (not M for 3.5) */
	const unsigned NOTP = HB_UC_WS | HB_UC_N | LET;
	size_t r, j;
	unsigned f = c[k].fl;

	/* 1: contractions */
	if ((r = contraction(c, k, m)))
		return r;
	/* 2: [^\r\n\p{L}\p{N}]?LET+ */
	if (f & LET) {
		j = k + 1;
		while (j < m && (c[j].fl & LET))
			j++;
		return j - k;
	}
	/* here c[k] is not LET (for 3.5 not M either) */
	if (!is_crlf(c[k].cp) && !(f & (HB_UC_L | HB_UC_N)) && k + 1 < m && (c[k + 1].fl & LET)) {
		j = k + 2;
		while (j < m && (c[j].fl & LET))
			j++;
		return j - k;
	}
	/* 3: \p{N} */
	if (f & HB_UC_N)
		return 1;
	/* 4:  ?[^\s L N]+[\r\n]* */
	j = k;
	if (c[k].cp == ' ' && k + 1 < m && !(c[k + 1].fl & NOTP))
		j = k + 1;
	if (!(c[j].fl & NOTP)) {
		j++;
		while (j < m && !(c[j].fl & NOTP))
			j++;
		while (j < m && is_crlf(c[j].cp))
			j++;
		return j - k;
	}
	/* c[k] is whitespace from here on (every other case matched above) */
	j = k;
	while (j < m && (c[j].fl & HB_UC_WS))
		j++;
	/* 5: \s*[\r\n]+ : greedy \s* backs off to the last \r or \n of the run */
	for (size_t t = j; t > k; t--) {
		if (is_crlf(c[t - 1].cp))
			return t - k;
	}
	/* 6: \s+(?!\S) : the whole run at the end of text, else one less */
	if (j == m)
		return j - k;
	if (j - k >= 2)
		return j - k - 1;
	/* 7: \s+ */
	return j - k;
}

int hb_tok_pretokenize(int pattern, const uint8_t *s, size_t n,
		       hb_tok_emit_fn emit, void *ctx, struct hb_error *err)
{
	struct cpinfo stack[256], *c = stack;
	size_t m = 0, i = 0, k = 0;
	int rc = HB_OK;

	if (n > 256) {
		c = malloc(n * sizeof(*c));
		if (!c)
			return hb_error_set(err, HB_ERR_NOMEM, "pretokenize", "out of memory");
	}
	while (i < n) {
		uint32_t cp;
		size_t r;
		if (s[i] < 0x80) {
			cp = s[i];
			r = 1;
		} else if (!(r = hb_utf8_decode(s + i, n - i, &cp))) {
			rc = hb_error_diag(err, "utf8-invalid", HB_ERR_FORMAT, "text", true, i,
					   "invalid UTF-8");
			goto out;
		}
		c[m].cp = cp;
		c[m].off = (uint32_t)i;
		c[m].fl = (uint8_t)hb_unicode_flags(cp);
		m++;
		i += r;
	}
	while (k < m) {
		size_t len = match_at(pattern, c, k, m);
		size_t end;
		if (len == 0 || len > m - k) {
			/* every code point is matched by some branch; a bug otherwise */
			rc = hb_error_set(err, HB_ERR_INTERNAL, "pretokenize",
					  "empty match at code point %zu", k);
			break;
		}
		end = k + len < m ? c[k + len].off : n;
		if ((rc = emit(ctx, c[k].off, end)))
			break;
		k += len;
	}
out:
	if (c != stack)
		free(c);
	return rc;
}
