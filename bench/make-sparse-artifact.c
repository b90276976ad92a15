/*
 * bench/make-sparse-artifact.c: write the sparse full-geometry
 * qwen4exp-flash-next artifact of the admission tests (tests/unit/
 * adm_sparse.c) to a path, for bench/admit.sh.  Prints one line:
 * "file_bytes N allocated_bytes N tensors N ple_pages N header_bytes N".
 */
#include "hb_base.h"
#include "../tests/unit/adm_sparse.h"

#include <sys/stat.h>

int main(int argc, char **argv)
{
	struct adm_sparse_info info;
	struct hb_error err;
	struct stat st;

	if (argc != 2) {
		fprintf(stderr, "usage: make-sparse-artifact PATH\n");
		return 2;
	}
	hb_error_clear(&err);
	if (adm_sparse_build(argv[1], &info, &err)) {
		fprintf(stderr, "make-sparse-artifact: %s: %s\n", err.field, err.msg);
		return 1;
	}
	if (stat(argv[1], &st)) {
		perror(argv[1]);
		return 1;
	}
	printf("file_bytes %" PRIu64 " allocated_bytes %" PRIu64 " tensors %" PRIu64 " ple_pages %" PRIu64
	       " header_bytes %" PRIu64 "\n", info.file_size, (uint64_t)st.st_blocks * 512, info.tensors,
	       info.ple_pages, info.header_bytes);
	return 0;
}
