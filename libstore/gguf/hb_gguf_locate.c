/*
 * hb_gguf_locate.c: find one tensor's extent by skimming the header.
 *
 * Admission's longest single piece of work is one SHA-256 stream over a
 * tensor's bytes (the PLE page-digest table), which no second core can
 * share; it can only start earlier.  The full reader (hb_gguf_read_fd)
 * copies and validates every key and value on the way to the tensor infos
 * (the 4 MB embedded tokenizer among them), so the tensor is known only
 * after all of that.  This skim reads the same structure but skips string
 * and array bodies by their declared lengths, reading little beyond the
 * keys and the tensor infos.
 *
 * The answer is a hint, never a verdict: it applies the reader's limits and
 * its alignment rule, so whenever hb_gguf_read_fd accepts a file the skim
 * finds the same absolute offset and byte count for the name (tested, and
 * asserted by the gguf fuzz target); on files the reader refuses it may
 * answer anything.  Callers compare it with the parsed tensor before they
 * use anything derived from it.
 */
#include "hb_base.h"
#include "hb_checked.h"
#include "hb_gguf.h"
#include "hb_gguf_int.h"

#include <sys/stat.h>
#include <unistd.h>

struct skim {
	int fd;
	uint64_t file_size, limit, pos, buf_off, bytes_read;
	size_t buf_len;
	unsigned char buf[HB_GGUF_READ_CHUNK];
};

/* n bytes (n <= the window) at the cursor, or NULL.  Advances. */
static const unsigned char *take(struct skim *s, uint64_t n)
{
	uint64_t end;

	if (n > sizeof(s->buf) || n > s->limit || s->pos > s->limit - n)
		return NULL;
	end = s->pos + n;
	if (s->pos < s->buf_off || end > s->buf_off + s->buf_len) {
		uint64_t want = s->limit - s->pos;
		ssize_t got;

		if (want > sizeof(s->buf))
			want = sizeof(s->buf);
		do
			got = pread(s->fd, s->buf, (size_t)want, (off_t)s->pos);
		while (got < 0 && errno == EINTR);
		if (got < 0 || (uint64_t)got < n)
			return NULL;
		s->bytes_read += (uint64_t)got;
		s->buf_off = s->pos;
		s->buf_len = (size_t)got;
	}
	s->pos = end;
	return s->buf + (end - n - s->buf_off);
}

static bool skip(struct skim *s, uint64_t n)
{
	if (n > s->limit || s->pos > s->limit - n)
		return false;
	s->pos += n;
	return true;
}

static bool u32_at(struct skim *s, uint32_t *v)
{
	const unsigned char *p = take(s, 4);

	if (p)
		*v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		     (uint32_t)p[3] << 24;
	return p != NULL;
}

static bool u64_at(struct skim *s, uint64_t *v)
{
	uint32_t lo, hi;

	if (!u32_at(s, &lo) || !u32_at(s, &hi))
		return false;
	*v = (uint64_t)hi << 32 | lo;
	return true;
}

/* A string's length, bounded as the reader bounds it. */
static bool str_len(struct skim *s, uint64_t max, uint64_t *len)
{
	return u64_at(s, len) && *len <= max;
}

static bool skip_value(struct skim *s, uint32_t type)
{
	uint64_t len, count;
	uint32_t et;
	size_t es;

	if (type == HB_GGUF_STRING)
		return str_len(s, HB_GGUF_MAX_STRING, &len) && skip(s, len);
	if (type != HB_GGUF_ARRAY)
		return type < HB_GGUF_TYPE_COUNT && skip(s, hb_gguf_type_size(type));
	if (!u32_at(s, &et) || et >= HB_GGUF_TYPE_COUNT || et == HB_GGUF_ARRAY ||
	    !u64_at(s, &count) || count > HB_GGUF_MAX_ARRAY)
		return false;
	if (et != HB_GGUF_STRING) {
		es = hb_gguf_type_size(et);
		return skip(s, count * es); /* count <= 2^24, es <= 8 */
	}
	for (uint64_t i = 0; i < count; i++)
		if (!str_len(s, HB_GGUF_MAX_STRING, &len) || !skip(s, len))
			return false;
	return true;
}

