/*
 * hb_trace_input.c: a set of shards read as one stream (hb_trace_input.h).
 * The shard reader validates every chunk; this file adds the agreement
 * between shards and the per-record checks every analysis relies on.
 */
#include "hb_base.h"
#include "hb_trace_input.h"

#include <fcntl.h>
#include <unistd.h>

static const char *const diag_ids[] = {
#define HB_TRACE_INPUT_ROW_(sym, id, meaning) id,
	HB_TRACE_INPUT_DIAGS(HB_TRACE_INPUT_ROW_)
#undef HB_TRACE_INPUT_ROW_
};

const char *hb_trace_input_diag_id(enum hb_trace_input_diag d)
{
	return (unsigned)d < HB_TRI_COUNT ? diag_ids[d] : NULL;
}

int hb_trace_set_init(struct hb_trace_set *s, const char *const *paths, size_t n,
		      struct hb_error *err)
{
	size_t dashes = 0;

	memset(s, 0, sizeof(*s));
	s->paths = paths;
	s->n = n;
	s->stdin_fd = -1;
	for (size_t i = 0; i < n; i++)
		dashes += !strcmp(paths[i], "-");
	if (dashes > 1)
		return hb_error_diag(err, diag_ids[HB_TRI_STDIN], HB_ERR_INVALID, "-", false, 0,
				     "standard input is named %zu times; it can be read once", dashes);
	if (!n)
		return hb_error_set(err, HB_ERR_INVALID, "trace", "no trace shard given");
	return HB_OK;
}

void hb_trace_set_release(struct hb_trace_set *s)
{
	if (s->stdin_fd >= 0)
		close(s->stdin_fd);
	s->stdin_fd = -1;
}

int hb_trace_set_spool(struct hb_trace_set *s, struct hb_error *err)
{
	const char *dir = getenv("TMPDIR");
	char buf[1 << 16];
	int fd;
	bool any = false;

	for (size_t i = 0; i < s->n; i++)
		any |= !strcmp(s->paths[i], "-");
	if (!any || s->stdin_fd >= 0)
		return HB_OK;
	fd = open(dir && *dir ? dir : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return hb_error_sys(err, errno, dir && *dir ? dir : "/tmp", "cannot create a temporary file in");
	for (;;) {
		ssize_t r = read(STDIN_FILENO, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			close(fd);
			return hb_error_sys(err, e, "-", "cannot read");
		}
		if (r == 0)
			break;
		for (ssize_t off = 0; off < r;) {
			ssize_t w = write(fd, buf + off, (size_t)(r - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				int e = w < 0 ? errno : EIO;
				close(fd);
				return hb_error_sys(err, e, "-", "cannot spool");
			}
			off += w;
		}
	}
	s->stdin_fd = fd;
	return HB_OK;
}

struct shard_ctx {
	struct hb_trace_set *s;
	size_t shard;
	uint64_t *index;
	hb_trace_set_fn fn;
	void *ctx;
	bool checked;
	struct hb_error *err;
};

static int agree(struct hb_trace_set *s, const struct hb_trace_header *h, const char *what,
		 struct hb_error *err)
{
	const struct hb_trace_header *a = &s->h;

	if (!s->have_header) {
		s->h = *h;
		s->have_header = true;
		return HB_OK;
	}
#define MISMATCH_(field)                                                                           \
	if (h->field != a->field)                                                                  \
		return hb_error_diag(err, diag_ids[HB_TRI_MISMATCH], HB_ERR_CONTRACT, what, false, 0, \
				     #field " %u differs from %u in '%s'", h->field, a->field, s->paths[0]);
	MISMATCH_(top_k)
	MISMATCH_(layers)
	MISMATCH_(experts)
#undef MISMATCH_
	if (memcmp(h->artifact, a->artifact, sizeof(h->artifact)))
		return hb_error_diag(err, diag_ids[HB_TRI_MISMATCH], HB_ERR_CONTRACT, what, false, 0,
				     "artifact digest differs from '%s''s", s->paths[0]);
	return HB_OK;
}

static int per_record(void *vctx, const struct hb_trace_header *h, const struct hb_route *r)
{
	struct shard_ctx *c = vctx;
	int rc;

	if (!c->checked) {
		if ((rc = agree(c->s, h, c->s->paths[c->shard], c->err)))
			return rc;
		c->checked = true;
	}
	/* top_k <= 64: a quadratic check costs less than a stamp array here */
	for (uint32_t i = 1; i < h->top_k; i++)
		for (uint32_t j = 0; j < i; j++)
			if (r->ids[i] == r->ids[j])
				return hb_error_diag(c->err, diag_ids[HB_TRI_DUPLICATE], HB_ERR_FORMAT,
						     c->s->paths[c->shard], false, 0,
						     "record %" PRIu64 " (sequence %" PRIu64 ", token %" PRIu64
						     ", layer %u) names expert %u twice",
						     *c->index, r->sequence, r->ordinal, r->layer, r->ids[i]);
	rc = c->fn ? c->fn(c->ctx, c->shard, *c->index, h, r) : 0;
	++*c->index;
	return rc;
}

int hb_trace_set_scan(struct hb_trace_set *s, hb_trace_set_fn fn, void *ctx,
		      uint64_t *records, struct hb_error *err)
{
	uint64_t index = 0;
	int rc = HB_OK;

	for (size_t i = 0; i < s->n && !rc; i++) {
		struct shard_ctx c = { s, i, &index, fn, ctx, false, err };
		struct hb_trace_header h;
		uint64_t got = 0;
		int fd;
		bool own = false;

		if (!strcmp(s->paths[i], "-")) {
			if (s->stdin_fd >= 0) {
				fd = s->stdin_fd;
				if (lseek(fd, 0, SEEK_SET) < 0)
					return hb_error_sys(err, errno, "-", "cannot rewind the spooled copy of");
			} else if (s->stdin_fd == -2) { /* read once, not spooled */
				return hb_error_set(err, HB_ERR_INVALID, "-",
						    "standard input was already read and not spooled");
			} else {
				fd = STDIN_FILENO;
				s->stdin_fd = -2;
			}
		} else {
			fd = open(s->paths[i], O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				return hb_error_sys(err, errno, s->paths[i], "cannot open");
			own = true;
		}
		rc = hb_trace_read(fd, s->paths[i], per_record, &c, &h, &got, err);
		if (!rc && !c.checked)
			rc = agree(s, &h, s->paths[i], err); /* a shard with no records */
		if (own)
			close(fd);
	}
	if (records)
		*records = index;
	return rc;
}
