/*
 * hb_stream_io.c: tickets, the three queues, dispatch, the reads and their
 * completion.
 *
 * Queue discipline (AFN-019 "required scheduler contract"): a free reader
 * takes the head of P0 if there is one; only when P0 is empty may it take
 * P1, then P2, and only while fewer than depth - reserved_p0 lower-class
 * reads are in flight, so reserved_p0 readers are always there for a P0
 * that arrives.  A read cannot be aborted once started (pread, and later
 * an io_uring SQE, runs to its end), so the reserve, not preemption, is
 * what keeps P1/P2 from delaying P0.  Within a class: earliest deadline
 * first (none last), then issue order.
 *
 * A read: allocate the slot's buffer on its first use (the allocation the
 * fault seam can refuse), pread the record's aligned span into it, with
 * O_DIRECT when the engine has it (the span and the buffer are 4096-aligned,
 * which satisfies every logical block size up to 4096), check the record's
 * SHA-256 against the artifact's table, then publish under the mutex only
 * if the slot still belongs to this ticket at this generation.  A buffered
 * read advises the kernel to drop the span from the page cache, so that the
 * cache's bytes are the only copy the budget has to hold.
 */
#include "hb_base.h"
#include "hb_sha256.h"
#include "hb_stream_int.h"

#include <fcntl.h>
#include <unistd.h>

/* ------------------------------------------------------------ tickets */

int32_t xs_ticket_new(struct hb_xs *s, uint8_t prio, int32_t slot, uint32_t layer, uint32_t expert)
{
	int32_t ti = s->ticket_free;
	struct xs_ticket *tk;
	struct xs_slot *sl = &s->slots[slot];
	uint64_t off, first, end;

	/* one live ticket per slot at most, and the table has one per slot */
	if (ti == XS_NONE)
		return XS_NONE;
	tk = &s->tickets[ti];
	s->ticket_free = tk->qnext;
	memset(tk, 0, sizeof(*tk));
	tk->qnext = XS_NONE;
	tk->lead = tk->mnext = XS_NONE;
	tk->ring = -1;
	tk->live = true;
	tk->t.id = ++s->next_ticket_id;
	memcpy(tk->t.store_sha256, s->em.payload_sha256, HB_SHA256_BYTES);
	tk->t.layer = layer;
	tk->t.expert = expert;
	tk->t.component = HB_EM_RECORD;
	tk->t.exact = prio == HB_XS_P0;
	tk->t.confidence = 1.0f;
	tk->t.prio = tk->t.prio_issued = prio;
	tk->t.issue_ns = xs_now(s);
	tk->t.token_pos = s->cur_token;
	tk->t.token_mask = 1;
	off = s->base + s->em.layers[layer].data_offset + (uint64_t)expert * s->record_bytes;
	first = off & ~(uint64_t)(XS_ALIGN - 1);
	end = (off + s->record_bytes + XS_ALIGN - 1) & ~(uint64_t)(XS_ALIGN - 1);
	tk->t.file_offset = first;
	tk->t.bytes = s->record_bytes;
	tk->t.bytes_physical = end - first;
	tk->t.slot = (uint32_t)slot;
	tk->t.slot_gen = ++sl->gen;
	tk->t.state = HB_XS_T_QUEUED;
	sl->state = HB_XS_SLOT_READING;
	sl->key = (int32_t)(layer * s->experts + expert);
	sl->ticket = ti;
	sl->rec_off = (uint32_t)(off - first);
	sl->leases = sl->pins = 0;
	sl->predicted = prio != HB_XS_P0;
	sl->used = false;
	sl->pred_prio = XS_NO_PRED;
	s->where[sl->key] = slot;
	s->st.tickets[prio]++;
	return ti;
}

static void ticket_free(struct hb_xs *s, int32_t ti)
{
	s->tickets[ti].live = false;
	s->tickets[ti].qnext = s->ticket_free;
	s->ticket_free = ti;
}

