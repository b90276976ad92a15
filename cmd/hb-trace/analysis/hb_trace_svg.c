/*
 * hb_trace_svg.c: the charts of hb_trace_svg.h.  A growing text buffer and
 * a plot frame (margins, axis ranges, nice ticks) shared by the three
 * charts.  Colours are chosen to stay distinct for colour-blind readers
 * (the Okabe-Ito palette's values).
 */
#include "hb_base.h"
#include "hb_trace_svg.h"

#include <math.h>
#include <stdarg.h>

#define W 880.0
#define H 520.0
#define ML 84.0
#define MR 190.0
#define MT 56.0
#define MB 70.0

static const char *const palette[] = { "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#000000", "#D55E00",
				       "#56B4E9" };

struct buf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		size_t room = b->cap - b->len;
		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if (b->p && (size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		{
			size_t cap = b->cap ? b->cap * 2 : 8192;
			char *g;
			while (cap - b->len <= (size_t)n)
				cap *= 2;
			g = realloc(b->p, cap);
			if (!g) {
				b->oom = true;
				return;
			}
			b->p = g, b->cap = cap;
		}
	}
}

static int done(struct buf *b, char **out, size_t *len, struct hb_error *err)
{
	put(b, "</svg>\n");
	if (b->oom) {
		free(b->p);
		return hb_error_set(err, HB_ERR_NOMEM, "plot", "out of memory");
	}
	*out = b->p, *len = b->len;
	return HB_OK;
}

static void head(struct buf *b, const char *title)
{
	put(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	       "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%g\" height=\"%g\" "
	       "viewBox=\"0 0 %g %g\" font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\" font-size=\"13\">\n"
	       "<title>%s</title>\n<rect x=\"0\" y=\"0\" width=\"%g\" height=\"%g\" fill=\"#ffffff\"/>\n"
	       "<text x=\"%g\" y=\"30\" font-size=\"17\" font-weight=\"bold\">%s</text>\n",
	    W, H, W, H, title, W, H, ML, title);
}

