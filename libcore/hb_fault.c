/*
 * hb_fault.c: the fault-injection test seam (see hb_fault.h).
 */
#include "hb_base.h"
#include "hb_fault.h"

#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

static struct {
	atomic_uint calls;
	atomic_uint fire_at; /* 0: disarmed */
	atomic_int errno_value;
} sites[HB_FAULT_SITE_COUNT];
static atomic_int any_armed;
static atomic_ullong events;
static _Atomic unsigned long long kill_at; /* 0: no crash seam */

/* Read once before main: the seam must not depend on which thread or which
 * library call comes first. */
__attribute__((constructor)) static void crash_seam_init(void)
{
	const char *v = getenv("HB_TEST_KILL_AT");
	char *end;
	unsigned long long n;

	if (!v || !*v)
		return;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (!errno && !*end && v[0] != '-')
		atomic_store(&kill_at, n);
}

void hb_fault_arm(enum hb_fault_site site, unsigned nth, int errno_value)
{
	if ((unsigned)site >= HB_FAULT_SITE_COUNT || nth == 0)
		return;
	atomic_store(&sites[site].calls, 0);
	atomic_store(&sites[site].errno_value, errno_value ? errno_value : EIO);
	atomic_store(&sites[site].fire_at, nth);
	atomic_store(&any_armed, 1);
}

void hb_fault_reset(void)
{
	for (size_t i = 0; i < HB_FAULT_SITE_COUNT; i++) {
		atomic_store(&sites[i].calls, 0);
		atomic_store(&sites[i].fire_at, 0);
		atomic_store(&sites[i].errno_value, 0);
	}
	atomic_store(&any_armed, 0);
}

int hb_fault_check(enum hb_fault_site site)
{
	unsigned n;

	if ((unsigned)site >= HB_FAULT_SITE_COUNT)
		return 0;
	n = atomic_fetch_add(&sites[site].calls, 1) + 1;
	{
		unsigned long long ev = atomic_fetch_add(&events, 1) + 1, at = atomic_load(&kill_at);
		if (at && ev == at)
			kill(getpid(), SIGKILL);
	}
	if (!atomic_load(&any_armed))
		return 0;
	if (atomic_load(&sites[site].fire_at) == n)
		return atomic_load(&sites[site].errno_value);
	return 0;
}

void hb_fault_arm_kill(unsigned long long nth)
{
	atomic_store(&kill_at, nth ? atomic_load(&events) + nth : 0);
}

unsigned long long hb_fault_events(void)
{
	return atomic_load(&events);
}

unsigned hb_fault_calls(enum hb_fault_site site)
{
	if ((unsigned)site >= HB_FAULT_SITE_COUNT)
		return 0;
	return atomic_load(&sites[site].calls);
}
