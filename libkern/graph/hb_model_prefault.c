/*
 * hb_model_prefault.c: a resident model's pages read once before its first
 * chunk (hb_model.h says why).  The mapping is cut into equal pieces, one
 * job each; every piece first asks the kernel to map its pages in one call
 * (MADV_POPULATE_READ, Linux 5.14: advice only, so a kernel without it or
 * a refusal leaves the read below to fault them in), then reads one byte a
 * page, which is what makes them resident where the page tables are
 * shadowed.  Reads only: no result depends on it.
 */
#include "hb_base.h"
#include "hb_pool.h"
#include "graph/hb_model.h"

#include <sys/mman.h>
#include <unistd.h>

/* a job's bytes: many jobs a thread, so the threads end together */
#define PREFAULT_PIECE ((size_t)16 << 20)

struct prefault {
	const uint8_t *map;
	size_t len, page;
	size_t skip[2][2]; /* [from, to) ranges not to read (to == from: none) */
};

/* the first offset in [o, end) not skipped (end if none) */
static size_t next_read(const struct prefault *f, size_t o, size_t end)
{
	for (int moved = 1; moved && o < end;) {
		moved = 0;
		for (int i = 0; i < 2; i++)
			if (o >= f->skip[i][0] && o < f->skip[i][1])
				o = f->skip[i][1], moved = 1;
	}
	return o < end ? o : end;
}

/* the end of the read run that starts at o (the next skipped range or end) */
static size_t run_end(const struct prefault *f, size_t o, size_t end)
{
	for (int i = 0; i < 2; i++)
		if (f->skip[i][0] > o && f->skip[i][0] < end)
			end = f->skip[i][0];
	return end;
}

static int prefault_piece(void *ctx, size_t job, unsigned worker)
{
	const struct prefault *f = ctx;
	size_t o = job * PREFAULT_PIECE, end = o + PREFAULT_PIECE;
	const volatile uint8_t *p = f->map;
	uint8_t acc = 0;

	(void)worker;
	if (end > f->len)
		end = f->len;
	for (o = next_read(f, o, end); o < end; o = next_read(f, o, end)) {
		size_t e = run_end(f, o, end), a = o / f->page * f->page;
#ifdef MADV_POPULATE_READ
		(void)madvise((void *)(f->map + a), e - a, MADV_POPULATE_READ);
#endif
		for (; o < e; o = (o / f->page + 1) * f->page)
			acc ^= p[o];
	}
	(void)acc;
	return HB_OK;
}

void hb_model_prefault(const struct hb_model *m, struct hb_pool *pool)
{
	struct prefault f;
	long page = sysconf(_SC_PAGESIZE);
	size_t jobs;

	if (!m->map || !m->map_len)
		return;
	memset(&f, 0, sizeof(f));
	f.map = m->map;
	f.len = m->map_len;
	f.page = page > 0 ? (size_t)page : 4096;
	f.skip[0][0] = m->ple_off, f.skip[0][1] = m->ple_off + m->ple_len;
	if (m->xs) {
		size_t e = (size_t)(m->em_base - m->map);
		f.skip[1][0] = e, f.skip[1][1] = e + m->em_len;
	}
	jobs = (f.len + PREFAULT_PIECE - 1) / PREFAULT_PIECE;
	if (pool)
		hb_pool_run(pool, jobs, prefault_piece, &f);
	else
		for (size_t j = 0; j < jobs; j++)
			prefault_piece(&f, j, 0);
}
