/*
 * hb_convert_experts.c: the expert store, written as a pipeline.
 *
 * Every record (one expert's gate|up|down, in layer-major, expert-minor
 * order) passes five stages, and a ring of record buffers lets them overlap
 * across the cores with no barrier between records:
 *
 *   produce    read the three source matrices straight into the record's
 *              place in its buffer (bf16 into the bf16 codec: bit-exact, a
 *              vectorised NaN scan) or decode and encode them (affine4,
 *              rounding); any thread: the workers, and the calling thread
 *              whenever its own next step is not ready;
 *   digest     the record's SHA-256 for the metadata table, by the thread
 *              that produced it, while the record is hot in its cache;
 *   payload    the store's whole-payload SHA-256, in order, on the calling
 *              thread; a record it produced itself gets both digests in one
 *              pass (hb_sha256_update2);
 *   write      one thread writes records in order: buffered (the default),
 *              through the page cache in windows of HB_CONV_IO_WINDOW bytes,
 *              each window's writeback started when it is complete and
 *              waited for (sync_file_range) once the next one is complete,
 *              so the device always has one window to write while the next
 *              is filled; or direct (--io direct), with O_DIRECT where the
 *              records are whole 4096-byte blocks and the file system
 *              allows it, each record on the device when its write returns;
 *   read-back  one thread reads every synced record back from the file and
 *              compares it byte for byte with the buffer its digests were
 *              computed from, while later records are produced and written:
 *              buffered, from the page cache that was written back (then the
 *              range is dropped from the cache, POSIX_FADV_DONTNEED, as is
 *              each shard once its last expert matrix is read), so the
 *              device carries the artifact once; direct, from the device.
 *
 * So each byte is read from the source once, hashed once per digest kind,
 * written once and read back once.  The read-back replaces re-hashing the
 * payload after the commit's reopen (hb_convert.c verify_artifact still
 * parses both stores and compares their recorded digests): a record the
 * file does not hold exactly is refused as conv-verify before anything is
 * published.  Bytes are the same whatever the thread count: records go to
 * fixed offsets and both digests see them in file order.
 *
 * Memory: the ring holds a few records and each producing thread one set
 * of float32 matrices (affine4 or rounding only), capped together at
 * PIPE_BUDGET whatever the geometry or --threads.
 */
#include "hb_base.h"
#include "hb_convert_int.h"
#include "hb_io.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DIRECT_ALIGN 4096u
#define MAX_SLOTS 32u
/* Ring and float scratch together.  The memory test (tests/cli/
 * convert-memory.bats) bounds the whole process at 128 MiB with 32 threads;
 * the rest of the converter (dense copy buffer, inventory, PLE rows) needs
 * under 30 MiB of it. */
#define PIPE_BUDGET (80u << 20)

struct xslot {
	uint8_t *buf;                 /* DIRECT_ALIGN-aligned, one record */
	uint64_t rec;                 /* the record held, UINT64_MAX: free */
	bool produced, digest_claimed, digested, written, verified;
	bool exact;                   /* bit-exact bf16 */
	uint64_t src_bytes;
	int rc;                       /* production */
	struct hb_error err;
};

/* Per producing thread: float32 matrices and the raw source bytes. */
struct scratch {
	float *f[3];
	uint8_t *raw;
};

struct xpipe {
	struct hb_conv *c;
	const struct hb_em_layout *l;
	uint64_t base, total, rb, experts;
	size_t alloc;                 /* bytes of one slot */
	uint64_t elems;               /* values of one matrix */
	struct xslot slots[MAX_SLOTS];
	unsigned n_slots;
	int dfd;                      /* O_DIRECT descriptor of the output, or -1 */
	uint64_t window;              /* buffered: records synced at a time */
	uint64_t *shard_left;         /* expert matrices to read, per shard */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t next_produce;        /* lowest record nobody produces yet */
	uint64_t payload_pos;         /* records the payload digest covers */
	uint64_t retire;              /* records whose slots are free again */
	bool failed, quit;
	bool tail_written;            /* the padding after the last record */
	int fail_rc;                  /* write or read-back failure, first */
	struct hb_error fail_err;
	struct hb_sha256 payload;
	uint64_t ns_read, ns_encode, ns_digest, ns_payload, ns_write, ns_readback;
};

