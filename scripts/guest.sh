#!/usr/bin/env bash
# Build the guest initramfs and boot it under QEMU.
#
#   guest.sh MODE LOG [MODULE_PARAMS]
#
# MODE is `test` (in-guest tests) or `run` (the demo walk). The serial console
# is written to LOG, the guest's live channel (its markers and the in-guest
# tests' output as they happen, serial port 1) to guest-live.log next to it.
# Plain emulation (TCG) by default; HLRS_KVM=1 asks for KVM.
#
# scripts/guest_watch.py runs QEMU and follows the guest's progress:
#   HLRS_GUEST_STALL    seconds without progress before the guest is stopped
#                       as hung (default 300), the failure naming the test
#                       binary and case (or KUnit suite and case) that ran
#   HLRS_GUEST_TIMEOUT  the whole run's cap in seconds (default 3600)
#   HLRS_GUEST_SLOW=N   give the guest 1/N of its CPU time (a slower machine)
# It prints a progress line every 30 s and writes each test case's duration
# to guest-times.tsv next to LOG.
#   HLRS_PCI=1          the guest gets a PCI Gaudi2 served by the model
#                       process over vfio-user (below; docs/pci.md)
source "$(dirname "$0")/lib.sh"
MODE=$1
LOG=$2
PARAMS=${3:-}
KOBJ=${KOBJ:-$(scripts/kernel.sh)}
DIR=$(dirname "$LOG")
# The initramfs is built next to LOG: two guests (make test's simulated and
# PCI passes) may boot at once.
OUT=$DIR/guest-root
rm -rf "$OUT/root"
mkdir -p "$OUT/root"/{bin,sbin,proc,sys,dev,tmp,tests,etc,lib/modules}
cp /bin/busybox "$OUT/root/bin/busybox"
cp "$HLRS_ROOT/scripts/guest/init" "$OUT/root/init"
# What the second pass (devices=4) of the in-guest tests runs.
cp "$HLRS_ROOT/scripts/guest/multi-device" "$OUT/root/multi-device"
# What the pass on the PCI device runs (HLRS_PCI=1).
cp "$HLRS_ROOT/scripts/guest/pci-pass" "$OUT/root/pci-pass"
cp "$HLRS_ROOT/scripts/guest/pci-only" "$OUT/root/pci-only"
# HLRS_MODULE_KO: another build of the module (the production kernel's).
cp "${HLRS_MODULE_KO:-$HLRS_ROOT/habanalabs_rs.ko}" "$OUT/root/habanalabs_rs.ko"
# The same module as built by `dkms build` (scripts/dkms.sh check), if any:
# the guest loads it once at the end.
if [ "$MODE" = test ] && [ "${HLRS_PCI:-0}" != 1 ] && [ -f "$HLRS_ROOT/target/dkms/habanalabs_rs.ko" ]; then
	cp "$HLRS_ROOT/target/dkms/habanalabs_rs.ko" "$OUT/root/habanalabs_rs-dkms.ko"
