/*
 * hb_progress.c: terminal-only progress line (see hb_progress.h).
 */
#include "hb_base.h"
#include "hb_progress.h"

#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void hb_progress_init(struct hb_progress *p, int fd, bool quiet,
		      const char *label, uint64_t total)
{
	memset(p, 0, sizeof(*p));
	p->fd = fd;
	p->enabled = !quiet && fd >= 0 && isatty(fd);
	snprintf(p->label, sizeof(p->label), "%s", label ? label : "");
	p->total = total;
}

void hb_progress_force(struct hb_progress *p, bool enabled)
{
	p->enabled = enabled;
}

size_t hb_progress_render(const struct hb_progress *p, char *buf, size_t len)
{
	enum { WIDTH = 30 };
	char bar[WIDTH + 1];
	unsigned pct = 0, fill;
	int n;

	if (p->total)
		pct = (unsigned)((p->done >= p->total ? 1.0 : (double)p->done / (double)p->total) * 100.0);
	fill = pct * WIDTH / 100;
	for (unsigned i = 0; i < WIDTH; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[WIDTH] = '\0';
	n = snprintf(buf, len, "\r%s [%s] %3u%% %" PRIu64 "/%" PRIu64 " MiB",
		     p->label, bar, pct, p->done >> 20, p->total >> 20);
	if (n < 0)
		return 0;
	return (size_t)n >= len ? len - 1 : (size_t)n;
}

static void draw(struct hb_progress *p)
{
	char buf[160];
	size_t n = hb_progress_render(p, buf, sizeof(buf));
	/* Best effort: a failed progress write must never fail the work. */
	if (write(p->fd, buf, n) < 0)
		p->enabled = false;
	p->drawn = true;
}

void hb_progress_add(struct hb_progress *p, uint64_t n)
{
	uint64_t t;

	p->done += n;
	if (!p->enabled)
		return;
	t = now_ns();
	if (p->drawn && t - p->last_draw_ns < 100000000u && p->done < p->total)
		return;
	p->last_draw_ns = t;
	draw(p);
}

void hb_progress_finish(struct hb_progress *p)
{
	static const char erase[] = "\r\033[K";

	if (p->enabled && p->drawn && write(p->fd, erase, sizeof(erase) - 1) < 0)
		p->enabled = false;
	p->drawn = false;
}
