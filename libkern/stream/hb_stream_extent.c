/*
 * hb_stream_extent.c: prefill extent streaming (AFN-019 H5).
 *
 * A prefill chunk of many tokens routes to most of a layer's experts; one
 * read per missing record then pays the per-read cost hundreds of times,
 * where one sequential read of the layer's extent pays it once and reads
 * the gaps for nothing.  Which costs less is decided per layer and chunk
 * (hb_xs_extent_decide), from the chunk's own misses and their bytes and
 * from two per-read rates the engine measures: a start-up probe (three
 * record reads, one window read) and then the service time of every read
 * it does, of either kind.
 *
 * The mechanism keeps the record path's invariants by riding on it.  The
 * misses of an extent layer get ordinary P0 tickets, one per record and
 * slot, marked with the route's group.  When a reader dispatches one of
 * them and a ring buffer is free, it gathers the group's queued tickets
 * that follow in file order into one window (at most the ring buffer's
 * bytes): one sequential read of the window into the ring buffer, then
 * each record is copied into its own slot and its SHA-256 checked there,
 * and each ticket completes as a record read would (published, or failed
 * with its record named; a failed window read fails every ticket of it,
 * the window named).  The ring has two buffers, so two windows can be in
 * flight while the records of earlier ones are being used; a ticket that
 * finds no free buffer is read alone.  Gap bytes (records not missed, or
 * cached already) are read into the ring and counted as physical, exact
 * bytes, so byte amplification shows the overread.
 *
 * The ring is counted in the budget: hb_xs_open takes its two buffers out
 * of the budget before the slots (slots x slot bytes + ring <= budget).
 */
#include "hb_base.h"
#include "hb_stream_int.h"

#include <math.h>
#include <time.h>

#define XS_EXTENT_WINDOW (32u << 20)

static const char *const extent_names[] = {"off", "auto", "always"};
static const char *const why_names[HB_XS_WHYS] = {"off",        "no_ring", "not_prefill", "few_misses",
						  "unmeasured", "dearer",  "cheaper",     "always"};

int hb_xs_extent_parse(const char *name, enum hb_xs_extent *out, struct hb_error *err)
{
	for (size_t i = 0; i < HB_ARRAY_LEN(extent_names); i++)
		if (!strcmp(name, extent_names[i])) {
			*out = (enum hb_xs_extent)i;
			return HB_OK;
		}
	return hb_error_set(err, HB_ERR_INVALID, "prefill_extent", "'%s' is not an extent mode (off, auto, always)",
			    name);
}

const char *hb_xs_extent_name(enum hb_xs_extent e)
{
	return (unsigned)e < HB_ARRAY_LEN(extent_names) ? extent_names[e] : "unknown";
}

const char *hb_xs_extent_why_name(enum hb_xs_extent_why w)
{
	return (unsigned)w < HB_XS_WHYS ? why_names[w] : "unknown";
}

static bool rate_ok(double bps)
{
	return isfinite(bps) && bps > 0;
}

void hb_xs_extent_decide(const struct hb_xs_extent_in *in, struct hb_xs_extent_out *out)
{
	out->extent = false;
	out->record_s = rate_ok(in->record_bps) ? (double)in->miss_bytes / in->record_bps : NAN;
	out->extent_s = rate_ok(in->extent_bps) ? (double)in->span_bytes / in->extent_bps : NAN;
	if (in->mode == HB_XS_EXTENT_OFF)
		out->why = HB_XS_WHY_OFF;
	else if (!in->ring)
		out->why = HB_XS_WHY_NO_RING;
	else if (in->phase != HB_XS_PHASE_PREFILL)
		out->why = HB_XS_WHY_NOT_PREFILL;
	else if (in->misses < 2)
		out->why = HB_XS_WHY_FEW;
	else if (in->mode == HB_XS_EXTENT_ALWAYS)
		out->why = HB_XS_WHY_ALWAYS;
	else if (isnan(out->record_s) || isnan(out->extent_s))
		out->why = HB_XS_WHY_UNMEASURED;
	else if (out->extent_s < out->record_s)
		out->why = HB_XS_WHY_CHEAPER;
	else
		out->why = HB_XS_WHY_DEARER;
	out->extent = out->why == HB_XS_WHY_ALWAYS || out->why == HB_XS_WHY_CHEAPER;
}

