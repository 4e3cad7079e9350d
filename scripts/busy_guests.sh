#!/usr/bin/env bash
# Load the machine as other users' guests would: N (default 2) QEMU guests of
# two vCPUs each, booting the cached test kernel into an init that keeps
# both vCPUs busy, for SECONDS (default 3600) or until killed. Used to
# measure `make test` on a busy machine (docs/testing.md):
#
#   scripts/busy_guests.sh 2 3600 &  make test;  kill %1
source "$(dirname "$0")/lib.sh"
N=${1:-2}
SECONDS_MAX=${2:-3600}
KOBJ=$("$HLRS_ROOT/scripts/kernel.sh")
DIR=$(mktemp -d /tmp/hlrs-busy.XXXXXX)
mkdir -p "$DIR/root/bin"
cp /bin/busybox "$DIR/root/bin/busybox"
cat >"$DIR/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
echo "busy guest: two spinning vCPUs"
(while :; do :; done) &
while :; do :; done
INIT
chmod +x "$DIR/root/init"
(cd "$DIR/root" && find . | cpio -o -H newc --quiet | gzip -1 >"$DIR/initrd.gz")
pids=()
for i in $(seq 1 "$N"); do
	timeout "$SECONDS_MAX" qemu-system-x86_64 -accel tcg,thread=multi -m 256 -smp 2 \
		-nographic -no-reboot -kernel "$KOBJ/arch/x86/boot/bzImage" -initrd "$DIR/initrd.gz" \
		-append "console=ttyS0 panic=-1 quiet" </dev/null >"$DIR/guest$i.log" 2>&1 &
	pids+=($!)
done
echo "busy guests: ${pids[*]} (logs in $DIR)"
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$DIR"' EXIT INT TERM
wait