static bool before(const struct hb_xs_ticket *a, const struct hb_xs_ticket *b)
{
	uint64_t da = a->deadline_ns ? a->deadline_ns : UINT64_MAX;
	uint64_t db = b->deadline_ns ? b->deadline_ns : UINT64_MAX;

	return da != db ? da < db : a->id < b->id;
}

static void queue_insert(struct hb_xs *s, int32_t ti)
{
	uint8_t p = s->tickets[ti].t.prio;
	int32_t *link = &s->qhead[p];

	while (*link != XS_NONE && !before(&s->tickets[ti].t, &s->tickets[*link].t))
		link = &s->tickets[*link].qnext;
	s->tickets[ti].qnext = *link;
	*link = ti;
	s->queued[p]++;
}

void xs_queue_remove(struct hb_xs *s, int32_t ti)
{
	uint8_t p = s->tickets[ti].t.prio;
	int32_t *link = &s->qhead[p];

	while (*link != XS_NONE && *link != ti)
		link = &s->tickets[*link].qnext;
	if (*link == ti) {
		*link = s->tickets[ti].qnext;
		s->tickets[ti].qnext = XS_NONE;
		s->queued[p]--;
	}
}

void xs_ticket_enqueue(struct hb_xs *s, int32_t ti)
{
	queue_insert(s, ti);
	xs_emit(s, HB_XS_EV_ISSUE, &s->tickets[ti].t);
	pthread_cond_signal(&s->work_cv);
}

void xs_ticket_promote(struct hb_xs *s, int32_t ti)
{
	struct xs_ticket *tk = &s->tickets[ti];

	if (tk->t.prio == HB_XS_P0)
		return;
	if (tk->t.state == HB_XS_T_QUEUED) {
		xs_queue_remove(s, ti);
		tk->t.prio = HB_XS_P0;
		queue_insert(s, ti);
	} else {
		tk->t.prio = HB_XS_P0;
		if (tk->low_inflight) {
			tk->low_inflight = false;
			s->inflight_low--;
		}
	}
	s->st.promoted++;
	xs_emit(s, HB_XS_EV_PROMOTE, &tk->t);
	pthread_cond_signal(&s->work_cv);
}

void xs_ticket_upgrade(struct hb_xs *s, int32_t ti, uint8_t prio)
{
	struct xs_ticket *tk = &s->tickets[ti];

	if (tk->t.state != HB_XS_T_QUEUED || prio >= tk->t.prio)
		return;
	xs_queue_remove(s, ti);
	tk->t.prio = prio;
	queue_insert(s, ti);
}

void xs_ticket_cancel(struct hb_xs *s, int32_t ti)
{
	struct xs_ticket *tk = &s->tickets[ti];
	struct xs_slot *sl = &s->slots[tk->t.slot];

	if (tk->t.state == HB_XS_T_QUEUED) {
		xs_queue_remove(s, ti);
		tk->t.state = HB_XS_T_CANCELLED;
		xs_slot_free(s, (int32_t)tk->t.slot);
		s->st.cancelled_queued++;
		xs_emit(s, HB_XS_EV_CANCEL, &tk->t);
		ticket_free(s, ti);
		return;
	}
	/* in flight: the reader owns the buffer until it returns; the key is
	 * dropped now so that nothing finds it, the slot frees at completion */
	tk->cancelled = true;
	if (sl->key != XS_NONE && s->where[sl->key] == (int32_t)tk->t.slot)
		s->where[sl->key] = XS_NONE;
	sl->state = HB_XS_SLOT_DRAINING;
	s->st.cancelled_inflight++;
	xs_emit(s, HB_XS_EV_CANCEL, &tk->t);
}