static const uint8_t zeros[DIRECT_ALIGN] __attribute__((aligned(DIRECT_ALIGN)));

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static double cpu_seconds(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static struct xslot *slot_of(struct xpipe *p, uint64_t r)
{
	return &p->slots[r % p->n_slots];
}

/* File offset of record r. */
static uint64_t rec_offset(const struct xpipe *p, uint64_t r)
{
	return p->base + p->l->layers[r / p->experts].data_offset + (r % p->experts) * p->rb;
}

/* Zero bytes of the payload before record r (a layer's alignment padding):
 * [*from, rec_offset(r)); *from is where the previous layer ended. */
static uint64_t gap_before(const struct xpipe *p, uint64_t r, uint64_t *from)
{
	uint64_t L = r / p->experts;

	if (r % p->experts)
		return 0;
	*from = L ? p->base + p->l->layers[L - 1].data_offset + p->experts * p->rb
		  : p->base + p->l->data_offset;
	return rec_offset(p, r) - *from;
}

/* mu held.  The first failure wins; everyone stops. */
static void fail_locked(struct xpipe *p, int rc, const struct hb_error *err)
{
	if (!p->failed) {
		p->failed = true;
		p->fail_rc = rc;
		if (err)
			p->fail_err = *err;
	}
	pthread_cond_broadcast(&p->cv);
}

/* mu held.  Free the slots of records every stage is done with. */
static void retire_locked(struct xpipe *p)
{
	bool any = false;

	while (p->retire < p->total && p->retire < p->payload_pos) {
		struct xslot *s = slot_of(p, p->retire);
		if (s->rec != p->retire || !s->digested || !s->verified)
			break;
		s->rec = UINT64_MAX;
		p->retire++;
		any = true;
	}
	if (any)
		pthread_cond_broadcast(&p->cv);
}

/* mu held.  The next record to produce, in order, when its slot is free. */
static struct xslot *claim_produce_locked(struct xpipe *p)
{
	struct xslot *s;

	if (p->failed || p->next_produce >= p->total)
		return NULL;
	s = slot_of(p, p->next_produce);
	if (s->rec != UINT64_MAX)
		return NULL;
	s->rec = p->next_produce++;
	s->produced = s->digest_claimed = s->digested = s->written = s->verified = false;
	s->rc = HB_OK;
	hb_error_clear(&s->err);
	return s;
}

static int scratch_ready(struct xpipe *p, struct scratch *sc, struct hb_error *err)
{
	if (sc->raw)
		return HB_OK;
	for (int k = 0; k < 3; k++)
		if (!(sc->f[k] = malloc((size_t)p->elems * 4)))
			return hb_error_set(err, HB_ERR_NOMEM, "experts", "out of memory");
	if (!(sc->raw = malloc((size_t)p->elems * 4)))
		return hb_error_set(err, HB_ERR_NOMEM, "experts", "out of memory");
	return HB_OK;
}

static void scratch_free(struct scratch *sc)
{
	for (int k = 0; k < 3; k++)
		free(sc->f[k]);
	free(sc->raw);
	memset(sc, 0, sizeof(*sc));
}

/* mu held: after producing s, take its digest if nobody has. */
static bool take_digest_locked(struct xslot *s)
{
	if (s->rc || s->digest_claimed)
		return false;
	s->digest_claimed = true;
	return true;
}

/* Source matrices still to read, per shard: a shard whose last expert
 * matrix has been read leaves the page cache whole (POSIX_FADV_DONTNEED).
 * Not range by range: the records are read in layer and expert order, not
 * in file order, and the kernel's readahead would read a dropped range
 * again. */
static void count_source_reads(struct xpipe *p)
{
	struct hb_conv *c = p->c;

	for (uint64_t r = 0; p->shard_left && r < p->total; r++) {
		struct hb_conv_matrix m[3];
		struct hb_error e;
		if (hb_conv_expert_sources(c, (uint32_t)(r / p->experts), (uint32_t)(r % p->experts), m, &e))
			continue; /* production reports it */
		for (int k = 0; k < 3; k++)
			if (m[k].ref.file >= c->ck.shards && m[k].ref.file < c->ck.shards + c->ck.nshards)
				p->shard_left[m[k].ref.file - c->ck.shards]++;
	}
}

static void source_read(struct xpipe *p, const struct hb_conv_matrix *m)
{
	const struct hb_conv *c = p->c;
	size_t i = (size_t)(m->ref.file - c->ck.shards);

	if (p->shard_left && m->ref.file >= c->ck.shards && i < c->ck.nshards &&
	    __atomic_sub_fetch(&p->shard_left[i], 1, __ATOMIC_ACQ_REL) == 0)
		posix_fadvise(m->ref.file->fd, 0, 0, POSIX_FADV_DONTNEED);
}

/* Stage 1: the record's bytes into s->buf; mu not held.  Returns whether
 * the caller took the record's digest too (want_digest): in the same
 * critical section that publishes the record, since the moment it is
 * published another thread may digest it, the slot may retire and be
 * handed to a later record. */
static bool produce(struct xpipe *p, struct xslot *s, struct scratch *sc, bool want_digest)
{
	bool mine;
	struct hb_conv *c = p->c;
	uint32_t layer = (uint32_t)(s->rec / p->experts), expert = (uint32_t)(s->rec % p->experts);
	const struct hb_em_layer *ly = &p->l->layers[layer];
	struct hb_conv_matrix m[3];
	uint64_t t0 = now_ns(), t_read = 0, t_enc = 0;
	int rc = hb_conv_expert_sources(c, layer, expert, m, &s->err);

	s->exact = c->o->expert_codec == HB_CONV_EXPERTS_BF16;
	s->src_bytes = 0;
	for (int k = 0; !rc && k < 3; k++) {
		s->exact &= m[k].ref.tensor->dtype == HB_DTYPE_BF16;
		s->src_bytes += m[k].rows * m[k].C * hb_dtype_size(m[k].ref.tensor->dtype);
	}
	if (!rc && s->exact) {
		/* bit-exact: the source bytes land where the record holds them */
		for (int k = 0; !rc && k < 3; k++)
			rc = hb_st_read(m[k].ref.file, m[k].ref.tensor,
					(m[k].lead * m[k].R + m[k].row0) * m[k].C * 2,
					s->buf + ly->comp[k].record_offset,
					(size_t)(m[k].rows * m[k].C * 2), &s->err);
		t_read = now_ns() - t0;
		if (!rc)
			rc = hb_em_check_bf16_record(p->l, layer, expert, s->buf, &s->err);
		t_enc = now_ns() - t0 - t_read;
	} else if (!rc && !(rc = scratch_ready(p, sc, &s->err))) {
		for (int k = 0; !rc && k < 3; k++)
			rc = hb_conv_decode_rows(c, &m[k], sc->f[k], sc->raw, &s->err);
		t_read = now_ns() - t0;
		if (!rc)
			rc = hb_em_encode_record(p->l, layer, expert, sc->f[0], sc->f[1], sc->f[2], s->buf,
						 &s->err);
		t_enc = now_ns() - t0 - t_read;
	}
	for (int k = 0; !rc && k < 3; k++)
		source_read(p, &m[k]);
	s->rc = rc;
	pthread_mutex_lock(&p->mu);
	p->ns_read += t_read;
	p->ns_encode += t_enc;
	s->produced = true;
	mine = want_digest && take_digest_locked(s);
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return mine;
}

/* Stage 2 alone: the record digest; mu not held. */
static void digest(struct xpipe *p, struct xslot *s)
{
	uint64_t t0 = now_ns();

	hb_sha256_buf(s->buf, (size_t)p->rb, p->c->record_sha + s->rec * HB_SHA256_BYTES);
	pthread_mutex_lock(&p->mu);
	p->ns_digest += now_ns() - t0;
	s->digested = true;
	retire_locked(p);
	pthread_mutex_unlock(&p->mu);
}

struct worker {
	struct xpipe *p;
	struct scratch sc;
};

static void *producer_main(void *arg)
{
	struct worker *w = arg;
	struct xpipe *p = w->p;

	pthread_mutex_lock(&p->mu);
	while (!p->quit && !p->failed) {
		struct xslot *s = claim_produce_locked(p);
		bool mine;
		if (!s) {
			pthread_cond_wait(&p->cv, &p->mu);
			continue;
		}
		pthread_mutex_unlock(&p->mu);
		mine = produce(p, s, &w->sc, true);
		if (mine)
			digest(p, s);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Wait until record r is in its slot with `flag` set; false when the run
 * failed or quit (or r's production failed: the payload thread reports it). */
static bool wait_for(struct xpipe *p, uint64_t r, size_t flag)
{
	struct xslot *s = slot_of(p, r);
	bool ok;

	pthread_mutex_lock(&p->mu);
	while (!p->failed && !p->quit && !(s->rec == r && *(bool *)((char *)s + flag)))
		pthread_cond_wait(&p->cv, &p->mu);
	ok = !p->failed && !p->quit && s->rec == r && !s->rc;
	pthread_mutex_unlock(&p->mu);
	return ok;
}

static int write_at(struct xpipe *p, const void *buf, size_t len, uint64_t off, struct hb_error *err)
{
	return hb_pwrite_full(p->dfd >= 0 ? p->dfd : p->c->pub.fd, buf, len, off, p->c->o->out_path, err);
}

/* Buffered: wait until [from, to) is on the device (writeback started
 * earlier or now) and hand records [r0, r1) to the read-back (r1 past the
 * last record: the trailing padding too).  Returns a failure. */
static int window_done(struct xpipe *p, uint64_t from, uint64_t to, uint64_t r0, uint64_t r1,
		       struct hb_error *err)
{
	uint64_t t0 = now_ns();
	int rc = HB_OK;

	if (to > from && sync_file_range(p->c->pub.fd, (off_t)from, (off_t)(to - from),
					 SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
					 SYNC_FILE_RANGE_WAIT_AFTER))
		rc = hb_error_sys(err, errno, p->c->o->out_path, "cannot write back the expert records");
	pthread_mutex_lock(&p->mu);
	p->ns_write += now_ns() - t0;
	if (!rc) {
		for (uint64_t q = r0; q < r1 && q < p->total; q++)
			slot_of(p, q)->written = true;
		if (r1 > p->total)
			p->tail_written = true;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

/* The writer.  Record p->total stands for the trailing padding.  Direct:
 * each record is on the device when its write returns.  Buffered: records
 * are written into the page cache and synced in windows of p->window
 * records, two windows in flight: when a window is complete its writeback
 * starts, then the one before it is waited for and handed to the read-back
 * (the ring holds two windows; size_pipe makes room). */
static void *writer_main(void *arg)
{
	struct xpipe *p = arg;
	uint64_t end_all = p->base + p->l->store_size;
	/* the window being filled: records [w0, r], bytes [wfrom, end); the
	 * one whose writeback runs: records [v0, w0), bytes [vfrom, wfrom) */
	uint64_t w0 = 0, v0 = 0, wfrom = p->base + p->l->data_offset, vfrom = wfrom;

	for (uint64_t r = 0; r <= p->total; r++) {
		struct hb_error err;
		uint64_t from = 0, gap = 0, t0, end;
		int rc = HB_OK;

		hb_error_clear(&err);
		if (r < p->total) {
			if (!wait_for(p, r, offsetof(struct xslot, produced)))
				return NULL;
			gap = gap_before(p, r, &from);
		} else {
			from = rec_offset(p, r - 1) + p->rb;
			gap = end_all - from;
		}
		t0 = now_ns();
		/* padding: whole blocks of zeros (aligned when direct) */
		for (uint64_t done = 0; !rc && done < gap;) {
			size_t n = gap - done < sizeof(zeros) ? (size_t)(gap - done) : sizeof(zeros);
			rc = write_at(p, zeros, n, from + done, &err);
			done += n;
		}
		if (!rc && r < p->total)
			rc = write_at(p, slot_of(p, r)->buf, (size_t)p->rb, rec_offset(p, r), &err);
		end = r < p->total ? rec_offset(p, r) + p->rb : end_all;
		pthread_mutex_lock(&p->mu);
		p->ns_write += now_ns() - t0;
		pthread_mutex_unlock(&p->mu);
		if (!rc && p->dfd >= 0) {
			rc = window_done(p, end, end, r, r + 1, &err);
		} else if (!rc && (r + 1 - w0 >= p->window || r == p->total)) {
			/* start this window's writeback, then finish the last */
			t0 = now_ns();
			if (sync_file_range(p->c->pub.fd, (off_t)wfrom, (off_t)(end - wfrom), SYNC_FILE_RANGE_WRITE))
				rc = hb_error_sys(&err, errno, p->c->o->out_path,
						  "cannot write back the expert records");
			pthread_mutex_lock(&p->mu);
			p->ns_write += now_ns() - t0;
			pthread_mutex_unlock(&p->mu);
			if (!rc && w0 > v0)
				rc = window_done(p, vfrom, wfrom, v0, w0, &err);
			v0 = w0, vfrom = wfrom;
			w0 = r + 1, wfrom = end;
			if (!rc && r == p->total)
				rc = window_done(p, vfrom, wfrom, v0, w0, &err);
		}
		if (rc) {
			pthread_mutex_lock(&p->mu);
			fail_locked(p, rc, &err);
			pthread_mutex_unlock(&p->mu);
			return NULL;
		}
	}
	return NULL;
}

static int verify_fail(struct hb_error *err, uint64_t off, const char *what)
{
	return hb_error_diag(err, "conv-verify", HB_ERR_INTERNAL, "expert_store", true, off,
			     "%s read back from the file differs from what was written", what);
}

struct reader {
	struct xpipe *p;
	uint8_t *buf;               /* one record, aligned */
	bool done;                  /* every record and padding byte checked */
	uint64_t dropped;           /* buffered: the cache is dropped below */
};

/* Buffered: what was read back and compared, up to `to`, leaves the page
 * cache, so that it holds about two windows whatever the artifact's size. */
static void drop_verified(struct reader *rd, uint64_t to)
{
	to = to / DIRECT_ALIGN * DIRECT_ALIGN;
	if (rd->p->dfd < 0 && to > rd->dropped) {
		posix_fadvise(rd->p->c->pub.fd, (off_t)rd->dropped, (off_t)(to - rd->dropped),
			      POSIX_FADV_DONTNEED);
		rd->dropped = to;
	}
}

static void *readback_main(void *arg)
{
	struct reader *rd = arg;
	struct xpipe *p = rd->p;
	int fd = p->dfd >= 0 ? p->dfd : p->c->pub.fd;
	const char *path = p->c->o->out_path;

	for (uint64_t r = 0; r <= p->total; r++) {
		struct hb_error err;
		uint64_t from = 0, gap = 0, t0;
		int rc = HB_OK;

		hb_error_clear(&err);
		if (r < p->total) {
			if (!wait_for(p, r, offsetof(struct xslot, written)))
				return NULL;
			gap = gap_before(p, r, &from);
		} else {
			/* the padding after the last record, once written */
			pthread_mutex_lock(&p->mu);
			while (!p->failed && !p->quit && !p->tail_written)
				pthread_cond_wait(&p->cv, &p->mu);
			if (p->failed || p->quit) {
				pthread_mutex_unlock(&p->mu);
				return NULL;
			}
			pthread_mutex_unlock(&p->mu);
			from = rec_offset(p, r - 1) + p->rb;
			gap = p->base + p->l->store_size - from;
		}
		t0 = now_ns();
		for (uint64_t done = 0; !rc && done < gap;) {
			size_t n = gap - done < sizeof(zeros) ? (size_t)(gap - done) : sizeof(zeros);
			rc = hb_pread_full(fd, rd->buf, n, from + done, path, &err);
			if (!rc && memcmp(rd->buf, zeros, n))
				rc = verify_fail(&err, from + done, "layer padding");
			done += n;
		}
		if (!rc && r < p->total) {
			rc = hb_pread_full(fd, rd->buf, (size_t)p->rb, rec_offset(p, r), path, &err);
			if (!rc && p->c->o->readback_hook)
				p->c->o->readback_hook(p->c->o->readback_ctx, r, rd->buf, (size_t)p->rb);
			if (!rc && memcmp(rd->buf, slot_of(p, r)->buf, (size_t)p->rb))
				rc = verify_fail(&err, rec_offset(p, r), "a record");
		}
		if (!rc)
			drop_verified(rd, r < p->total ? rec_offset(p, r) + p->rb : from + gap);
		pthread_mutex_lock(&p->mu);
		p->ns_readback += now_ns() - t0;
		if (rc) {
			fail_locked(p, rc, &err);
		} else if (r < p->total) {
			slot_of(p, r)->verified = true;
			retire_locked(p);
		}
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		if (rc)
			return NULL;
	}
	pthread_mutex_lock(&p->mu);
	rd->done = true;
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* The calling thread: the payload digest in order, helping produce when
 * its next record is not ready.  Returns the first failure. */
static int drive(struct xpipe *p, struct scratch *sc, struct hb_error *err)
{
	struct hb_conv *c = p->c;
	int rc = HB_OK;

	for (uint64_t r = 0; r < p->total && !rc; r++) {
		struct xslot *s = slot_of(p, r);
		uint64_t from, gap = gap_before(p, r, &from), t0;
		bool mine = false;

		t0 = now_ns();
		for (uint64_t done = 0; done < gap;) {
			size_t n = gap - done < sizeof(zeros) ? (size_t)(gap - done) : sizeof(zeros);
			hb_sha256_update(&p->payload, zeros, n);
			done += n;
		}
		pthread_mutex_lock(&p->mu);
		p->ns_payload += now_ns() - t0;
		for (;;) {
			struct xslot *t;
			if (p->failed) {
				rc = p->fail_rc;
				*err = p->fail_err;
				break;
			}
			if (s->rec == r && s->produced) {
				if (s->rc) { /* the first refusal in record order */
					rc = s->rc;
					*err = s->err;
					fail_locked(p, rc, err);
					break;
				}
				mine = take_digest_locked(s);
				break;
			}
			if ((t = claim_produce_locked(p))) {
				/* its own next record waits for the two-digest
				 * pass; a later one is digested now, while hot */
				bool later = t != s;
				pthread_mutex_unlock(&p->mu);
				if (produce(p, t, sc, later))
					digest(p, t);
				pthread_mutex_lock(&p->mu);
				continue;
			}
			pthread_cond_wait(&p->cv, &p->mu);
		}
		pthread_mutex_unlock(&p->mu);
		if (rc)
			break;
		t0 = now_ns();
		if (mine) {
			struct hb_sha256 h;
			hb_sha256_init(&h);
			hb_sha256_update2(&p->payload, &h, s->buf, (size_t)p->rb);
			hb_sha256_final(&h, c->record_sha + r * HB_SHA256_BYTES);
		} else {
			hb_sha256_update(&p->payload, s->buf, (size_t)p->rb);
		}
		if (!s->exact && c->o->expert_codec == HB_CONV_EXPERTS_BF16)
			c->experts_rounded = true;
		hb_conv_progress(c, s->src_bytes);
		c->pipe.src_bytes += s->src_bytes;
		pthread_mutex_lock(&p->mu);
		if (mine) { /* both digests in one pass: half the time to each */
			uint64_t t = now_ns() - t0;
			p->ns_payload += t / 2;
			p->ns_digest += t - t / 2;
			s->digested = true;
		} else {
			p->ns_payload += now_ns() - t0;
		}
		p->payload_pos = r + 1;
		retire_locked(p);
		pthread_mutex_unlock(&p->mu);
	}
	if (!rc) {
		uint64_t from = rec_offset(p, p->total - 1) + p->rb, end = p->base + p->l->store_size;
		for (uint64_t done = 0; from + done < end;) {
			size_t n = end - from - done < sizeof(zeros) ? (size_t)(end - from - done) : sizeof(zeros);
			hb_sha256_update(&p->payload, zeros, n);
			done += n;
		}
		/* every record written and read back (the read-back thread also
		 * checks the trailing padding once retire reaches the end) */
		pthread_mutex_lock(&p->mu);
		while (!p->failed && p->retire < p->total)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->failed) {
			rc = p->fail_rc;
			*err = p->fail_err;
		}
		pthread_mutex_unlock(&p->mu);
	}
	return rc;
}

/* An O_DIRECT descriptor of the output file, when every record and padding
 * range is whole aligned blocks and the file system takes O_DIRECT. */
static int open_direct(const struct xpipe *p)
{
	const struct hb_em_layout *l = p->l;
	char path[64];
	struct stat a, b;
	int fd;

	if (p->c->o->io != HB_CONV_IO_DIRECT || p->rb % DIRECT_ALIGN || p->base % DIRECT_ALIGN ||
	    l->data_offset % DIRECT_ALIGN || l->store_size % DIRECT_ALIGN)
		return -1;
	for (uint32_t L = 0; L < l->layer_count; L++)
		if (l->layers[L].data_offset % DIRECT_ALIGN)
			return -1;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p->c->pub.fd);
	fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &a) || fstat(p->c->pub.fd, &b) || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		close(fd);
		return -1;
	}
	return fd;
}

/* How many records in flight and how many producing threads, within the
 * budget: the ring first (enough to overlap the stages; buffered, two sync
 * windows and the producers' records, half the budget where the producers
 * need float scratch, all of it otherwise), then producers. */
static void size_pipe(struct xpipe *p, unsigned threads, bool need_scratch, bool buffered,
		      unsigned *producers)
{
	uint64_t per_scratch = need_scratch ? p->elems * 16 : 0, used, win;
	uint64_t ring = buffered && !need_scratch ? PIPE_BUDGET : PIPE_BUDGET / 2;
	unsigned n = buffered ? MAX_SLOTS : threads + 3 < MAX_SLOTS ? threads + 3 : MAX_SLOTS;

	while (n > 3 && (uint64_t)(n + 1) * p->alloc > ring)
		n--;
	p->n_slots = n;
	win = (p->c->o->io_window ? p->c->o->io_window : HB_CONV_IO_WINDOW) / p->rb;
	p->window = win < 1 ? 1 : win > n / 2 ? n / 2 : win;
	used = (uint64_t)(n + 1) * p->alloc; /* + the read-back buffer */
	*producers = threads ? threads : 1;
	while (*producers > 1 && used + *producers * per_scratch > PIPE_BUDGET)
		(*producers)--;
}

/* True when the stacks of the threads the pipeline cannot run without (the
 * writer and the read-back thread) still fit in the address space. */
static bool stacks_fit(unsigned threads)
{
	pthread_attr_t a;
	size_t stack = 8u << 20, guard = (size_t)sysconf(_SC_PAGESIZE), bytes;
	void *m;

	if (!pthread_getattr_default_np(&a)) {
		pthread_attr_getstacksize(&a, &stack);
		pthread_attr_getguardsize(&a, &guard);
		pthread_attr_destroy(&a);
	}
	bytes = threads * (stack + guard);
	m = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return false;
	munmap(m, bytes);
	return true;
}

/* The ring's record buffers and the read-back buffer.  An address-space
 * limit (ulimit -v) can refuse the whole ring where a smaller one fits:
 * halve it down to four slots before giving up, and count as refused a
 * ring after which the writer's and the read-back thread's stacks would
 * not fit.  The depth changes how far the stages overlap, not a byte of
 * the output. */
static int alloc_ring(struct xpipe *p, uint8_t **readback)
{
	for (;;) {
		bool ok = true;
		void *m = NULL;

		for (unsigned i = 0; i < p->n_slots; i++) {
			p->slots[i].rec = UINT64_MAX;
			if (posix_memalign(&m, DIRECT_ALIGN, p->alloc))
				m = NULL;
			p->slots[i].buf = m;
			ok = ok && m;
		}
		if (posix_memalign(&m, DIRECT_ALIGN, p->alloc))
			m = NULL;
		*readback = m;
		ok = ok && m && stacks_fit(2);
		if (ok)
			return HB_OK;
		for (unsigned i = 0; i < p->n_slots; i++) {
			free(p->slots[i].buf);
			p->slots[i].buf = NULL;
		}
		free(*readback);
		*readback = NULL;
		if (p->n_slots <= 4)
			return HB_ERR_NOMEM;
		p->n_slots = p->n_slots / 2 < 4 ? 4 : p->n_slots / 2;
		if (p->window > p->n_slots / 2)
			p->window = p->n_slots / 2;
	}
}

int hb_conv_write_experts(struct hb_conv *c, struct hb_error *err_out)
{
	struct hb_error local, *err = &local;
	struct xpipe *p = calloc(1, sizeof(*p));
	unsigned threads = c->o->threads ? c->o->threads : hb_cpu_count(), producers = 1, workers = 0;
	struct worker *wk = NULL;
	struct reader rd = {0};
	struct scratch own = {{0}, 0};
	pthread_t writer, reader, *wt = NULL;
	bool writer_up = false, reader_up = false, need_scratch;
	uint64_t t0 = now_ns();
	double cpu0 = cpu_seconds();
	int rc = HB_OK;

	hb_error_clear(&local);
	c->record_sha = calloc((size_t)c->em_geom.layers * c->em_geom.experts, 32);
	if (!p || !c->record_sha) {
		free(p);
		return hb_error_set(err_out, HB_ERR_NOMEM, "experts", "out of memory");
	}
	p->c = c;
	p->l = &c->em_plan;
	p->base = c->gw.tensors[c->em_index].offset;
	p->experts = c->em_geom.experts;
	p->total = (uint64_t)c->em_geom.layers * c->em_geom.experts;
	p->rb = c->em_plan.record_bytes;
	p->alloc = (size_t)((p->rb + DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN);
	p->elems = c->cfg.hidden_size * c->cfg.moe_intermediate_size;
	p->dfd = -1;
	p->fail_rc = HB_OK;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	need_scratch = c->o->expert_codec != HB_CONV_EXPERTS_BF16;
	for (size_t i = 0; i < c->inv.n && !need_scratch; i++)
		need_scratch = c->inv.entries[i].cls == HB_INV_EXPERT && c->inv.entries[i].src->dtype != HB_DTYPE_BF16;
	size_pipe(p, threads, need_scratch, c->o->io != HB_CONV_IO_DIRECT, &producers);
	rc = alloc_ring(p, &rd.buf);
	wk = calloc(producers, sizeof(*wk));
	wt = calloc(producers, sizeof(*wt));
	if (rc || !wk || !wt) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "experts", "cannot allocate %u record buffers of %zu bytes",
				  p->n_slots, p->alloc);
		goto out;
	}
	for (size_t i = 0; i < c->ck.nshards; i++)
		posix_fadvise(c->ck.shards[i].fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	p->shard_left = calloc(c->ck.nshards ? c->ck.nshards : 1, sizeof(*p->shard_left));
	count_source_reads(p);
	p->dfd = open_direct(p);
	c->direct_io = p->dfd >= 0;
	rd.dropped = p->base + p->l->data_offset;
	hb_sha256_init(&p->payload);
	rd.p = p;
	if (pthread_create(&writer, NULL, writer_main, p)) {
		rc = hb_error_set(err, HB_ERR_INTERNAL, "experts", "cannot start the writer thread");
		goto out;
	}
	writer_up = true;
	if (pthread_create(&reader, NULL, readback_main, &rd)) {
		rc = hb_error_set(err, HB_ERR_INTERNAL, "experts", "cannot start the read-back thread");
		goto out;
	}
	reader_up = true;
	/* the calling thread is one producer; a worker that cannot start
	 * leaves its records to the others */
	for (unsigned i = 0; i + 1 < producers; i++) {
		wk[workers].p = p;
		if (!pthread_create(&wt[workers], NULL, producer_main, &wk[workers]))
			workers++;
	}
	rc = drive(p, &own, err);
out:
	/* on success the writer and the read-back thread finish the trailing
	 * padding by themselves; on failure everyone stops */
	if (rc) {
		pthread_mutex_lock(&p->mu);
		fail_locked(p, rc, err);
		pthread_mutex_unlock(&p->mu);
	}
	if (writer_up)
		pthread_join(writer, NULL);
	if (reader_up)
		pthread_join(reader, NULL);
	pthread_mutex_lock(&p->mu);
	p->quit = true;
	pthread_cond_broadcast(&p->cv);
	if (!rc && p->failed) {
		rc = p->fail_rc;
		*err = p->fail_err;
	}
	if (!rc && !rd.done)
		rc = hb_error_set(err, HB_ERR_INTERNAL, "experts", "the read-back did not finish");
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < workers; i++)
		pthread_join(wt[i], NULL);
	if (!rc) {
		/* the header: the plan with the source identity and the digest */
		uint64_t meta = hb_em_layout_meta_bytes(&c->em_plan);
		uint8_t *hdr = calloc(1, (size_t)c->em_plan.data_offset);
		struct hb_em_layout *f = &c->em_final;
		*f = c->em_plan;
		f->layers = calloc(c->em_plan.layer_count, sizeof(*f->layers));
		if (!hdr || !f->layers) {
			free(f->layers);
			memset(f, 0, sizeof(*f));
			rc = hb_error_set(err, HB_ERR_NOMEM, "experts", "out of memory");
		} else {
			memcpy(f->layers, c->em_plan.layers, sizeof(*f->layers) * c->em_plan.layer_count);
			c->em_finished = true;
			f->source_size = c->inv.bytes[HB_INV_EXPERT];
			memcpy(f->source_sha256, c->inv.digest, HB_SHA256_BYTES);
			f->source_tensors = c->inv.count[HB_INV_EXPERT];
			hb_sha256_final(&p->payload, f->payload_sha256);
			rc = hb_em_serialise(f, hdr, (size_t)meta, err);
			if (!rc)
				rc = hb_pwrite_full(c->pub.fd, hdr, (size_t)c->em_plan.data_offset, p->base,
						    "expert_store.header", err);
			c->experts_read_back = !rc;
		}
		free(hdr);
	}
	c->pipe.ran = true;
	c->pipe.direct_io = c->direct_io;
	c->pipe.producers = workers + 1;
	c->pipe.slots = p->n_slots;
	c->pipe.window_bytes = c->direct_io ? 0 : p->window * p->rb;
	c->pipe.bytes = p->total * p->rb;
	c->pipe.wall_s = (double)(now_ns() - t0) * 1e-9;
	c->pipe.cpu_s = cpu_seconds() - cpu0;
	c->pipe.read_s = (double)p->ns_read * 1e-9;
	c->pipe.encode_s = (double)p->ns_encode * 1e-9;
	c->pipe.digest_s = (double)p->ns_digest * 1e-9;
	c->pipe.payload_s = (double)p->ns_payload * 1e-9;
	c->pipe.write_s = (double)p->ns_write * 1e-9;
	c->pipe.readback_s = (double)p->ns_readback * 1e-9;
	c->pipe.cpus = hb_cpu_count();
	for (unsigned i = 0; wk && i < producers; i++)
		scratch_free(&wk[i].sc);
	scratch_free(&own);
	free(wk);
	free(wt);
	for (unsigned i = 0; i < p->n_slots; i++)
		free(p->slots[i].buf);
	free(rd.buf);
	free(p->shard_left);
	if (p->dfd >= 0)
		close(p->dfd);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
	if (rc && err_out)
		*err_out = local;
	return rc;
}

const char *hb_conv_pipe_bound(const struct hb_conv_pipe_stats *s)
{
	static const char *const names[] = {"source-read", "cpu", "payload-digest", "write", "read-back"};
	double share[5];
	unsigned cores;
	size_t best = 0;

	if (!s->ran || !(s->wall_s > 0))
		return "none";
	cores = s->cpus < s->producers + 1 ? s->cpus : s->producers + 1;
	/* producers blocked in source reads, as a share of their time */
	share[0] = s->read_s / (s->wall_s * s->producers);
	share[1] = s->cpu_s / (s->wall_s * (cores ? cores : 1));
	share[2] = s->payload_s / s->wall_s;
	share[3] = s->write_s / s->wall_s;
	share[4] = s->readback_s / s->wall_s;
	for (size_t i = 1; i < HB_ARRAY_LEN(share); i++)
		if (share[i] > share[best])
			best = i;
	return names[best];
}
