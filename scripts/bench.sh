#!/usr/bin/env bash
# `make bench`: every benchmark in one guest boot (kmemleak off: it would
# measure kmemleak, not the driver), two devices:
#   - KUnit `bench_*` tests at module load: the VA allocator next to drm_mm
#     (best fit) and upstream's list algorithm at 100 .. 100,000 live blocks,
#     fragmentation, a 64 GiB MAP;
#   - `hlrs bench` in the guest: ioctl costs next to a null ioctl, scaling with
#     live host mappings and teardown, the 1 GiB pinning floor, 1 vs 2 threads,
#     command submission, and the PCI device next to a simulated one.
# Prints one table and writes target/bench/results.json (scripts/bench_report.py).
#
# By default on the production-configured kernel (same source and functional
# options as the test kernel, no debug options, optimised for speed; built
# and cached the first time, scripts/kernel.sh), with the module built from
# the same sources into target/bench/module-production. HLRS_KERNEL=debug
# (`make bench KERNEL=debug`) runs on the test kernel instead.
#
#   HLRS_BENCH_ARGS="--live 100,10000"   arguments of `hlrs bench` (default: all)
#   HLRS_BENCH_COMPARE=OLD.json           also print every figure's change from
#                                         that earlier run (`make bench COMPARE=...`)
#   HLRS_BENCH_PCI=0                      no Gaudi2 on PCI (by default the guest
#                                         gets one, and the PCI section compares
#                                         it with a simulated device)
source "$(dirname "$0")/lib.sh"
cd "$HLRS_ROOT"
OUT=$HLRS_ROOT/target/bench
mkdir -p "$OUT"
rm -f "$OUT/objtool-findings"
export HLRS_KERNEL=${HLRS_KERNEL:-production}
# The module's sources copied (changed files only, so rebuilds stay
# incremental) next to their production-kernel objects.
production_module() {
	local src=$OUT/module-production
	mkdir -p "$src/src"
	cp -u "$HLRS_ROOT/Kbuild" "$src/"
	(cd "$HLRS_ROOT/src" && find . \( -name '*.rs' -o -name '*.c' -o -name '*.h' \) \
		-exec cp -u --parents {} "$src/src/" \;)
	# objtool on the production kernel sees other code than on the test
	# kernel (make test's lint): its findings are reported here, and fail
	# `make bench` at the end (core's quicksort once "fell through").
	HLRS_MODULE_SRC=$src "$HLRS_ROOT/scripts/module.sh" build 2>&1 | tee "$OUT/module-production.log" >&2
	if grep -q objtool "$OUT/module-production.log"; then
		echo "objtool: findings on the production kernel (see $OUT/module-production.log)" >&2
		touch "$OUT/objtool-findings"
	fi
}
{
	if [ "$HLRS_KERNEL" = debug ]; then
		prepare_module
	else
		step "bootstrap (toolchain, kernel source)" "$HLRS_ROOT/scripts/bootstrap.sh" >&2
		step "production kernel (cached by version + config)" kernel_dir
		export KOBJ
		step "module for the production kernel" production_module
		export HLRS_MODULE_KO=$OUT/module-production/habanalabs_rs.ko
	fi
	step "in-guest binaries (static): tests, CLI" build_guest_bins
	# A Gaudi2 on PCI next to the two simulated ones (the PCI section:
	# src/user/hlrs-cli/src/bench_pci.rs), when QEMU with vfio-user builds.
	PCI_PARAM=""
	if [ "${HLRS_BENCH_PCI:-1}" = 1 ] &&
		step "QEMU with vfio-user (cached) and the model process" pci_prepare "$OUT/model-build.log"; then
		export HLRS_PCI=1
		PCI_PARAM=",pci=1"
	fi
	HLRS_CMDLINE="kunit.filter_glob=hlrs_*.bench* kmemleak=off hlrs.bench=$(echo "${HLRS_BENCH_ARGS:-}" | tr ' ' '+')" \
		step "guest: benchmarks" \
		scripts/guest.sh bench "$OUT/console.log" "bench_va_blocks=${HLRS_BENCH_BLOCKS:-100000},devices=2,kunit_mappings=1000$PCI_PARAM" || true
} >&2
rc=0
HLRS_BENCH_KERNEL="$HLRS_KERNEL ($(basename "$KOBJ"))" python3 scripts/bench_report.py "$OUT/console.log" "$OUT/results.json" "$OUT/table.md" || rc=$?
if [ -n "${HLRS_BENCH_COMPARE:-}" ]; then
	echo
	python3 scripts/bench_report.py --compare "$HLRS_BENCH_COMPARE" "$OUT/results.json"
fi
if [ -f "$OUT/objtool-findings" ]; then
	echo "objtool: findings on the production kernel (see $OUT/module-production.log)"
	rc=1
fi
exit $rc
