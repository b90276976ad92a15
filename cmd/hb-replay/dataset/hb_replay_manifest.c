/*
 * hb_replay_manifest.c: reading label-shard manifests and listing shards.
 *
 * Owns the read side of the JSON manifest that hb_replay_label.c publishes
 * beside each shard (hb-replay(1) FILES) and the check that a manifest
 * still describes its shard byte for byte (size and SHA-256), and so does
 * its hidden-state sidecar when the manifest records one (--capture-hidden).  It does not
 * interpret routes; parity and merge do.
 */
#include "hb_replay_int.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_parse.h"
#include "hb_sha256.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static int bad(const char *path, const char *field, struct hb_error *err)
{
	char f[HB_ERROR_FIELD_MAX];
	snprintf(f, sizeof(f), "%s", field);
	return hb_error_diag(err, hb_replay_diag_id(HB_RPD_MANIFEST), HB_ERR_FORMAT, f, false, 0,
			     "%s: missing or malformed", path);
}

static int hex32(const cJSON *o, const char *key, uint8_t out[32])
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(s) && strlen(s->valuestring) == 64 ? hb_hex_decode(s->valuestring, out, 32) : -1;
}

/* An owner or thread id: a JSON integer, or a decimal string for an id
 * past 2^53 (hb_json_add_u64 writes those so, and every name's id is one);
 * beside it, the name it was given as, when it was a name, which must map
 * to that id (hb_trace_name_id). */
static int id_field(const cJSON *o, const char *key, uint64_t *id)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key), *nm;
	char nkey[32];

	if (cJSON_IsString(it)) {
		/* only what hb_json_add_u64 writes: canonical, past 2^53 */
		const char *p = it->valuestring;
		if (!*p || *p == '0' || hb_parse_u64(p, id) || *id <= HB_JSON_MAX_EXACT_U64)
			return -1;
	} else if (!it || hb_json_item_u64(it, "", id, NULL)) {
		return -1;
	}
	snprintf(nkey, sizeof(nkey), "%s_name", key);
	if (!(nm = cJSON_GetObjectItemCaseSensitive(o, nkey)))
		return 0;
	{
		uint64_t v;
		if (!cJSON_IsString(nm) || hb_trace_name_id(nm->valuestring, strlen(nm->valuestring), &v) || v != *id)
			return -1;
	}
	return 0;
}

/* The optional "hidden" object: what --capture-hidden captured. */
static int load_hidden(const char *path, const cJSON *h, struct hb_replay_manifest *m, struct hb_error *err)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(h, "format"), *a, *x;
	size_t i = 0;

	if (!cJSON_IsObject(h) || !cJSON_IsString(f) || strcmp(f->valuestring, HB_REPLAY_HIDDEN_FORMAT) ||
	    hb_json_u64(h, "positions_per_sequence", "", &m->hidden_positions, NULL) ||
	    hb_json_u64(h, "hc", "", &m->hidden_hc, NULL) || hb_json_u64(h, "width", "", &m->hidden_width, NULL) ||
	    hb_json_u64(h, "samples", "", &m->hidden_samples, NULL) ||
	    hb_json_u64(h, "bytes", "", &m->hidden_bytes, NULL) || hex32(h, "sha256", m->hidden_sha))
		return bad(path, "hidden", err);
	a = cJSON_GetObjectItemCaseSensitive(h, "layers");
	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) < 1 || cJSON_GetArraySize(a) > (int)HB_REPLAY_CAPTURE_MAX)
		return bad(path, "hidden.layers", err);
	m->n_hidden_layers = (size_t)cJSON_GetArraySize(a);
	if (!(m->hidden_layers = calloc(m->n_hidden_layers, sizeof(uint32_t))))
		return hb_error_set(err, HB_ERR_NOMEM, path, "out of memory");
	cJSON_ArrayForEach(x, a) {
		uint64_t v;
		if (hb_json_item_u64(x, "", &v, NULL) || v > UINT32_MAX || (i && v <= m->hidden_layers[i - 1]))
			return bad(path, "hidden.layers", err);
		m->hidden_layers[i++] = (uint32_t)v;
	}
	m->has_hidden = true;
	return HB_OK;
}