int32_t xs_dispatch(struct hb_xs *s)
{
	int32_t ti = XS_NONE;
	struct xs_ticket *tk;

	if (s->inflight >= s->cfg.depth)
		return XS_NONE;
	/* an extent group's ticket waits for a ring buffer (a window in
	 * flight frees one) rather than going alone; other P0s pass it */
	for (ti = s->qhead[HB_XS_P0]; ti != XS_NONE && s->tickets[ti].group && s->ring_busy[0] && s->ring_busy[1];)
		ti = s->tickets[ti].qnext;
	if (ti != XS_NONE)
		;
	else if (s->qhead[HB_XS_P0] != XS_NONE)
		return XS_NONE;
	else if (s->inflight_low + s->cfg.reserved_p0 < s->cfg.depth)
		ti = s->qhead[HB_XS_P1] != XS_NONE ? s->qhead[HB_XS_P1] : s->qhead[HB_XS_P2];
	if (ti == XS_NONE)
		return XS_NONE;
	tk = &s->tickets[ti];
	xs_queue_remove(s, ti);
	tk->t.state = HB_XS_T_INFLIGHT;
	tk->t.start_ns = xs_now(s);
	tk->start_seq = ++s->start_seq;
	s->inflight++;
	if (tk->t.prio > HB_XS_P0) {
		tk->low_inflight = true;
		s->inflight_low++;
	}
	xs_emit(s, HB_XS_EV_DISPATCH, &tk->t);
	if (tk->group)
		xs_extent_gather(s, ti);
	return ti;
}

/* ------------------------------------------------------------ faults */

bool xs_fault(struct hb_xs *s, enum hb_xs_fault kind)
{
	unsigned n = atomic_fetch_add(&s->fault_calls[kind], 1) + 1;
	unsigned at = atomic_load(&s->fault_at[kind]);

	return at && at == n;
}

void hb_xs_test_fault_arm(struct hb_xs *s, enum hb_xs_fault kind, unsigned nth)
{
	if ((unsigned)kind >= HB_XS_FAULT_KINDS || !nth)
		return;
	atomic_store(&s->fault_calls[kind], 0);
	atomic_store(&s->fault_at[kind], nth);
}

void hb_xs_test_fault_reset(struct hb_xs *s)
{
	for (int k = 0; k < HB_XS_FAULT_KINDS; k++) {
		atomic_store(&s->fault_at[k], 0);
		atomic_store(&s->fault_calls[k], 0);
	}
}

unsigned hb_xs_test_fault_calls(struct hb_xs *s, enum hb_xs_fault kind)
{
	return (unsigned)kind < HB_XS_FAULT_KINDS ? atomic_load(&s->fault_calls[kind]) : 0;
}

/* ------------------------------------------------------------ a read */

struct xs_job {
	uint32_t layer, expert;
	uint64_t off, span, need;
	uint32_t rec_off;
	uint8_t *buf;
	bool new_buf;
	int fd;
	bool direct;
	bool fell_back;        /* O_DIRECT refused this read: buffered from now on */
	const uint8_t *want;   /* the record's digest */
	struct hb_sha256 *hash; /* non-NULL: the record's bytes hashed as they arrive */
	uint64_t chunk;        /* with hash: pread at most this much at a time */
	uint64_t hashed;       /* span bytes before this one are hashed (or before the record) */
	char name[64];
};

/*
 * A record's read is issued in chunks of this many bytes, each hashed as
 * soon as it is in, so that the SHA-256 check runs while the later chunks
 * (and the other readers' records) are still coming: one whole-record
 * pread per reader had the readers' transfers end together, then their
 * checks contend for the cores together while the disk stood idle
 * (stream trace of a decode step: four 2.6 MiB reads ready 7.4-8.9 ms
 * after their start, of which 5.7 ms transfer, and the next reads only
 * then); now a record is ready one chunk's check after its last byte.
 */
#define XS_CHUNK (512u << 10)

/* the span's bytes up to `to` are in: hash what is the record's and not yet hashed */
static void hash_arrived(struct xs_job *j, uint64_t to)
{
	uint64_t a = j->hashed > j->rec_off ? j->hashed : j->rec_off, b = to < j->need ? to : j->need;

	if (b > a)
		hb_sha256_update(j->hash, j->buf + a, (size_t)(b - a));
	j->hashed = to > j->hashed ? to : j->hashed;
}

