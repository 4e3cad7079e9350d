#!/usr/bin/env bash
# `make test`: bootstrap (if needed) -> kernel (if not cached) -> module ->
# host `cargo test` -> guest run (KUnit + in-guest userspace tests) -> one
# summary ending in `N passed, N failed`. Exits non-zero if anything failed.
#
# Environment: HLRS_PARAMS (module parameters for the guest, e.g. devices=4),
# HLRS_GUEST_STALL / HLRS_GUEST_TIMEOUT / HLRS_GUEST_SLOW (the guest's stall
# limit, its cap, a slowed guest: scripts/guest.sh), HLRS_GUEST_ONLY /
# HLRS_GUEST_SKIP (some in-guest test binaries), HLRS_KVM=1 (try KVM),
# HLRS_PCI_PASS=0 (no second boot with the PCI Gaudi2).
source "$(dirname "$0")/lib.sh"
cd "$HLRS_ROOT"
T0=$(date +%s)
OUT=$HLRS_ROOT/target/test
mkdir -p "$OUT"
HLRS_STEPS=$OUT/steps.tsv
: >"$HLRS_STEPS"

: >"$OUT/lint.txt"
step "bootstrap (toolchain, kernel source)" "$HLRS_ROOT/scripts/bootstrap.sh" >&2
# On a cold machine QEMU with vfio-user (the PCI boot's) builds next to the
# kernel, niced, rather than next to the simulated guest later: the PCI boot,
# which waits on its model process more than on the CPU, then starts with
# the simulated one. A cached build returns at once; pci_prepare below waits
# for this one (scripts/qemu.sh takes a lock).
if [ "${HLRS_PCI_PASS:-1}" = 1 ]; then
	mkdir -p "$OUT/pci"
	scripts/qemu.sh >/dev/null &
	QEMU_EARLY=$!
fi
step "test kernel (cached by version + config)" kernel_dir
export KOBJ
# One compile of the module for the tests and for clippy: clippy-driver
# generates the code rustc does, and reports its lints (and objtool its
# findings) on the way.
module_and_clippy() {
	local rc=0
	scripts/module.sh build-lint "$OUT/clippy.log" || rc=$?
	[ $rc = 2 ] && echo "clippy: warnings in the module (see $OUT/clippy.log)" >>"$OUT/lint.txt"
	[ $rc != 1 ]
}
step "module (clippy-driver: built and linted in one compile)" with_progress module module_and_clippy

lints() {
	scripts/module.sh fmt-check >"$OUT/fmt.log" 2>&1 || echo "rustfmt: formatting differs (make fmt)" >>"$OUT/lint.txt"
	# The floors (no import cycle, nothing imports a higher floor), function
	# and file sizes, and the documentation's links.
	python3 scripts/imports.py --check --sizes >"$OUT/imports.log" 2>&1 ||
		grep -E '^  (up|cycle|size|.*on no floor)' "$OUT/imports.log" | sed 's/^  /structure: /' >>"$OUT/lint.txt"
	python3 scripts/check_links.py >"$OUT/links.log" 2>&1 ||
		echo "docs: broken links (see $OUT/links.log)" >>"$OUT/lint.txt"
	# Every in-guest test that needs several devices runs in the 4-device pass.
	python3 scripts/check_multi_device.py >>"$OUT/lint.txt" 2>&1 || true
}
step "lints (rustfmt, structure, links)" with_progress lints lints

dkms_check() {
	rm -f "$HLRS_ROOT/target/dkms/habanalabs_rs.ko"
	scripts/dkms.sh check >"$OUT/dkms.log" 2>&1 ||
		{ tail -n 20 "$OUT/dkms.log"; echo "dkms: build failed (see $OUT/dkms.log)" >>"$OUT/lint.txt"; }
}
# The DKMS build compiles the module again (one rustc, one CPU) from its own
# copy of the sources: it runs next to the host tests and the in-guest
# binaries, and the simulated guest (which loads its module) waits for it.
step "DKMS build (Debian dkms, against the cached kernel tree)" with_progress "DKMS build" dkms_check &
DKMS_PID=$!

host_tests() {
	cargo test --workspace --exclude hlrs-guest-tests --color never >"$OUT/host.log" 2>&1 ||
		{ tail -n 30 "$OUT/host.log"; return 0; }
}
step "host cargo test" host_tests

step "in-guest binaries (static): tests, CLI" build_guest_bins
wait "$DKMS_PID" || true

# The two boots run at once (a guest under TCG keeps about one of the
# machine's two CPUs busy; the PCI one waits on its model process as often):
# the simulated devices, and a Gaudi2 on PCI running the test binaries the
# list scripts/guest/pci-pass names, the model process behind QEMU's
# vfio-user-pci with the IOMMU on (docs/pci.md). A progress line every 30 s
# names each guest's current test (guest_watch.py); HLRS_PCI_PASS=0 skips
# the second boot.
sim_guest() {
	step "guest run (QEMU)" env HLRS_GUEST_LABEL=guest \
		scripts/guest.sh test "$OUT/console.log" "${HLRS_PARAMS:-}" || true
}
sim_guest &
SIM_PID=$!
# Interrupted (Ctrl-C, CI's TERM): the background guest stops too (its
# watcher stops QEMU, guest.sh the model process).
stop_sim_guest() { pkill -TERM -f "guest_watch.py --log $OUT/console.log" 2>/dev/null || true; }
trap 'stop_sim_guest; exit 143' INT TERM
PCI_ARGS=()
if [ "${HLRS_PCI_PASS:-1}" = 1 ]; then
	mkdir -p "$OUT/pci"
	wait "${QEMU_EARLY:-}" 2>/dev/null || true
	if step "QEMU with vfio-user (cached) and the model process" pci_prepare "$OUT/pci/model-build.log"; then
		step "guest run on the PCI device (QEMU, vfio-user, intel-iommu)" \
			env HLRS_PCI=1 HLRS_GUEST_LABEL="pci guest" \
			scripts/guest.sh test "$OUT/pci/console.log" "pci=1,devices=0" || true
		PCI_ARGS=(--pci-guest "$OUT/pci/console.log")
	else
		echo "PCI pass: no QEMU with vfio-user or no model process (see above)" >>"$OUT/lint.txt"
	fi
fi
wait "$SIM_PID" || true

echo "==> summary (guest console: $OUT/console.log)"
rc=0
python3 scripts/summarize.py --guest "$OUT/console.log" --host "$OUT/host.log" "${PCI_ARGS[@]}" \
	--expect-guest-tests --expect-check dkms_built_module_loads --lint "$OUT/lint.txt" >"$OUT/summary.txt" || rc=$?
echo "==> time per step"
awk -F'\t' '{ printf "    %-60s %7.1f s\n", $1, $2 }' "$HLRS_STEPS"
printf '    %-60s %7d s\n' "make test, in all" "$(($(date +%s) - T0))"
# The verdict `N passed, N failed` is the very last line.
cat "$OUT/summary.txt"
exit $rc
