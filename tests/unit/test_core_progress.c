/* Unit tests: the progress line stays off the wire unless on a terminal. */
#include "hb_base.h"
#include "harness.h"
#include "hb_progress.h"

#include <fcntl.h>
#include <unistd.h>

static void off_for_pipes_and_quiet(void)
{
	struct hb_progress p;
	int fds[2];
	char buf[64];

	CHECK(pipe(fds) == 0);
	hb_progress_init(&p, fds[1], false, "convert", 100);
	CHECK(!p.enabled); /* a pipe is not a terminal */
	hb_progress_add(&p, 50);
	hb_progress_finish(&p);
	close(fds[1]);
	CHECK_EQ_INT(read(fds[0], buf, sizeof(buf)), 0); /* nothing written */
	close(fds[0]);
	hb_progress_init(&p, fds[1], true, "convert", 100);
	CHECK(!p.enabled);
}

static void renders_when_enabled(void)
{
	struct hb_progress p;
	int fds[2];
	char buf[512];
	ssize_t n;

	CHECK(pipe(fds) == 0);
	hb_progress_init(&p, fds[1], false, "convert", 4u << 20);
	hb_progress_force(&p, true);
	hb_progress_add(&p, 1u << 20);
	hb_progress_finish(&p);
	close(fds[1]);
	n = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	CHECK(n > 0);
	buf[n > 0 ? n : 0] = '\0';
	CHECK_STR(buf, "\rconvert [#######.......................]  25% 1/4 MiB\r\033[K");
}

static void render_bounds(void)
{
	struct hb_progress p;
	char buf[256];

	hb_progress_init(&p, -1, false, "x", 0);
	hb_progress_render(&p, buf, sizeof(buf));
	CHECK(strstr(buf, "  0%") != NULL);
	p.total = 10;
	p.done = 20; /* more than announced: clamp the bar, keep the count */
	hb_progress_render(&p, buf, sizeof(buf));
	CHECK(strstr(buf, "100%") != NULL);
	CHECK_EQ_U64(hb_progress_render(&p, buf, 8), 7);
}

HB_TEST_MAIN(T(off_for_pipes_and_quiet), T(renders_when_enabled), T(render_bounds))