static int read_span(struct hb_xs *s, struct xs_job *j, struct hb_error *err)
{
	uint64_t done = 0;
	bool shorten = xs_fault(s, HB_XS_FAULT_SHORT);

	if (xs_fault(s, HB_XS_FAULT_EIO))
		return hb_error_sys(err, EIO, j->name, "read of %" PRIu64 " bytes at %" PRIu64 " failed",
				    j->span, j->off);
	while (done < j->span) {
		uint64_t want = j->span - done;
		ssize_t got;
		if (j->hash && want > j->chunk)
			want = j->chunk;
		if (shorten) {
			want /= 2;
			want &= ~(uint64_t)(XS_ALIGN - 1);
			if (!want)
				break;
		}
		got = pread(j->fd, j->buf + done, (size_t)want, (off_t)(j->off + done));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && errno == EINVAL && j->direct) {
			/* the file system took O_DIRECT at open and refuses it
			 * now: go on buffered, and say so */
			j->direct = false;
			j->fell_back = true;
			j->fd = s->fd_buffered;
			continue;
		}
		if (got < 0)
			return hb_error_sys(err, errno, j->name, "read at %" PRIu64 " failed", j->off + done);
		if (got == 0)
			break;
		done += (uint64_t)got;
		if (j->hash)
			hash_arrived(j, done);
		/* a direct read that ends off a block boundary met the end of
		 * the file; another direct read from there would be refused */
		if (shorten || (j->direct && done % XS_ALIGN))
			break;
	}
	if (!j->direct)
		posix_fadvise(j->fd, (off_t)j->off, (off_t)j->span, POSIX_FADV_DONTNEED);
	if (done < j->need)
		return hb_error_set_at(err, HB_ERR_SHORT, j->name, j->off + done,
				       "the read ends %" PRIu64 " bytes before the record does",
				       j->need - done);
	return HB_OK;
}

/* got against want: 0, or HB_ERR_DIGEST naming the record */
static int digest_check(const uint8_t *got, const uint8_t *want, const char *name, uint64_t off, const char *how,
			struct hb_error *err)
{
	char hg[HB_SHA256_HEX], hw[HB_SHA256_HEX];

	if (!memcmp(got, want, HB_SHA256_BYTES))
		return HB_OK;
	hb_hex_encode(got, HB_SHA256_BYTES, hg);
	hb_hex_encode(want, HB_SHA256_BYTES, hw);
	hb_error_set_at(err, HB_ERR_DIGEST, name, off, "record SHA-256 %s%s differs from hebrus.experts.record_sha256 %s",
			hg, how, hw);
	return HB_ERR_DIGEST;
}

int xs_verify(const struct hb_xs *s, const uint8_t *rec, const uint8_t *want, const char *name, uint64_t off,
	      const char *how, struct hb_error *err)
{
	uint8_t got[HB_SHA256_BYTES];

	hb_sha256_buf(rec, (size_t)s->record_bytes, got);
	return digest_check(got, want, name, off, how, err);
}

static int run_job(struct hb_xs *s, struct xs_job *j, struct hb_error *err)
{
	struct hb_sha256 h;
	uint8_t got[HB_SHA256_BYTES];
	int rc;

	if (!j->buf) {
		void *p = NULL;
		if (xs_fault(s, HB_XS_FAULT_ALLOC) || posix_memalign(&p, XS_ALIGN, (size_t)s->slot_bytes))
			return hb_error_set(err, HB_ERR_NOMEM, j->name,
					    "cannot allocate a slot of %" PRIu64 " bytes", s->slot_bytes);
		j->buf = p;
		j->new_buf = true;
	}
	hb_sha256_init(&h);
	j->hash = &h;
	j->hashed = 0;
	j->chunk = s->read_chunk ? s->read_chunk : XS_CHUNK;
	if ((rc = read_span(s, j, err)))
		return rc;
	if (xs_fault(s, HB_XS_FAULT_DIGEST)) { /* the test seam: a bit flipped after the read, checked again */
		j->buf[j->rec_off] ^= 0x01;
		return xs_verify(s, j->buf + j->rec_off, j->want, j->name, j->off + j->rec_off, "", err);
	}
	hb_sha256_final(&h, got);
	return digest_check(got, j->want, j->name, j->off + j->rec_off, "", err);
}