/* ------------------------------------------------------------ the ring */

int xs_ring_open(struct hb_xs *s, struct hb_error *err)
{
	uint64_t win = s->cfg.extent_window ? s->cfg.extent_window : XS_EXTENT_WINDOW;
	uint64_t cap = (s->cfg.budget_bytes / 4) & ~(uint64_t)(XS_ALIGN - 1);
	uint64_t lo = 2 * s->slot_bytes;

	if (s->cfg.extent == HB_XS_EXTENT_OFF)
		return HB_OK;
	win &= ~(uint64_t)(XS_ALIGN - 1);
	if (win < lo)
		win = lo;
	if (win > cap)
		win = cap;
	if (win < lo || win > SIZE_MAX)
		return HB_OK; /* no ring: every layer reads records (HB_XS_WHY_NO_RING) */
	for (int k = 0; k < 2; k++) {
		void *p = NULL;
		if (posix_memalign(&p, XS_ALIGN, (size_t)win))
			return hb_error_set(err, HB_ERR_NOMEM, "expert_cache",
					    "cannot allocate the extent ring (2 x %" PRIu64 " bytes)", win);
		s->ring[k] = p;
	}
	s->ring_win = win;
	s->st.ring_bytes = 2 * win;
	s->st.resident_bytes += 2 * win;
	return HB_OK;
}

void xs_ring_close(struct hb_xs *s)
{
	for (int k = 0; k < 2; k++) {
		free(s->ring[k]);
		s->ring[k] = NULL;
	}
}

static uint64_t rec_file(const struct hb_xs *s, uint32_t layer, uint32_t expert)
{
	return s->base + s->em.layers[layer].data_offset + (uint64_t)expert * s->record_bytes;
}

static uint64_t down(uint64_t v)
{
	return v & ~(uint64_t)(XS_ALIGN - 1);
}

