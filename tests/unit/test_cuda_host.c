/*
 * The CUDA backend's host side, in make test (no GPU needed): starting it
 * either names a device of compute capability 9.0 or later, or refuses
 * with a message that says why (no device, an older device) and leaves the
 * CPU reference installed, so sessions run as before.  Without nvcc at
 * build time the case skips, saying so.
 */
#include "hb_base.h"
#include "harness.h"
#include "backend/hb_backend.h"
#ifdef HB_WITH_CUDA
#include "hb_cuda.h"
#endif

static void start_names_a_device_or_refuses_clearly(void)
{
#ifdef HB_WITH_CUDA
	struct hb_error err;
	int rc;

	hb_error_clear(&err);
	CHECK(hb_backend_device() == NULL);
	rc = hb_cuda_start(&err);
	if (rc) {
		printf("# refused: %s: %s\n", err.field, err.msg);
		CHECK_EQ_INT(rc, HB_ERR_UNSUPPORTED);
		CHECK(!strcmp(err.field, "cuda.device") || !strcmp(err.field, "cuda.capability"));
		CHECK_EQ_INT(strncmp(err.msg, "cuda: ", 6), 0);
		CHECK(hb_backend_device() == NULL);
		CHECK_EQ_INT(strncmp(hb_backend_name(), "cpu/", 4), 0);
		CHECK_EQ_INT(hb_cuda_error(NULL), HB_OK);
		return;
	}
	printf("# device: %s\n", hb_backend_name());
	CHECK(hb_backend_device() != NULL);
	CHECK_EQ_INT(strncmp(hb_backend_name(), "cuda/sm_", 8), 0);
	hb_cuda_stop();
	CHECK(hb_backend_device() == NULL);
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

HB_TEST_MAIN(T(start_names_a_device_or_refuses_clearly))
