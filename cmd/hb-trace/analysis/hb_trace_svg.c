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

#define TL_MAX_STEPS 4096u
#define TL_MAX_REQS 8192u
#define TL_LANES 16u

struct hb_tsvg_timeline {
	uint64_t first, count;
	struct hb_tpf_event *steps, *reqs;
	size_t nsteps, nreqs, rhead; /* reqs: a ring of the latest completions */
	bool past;                   /* a step after the window was seen */
	uint64_t end;                /* end of the window's last step */
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
	t->first = first, t->count = count ? count : 1;
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
		if (ev->token >= t->first && ev->token - t->first < t->count) {
			if (t->nsteps < TL_MAX_STEPS)
				t->steps[t->nsteps++] = *ev;
			t->end = ev->end;
		} else if (t->nsteps) {
			t->past = true;
		}
		return;
	}
	if (t->past && ev->submit > t->end)
		return;
	t->reqs[t->rhead] = *ev;
	t->rhead = (t->rhead + 1) % TL_MAX_REQS;
	if (t->nreqs < TL_MAX_REQS)
		t->nreqs++;
}

int hb_tsvg_timeline_render(const struct hb_tsvg_timeline *t, const char *title, char **out, size_t *len,
			    struct hb_error *err)
{
	static const char *const cls_color[] = { "#D55E00", "#E69F00", "#0072B2" };
	static const char *const cls_name[] = { "P0 exact", "P1 near-term", "P2 speculative" };
	struct buf b = { 0 };
	struct frame f = { 0, 1, 0, 1, false };
	uint64_t lane_end[TL_LANES] = { 0 };
	double row = 18, top = MT + 20;

	if (t->nsteps) {
		f.x0 = (double)t->steps[0].start / 1e6;
		f.x1 = (double)t->steps[t->nsteps - 1].end / 1e6;
		if (f.x1 <= f.x0)
			f.x1 = f.x0 + 1e-3;
	}
	head(&b, title);
	put(&b, "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">compute</text>\n", ML - 6, top + row * 0.7);
	put(&b, "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">storage</text>\n", ML - 6, top + row * 2.7);
	for (size_t i = 0; i < t->nsteps; i++) {
		const struct hb_tpf_event *s = &t->steps[i];
		double a = fx(&f, (double)s->start / 1e6), r = fx(&f, (double)s->router / 1e6);
		double w = fx(&f, (double)s->ready / 1e6), e = fx(&f, (double)s->end / 1e6);
		put(&b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%g\" fill=\"#9ecae1\"/>\n", a, top, r - a, row);
		if (w > r)
			put(&b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%g\" fill=\"#D55E00\"/>\n", r, top, w - r, row);
		put(&b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%g\" fill=\"#3182bd\"/>\n", w, top, e - w, row);
		if (s->layer == 0)
			put(&b, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#000000\"/>\n"
				"<text x=\"%.2f\" y=\"%.1f\" font-size=\"10\">t%" PRIu64 "</text>\n",
			    a, top - 4, a, H - MB, a + 2, top - 6, s->token);
	}
	for (size_t j = 0; j < t->nreqs; j++) {
		const struct hb_tpf_event *q = &t->reqs[(t->rhead + TL_MAX_REQS - t->nreqs + j) % TL_MAX_REQS];
		double s = (double)q->submit / 1e6, d = (double)q->done / 1e6;
		uint32_t lane = 0;
		if (!t->nsteps || d < f.x0 || s > f.x1)
			continue;
		s = s < f.x0 ? f.x0 : s;
		d = d > f.x1 ? f.x1 : d;
		while (lane + 1 < TL_LANES && lane_end[lane] > q->submit)
			lane++;
		lane_end[lane] = q->done;
		put(&b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%g\" fill=\"%s\"%s>"
			"<title>layer %u expert %u: %s%s</title></rect>\n",
		    fx(&f, s), top + row * (2 + lane), fx(&f, d) - fx(&f, s) > 0.5 ? fx(&f, d) - fx(&f, s) : 0.5, row - 3,
		    cls_color[q->cls < 3 ? q->cls : 2], q->promoted ? " stroke=\"#000000\" stroke-width=\"1\"" : "",
		    q->layer, q->expert, cls_name[q->cls < 3 ? q->cls : 2], q->promoted ? " (promoted)" : "");
	}
	{ /* the x axis only: rows have no numeric y */
		char s[32];
		double xs = nice_step(f.x0, f.x1, 8);
		put(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\"/>\n<g text-anchor=\"middle\">\n",
		    ML, H - MB, W - MR, H - MB);
		for (double x = ceil(f.x0 / xs) * xs; x <= f.x1 + xs * 1e-9; x += xs) {
			snprintf(s, sizeof(s), "%g", x);
			put(&b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\"/>"
				"<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
			    fx(&f, x), H - MB, fx(&f, x), H - MB + 4, fx(&f, x), H - MB + 18, s);
		}
		put(&b, "<text x=\"%.1f\" y=\"%.1f\">time (ms)</text>\n</g>\n", (ML + W - MR) / 2, H - 22);
	}
	legend(&b, 0, "#9ecae1", 10, "attention");
	legend(&b, 1, "#D55E00", 10, "exposed wait");
	legend(&b, 2, "#3182bd", 10, "experts");
	put(&b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">outlined: promoted</text>\n", W - MR + 16, MT + 10 + 24 * 6 + 4);
	for (int c = 0; c < 3; c++)
		legend(&b, 3 + c, cls_color[c], 10, cls_name[c]);
	return done(&b, out, len, err);
}