/* Notify the active routes' wants on ticket id: ready (rc 0) or failed. */
static void notify(struct hb_xs *s, uint64_t id, int32_t slot, int rc, const struct hb_error *err)
{
	for (struct hb_xs_route *r = s->routes; r; r = r->next)
		for (size_t i = 0; i < r->n; i++) {
			struct hb_xs_want *w = &r->w[i];
			if (w->state != HB_XS_W_READ || w->ticket_id != id)
				continue;
			if (rc) {
				w->state = HB_XS_W_FAILED;
				if (!r->err.code)
					r->err = *err;
				continue;
			}
			w->state = HB_XS_W_READY;
			w->ready_seq = ++s->ready_seq;
			xs_slot_consume(s, slot);
		}
}

static void count_bytes(struct hb_xs *s, const struct hb_xs_ticket *t, bool rejected)
{
	s->st.bytes_physical += t->bytes_physical;
	s->st.bytes_logical += t->bytes;
	if (t->prio_issued == HB_XS_P0) {
		s->st.bytes_exact += t->bytes_physical;
		return;
	}
	s->st.bytes_predicted += t->bytes_physical;
	if (rejected)
		s->st.bytes_rejected += t->bytes_physical;
}

/* Complete ticket ti with the read's result; gen_skew != 0 only from the
 * test seam, which pretends the slot moved on meanwhile. */
bool xs_complete(struct hb_xs *s, int32_t ti, int rc, const struct hb_error *err, uint32_t gen_skew)
{
	struct xs_ticket *tk = &s->tickets[ti];
	struct hb_xs_ticket *t = &tk->t;
	int32_t slot = (int32_t)t->slot;
	struct xs_slot *sl = &s->slots[slot];
	bool mine = sl->ticket == ti && sl->gen == t->slot_gen + gen_skew;
	bool published = false;

	t->ready_ns = xs_now(s);
	t->completion_seq = ++s->completion_seq;
	if (tk->lead == XS_NONE)
		s->inflight--; /* a window's members ride on its lead's read */
	if (tk->low_inflight)
		s->inflight_low--;
	tk->low_inflight = false;
	if (tk->cancelled || !mine || sl->state != HB_XS_SLOT_READING) {
		/* stale: the bytes may be good, but this slot is not this
		 * ticket's any more (or it was cancelled): publish nothing */
		t->state = HB_XS_T_CANCELLED;
		t->result = rc;
		s->st.stale_discards++;
		if (!rc)
			count_bytes(s, t, true);
		if (sl->ticket == ti)
			xs_slot_free(s, slot);
	} else if (rc) {
		t->state = HB_XS_T_FAILED;
		t->result = rc;
		if (rc == HB_ERR_DIGEST)
			s->st.failed_digest++;
		else if (rc == HB_ERR_SHORT)
			s->st.failed_short++;
		else if (rc == HB_ERR_NOMEM)
			s->st.failed_alloc++;
		else
			s->st.failed_io++;
		s->st.last_failure = *err;
		notify(s, t->id, slot, rc, err);
		xs_slot_free(s, slot);
	} else {
		uint64_t lat = t->ready_ns - t->issue_ns;
		t->state = HB_XS_T_DONE;
		published = true;
		hb_xs_hist_add(&s->st.ready, lat);
		if (t->prio == HB_XS_P0) {
			s->miss_samples++;
			s->mean_miss_ns += ((double)lat - s->mean_miss_ns) / (double)s->miss_samples;
		}
		if (t->deadline_ns) {
			int64_t slack = (int64_t)(t->deadline_ns - t->ready_ns);
			s->st.deadlines++;
			if (t->ready_ns > t->deadline_ns)
				s->st.late++;
			if (slack < s->st.slack_min_ns)
				s->st.slack_min_ns = slack;
			s->st.slack_sum_ns += slack;
		}
		count_bytes(s, t, false);
		s->st.completed++;
		sl->state = HB_XS_SLOT_VALID;
		sl->ticket = XS_NONE;
		sl->read_ns = lat;
		sl->phys = t->bytes_physical;
		sl->last_use = ++s->use_clock;
		xs_slot_refresh_state(sl);
		notify(s, t->id, slot, 0, NULL);
	}
	xs_emit(s, HB_XS_EV_COMPLETE, t);
	ticket_free(s, ti);
	pthread_cond_broadcast(&s->done_cv);
	pthread_cond_signal(&s->work_cv);
	return published;
}

