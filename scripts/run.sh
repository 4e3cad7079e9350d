#!/usr/bin/env bash
# `make run`: the main job. Builds what is needed (toolchain, cached kernel,
# module), boots the guest, loads the module, shows it working, unloads it and
# says whether everything was clean.
source "$(dirname "$0")/lib.sh"
cd "$HLRS_ROOT"
OUT=$HLRS_ROOT/target/run
mkdir -p "$OUT"
{
	prepare_module
	step "in-guest binaries (static): CLI" build_guest_bins
	# PCI=1 (HLRS_PCI=1): the guest also gets a Gaudi2 on PCI, the model
	# process behind QEMU's vfio-user-pci (docs/pci.md), and the module
	# drives it (pci=1).
	PARAMS=${HLRS_PARAMS:-kunit_mappings=1000}
	if [ "${HLRS_PCI:-0}" = 1 ]; then
		step "QEMU with vfio-user (cached) and the model process" pci_prepare "$OUT/model-build.log"
		PARAMS="$PARAMS,pci=1"
	fi
	step "boot the guest (QEMU), load the module, run the walk" \
		scripts/guest.sh run "$OUT/console.log" "$PARAMS" || true
} >&2

# Show the walk: what the guest printed between the run markers.
sed -n '/^\(\[ *[0-9.]*\] \)\{0,1\}@@HLRS insmod-end/,/^@@HLRS run rc=/p' "$OUT/console.log" | grep -v '^@@HLRS' | grep -v '^\[ *[0-9.]*\] '
echo
printf '\033[1m== Unloading the module\033[0m\n'
grep -m1 -E '^\[ *[0-9.]+\] habanalabs_rs: unloaded' "$OUT/console.log" | sed 's/^/  /'
grep -q '^@@HLRS rmmod-end rc=0' "$OUT/console.log" && echo "  rmmod: ok" || echo "  rmmod: FAILED"
echo
printf '\033[1m== Verdict\033[0m\n'
if python3 scripts/summarize.py --guest "$OUT/console.log" >"$OUT/verdict.txt"; then
	echo "  clean: module loaded, its KUnit suites passed, it unloaded, and the kernel log"
	echo "  shows no oops, BUG, WARNING, lockdep, KFENCE or kmemleak report."
	echo "  ($(tail -n1 "$OUT/verdict.txt") KUnit tests; full console log: $OUT/console.log)"
else
	sed -n '/== problems/,$p' "$OUT/verdict.txt" | sed 's/^/  /'
	echo "  NOT CLEAN (full console log: $OUT/console.log)"
	exit 1
fi