fi
[ -f "$HLRS_ROOT/scripts/guest/run.sh" ] && cp "$HLRS_ROOT/scripts/guest/run.sh" "$OUT/root/run.sh"
# The static userspace binaries built by build_guest_bins.
BINS=$HLRS_ROOT/target/guest-bin
[ -d "$BINS/tests" ] && cp "$BINS"/tests/* "$OUT/root/tests/"
# A quicker loop: HLRS_GUEST_ONLY="userptr mmap" runs only those test
# binaries, HLRS_GUEST_SKIP="fuzz races" all but those (the summary then
# counts fewer tests; `make test` itself sets neither).
if [ -n "${HLRS_GUEST_ONLY:-}" ]; then
	for t in "$OUT/root/tests"/*; do
		[[ " $HLRS_GUEST_ONLY " == *" $(basename "$t") "* ]] || rm -f "$t"
	done
fi
for t in ${HLRS_GUEST_SKIP:-}; do rm -f "$OUT/root/tests/$t"; done
[ -f "$BINS/hlrs" ] && cp "$BINS/hlrs" "$OUT/root/bin/hlrs"
# A 32-bit (i386) program without libc that drives device 0 through the
# upstream uAPI header built for 32 bit: the nodes' compat_ioctl (guest test
# a_32_bit_process_reaches_info_and_memory_ioctls_on_both_nodes). gcc's -m32
# code generation is all it needs, no 32-bit libc.
KSRC=$(kernel_src)
gcc -m32 -static -nostdlib -nostdinc -ffreestanding -fno-pic -fno-stack-protector \
	-fno-builtin -O2 -w -D__user= -I"$KSRC/include/uapi" -I"$KSRC/arch/x86/include/uapi" \
	-I"$KOBJ/arch/x86/include/generated/uapi" -o "$OUT/root/bin/hl-compat32" \
	"$HLRS_ROOT/tests/guest/compat32/hl_compat32.c" ||
	echo "@@HLRS-HOST hl-compat32 could not be built (gcc -m32)" >&2
chmod +x "$OUT/root/init" "$OUT/root"/*.sh 2>/dev/null || true
(cd "$OUT/root" && find . | cpio -o -H newc --quiet | gzip -1 >"$OUT/initrd.gz")

# The TSC as the guest's clocksource: tinyconfig has no ACPI, so there is no
# HPET/PM timer to calibrate the TSC against under TCG, the PIT loop fails on
# some hosts, and the kernel falls back to jiffies (4 ms resolution), useless
# for benchmarks. The host's TSC rate (the guest's under TCG) is measured once
# and passed as tsc_early_khz; tsc=reliable skips the clocksource watchdog.
TSC_ARGS="tsc=reliable"
TSC_BIN=$HLRS_ROOT/target/tsc-khz
if [ ! -x "$TSC_BIN" ] || [ "$TSC_BIN" -ot "$HLRS_ROOT/scripts/guest/tsc_khz.c" ]; then
	# Built aside and renamed: another guest may be starting too.
	gcc -O2 -o "$TSC_BIN.$$" "$HLRS_ROOT/scripts/guest/tsc_khz.c" 2>/dev/null &&
		mv -f "$TSC_BIN.$$" "$TSC_BIN" || rm -f "$TSC_BIN.$$"
fi
if [ -x "$TSC_BIN" ] && KHZ=$("$TSC_BIN") && [ "${KHZ:-0}" -gt 100000 ]; then
	TSC_ARGS="$TSC_ARGS tsc_early_khz=$KHZ"
fi
# The soft-lockup and hung-task detectors with lowered thresholds (soft
# lockup after 2 x 3 s on a CPU without a schedule, a task blocked 90 s in D
# state; defaults 20 s and 120 s), so a long page-table loop that never
# yields shows up as a report, which fails the run.
LOCKUP_ARGS="watchdog_thresh=3 sysctl.kernel.hung_task_timeout_secs=90"
ACCEL=(-accel tcg,thread=multi)
if [ "${HLRS_KVM:-0}" = 1 ] && [ -w /dev/kvm ]; then ACCEL=(-enable-kvm -cpu host); fi
QEMU=(qemu-system-x86_64)
MACHINE=()
CMDLINE_PCI=""
MODEL_PID=""
# HLRS_PCI=1: the guest gets a Gaudi2 on PCI, the model process
# (src/user/gaudi2-model, HLRS_MODEL_BIN) served over vfio-user to the QEMU
# built by scripts/qemu.sh (HLRS_QEMU), behind an emulated intel-iommu: q35,
# guest RAM in a shared memfd (QEMU hands the model the guest's DMA
# mappings as file descriptors), the IOMMU strict so a page the driver
# unmapped is gone for the device at once.
if [ "${HLRS_PCI:-0}" = 1 ]; then
	QEMU=("${HLRS_QEMU:-$("$HLRS_ROOT/scripts/qemu.sh")}")
	MODEL=${HLRS_MODEL_BIN:-$HLRS_ROOT/target/release/gaudi2-model}
	[ -x "$MODEL" ] || die "no model server at $MODEL (cargo build --release -p gaudi2-model)"
	SOCK=$DIR/gaudi2.sock
	rm -f "$SOCK" "$DIR/gaudi2-stats.txt"
	# A 128 GiB DRAM window (a sparse memfd: only what is written costs
	# memory), so the driver's DRAM is the simulated device's 6 x 16 GiB and
	# the tests' expectations of its geometry hold; QEMU's 64-bit PCI hole
	# grows to fit the BAR.
	"$MODEL" --socket "$SOCK" --stats "$DIR/gaudi2-stats.txt" ${HLRS_MODEL_ARGS:---dram-mib 131072} \
		>"$DIR/gaudi2-model.log" 2>&1 &
	MODEL_PID=$!
	for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
	[ -S "$SOCK" ] || { cat "$DIR/gaudi2-model.log" >&2; die "the model server did not open $SOCK"; }
	MACHINE=(-machine q35,memory-backend=mem -object memory-backend-memfd,id=mem,size=3072M,share=on
		-L /usr/share/seabios -L /usr/share/qemu -nic none
		-global q35-pcihost.pci-hole64-size=512G -device intel-iommu,caching-mode=on
		-device "{\"driver\":\"vfio-user-pci\",\"socket\":{\"path\":\"$SOCK\",\"type\":\"unix\"}}")
	# no_debug_objects: the unbind case and rmmod iounmap the 128 GiB DRAM
	# window, and debugobjects' freed-object check walks it 4 KiB at a time
	# (33.5 M bucket locks: about 110 s per iounmap under TCG, the guest
	# frozen meanwhile). The simulated pass keeps the check.
	CMDLINE_PCI="intel_iommu=on iommu.strict=1 hlrs.pci=1 no_debug_objects"
	# `make test`'s second boot: KUnit ran in the first one. `make run
	# PCI=1` is the only boot: its KUnit suites run as in `make run`.
	if [ "$MODE" = test ]; then
		CMDLINE_PCI="$CMDLINE_PCI kunit.filter_glob=hlrs_none_on_pci"
	fi
fi
stop_model() {
	[ -n "$MODEL_PID" ] || return 0
	# SIGTERM: the model writes its stats and exits (it also exits on its
	# own when QEMU disconnects).
	kill -TERM "$MODEL_PID" 2>/dev/null || true
	for _ in $(seq 50); do kill -0 "$MODEL_PID" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$MODEL_PID" 2>/dev/null || true
	wait "$MODEL_PID" 2>/dev/null || true
}
trap stop_model EXIT
rc=0
python3 "$HLRS_ROOT/scripts/guest_watch.py" --log "$LOG" --live "$DIR/guest-live.log" \
	--stall "${HLRS_GUEST_STALL:-300}" --cap "${HLRS_GUEST_TIMEOUT:-3600}" \
	--slow "${HLRS_GUEST_SLOW:-1}" --src "$HLRS_ROOT/src" --times "$DIR/guest-times.tsv" \
	--label "${HLRS_GUEST_LABEL:-guest}" -- \
	"${QEMU[@]}" "${ACCEL[@]}" "${MACHINE[@]}" -m 3072 -smp 2 -nographic -no-reboot \
	-serial mon:stdio -serial "file:$DIR/guest-live.log" \
	-kernel "$KOBJ/arch/x86/boot/bzImage" -initrd "$OUT/initrd.gz" \
	-append "console=ttyS0 panic=-1 $TSC_ARGS kfence.sample_interval=10 $LOCKUP_ARGS $CMDLINE_PCI hlrs.mode=$MODE hlrs.params=$PARAMS ${HLRS_CMDLINE:-}" || rc=$?
stop_model
exit $rc
