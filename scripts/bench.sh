#!/usr/bin/env bash
# `make bench`: the KUnit benchmarks (every `bench_*` test) in one guest booted
# without kmemleak (it would measure kmemleak, not the driver): the VA
# allocator at 100 and 100,000 live blocks (with the ratio) and a 64 GiB MAP.
source "$(dirname "$0")/lib.sh"
cd "$HLRS_ROOT"
OUT=$HLRS_ROOT/target/bench
mkdir -p "$OUT"
{
	prepare_module
	HLRS_CMDLINE="kunit.filter_glob=hlrs_*.bench* kmemleak=off" step "guest: benchmarks" \
		scripts/guest.sh bench "$OUT/console.log" "bench_va_blocks=${HLRS_BENCH_BLOCKS:-100000}" || true
} >&2
grep -o 'habanalabs_rs: bench .*' "$OUT/console.log" | sed 's/^habanalabs_rs: //' | sort -u | grep . ||
	{ echo "benchmarks did not report"; exit 1; }