/* 1, 2 or 5 times a power of ten, about n steps over [lo, hi] */
static double nice_step(double lo, double hi, int n)
{
	double raw = (hi - lo) / n, p = pow(10, floor(log10(raw))), f = raw / p;
	return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

struct frame {
	double x0, x1, y0, y1;
	bool logx;
};

static double fx(const struct frame *f, double x)
{
	double a = f->logx ? log2(x) : x, lo = f->logx ? log2(f->x0) : f->x0, hi = f->logx ? log2(f->x1) : f->x1;
	return ML + (hi > lo ? (a - lo) / (hi - lo) : 0.5) * (W - ML - MR);
}

static double fy(const struct frame *f, double y)
{
	return H - MB - (f->y1 > f->y0 ? (y - f->y0) / (f->y1 - f->y0) : 0.5) * (H - MT - MB);
}

static void fmt_num(char *s, size_t n, double v)
{
	if (fabs(v) >= 1e9)
		snprintf(s, n, "%gG", v / 1e9);
	else if (fabs(v) >= 1e6)
		snprintf(s, n, "%gM", v / 1e6);
	else if (fabs(v) >= 1e4)
		snprintf(s, n, "%gk", v / 1e3);
	else
		snprintf(s, n, "%g", fabs(v) < 1e-12 ? 0.0 : v);
}

static void axes(struct buf *b, const struct frame *f, const char *xlabel, const char *ylabel, double ystep)
{
	char s[32];
	put(b, "<g stroke=\"#cccccc\" stroke-width=\"1\">\n");
	for (double y = f->y0; y <= f->y1 + ystep * 1e-9; y += ystep)
		put(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", ML, fy(f, y), W - MR, fy(f, y));
	put(b, "</g>\n<g stroke=\"#000000\" stroke-width=\"1.2\">\n"
	       "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n"
	       "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n</g>\n",
	    ML, H - MB, W - MR, H - MB, ML, MT, ML, H - MB);
	put(b, "<g text-anchor=\"end\">\n");
	for (double y = f->y0; y <= f->y1 + ystep * 1e-9; y += ystep) {
		fmt_num(s, sizeof(s), y);
		put(b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", ML - 6, fy(f, y) + 4, s);
	}
	put(b, "</g>\n<g text-anchor=\"middle\">\n");
	if (f->logx) {
		/* the caller labels its own values */
	} else {
		double xs = nice_step(f->x0, f->x1, 8);
		for (double x = ceil(f->x0 / xs) * xs; x <= f->x1 + xs * 1e-9; x += xs) {
			fmt_num(s, sizeof(s), x);
			put(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\"/>\n", fx(f, x),
			    H - MB, fx(f, x), H - MB + 4);
			put(b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", fx(f, x), H - MB + 18, s);
		}
	}
	put(b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", (ML + W - MR) / 2, H - 22, xlabel);
	put(b, "<text transform=\"translate(22 %.1f) rotate(-90)\">%s</text>\n</g>\n", (MT + H - MB) / 2, ylabel);
}

static void legend(struct buf *b, int i, const char *color, double width, const char *label)
{
	double y = MT + 10 + 24 * i;
	put(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%g\"/>\n"
	       "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
	    W - MR + 16, y, W - MR + 46, y, color, width, W - MR + 52, y + 4, label);
}

static void series(struct buf *b, const struct frame *f, const double *x, const double *y, size_t n,
		   const char *color, double width, const char *dash)
{
	put(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%g\"%s%s%s points=\"", color, width,
	    dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
	for (size_t i = 0; i < n; i++)
		if (isfinite(y[i]))
			put(b, "%.1f,%.1f ", fx(f, x[i]), fy(f, y[i]));
	put(b, "\"/>\n");
	for (size_t i = 0; i < n; i++)
		if (isfinite(y[i]))
			put(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%g\" fill=\"%s\"/>\n", fx(f, x[i]), fy(f, y[i]),
			    width + 1.5, color);
}

int hb_tsvg_overlap(const struct hb_tstats_result *r, char **out, size_t *len, struct hb_error *err)
{
	struct buf b = { 0 };
	uint32_t L = r->h.layers;
	double *x = malloc(L * sizeof(*x)), *p = malloc(L * sizeof(*p)), *a = malloc(L * sizeof(*a));
	struct frame f = { 0, L > 1 ? L - 1 : 1, 0, r->h.top_k, false };
	char title[160];

	if (!x || !p || !a) {
		free(x), free(p), free(a);
		return hb_error_set(err, HB_ERR_NOMEM, "plot", "out of memory");
	}
	for (uint32_t l = 0; l < L; l++)
		x[l] = l, p[l] = r->layers[l].prev_mean, a[l] = r->layers[l].adj_mean;
	snprintf(title, sizeof(title), "Route overlap by layer (top-%u, %" PRIu64 " tokens)", r->h.top_k, r->tokens);
	head(&b, title);
	axes(&b, &f, "layer", "experts shared (of top-k)", nice_step(0, r->h.top_k, 5));
	series(&b, &f, x, p, L, palette[0], 2.5, NULL);
	series(&b, &f, x, a, L, palette[1], 2.5, "7 4");
	legend(&b, 0, palette[0], 2.5, "previous token");
	legend(&b, 1, palette[1], 2.5, "adjacent layer");
	free(x), free(p), free(a);
	return done(&b, out, len, err);
}

int hb_tsvg_hitrate(const struct hb_tcache_result *r, bool per_layer, uint64_t record_bytes,
		    char **out, size_t *len, struct hb_error *err)
{
	struct buf b = { 0 };
	struct frame f = { 0, 1, 0, 1, false };
	double *x = malloc((r->ncells + 1) * sizeof(*x)), *y = malloc((r->ncells + 1) * sizeof(*y));
	char title[160];
	int li = 0;
	bool first = true;

	if (!x || !y) {
		free(x), free(y);
		return hb_error_set(err, HB_ERR_NOMEM, "plot", "out of memory");
	}
	for (size_t i = 0; i < r->ncells; i++) {
		double v = (double)r->cells[i].budget;
		if (v <= 0)
			continue;
		f.x0 = first || v < f.x0 ? v : f.x0;
		f.x1 = first || v > f.x1 ? v : f.x1;
		first = false;
	}
	if (first || f.x1 <= f.x0) { /* one budget or only zero: a linear axis around it */
		f.x0 = 0, f.x1 = first ? 1 : f.x1 * 2;
	} else {
		f.logx = true;
	}
	snprintf(title, sizeof(title), "Expert cache hit rate by budget (%s caches, %" PRIu64 " tokens)",
		 per_layer ? "per-layer" : "global", r->tokens);
	head(&b, title);
	axes(&b, &f, record_bytes ? "budget (expert records; x record bytes for bytes)" : "budget (expert records)",
	     "hit rate", 0.1);
	if (f.logx) {
		double last = -1;
		for (size_t i = 0; i < r->ncells; i++) {
			double v = (double)r->cells[i].budget;
			char s[32];
			if (v <= 0 || v <= last || (last > 0 && fx(&f, v) - fx(&f, last) < 28))
				continue; /* ascending within a policy; skip crowded labels */
			last = v;
			fmt_num(s, sizeof(s), v);
			put(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\"/>"
				"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
			    fx(&f, v), H - MB, fx(&f, v), H - MB + 4, fx(&f, v), H - MB + 18, s);
		}
	}
	/* every policy but Belady first, Belady on top */
	for (int pass = 0; pass < 2; pass++)
		for (int p = 0; p < HB_TC_POLICIES; p++) {
			size_t n = 0;
			bool bel = p == HB_TC_BELADY;
			if (bel != (pass == 1))
				continue;
			for (size_t i = 0; i < r->ncells; i++)
				if ((int)r->cells[i].policy == p && (!f.logx || r->cells[i].budget > 0))
					x[n] = (double)r->cells[i].budget, y[n++] = r->cells[i].hit_rate;
			if (!n)
				continue;
			series(&b, &f, x, y, n, bel ? "#000000" : palette[p], bel ? 3.5 : 2.0, bel ? NULL : p % 2 ? "6 3" : NULL);
			legend(&b, li++, bel ? "#000000" : palette[p], bel ? 3.5 : 2.0,
			       bel ? "belady (optimal)" : hb_tcache_policy_name((enum hb_tcache_policy)p));
		}
	free(x), free(y);
	return done(&b, out, len, err);
}

/* ------------------------------------------------------------ timeline */

/*
 * The timeline keeps the latest TL_MAX_STEPS steps and TL_MAX_REQS reads
 * (rings), or, with an explicit window, the window's steps and the reads
 * around them.  The window chosen by default is the first count tokens of
 * the trace's token-major tail (every token's layers back to back: decode,
 * not a layer-major prefill chunk), so the x-range holds only those tokens.
 */
#define TL_MAX_STEPS 4096u
#define TL_MAX_REQS 65536u
#define TL_SUBROWS 12u
#define TW 1100.0
#define TML 118.0
#define TMR 24.0

struct hb_tsvg_timeline {
	uint64_t first, count;
	bool automatic;
	struct hb_tpf_event *steps, *reqs;
	size_t nsteps, shead, nreqs, rhead;
	bool past;                   /* a step after an explicit window was seen */
	uint64_t end;                /* end of the explicit window's last step */
};

int hb_tsvg_timeline_create(struct hb_tsvg_timeline **out, uint64_t first, uint64_t count,
			    struct hb_error *err)
{
	struct hb_tsvg_timeline *t = calloc(1, sizeof(*t));
	if (t) {
		t->steps = malloc(TL_MAX_STEPS * sizeof(*t->steps));
		t->reqs = malloc(TL_MAX_REQS * sizeof(*t->reqs));
	}
	if (!t || !t->steps || !t->reqs) {
		hb_tsvg_timeline_free(t);
		return hb_error_set(err, HB_ERR_NOMEM, "plot", "out of memory");
	}
	t->automatic = first == HB_TSVG_AUTO;
	t->first = t->automatic ? 0 : first, t->count = count ? count : 1;
	*out = t;
	return HB_OK;
}

void hb_tsvg_timeline_free(struct hb_tsvg_timeline *t)
{
	if (t) {
		free(t->steps), free(t->reqs);
		free(t);
	}
}

void hb_tsvg_timeline_event(void *timeline, const struct hb_tpf_event *ev)
{
	struct hb_tsvg_timeline *t = timeline;

	if (ev->is_step) {
		if (!t->automatic) {
			if (ev->token < t->first || ev->token - t->first >= t->count) {
				t->past |= t->nsteps > 0;
				return;
			}
			t->end = ev->end;
		}
		t->steps[t->shead] = *ev;
		t->shead = (t->shead + 1) % TL_MAX_STEPS;
		if (t->nsteps < TL_MAX_STEPS)
			t->nsteps++;
		return;
	}
	if (!t->automatic && t->past && ev->submit > t->end)
		return;
	t->reqs[t->rhead] = *ev;
	t->rhead = (t->rhead + 1) % TL_MAX_REQS;
	if (t->nreqs < TL_MAX_REQS)
		t->nreqs++;
}

static const struct hb_tpf_event *step_at(const struct hb_tsvg_timeline *t, size_t i)
{
	return &t->steps[(t->shead + TL_MAX_STEPS - t->nsteps + i) % TL_MAX_STEPS];
}

static const struct hb_tpf_event *req_at(const struct hb_tsvg_timeline *t, size_t i)
{
	return &t->reqs[(t->rhead + TL_MAX_REQS - t->nreqs + i) % TL_MAX_REQS];
}

/* [*lo, *hi): the steps drawn.  Automatic: the first count tokens of the
 * token-major tail of the single-token steps. */
static void window(const struct hb_tsvg_timeline *t, size_t *lo, size_t *hi)
{
	size_t j = 0, n = 0;
	uint64_t tok = 0;

	*lo = 0, *hi = t->nsteps;
	if (!t->automatic || !t->nsteps)
		return;
	for (size_t i = 0; i < t->nsteps; i++) {
		const struct hb_tpf_event *s = step_at(t, i), *p = i ? step_at(t, i - 1) : NULL;
		bool major = p && s->tokens <= 1 && p->tokens <= 1 &&
			     ((s->token == p->token && s->layer == p->layer + 1) || (s->token > p->token && s->layer == 0));
		if (!major)
			j = i;
	}
	/* the tail starts at a token's layer 0 (the step that broke the order
	 * may be a prefill's last step; a measured prefill chunk is skipped) */
	while (j < t->nsteps && (step_at(t, j)->tokens > 1 || step_at(t, j)->layer != 0 ||
				 (j && step_at(t, j - 1)->token == step_at(t, j)->token)))
		j++;
	if (j == t->nsteps)
		j = 0;
	*lo = j;
	for (size_t i = j; i < t->nsteps; i++) {
		const struct hb_tpf_event *s = step_at(t, i);
		if (i == j || s->token != tok) {
			if (++n > t->count)
				break;
			tok = s->token;
		}
		*hi = i + 1;
	}
}

struct tl_lane {
	const char *name;
	double y, h;
};

static void tl_rect(struct buf *b, double x0, double x1, double y, double h, const char *fill, const char *extra)
{
	put(b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"%s/>\n", x0, y,
	    x1 - x0 > 0.6 ? x1 - x0 : 0.6, h, fill, extra ? extra : "");
}

static void tl_legend(struct buf *b, double *x, double y, const char *fill, const char *label)
{
	put(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" fill=\"%s\"/>"
	       "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s</text>\n", *x, y - 9, fill, *x + 18, y, label);
	*x += 30 + 7.0 * (double)strlen(label);
}

static const char *const tl_cls_color[] = { "#D55E00", "#E69F00", "#0072B2" };
static const char *const tl_cls_name[] = { "P0 exact", "P1 near-term", "P2 speculative" };

/* One render: the window, its time range, the lanes. */
struct tl_draw {
	const struct hb_tsvg_timeline *t;
	struct buf b;
	struct tl_lane lane[7];
	size_t lo, hi, in_win;
	double x0, x1;
	unsigned qmax;
	bool measured;
	uint64_t sub_end[3][TL_SUBROWS];
	unsigned nsub[3];
};

static double tl_x(const struct tl_draw *d, double ns)
{
	return TML + (ns / 1e6 - d->x0) / (d->x1 - d->x0) * (TW - TML - TMR);
}

static bool tl_in_window(const struct tl_draw *d, const struct hb_tpf_event *q)
{
	return !((double)q->done / 1e6 < d->x0 || (double)q->submit / 1e6 > d->x1);
}

/* The class sub-row of read q (first fit by end time), packing as it goes. */
static unsigned tl_row(struct tl_draw *d, const struct hb_tpf_event *q, unsigned c)
{
	unsigned r = 0;
	while (r + 1 < TL_SUBROWS && r < d->nsub[c] && d->sub_end[c][r] > q->submit)
		r++;
	d->sub_end[c][r] = q->done;
	if (r + 1 > d->nsub[c])
		d->nsub[c] = r + 1;
	return r;
}

static unsigned tl_cls(const struct hb_tpf_event *q)
{
	return q->cls_issued < 3 ? q->cls_issued : 2;
}

/* The window, the rows each class needs, the deepest queue; the lanes. */
static double tl_layout(struct tl_draw *d)
{
	const struct hb_tsvg_timeline *t = d->t;
	double y = 64, qh = 70;

	window(t, &d->lo, &d->hi);
	d->x0 = 0, d->x1 = 1, d->qmax = 1;
	if (d->hi > d->lo) {
		d->x0 = (double)step_at(t, d->lo)->start / 1e6;
		d->x1 = (double)step_at(t, d->hi - 1)->end / 1e6;
		d->measured = step_at(t, d->lo)->measured;
	}
	if (!(d->x1 > d->x0))
		d->x1 = d->x0 + 1e-3;
	for (size_t i = 0; i < t->nreqs; i++) {
		const struct hb_tpf_event *q = req_at(t, i);
		unsigned out = 0;
		if (!tl_in_window(d, q))
			continue;
		d->in_win++;
		tl_row(d, q, tl_cls(q));
		for (size_t k = 0; k < t->nreqs; k++) {
			const struct hb_tpf_event *o = req_at(t, k);
			out += o->submit <= q->submit && o->done > q->submit;
		}
		d->qmax = out > d->qmax ? out : d->qmax;
	}
	d->lane[0] = (struct tl_lane){ "mixer", y, 18 };
	d->lane[1] = (struct tl_lane){ "router", y + 22, 18 };
	d->lane[2] = (struct tl_lane){ "experts", y + 44, 18 };
	y += 74;
	for (unsigned c = 0; c < 3; c++) {
		double h = d->nsub[c] ? 7.0 * d->nsub[c] + 2 : 12;
		d->lane[3 + c] = (struct tl_lane){ tl_cls_name[c], y, h };
		y += h + 8;
	}
	d->lane[6] = (struct tl_lane){ "reads", y + 4, qh };
	memset(d->sub_end, 0, sizeof(d->sub_end));
	memset(d->nsub, 0, sizeof(d->nsub));
	return y + qh + 4 + 112;
}

/* Compute stages, the exposed wait over the experts lane, token separators;
 * returns the window's exposed wait (ns). */
static double tl_steps(struct tl_draw *d)
{
	const struct tl_lane *L = d->lane;
	double last_label = -1e9, exposed = 0;

	for (size_t i = d->lo; i < d->hi; i++) {
		const struct hb_tpf_event *s = step_at(d->t, i);
		double a = tl_x(d, (double)s->start), m = tl_x(d, (double)s->moe), r = tl_x(d, (double)s->router);
		double e = tl_x(d, (double)s->end), w = s->exposed ? tl_x(d, (double)(s->router + s->exposed)) : r;
		tl_rect(&d->b, a, m, L[0].y + 2, L[0].h - 4, "#9ecae1", NULL);
		if (m < r)
			tl_rect(&d->b, m, r, L[1].y + 2, L[1].h - 4, "#6baed6", NULL);
		tl_rect(&d->b, r, e, L[2].y + 2, L[2].h - 4, "#3182bd", NULL);
		if (s->exposed)
			tl_rect(&d->b, r, w > e ? e : w, L[2].y, L[2].h, "#8B0000", NULL);
		exposed += (double)s->exposed;
		if (s->layer != 0)
			continue;
		put(&d->b, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#555555\" stroke-dasharray=\"3 3\"/>\n",
		    a, L[0].y - 10, a, L[6].y + L[6].h);
		if (a - last_label >= 34) {
			put(&d->b, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\">t%" PRIu64 "</text>\n", a + 2, L[0].y - 3,
			    s->token);
			last_label = a;
		}
	}
	return exposed;
}

/* Reads: queued part pale, service part in the class colour; promoted outlined. */
static void tl_reads(struct tl_draw *d)
{
	const uint64_t lo = (uint64_t)(d->x0 * 1e6), hi = (uint64_t)(d->x1 * 1e6);

	for (size_t i = 0; i < d->t->nreqs; i++) {
		const struct hb_tpf_event *q = req_at(d->t, i);
		unsigned c = tl_cls(q), r;
		double ry, s0, s1, s2;
		if (!tl_in_window(d, q))
			continue;
		r = tl_row(d, q, c);
		ry = d->lane[3 + c].y + 1 + 7.0 * r;
		s0 = tl_x(d, (double)(q->submit < lo ? lo : q->submit));
		s1 = tl_x(d, (double)(q->dispatch < q->submit ? q->submit : q->dispatch));
		s2 = tl_x(d, (double)(q->done > hi ? hi : q->done));
		s1 = s1 < s0 ? s0 : s1 > s2 ? s2 : s1;
		if (s1 > s0)
			tl_rect(&d->b, s0, s1, ry + 1.5, 3, "#bbbbbb", NULL);
		put(&d->b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"6\" fill=\"%s\"%s>"
			   "<title>layer %u expert %u: %s%s</title></rect>\n",
		    s1, ry, s2 - s1 > 0.6 ? s2 - s1 : 0.6, tl_cls_color[c],
		    q->promoted ? " stroke=\"#000000\" stroke-width=\"0.8\"" : "", q->layer, q->expert, tl_cls_name[c],
		    q->promoted ? " (promoted to P0)" : "");
	}
}

/* Queue depth over the window: reads outstanding (issued, not ready; grey)
 * and in service (dispatched, not ready; black). */
static void tl_depth(struct tl_draw *d)
{
	const struct tl_lane *L = &d->lane[6];
	double py = L->y + L->h;

	put(&d->b, "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\">%u</text>"
		   "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\">0</text>\n",
	    TML - 8, L->y + 9, d->qmax, TML - 8, py);
	for (int pass = 0; pass < 2; pass++) {
		put(&d->b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" points=\"%.2f,%.1f ",
		    pass ? "#000000" : "#999999", pass ? "1.2" : "2.5", TML, py);
		for (double px = TML; px <= TW - TMR; px += 1.0) {
			uint64_t at = (uint64_t)((d->x0 + (px - TML) / (TW - TML - TMR) * (d->x1 - d->x0)) * 1e6);
			unsigned n = 0;
			for (size_t k = 0; k < d->t->nreqs; k++) {
				const struct hb_tpf_event *o = req_at(d->t, k);
				n += (pass ? o->dispatch : o->submit) <= at && o->done > at;
			}
			put(&d->b, "%.1f,%.1f ", px, py - (double)(n < d->qmax ? n : d->qmax) / d->qmax * (L->h - 4));
		}
		put(&d->b, "\"/>\n");
	}
}

/* The x axis (ms from the window's start), its caption and the legend. */
static void tl_axis_legend(struct tl_draw *d, double exposed)
{
	double xs = nice_step(0, d->x1 - d->x0, 10), ay = d->lane[6].y + d->lane[6].h + 6, y = ay + 58, lx = TML;

	put(&d->b, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#000000\"/>\n"
		   "<g text-anchor=\"middle\" font-size=\"11\">\n", TML, ay, TW - TMR, ay);
	for (double x = 0; x <= d->x1 - d->x0 + xs * 1e-9; x += xs) {
		double px = tl_x(d, (x + d->x0) * 1e6);
		put(&d->b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\"/>"
			   "<text x=\"%.1f\" y=\"%.1f\">%g</text>\n", px, ay, px, ay + 4, px, ay + 16, x);
	}
	put(&d->b, "</g>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time (ms) from token t%" PRIu64
		   "; %s; exposed wait in the window %.2f ms; %zu reads</text>\n",
	    (TML + TW - TMR) / 2, ay + 34, d->hi > d->lo ? step_at(d->t, d->lo)->token : 0,
	    d->measured ? "measured (hb-run --stream-trace)" : "simulated", exposed / 1e6, d->in_win);
	tl_legend(&d->b, &lx, y, "#9ecae1", "mixer (attention)");
	if (d->measured)
		tl_legend(&d->b, &lx, y, "#6baed6", "router");
	tl_legend(&d->b, &lx, y, "#3182bd", "experts");
	tl_legend(&d->b, &lx, y, "#8B0000", "exposed wait");
	tl_legend(&d->b, &lx, y, "#bbbbbb", "queued");
	for (int c = 0; c < 3; c++)
		tl_legend(&d->b, &lx, y, tl_cls_color[c], tl_cls_name[c]);
	put(&d->b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">outlined: promoted</text>\n", lx, y);
	put(&d->b, "<text x=\"%g\" y=\"%.1f\" font-size=\"12\">reads lane: grey, outstanding (issued, not ready); "
		   "black, in service (a reader has it)%s.</text>\n<text x=\"%g\" y=\"%.1f\" font-size=\"12\">"
		   "exposed wait: from the router's decision to the last exact record ready%s.</text>\n",
	    TML, y + 20, d->measured ? "" : " (the simulation does not separate them)", TML, y + 36,
	    d->measured ? " (measured: wall time)" : "");
}

int hb_tsvg_timeline_render(const struct hb_tsvg_timeline *t, const char *title, char **out, size_t *len,
			    struct hb_error *err)
{
	struct tl_draw *d = calloc(1, sizeof(*d));
	double Hh, exposed;
	int rc;

	if (!d)
		return hb_error_set(err, HB_ERR_NOMEM, "plot", "out of memory");
	d->t = t;
	Hh = tl_layout(d);
	put(&d->b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		   "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%g\" height=\"%.0f\" "
		   "viewBox=\"0 0 %g %.0f\" font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\" font-size=\"13\">\n"
		   "<title>%s</title>\n<rect x=\"0\" y=\"0\" width=\"%g\" height=\"%.0f\" fill=\"#ffffff\"/>\n"
		   "<text x=\"%g\" y=\"24\" font-size=\"16\" font-weight=\"bold\">%s</text>\n",
	    TW, Hh, TW, Hh, title, TW, Hh, TML, title);
	for (unsigned l = 0; l < 7; l++) {
		put(&d->b, "<rect x=\"%g\" y=\"%.1f\" width=\"%g\" height=\"%.1f\" fill=\"%s\"/>\n", TML, d->lane[l].y,
		    TW - TML - TMR, d->lane[l].h, l % 2 ? "#f4f4f4" : "#fafafa");
		put(&d->b, "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", TML - 8,
		    d->lane[l].y + d->lane[l].h / 2 + 4, d->lane[l].name);
	}
	exposed = tl_steps(d);
	tl_reads(d);
	tl_depth(d);
	tl_axis_legend(d, exposed);
	rc = done(&d->b, out, len, err);
	free(d);
	return rc;
}
