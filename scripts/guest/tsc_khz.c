// SPDX-License-Identifier: GPL-2.0
/*
 * Print the host's TSC frequency in kHz, measured against CLOCK_MONOTONIC_RAW
 * over 200 ms. Under TCG the guest's TSC runs at the host's rate, but a
 * tinyconfig guest has nothing to calibrate it against (no ACPI, so no HPET
 * or PM timer, and the PIT loop fails under emulation): guest.sh passes this
 * as `tsc_early_khz=` so that the guest's clocksource is the TSC, not jiffies.
 */
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

static long long ns_since(const struct timespec *a)
{
	struct timespec b;

	clock_gettime(CLOCK_MONOTONIC_RAW, &b);
	return (b.tv_sec - a->tv_sec) * 1000000000LL + (b.tv_nsec - a->tv_nsec);
}

int main(void)
{
	struct timespec a;
	unsigned long long t0, t1;
	long long ns;

	clock_gettime(CLOCK_MONOTONIC_RAW, &a);
	t0 = __rdtsc();
	while ((ns = ns_since(&a)) < 200000000LL)
		;
	t1 = __rdtsc();
	printf("%llu\n", (t1 - t0) * 1000000ULL / (unsigned long long)ns);
	return 0;
}
