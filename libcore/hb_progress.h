/*
 * hb_progress.h: a progress line for long operations.
 *
 * The only output a library may produce, and only through a file descriptor
 * the binary hands in (stderr by convention).  It is enabled only when that
 * descriptor is a terminal and the user did not ask for quiet (-q), so pipes,
 * CI logs and scripts never see it.  Updates are rate-limited.
 */
#ifndef HB_PROGRESS_H
#define HB_PROGRESS_H

#include "hb_base.h"

struct hb_progress {
	int fd;
	bool enabled;
	char label[48];
	uint64_t total;
	uint64_t done;
	uint64_t last_draw_ns;
	bool drawn;
};

/* enabled = !quiet && isatty(fd).  force_enable is for tests. */
void hb_progress_init(struct hb_progress *p, int fd, bool quiet,
		      const char *label, uint64_t total);
void hb_progress_force(struct hb_progress *p, bool enabled);
void hb_progress_add(struct hb_progress *p, uint64_t n);
/* Erase the line (if one was drawn). */
void hb_progress_finish(struct hb_progress *p);
/* Render the line into buf without writing it (shared with tests). */
size_t hb_progress_render(const struct hb_progress *p, char *buf, size_t len);

#endif
