#!/usr/bin/env bash
# `make bench`: the VA allocator benchmark at 100 and 100,000 live blocks, in
# a guest booted without kmemleak (it would measure kmemleak, not the allocator);
# one guest run (KUnit suite hlrs_va_range, test bench_*). Prints the ratio.
source "$(dirname "$0")/lib.sh"
cd "$HLRS_ROOT"
OUT=$HLRS_ROOT/target/bench
mkdir -p "$OUT"
{
	prepare_module
	HLRS_CMDLINE="kunit.filter_glob=hlrs_va_range.bench* kmemleak=off" step "guest: VA benchmark" \
		scripts/guest.sh bench "$OUT/console.log" "bench_va_blocks=${HLRS_BENCH_BLOCKS:-100000}" || true
} >&2
grep -m1 -o 'bench va alloc+free: .*' "$OUT/console.log" || { echo "benchmark did not report"; exit 1; }