int hb_replay_manifest_load(const char *path, struct hb_replay_manifest *m, struct hb_error *err)
{
	static const char *const keys[] = {"shard", "generation", "top_k", "layers", "experts",
					   "max_shard_bytes", "bytes", "records"};
	uint64_t *slots[] = {&m->shard, &m->generation, &m->top_k, &m->layers, &m->experts,
			     &m->max_shard_bytes, &m->bytes, &m->records};
	cJSON *o = NULL;
	const cJSON *f, *a, *x;
	struct hb_error jerr;
	size_t i = 0;
	int rc;

	memset(m, 0, sizeof(*m));
	hb_error_clear(&jerr);
	if ((rc = hb_json_parse_file(path, 64u << 20, &o, &jerr))) {
		if (rc == HB_ERR_NOMEM || jerr.sys_errno) {
			*err = jerr;
			return rc;
		}
		return hb_error_diag(err, hb_replay_diag_id(HB_RPD_MANIFEST), HB_ERR_FORMAT, path, false, 0,
				     "not a JSON manifest");
	}
	f = cJSON_GetObjectItemCaseSensitive(o, "format");
	if (!cJSON_IsString(f) || strcmp(f->valuestring, HB_REPLAY_MANIFEST_FORMAT)) {
		rc = bad(path, "format", err);
		goto out;
	}
	for (size_t k = 0; k < HB_ARRAY_LEN(keys); k++)
		if (hb_json_u64(o, keys[k], keys[k], slots[k], NULL)) {
			rc = bad(path, keys[k], err);
			goto out;
		}
	if (id_field(o, "owner", &m->owner)) {
		rc = bad(path, "owner", err);
		goto out;
	}
	a = cJSON_GetObjectItemCaseSensitive(o, "worker");
	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 2 ||
	    hb_json_item_u64(cJSON_GetArrayItem(a, 0), "worker", &m->worker, NULL) ||
	    hb_json_item_u64(cJSON_GetArrayItem(a, 1), "worker", &m->workers, NULL)) {
		rc = bad(path, "worker", err);
		goto out;
	}
	if (hex32(o, "artifact", m->artifact) || hex32(o, "text", m->text) || hex32(o, "sha256", m->sha)) {
		rc = bad(path, "artifact/text/sha256", err);
		goto out;
	}
	a = cJSON_GetObjectItemCaseSensitive(o, "ranges");
	if (!cJSON_IsArray(a)) {
		rc = bad(path, "ranges", err);
		goto out;
	}
	m->n_ranges = (size_t)cJSON_GetArraySize(a);
	m->ranges = calloc(m->n_ranges ? m->n_ranges : 1, sizeof(*m->ranges));
	if (!m->ranges) {
		rc = hb_error_set(err, HB_ERR_NOMEM, path, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(x, a) {
		struct hb_replay_range *r = &m->ranges[i++];
		if (hb_json_u64(x, "sequence", "", &r->sequence, NULL) || id_field(x, "owner", &r->owner) ||
		    id_field(x, "thread", &r->thread) || hb_json_u64(x, "turn", "", &r->turn, NULL) ||
		    hb_json_u64(x, "first", "", &r->first, NULL) || hb_json_u64(x, "end", "", &r->end, NULL) ||
		    hb_json_u64(x, "length", "", &r->length, NULL) || hex32(x, "tokens_sha256", r->tokens_sha) ||
		    r->first >= r->end || r->end > r->length) {
			char g[48];
			snprintf(g, sizeof(g), "ranges[%zu]", i - 1);
			rc = bad(path, g, err);
			goto out;
		}
	}
	if ((a = cJSON_GetObjectItemCaseSensitive(o, "hidden")) && (rc = load_hidden(path, a, m, err)))
		goto out;
out:
	cJSON_Delete(o);
	if (rc)
		hb_replay_manifest_release(m);
	return rc;
}

void hb_replay_manifest_release(struct hb_replay_manifest *m)
{
	free(m->ranges);
	m->ranges = NULL;
	m->n_ranges = 0;
	free(m->hidden_layers);
	m->hidden_layers = NULL;
	m->n_hidden_layers = 0;
	m->has_hidden = false;
}

static int check_file(const char *shard, uint64_t bytes, const uint8_t sha[32], struct hb_error *err)
{
	struct hb_sha256 h;
	uint8_t buf[1 << 16], d[32];
	uint64_t size, off = 0;
	int fd, rc;

	if ((rc = hb_open_read(shard, &fd, err)))
		return rc;
	if ((rc = hb_file_size(fd, &size, shard, err)))
		goto out;
	if (size != bytes) {
		rc = hb_error_diag(err, hb_replay_diag_id(HB_RPD_MANIFEST), HB_ERR_DIGEST, shard, false, 0,
				   "%" PRIu64 " bytes, its manifest says %" PRIu64, size, bytes);
		goto out;
	}
	hb_sha256_init(&h);
	while (off < size) {
		size_t n = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
		if ((rc = hb_pread_full(fd, buf, n, off, shard, err)))
			goto out;
		hb_sha256_update(&h, buf, n);
		off += n;
	}
	hb_sha256_final(&h, d);
	if (memcmp(d, sha, 32))
		rc = hb_error_diag(err, hb_replay_diag_id(HB_RPD_MANIFEST), HB_ERR_DIGEST, shard, false, 0,
				   "SHA-256 differs from its manifest's");
out:
	close(fd);
	return rc;
}

int hb_replay_manifest_check_shard(const struct hb_replay_manifest *m, const char *shard, struct hb_error *err)
{
	char side[4096];
	size_t len = strlen(shard);
	int rc;

	if ((rc = check_file(shard, m->bytes, m->sha, err)) || !m->has_hidden)
		return rc;
	if (len < 8 || strcmp(shard + len - 8, ".hbtrace") || len + 2 >= sizeof(side))
		return hb_error_diag(err, hb_replay_diag_id(HB_RPD_MANIFEST), HB_ERR_FORMAT, shard, false, 0,
				     "a shard with hidden states must be named *.hbtrace");
	snprintf(side, sizeof(side), "%.*s.hbhidden", (int)(len - 8), shard);
	if (m->hidden_bytes != hb_replay_hidden_bytes(m->hidden_samples, m->n_hidden_layers, m->hidden_width))
		return hb_error_diag(err, hb_replay_diag_id(HB_RPD_MANIFEST), HB_ERR_FORMAT, side, false, 0,
				     "its manifest's bytes disagree with its samples, layers and width");
	return check_file(side, m->hidden_bytes, m->hidden_sha, err);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void hb_replay_free_list(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

int hb_replay_list_shards(const char *path, char ***out, size_t *n, struct hb_error *err)
{
	struct stat sb;
	DIR *d;
	struct dirent *de;
	size_t cap = 16;
	char **v;

	*out = NULL;
	*n = 0;
	if (stat(path, &sb))
		return hb_error_sys(err, errno, path, "cannot open");
	v = calloc(cap, sizeof(char *));
	if (!v)
		return hb_error_set(err, HB_ERR_NOMEM, path, "out of memory");
	if (!S_ISDIR(sb.st_mode)) {
		v[0] = strdup(path);
		if (!v[0]) {
			free(v);
			return hb_error_set(err, HB_ERR_NOMEM, path, "out of memory");
		}
		*out = v;
		*n = 1;
		return HB_OK;
	}
	if (!(d = opendir(path))) {
		free(v);
		return hb_error_sys(err, errno, path, "cannot list");
	}
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char *p;
		if (de->d_name[0] == '.' || len < 8 || strcmp(de->d_name + len - 8, ".hbtrace"))
			continue;
		if (*n == cap) {
			char **g = realloc(v, 2 * cap * sizeof(char *));
			if (!g)
				goto nomem;
			v = g;
			cap *= 2;
		}
		p = malloc(strlen(path) + len + 2);
		if (!p)
			goto nomem; /* a shorter list would drop shards silently */
		snprintf(p, strlen(path) + len + 2, "%s/%s", path, de->d_name);
		v[(*n)++] = p;
	}
	closedir(d);
	qsort(v, *n, sizeof(char *), cmp_str);
	*out = v;
	return HB_OK;
nomem:
	closedir(d);
	for (size_t i = 0; i < *n; i++)
		free(v[i]);
	free(v);
	*n = 0;
	return hb_error_set(err, HB_ERR_NOMEM, path, "out of memory listing the shards");
}

int hb_replay_read_shards(const char *path, hb_trace_record_fn fn, void *ctx, const int *cb_rc,
			  struct hb_error *err)
{
	char **files = NULL;
	size_t nf = 0;
	int rc;

	if ((rc = hb_replay_list_shards(path, &files, &nf, err)))
		return rc;
	if (!nf)
		rc = hb_error_diag(err, hb_replay_diag_id(HB_RPD_COVERAGE), HB_ERR_NOTFOUND, path, false, 0,
				   "no label shards (*.hbtrace)");
	for (size_t i = 0; i < nf && !rc; i++) {
		struct hb_trace_header h;
		uint64_t records;
		int fd;
		if ((rc = hb_open_read(files[i], &fd, err)))
			break;
		rc = hb_trace_read(fd, files[i], fn, ctx, &h, &records, err);
		close(fd);
		if (*cb_rc)
			rc = *cb_rc;
	}
	hb_replay_free_list(files, nf);
	return rc;
}
