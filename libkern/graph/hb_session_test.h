/*
 * hb_session_test.h: test seams of the session (AFN-013: not reachable from
 * any binary's options).  Only tests include this header.
 */
#ifndef HB_SESSION_TEST_H
#define HB_SESSION_TEST_H

#include "hb_session.h"

/*
 * Called after every graph stage of a chunk with the stage's name
 * ("embed", "layer3.ple", "layer3.mixer", "layer3.moe", "final", "logits");
 * a non-zero return fails the chunk there.  A hook may also poison the
 * private workspace through hb_session_test_poison to exercise the finite
 * check.
 */
void hb_session_test_fault(struct hb_session *s, int (*fn)(void *ctx, const char *stage), void *ctx);
/* Write NaN into the private streams of the running chunk. */
void hb_session_test_poison(struct hb_session *s);
/* Make the next workspace growth fail as an allocation failure would. */
void hb_session_test_fail_alloc(struct hb_session *s);
/* Each large buffer of the chunk workspace, as it stands (none before a
 * chunk or a reservation): a test asks the kernel which pages are in. */
void hb_session_test_workspace(const struct hb_session *s, void (*each)(void *ctx, const void *p, size_t bytes),
			       void *ctx);

/* Called by hb_model_load between admission and the mapping, with the
 * artifact's path (NULL: nothing): a test replaces the file there to show
 * that the model maps the descriptor admission checked, not the path. */
extern void (*hb_model_after_admission_seam)(const char *path);

#endif