int xs_read_span(struct hb_xs *s, bool direct, uint8_t *buf, uint64_t off, uint64_t span, uint64_t need,
		 const char *name, struct hb_error *err)
{
	struct xs_job j;
	int rc;

	memset(&j, 0, sizeof(j));
	j.off = off, j.span = span, j.need = need, j.buf = buf;
	j.direct = direct;
	j.fd = direct ? s->fd : s->fd_buffered;
	snprintf(j.name, sizeof(j.name), "%s", name);
	rc = read_span(s, &j, err);
	if (j.fell_back) {
		pthread_mutex_lock(&s->mu);
		if (s->direct) {
			s->direct = false;
			snprintf(s->io_mode, sizeof(s->io_mode), "buffered (O_DIRECT read refused: %s)",
				 strerror(EINVAL));
		}
		pthread_mutex_unlock(&s->mu);
	}
	return rc;
}

static bool run(struct hb_xs *s, int32_t ti, uint32_t gen_skew)
{
	struct xs_ticket *tk = &s->tickets[ti];
	struct xs_slot *sl;
	struct xs_job j;
	struct hb_error err;
	uint64_t t0;
	int rc;

	if (tk->lead != XS_NONE)
		ti = tk->lead, tk = &s->tickets[ti];
	if (tk->mnext != XS_NONE)
		return xs_extent_run(s, ti, gen_skew);
	sl = &s->slots[tk->t.slot];
	t0 = xs_now(s);

	memset(&j, 0, sizeof(j));
	j.layer = tk->t.layer;
	j.expert = tk->t.expert;
	j.off = tk->t.file_offset;
	j.span = tk->t.bytes_physical;
	j.rec_off = sl->rec_off;
	j.need = j.rec_off + s->record_bytes;
	j.buf = sl->buf;
	j.direct = s->direct;
	j.fd = s->direct ? s->fd : s->fd_buffered;
	j.want = s->record_sha + (size_t)sl->key * HB_SHA256_BYTES;
	xs_name_record(j.name, sizeof(j.name), j.layer, j.expert);
	hb_error_clear(&err);
	pthread_mutex_unlock(&s->mu);
	rc = run_job(s, &j, &err);
	pthread_mutex_lock(&s->mu);
	if (j.new_buf) {
		/* the buffer belongs to the slot from now on, whatever became
		 * of the read: it is inside the budget either way */
		sl->buf = j.buf;
		s->st.resident_bytes += s->slot_bytes;
	}
	if (j.fell_back && s->direct) {
		s->direct = false;
		snprintf(s->io_mode, sizeof(s->io_mode), "buffered (O_DIRECT read refused: %s)", strerror(EINVAL));
	}
	if (!rc) {
		s->st.record_reads++;
		s->st.record_read_bytes += j.span;
		s->st.record_read_ns += xs_now(s) - t0;
	}
	return xs_complete(s, ti, rc, &err, gen_skew);
}

void xs_run_ticket(struct hb_xs *s, int32_t ti)
{
	run(s, ti, 0);
}

static int32_t pick_inflight(struct hb_xs *s)
{
	int32_t best = XS_NONE;
	uint32_t n = 0, k;

	for (uint32_t i = 0; i < s->nslots; i++)
		if (s->tickets[i].live && s->tickets[i].t.state == HB_XS_T_INFLIGHT && !s->tickets[i].pumping &&
		    s->tickets[i].lead == XS_NONE) {
			n++;
			if (best == XS_NONE || s->tickets[i].start_seq < s->tickets[best].start_seq)
				best = (int32_t)i;
		}
	if (!n || !s->random_order)
		return best;
	/* xorshift64: a seeded, reproducible order */
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	k = (uint32_t)(s->rng % n);
	for (uint32_t i = 0; i < s->nslots; i++)
		if (s->tickets[i].live && s->tickets[i].t.state == HB_XS_T_INFLIGHT && !s->tickets[i].pumping &&
		    s->tickets[i].lead == XS_NONE && !k--)
			return (int32_t)i;
	return best;
}

