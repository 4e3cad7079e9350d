#!/bin/sh
# The demo walk of `make run`, executed inside the guest after insmod.
# Everything printed here is shown to the person who ran `make run`.
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "The module is loaded"
modinfo habanalabs_rs | grep -E '^(filename|description|license|name|parm|vermagic|import_ns)' | sed 's/^/  /'
echo "  /sys/module/habanalabs_rs/initstate: $(cat /sys/module/habanalabs_rs/initstate)"

say "What the driver said while loading (dmesg)"
dmesg | grep -E '\] habanalabs_rs: (loading|[0-9]+ simulated|device|bench)' | sed 's/^/  /'
echo "  (the KUnit suites also inject failures on purpose; their messages are in the full log)"
echo "  KUnit suites that ran at load: $(dmesg | grep -oE '# Subtest: hlrs_[a-z_0-9]+' | sed 's/# Subtest: //' | tr '\n' ' ')"

say "Device nodes"
ls -l /dev/accel/ 2>/dev/null | sed 's/^/  /' || echo "  (no /dev/accel yet)"
for d in /sys/class/accel/*; do
	[ -e "$d" ] || continue
	printf '  %-22s pci_addr=%s\n' "$(basename "$d")" "$(cat "$d/pci_addr" 2>/dev/null || echo -)"
done

say "Devices (hlrs list)"
hlrs list

say "What device 0 says about itself (hlrs info: INFO ioctl, HW_IP_INFO, on the control node)"
hlrs info

say "DRAM usage of every device (hlrs usage: INFO ioctl, DRAM_USAGE)"
hlrs usage

say "SRAM through upstream's debugfs ABI (hlrs poke/peek: accel/0/addr + data64)"
ls -l /sys/kernel/debug/accel/ /sys/kernel/debug/habanalabs/ | sed 's/^/  /'
hlrs poke 0x1000FFFFFD000100 0xfeedface12345678 --64 && echo "  poke 0x1000fffffd000100 <- 0xfeedface12345678"
echo "  peek 0x1000fffffd000100 (64): $(hlrs peek 0x1000FFFFFD000100 --64)"
echo "  peek 0x1000fffffd000104 (32): $(hlrs peek 0x1000FFFFFD000104)"
echo "  the same through habanalabs/hl0/data32: $(echo 0x1000FFFFFD000104 >/sys/kernel/debug/habanalabs/hl0/addr; cat /sys/kernel/debug/habanalabs/hl0/data32)"
echo "  hlrs dump 0x1000FFFFFD0000F8 0x20 (dma_size + data_dma, one device read):"
hlrs dump 0x1000FFFFFD0000F8 0x20 | sed 's/^/    /'
hlrs scrub 0x5a5a5a5a5a5a5a5a && echo "  hlrs scrub 0x5a5a5a5a5a5a5a5a: user DRAM scrubbed (memory_scrub_val + memory_scrub, no context open)"
echo "  an unmapped DRAM page now reads as the pattern: $(hlrs peek 0x1001000060000000 --64)"
hlrs scrub 0 && echo "  hlrs scrub 0: back to zeros"

say "The device moves bytes: CS + WAIT_CS with LIN_DMA through the engines' MMU (hlrs dma, hlrs cs)"
hlrs dma --size 16777216 2>&1 | sed 's/^/  /'
hlrs dma --size 1048576 --via sram --queue 8 2>&1 | sed 's/^/  /'
echo "  a DMA to an unmapped VA: the CS is aborted and the page fault reported (hlrs dma --fault):"
hlrs dma --fault 2>&1 | sed 's/^/    /'
hlrs cs --count 2000 2>&1 | sed 's/^/  /'
echo "  host memory behind the simulated DRAM after those DMAs (hlrs dram-host): bounded, charged to"
echo "  the opener's memory cgroup, given back when the pages return to the pool:"
hlrs dram-host | sed 's/^/    /'

say "Two queues ordered by the sync manager on the simulated device: a SOB, a monitor and a FENCE, SIGNAL and WAIT CSs, a DMA core a CB programs by its registers, an interrupt wait (hlrs sync)"
hlrs sync 2>&1 | sed 's/^/  /'

say "libhlthunk's all-to-all: 8 EDMAs copying through their lower CPs while the PDMAs copy in and out, one CS ordered by SOBs, monitors and fences (hlrs all-to-all)"
hlrs all-to-all --copies 8 2>&1 | sed 's/^/  /'

say "A walk through the memory ioctls (hlrs walk)"
hlrs walk >/tmp/walk.txt 2>&1
rc=$?
sed 's/^/  /' /tmp/walk.txt
echo "  hlrs walk exit status: $rc"

say "Debugfs after the walk"
for f in dram_pool memory; do
	echo "  -- /sys/kernel/debug/habanalabs_rs/0/$f"
	sed 's/^/     /' /sys/kernel/debug/habanalabs_rs/0/$f
done
echo "  -- /sys/kernel/debug/habanalabs_rs/0/bench (where the walk's host MAP spent its time)"
sed 's/^/     /' /sys/kernel/debug/habanalabs_rs/0/bench

# `make run PCI=1`: the module also drove the Gaudi2 on PCI (the model
# process behind QEMU's vfio-user-pci, the IOMMU on); show it.
if grep -q 'hlrs.pci=1' /proc/cmdline; then
	say "The Gaudi2 on PCI (make run PCI=1: the model process behind vfio-user-pci, intel-iommu on)"
	dmesg | grep -E 'DMAR: IOMMU enabled|\[1da3:1020\]|habanalabs_rs.*(Gaudi2: boot|PCI 1da3)' | sed 's/^/  /'
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat $d/vendor)" = 0x1da3 ] || continue
		echo "  $(basename $d): driver $(basename "$(readlink $d/driver)"), $(ls $d/msi_irqs 2>/dev/null | wc -l) MSI-X vectors, IOMMU group $(basename "$(readlink $d/iommu_group)")"
	done
	# The PCI device: the one whose debugfs `pci` is not "not a PCI device".
	n=$(for d in /sys/kernel/debug/habanalabs_rs/*/pci; do
		[ -f "$d" ] && ! grep -q '^not a PCI device' "$d" && basename "$(dirname $d)"
	done | head -n1)
	if [ -n "$n" ]; then
		echo "  -- register traffic since the probe (debugfs $n/pci)"
		sed 's/^/     /' /sys/kernel/debug/habanalabs_rs/$n/pci
		say "Firmware answers through the CPU queue, by DMA (hlrs sensors --device $n)"
		hlrs sensors --device $n 2>&1 | sed 's/^/  /'
		say "The memory walk on the PCI device: PTEs through BAR4, invalidations by register, host pages through the IOMMU (hlrs walk --device $n)"
		hlrs walk --device $n >/tmp/walk-pci.txt 2>&1
		echo "  hlrs walk --device $n exit status: $? (its last lines:)"
		tail -n 8 /tmp/walk-pci.txt | sed 's/^/  /'
		echo "  -- register traffic after the walk (debugfs $n/pci)"
		sed 's/^/     /' /sys/kernel/debug/habanalabs_rs/$n/pci
		say "A DMA round trip on the PCI device: BDs on the PQs, doorbells, completion by MSI-X 21 (hlrs dma --device $n)"
		hlrs dma --device $n --size 1048576 2>&1 | sed 's/^/  /'
		hlrs dma --device $n --size 1048576 --via sram --queue 8 2>&1 | sed 's/^/  /'
		echo "  a DMA to an unmapped VA: the event queue (MSI-X 0) reports the page fault (hlrs dma --fault):"
		hlrs dma --device $n --fault 2>&1 | sed 's/^/    /'
		say "Two queues ordered by the sync manager: a SOB, a monitor and a FENCE, SIGNAL and WAIT CSs, a DMA core a CB programs by its registers, an interrupt wait (hlrs sync --device $n)"
		hlrs sync --device $n 2>&1 | sed 's/^/  /'
		echo "  -- the CS counters (debugfs $n/pci):"
		grep -E '^(cs_|doorbells|cq_|eq_)' /sys/kernel/debug/habanalabs_rs/$n/pci | sed 's/^/     /'
	fi
fi