/* One key/value; *alignment set when the key is general.alignment. */
static bool skim_kv(struct skim *s, uint32_t *alignment)
{
	static const char align_key[] = "general.alignment";
	const unsigned char *key;
	uint64_t len;
	uint32_t type;
	bool is_align;

	if (!str_len(s, HB_GGUF_MAX_KEY, &len) || !(key = take(s, len)))
		return false;
	is_align = len == sizeof(align_key) - 1 && !memcmp(key, align_key, (size_t)len);
	if (!u32_at(s, &type))
		return false;
	if (!is_align)
		return skip_value(s, type);
	/* the reader refuses anything but a u32 power of two */
	return type == HB_GGUF_U32 && u32_at(s, alignment) && hb_gguf_is_pow2(*alignment);
}

int hb_gguf_locate_tensor(int fd, const char *name, uint64_t *offset, uint64_t *nbytes,
			  uint64_t *bytes_read)
{
	struct skim *s = calloc(1, sizeof(*s));
	size_t name_len = strlen(name);
	uint64_t nt, nkv, found_rel = 0, found_bytes = 0, data_start;
	uint32_t alignment = HB_GGUF_DEFAULT_ALIGNMENT, version;
	const unsigned char *p;
	bool found = false, ok = false;
	struct stat st;

	if (!s)
		return HB_ERR_NOMEM;
	s->fd = fd;
	if (fstat(fd, &st) || st.st_size < 0)
		goto out;
	s->file_size = (uint64_t)st.st_size;
	s->limit = s->file_size < HB_GGUF_MAX_HEADER_BYTES ? s->file_size : HB_GGUF_MAX_HEADER_BYTES;
	if (!(p = take(s, 4)) || memcmp(p, HB_GGUF_MAGIC, 4) || !u32_at(s, &version) ||
	    version != HB_GGUF_VERSION || !u64_at(s, &nt) || nt > HB_GGUF_MAX_TENSORS ||
	    !u64_at(s, &nkv) || nkv > HB_GGUF_MAX_KV)
		goto out;
	for (uint64_t i = 0; i < nkv; i++)
		if (!skim_kv(s, &alignment))
			goto out;
	for (uint64_t i = 0; i < nt; i++) {
		uint64_t len, dims[HB_GGUF_MAX_DIMS], rel, bytes;
		uint32_t n_dims, type;
		bool match;

		if (!str_len(s, HB_GGUF_MAX_TENSOR_NAME, &len) || !(p = take(s, len)))
			goto out;
		match = !found && len == name_len && !memcmp(p, name, name_len);
		if (!u32_at(s, &n_dims) || n_dims < 1 || n_dims > HB_GGUF_MAX_DIMS)
			goto out;
		for (uint32_t d = 0; d < n_dims; d++)
			if (!u64_at(s, &dims[d]))
				goto out;
		if (!u32_at(s, &type) || !u64_at(s, &rel) || rel % alignment)
			goto out;
		if (match) {
			if (hb_gguf_tensor_bytes(type, n_dims, dims, &bytes))
				goto out;
			found = true;
			found_rel = rel;
			found_bytes = bytes;
		}
	}
	if (!found || hb_align_up_u64(s->pos, alignment, &data_start) ||
	    data_start > HB_GGUF_MAX_HEADER_BYTES || hb_add_u64(data_start, found_rel, offset) ||
	    !hb_range_inside(*offset, found_bytes, s->file_size))
		goto out;
	*nbytes = found_bytes;
	ok = true;
out:
	if (bytes_read)
		*bytes_read = s->bytes_read;
	free(s);
	return ok ? HB_OK : HB_ERR_NOTFOUND;
}