bool xs_pump(struct hb_xs *s)
{
	int32_t ti;

	while (xs_dispatch(s) != XS_NONE)
		;
	/* several callers may wait on one engine (the graph's expert jobs):
	 * a ticket another wait is reading is not picked twice */
	ti = pick_inflight(s);
	if (ti == XS_NONE)
		return false;
	s->tickets[ti].pumping = true;
	s->pumping++;
	run(s, ti, 0);
	/* completed under mu, which is held since: the entry is free, not reused */
	s->tickets[ti].pumping = false;
	s->pumping--;
	return true;
}

/* ------------------------------------------------------------ workers */

static void *worker(void *arg)
{
	struct hb_xs *s = arg;

	pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		int32_t ti = xs_dispatch(s);
		if (ti == XS_NONE) {
			pthread_cond_wait(&s->work_cv, &s->mu);
			continue;
		}
		run(s, ti, 0);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

int xs_workers_start(struct hb_xs *s, struct hb_error *err)
{
	if (!s->cfg.threads)
		return HB_OK;
	s->workers = calloc(s->cfg.threads, sizeof(*s->workers));
	if (!s->workers)
		return hb_error_set(err, HB_ERR_NOMEM, "expert_cache", "out of memory");
	for (unsigned i = 0; i < s->cfg.threads; i++) {
		int e = pthread_create(&s->workers[i], NULL, worker, s);
		if (e) {
			xs_workers_stop(s);
			return hb_error_sys(err, e, "expert_cache.threads", "cannot start I/O thread %u", i);
		}
		s->n_workers++;
	}
	return HB_OK;
}

void xs_workers_stop(struct hb_xs *s)
{
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_broadcast(&s->work_cv);
	pthread_mutex_unlock(&s->mu);
	for (unsigned i = 0; i < s->n_workers; i++)
		pthread_join(s->workers[i], NULL);
	s->n_workers = 0;
	free(s->workers);
	s->workers = NULL;
}

/* ------------------------------------------------------------ test seam */

void hb_xs_test_set_clock(struct hb_xs *s, hb_xs_clock_fn fn, void *ctx)
{
	pthread_mutex_lock(&s->mu);
	s->clock = fn;
	s->clock_ctx = ctx;
	pthread_mutex_unlock(&s->mu);
}

void hb_xs_test_read_chunk(struct hb_xs *s, uint64_t bytes)
{
	if (bytes % XS_ALIGN == 0)
		s->read_chunk = bytes;
}

void hb_xs_test_random_order(struct hb_xs *s, uint64_t seed)
{
	pthread_mutex_lock(&s->mu);
	s->random_order = true;
	s->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
	pthread_mutex_unlock(&s->mu);
}

int hb_xs_test_dispatch(struct hb_xs *s, struct hb_xs_ticket *out)
{
	int32_t ti;

	pthread_mutex_lock(&s->mu);
	ti = xs_dispatch(s);
	if (ti != XS_NONE && out)
		*out = s->tickets[ti].t;
	pthread_mutex_unlock(&s->mu);
	return ti == XS_NONE ? 1 : 0;
}

static int32_t inflight_index(struct hb_xs *s, uint64_t id)
{
	for (uint32_t i = 0; i < s->nslots; i++)
		if (s->tickets[i].live && s->tickets[i].t.id == id && s->tickets[i].t.state == HB_XS_T_INFLIGHT)
			return (int32_t)i;
	return XS_NONE;
}

int hb_xs_test_complete(struct hb_xs *s, uint64_t id)
{
	int32_t ti;

	pthread_mutex_lock(&s->mu);
	ti = inflight_index(s, id);
	if (ti != XS_NONE)
		run(s, ti, 0);
	pthread_mutex_unlock(&s->mu);
	return ti == XS_NONE ? HB_ERR_INVALID : HB_OK;
}

int hb_xs_test_complete_stale(struct hb_xs *s, uint64_t id)
{
	int32_t ti;
	bool published = false;

	pthread_mutex_lock(&s->mu);
	ti = inflight_index(s, id);
	if (ti != XS_NONE)
		published = run(s, ti, 1);
	pthread_mutex_unlock(&s->mu);
	if (ti == XS_NONE)
		return HB_ERR_INVALID;
	return published ? 0 : 1;
}

size_t hb_xs_test_inflight(struct hb_xs *s, uint64_t *ids, size_t cap)
{
	size_t n = 0;
	uint64_t last = 0;

	pthread_mutex_lock(&s->mu);
	/* oldest dispatch first: repeated minimum over start_seq */
	for (;;) {
		int32_t best = XS_NONE;
		for (uint32_t i = 0; i < s->nslots; i++) {
			const struct xs_ticket *tk = &s->tickets[i];
			if (tk->live && tk->t.state == HB_XS_T_INFLIGHT && tk->start_seq > last &&
			    (best == XS_NONE || tk->start_seq < s->tickets[best].start_seq))
				best = (int32_t)i;
		}
		if (best == XS_NONE)
			break;
		last = s->tickets[best].start_seq;
		if (n < cap)
			ids[n] = s->tickets[best].t.id;
		n++;
	}
	pthread_mutex_unlock(&s->mu);
	return n;
}

void hb_xs_test_queued(struct hb_xs *s, unsigned out[3])
{
	pthread_mutex_lock(&s->mu);
	for (int p = 0; p < HB_XS_PRIOS; p++)
		out[p] = s->queued[p];
	pthread_mutex_unlock(&s->mu);
}

size_t hb_xs_test_audit(struct hb_xs *s)
{
	size_t bad = 0;
	uint8_t got[HB_SHA256_BYTES];

	pthread_mutex_lock(&s->mu);
	for (uint32_t i = 0; i < s->nslots; i++) {
		const struct xs_slot *sl = &s->slots[i];
		bool holds = sl->state == HB_XS_SLOT_VALID || sl->state == HB_XS_SLOT_LEASED;
		if (!holds) {
			/* a slot without a record is never what the index finds */
			if (sl->state != HB_XS_SLOT_READING && sl->key != XS_NONE && s->where[sl->key] == (int32_t)i)
				bad++;
			continue;
		}
		if (sl->key == XS_NONE || s->where[sl->key] != (int32_t)i || !sl->buf) {
			bad++;
			continue;
		}
		hb_sha256_buf(sl->buf + sl->rec_off, (size_t)s->record_bytes, got);
		if (memcmp(got, s->record_sha + (size_t)sl->key * HB_SHA256_BYTES, HB_SHA256_BYTES))
			bad++;
	}
	for (uint64_t k = 0; k < (uint64_t)s->layers * s->experts; k++)
		if (s->where[k] != XS_NONE && s->slots[s->where[k]].key != (int32_t)k)
			bad++;
	pthread_mutex_unlock(&s->mu);
	return bad;
}

int hb_xs_test_corrupt(struct hb_xs *s, uint32_t layer, uint32_t expert)
{
	int32_t slot;
	int rc = HB_ERR_NOTFOUND;

	if (layer >= s->layers || expert >= s->experts)
		return HB_ERR_INVALID;
	pthread_mutex_lock(&s->mu);
	slot = s->where[layer * s->experts + expert];
	if (slot != XS_NONE && (s->slots[slot].state == HB_XS_SLOT_VALID || s->slots[slot].state == HB_XS_SLOT_LEASED)) {
		s->slots[slot].buf[s->slots[slot].rec_off] ^= 0x80;
		rc = HB_OK;
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int32_t hb_xs_test_slot_of(struct hb_xs *s, uint32_t layer, uint32_t expert)
{
	int32_t slot;

	if (layer >= s->layers || expert >= s->experts)
		return -1;
	pthread_mutex_lock(&s->mu);
	slot = s->where[layer * s->experts + expert];
	pthread_mutex_unlock(&s->mu);
	return slot;
}
