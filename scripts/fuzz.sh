#!/usr/bin/env bash
# `make fuzz`: a long run of the structured ioctl fuzzer (`hlrs fuzz`) inside
# the guest on the debug kernel, on 2 devices with 2 threads each. The kernel
# log is judged like `make test`'s (oops, WARNING, lockdep, KFENCE, kmemleak).
#
#   make fuzz                          5,000,000 calls, seed 1, at most 3000 s (~35 min under TCG)
#   make fuzz FUZZ_ARGS="--seed 7 --calls 20000000 --seconds 3600"
source "$(dirname "$0")/lib.sh"
cd "$HLRS_ROOT"
OUT=$HLRS_ROOT/target/fuzz
mkdir -p "$OUT"
ARGS=${FUZZ_ARGS:---calls 5000000 --seconds 3000}
{
	prepare_module
	step "in-guest binaries (static): tests, CLI" build_guest_bins
	follow() {
		# A progress line every 20 s from the fuzzer's bar in the console log.
		HLRS_GUEST_TIMEOUT=${HLRS_GUEST_TIMEOUT:-3600} \
			HLRS_CMDLINE="hlrs.fuzz=$(echo "--devices 2 --threads 2 $ARGS" | tr ' ' ',')" \
			scripts/guest.sh fuzz "$OUT/console.log" "devices=2,kunit_mappings=1000" &
		local pid=$! t0
		t0=$(date +%s)
		while kill -0 "$pid" 2>/dev/null; do
			sleep 20
			printf '    fuzzer: %s, %d s\n' \
				"$(tr '\r' '\n' <"$OUT/console.log" 2>/dev/null | grep -o '[0-9]*% [0-9]* ops' | tail -n 1)" \
				"$(($(date +%s) - t0))"
		done
		wait "$pid" || true
	}
	step "guest: fuzzer" follow
} >&2
sed -n '/@@HLRS fuzz-begin/,/@@HLRS fuzz-end/p' "$OUT/console.log" | grep -v '^@@HLRS'
python3 scripts/summarize.py --guest "$OUT/console.log" --expect-check fuzz >"$OUT/summary.txt" || true
grep -E "FAILED|problems|^  - " "$OUT/summary.txt" || true
tail -n 1 "$OUT/summary.txt"
grep -q ' 0 failed' <(tail -n 1 "$OUT/summary.txt")