static uint64_t up(uint64_t v)
{
	return (v + XS_ALIGN - 1) & ~(uint64_t)(XS_ALIGN - 1);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void xs_extent_probe(struct hb_xs *s)
{
	struct hb_error err;
	uint64_t t0, a, b, end;

	if (s->cfg.extent != HB_XS_EXTENT_AUTO || !s->ring_win)
		return;
	/* record-sized reads: three records far apart, none in layer 0's
	 * first window, so no read is helped by the one before */
	for (uint32_t i = 0; i < 3; i++) {
		uint32_t layer = (s->layers - 1 - i % s->layers), expert = s->experts - 1 - i * (s->experts / 3);
		uint64_t off = rec_file(s, layer, expert);
		a = down(off), b = up(off + s->record_bytes);
		hb_error_clear(&err);
		t0 = mono_ns();
		if (xs_read_span(s, s->direct, s->ring[1], a, b - a, off + s->record_bytes - a, "expert_cache.probe", &err))
			return;
		s->st.probe_record_ns += mono_ns() - t0;
		s->st.probe_record_bytes += b - a;
	}
	/* one window of layer 0 from its first record */
	a = down(rec_file(s, 0, 0));
	end = up(rec_file(s, 0, s->experts - 1) + s->record_bytes);
	b = end - a < s->ring_win ? end : a + s->ring_win;
	hb_error_clear(&err);
	t0 = mono_ns();
	if (xs_read_span(s, s->direct, s->ring[0], a, b - a, b - a, "expert_cache.probe", &err))
		return;
	s->st.probe_extent_ns += mono_ns() - t0;
	s->st.probe_extent_bytes += b - a;
}

static double rate(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes * 1e9 / (double)ns : NAN;
}

/* ------------------------------------------------------------ deciding */

void xs_extent_route(struct hb_xs *s, struct hb_xs_route *r)
{
	struct hb_xs_extent_in in;
	uint32_t lo = UINT32_MAX, hi = 0;

	memset(&in, 0, sizeof(in));
	in.mode = s->cfg.extent;
	in.ring = s->ring_win != 0;
	in.phase = r->phase;
	for (size_t i = 0; i < r->n; i++) {
		uint32_t e = r->w[i].expert;
		uint64_t off = rec_file(s, r->layer, e);
		if (r->w[i].how != HB_XS_MISS)
			continue;
		in.misses++;
		in.miss_bytes += up(off + s->record_bytes) - down(off);
		lo = e < lo ? e : lo;
		hi = e > hi ? e : hi;
	}
	if (in.misses)
		in.span_bytes = up(rec_file(s, r->layer, hi) + s->record_bytes) - down(rec_file(s, r->layer, lo));
	in.record_bps = rate(s->st.probe_record_bytes + s->st.record_read_bytes,
			     s->st.probe_record_ns + s->st.record_read_ns);
	in.extent_bps = rate(s->st.probe_extent_bytes + s->st.extent_bytes,
			     s->st.probe_extent_ns + s->st.extent_read_ns);
	hb_xs_extent_decide(&in, &r->extent);
	s->st.extent_why[r->extent.why]++;
	if (!r->extent.extent)
		return;
	r->group = ++s->next_group;
	for (size_t i = 0; i < r->n; i++) {
		const struct hb_xs_want *w = &r->w[i];
		int32_t ti;
		if (w->how != HB_XS_MISS || w->state != HB_XS_W_READ)
			continue;
		ti = s->slots[w->slot].ticket;
		if (ti != XS_NONE && s->tickets[ti].live && s->tickets[ti].t.id == w->ticket_id &&
		    s->tickets[ti].t.state == HB_XS_T_QUEUED)
			s->tickets[ti].group = r->group;
	}
}

/* ------------------------------------------------------------ windows */

void xs_extent_gather(struct hb_xs *s, int32_t ti)
{
	struct xs_ticket *lead = &s->tickets[ti];
	int k = !s->ring_busy[0] ? 0 : !s->ring_busy[1] ? 1 : -1;
	uint64_t start = lead->t.file_offset, rec_end;
	int32_t *tail = &lead->mnext, nx;
	uint32_t n = 0;

	if (!s->ring_win || k < 0)
		return;
	rec_end = start + s->slots[lead->t.slot].rec_off + s->record_bytes;
	for (int32_t q = s->qhead[HB_XS_P0]; q != XS_NONE; q = nx) {
		struct xs_ticket *m = &s->tickets[q];
		uint64_t rs = m->t.file_offset + s->slots[m->t.slot].rec_off;
		nx = m->qnext;
		if (m->group != lead->group || m->t.layer != lead->t.layer || rs < rec_end)
			continue;
		if (m->t.file_offset + m->t.bytes_physical - start > s->ring_win)
			break;
		xs_queue_remove(s, q);
		m->t.state = HB_XS_T_INFLIGHT;
		m->t.start_ns = lead->t.start_ns;
		m->start_seq = ++s->start_seq;
		m->lead = ti;
		m->mnext = XS_NONE;
		m->t.extent = lead->t.extent = true;
		*tail = q;
		tail = &m->mnext;
		rec_end = rs + s->record_bytes;
		n++;
		xs_emit(s, HB_XS_EV_DISPATCH, &m->t);
	}
	if (n) {
		lead->ring = (int8_t)k;
		s->ring_busy[k] = true;
	}
}

struct xs_member {
	int32_t ti, slot;
	uint8_t *buf;
	bool new_buf;
	uint64_t rec;         /* the record's file offset */
	uint32_t rec_off, expert;
	const uint8_t *want;
	int rc;
	struct hb_error err;
};

/* Copy member m's record out of the window and check it (mu not held). */
static int member_take(struct hb_xs *s, const uint8_t *win, uint64_t win0, struct xs_member *m)
{
	char name[64];

	xs_name_record(name, sizeof(name), s->tickets[m->ti].t.layer, m->expert);
	if (!m->buf) {
		void *p = NULL;
		if (xs_fault(s, HB_XS_FAULT_ALLOC) || posix_memalign(&p, XS_ALIGN, (size_t)s->slot_bytes))
			return hb_error_set(&m->err, HB_ERR_NOMEM, name, "cannot allocate a slot of %" PRIu64 " bytes",
					    s->slot_bytes);
		m->buf = p;
		m->new_buf = true;
	}
	memcpy(m->buf + m->rec_off, win + (m->rec - win0), (size_t)s->record_bytes);
	if (xs_fault(s, HB_XS_FAULT_DIGEST))
		m->buf[m->rec_off] ^= 0x01;
	return xs_verify(s, m->buf + m->rec_off, m->want, name, m->rec, " (read in an extent window)", &m->err);
}

bool xs_extent_run(struct hb_xs *s, int32_t ti, uint32_t gen_skew)
{
	struct xs_ticket *lead = &s->tickets[ti];
	struct xs_member *mv;
	struct hb_error err;
	uint64_t win0 = lead->t.file_offset, win1 = 0, need = 0, phys = 0, t0;
	uint32_t n = 0, layer = lead->t.layer;
	int k = lead->ring, rc;
	bool published = false, direct = s->direct;
	char name[80];

	for (int32_t q = ti; q != XS_NONE; q = s->tickets[q].mnext)
		n++;
	mv = calloc(n, sizeof(*mv));
	n = 0;
	for (int32_t q = ti; q != XS_NONE; q = s->tickets[q].mnext) {
		const struct xs_ticket *tk = &s->tickets[q];
		const struct xs_slot *sl = &s->slots[tk->t.slot];
		uint64_t e = tk->t.file_offset + tk->t.bytes_physical;
		if (mv) {
			struct xs_member *m = &mv[n];
			m->ti = q, m->slot = (int32_t)tk->t.slot, m->buf = sl->buf;
			m->rec = tk->t.file_offset + sl->rec_off, m->rec_off = sl->rec_off;
			m->expert = tk->t.expert;
			m->want = s->record_sha + (size_t)sl->key * HB_SHA256_BYTES;
			if (m->rec + s->record_bytes - win0 > need)
				need = m->rec + s->record_bytes - win0;
		}
		win1 = e > win1 ? e : win1;
		phys += tk->t.bytes_physical;
		n++;
	}
	snprintf(name, sizeof(name), "expert_store.layer[%u].experts[%u..%u]", layer, lead->t.expert,
		 mv ? mv[n - 1].expert : lead->t.expert);
	hb_error_clear(&err);
	t0 = xs_now(s);
	pthread_mutex_unlock(&s->mu);
	if (!mv)
		rc = hb_error_set(&err, HB_ERR_NOMEM, name, "out of memory for an extent window");
	else
		rc = xs_read_span(s, direct, s->ring[k], win0, win1 - win0, need, name, &err);
	for (uint32_t i = 0; mv && i < n; i++) {
		hb_error_clear(&mv[i].err);
		if (rc)
			mv[i].rc = rc, mv[i].err = err;
		else
			mv[i].rc = member_take(s, s->ring[k], win0, &mv[i]);
	}
	pthread_mutex_lock(&s->mu);
	s->ring_busy[k] = false;
	if (!rc) {
		s->st.extent_reads++;
		s->st.extent_records += n;
		s->st.extent_bytes += win1 - win0;
		s->st.extent_gap_bytes += win1 - win0 > (uint64_t)n * s->record_bytes
						  ? win1 - win0 - (uint64_t)n * s->record_bytes
						  : 0;
		s->st.extent_read_ns += xs_now(s) - t0;
		if (win1 - win0 > phys) {
			/* the gaps: read for no want, but read */
			s->st.bytes_physical += win1 - win0 - phys;
			s->st.bytes_exact += win1 - win0 - phys;
		}
	}
	/* members first, the lead last: its index is what members point at */
	for (uint32_t i = n; i-- > 0;) {
		int32_t q = mv ? mv[i].ti : XS_NONE;
		if (!mv)
			break;
		if (mv[i].new_buf) {
			s->slots[mv[i].slot].buf = mv[i].buf;
			s->st.resident_bytes += s->slot_bytes;
		}
		published |= xs_complete(s, q, mv[i].rc, &mv[i].err, gen_skew);
	}
	if (!mv) {
		/* no member list: fail the chain as it stands, members first */
		for (int32_t q = lead->mnext, nx; q != XS_NONE; q = nx) {
			nx = s->tickets[q].mnext;
			xs_complete(s, q, rc, &err, gen_skew);
		}
		xs_complete(s, ti, rc, &err, gen_skew);
	}
	free(mv);
	return published;
}
