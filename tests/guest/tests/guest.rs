//! In-guest tests of the loaded module, through the real device nodes.
//!
//! Every test runs against every device present, so the same suite checks
//! `devices=1` and `devices=4` loads (`/init` runs it for both).

use hlrs::{uapi::*, Device, DeviceStatus, Node};
use hlrs_guest_tests::{expect_errno, guest_only, read_trimmed};
use rustix::ioctl::Opcode;
use std::os::unix::fs::FileTypeExt;

const EINVAL: i32 = 22;
const EBUSY: i32 = 16;
const EFAULT: i32 = 14;
const ENOTTY: i32 = 25;
const EOPNOTSUPP: i32 = 95;

/// Every device index; at least one must exist.
fn devices() -> Vec<u32> {
    let v = hlrs::device_indices().expect("/sys/class/accel");
    assert!(!v.is_empty(), "no accel device registered");
    v
}

#[test]
fn module_is_live() {
    guest_only!();
    assert_eq!(
        read_trimmed("/sys/module/habanalabs_rs/initstate").unwrap(),
        "live"
    );
}

#[test]
fn the_module_says_it_only_creates_simulated_devices() {
    guest_only!();
    // The guest has no Habana PCI function: the scan finds none and says so,
    // in the kernel log at load and in debugfs (on a Gaudi host it counts
    // them and leaves them alone).
    let scan = std::fs::read_to_string("/sys/kernel/debug/habanalabs_rs/pci_scan").unwrap();
    assert_eq!(
        scan,
        "no Habana PCI device on this host; creating simulated devices only\n"
    );
}

#[test]
fn kernel_is_not_tainted_by_warnings_or_oopses() {
    guest_only!();
    let taint: u64 = read_trimmed("/proc/sys/kernel/tainted")
        .unwrap()
        .parse()
        .unwrap();
    // TAINT_DIE (D, bit 7) and TAINT_WARN (W, bit 9) must be clear; TAINT_OOT_MODULE
    // (O, bit 12) is expected for an out-of-tree module.
    assert_eq!(taint & (1 << 7), 0, "kernel oopsed (taint {taint:#x})");
    assert_eq!(taint & (1 << 9), 0, "kernel warned (taint {taint:#x})");
}

#[test]
fn both_nodes_exist_with_pci_addr() {
    guest_only!();
    for i in devices() {
        for node in [Node::Compute, Node::Control] {
            let path = hlrs::node_path(node, i);
            let meta = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            assert!(
                meta.file_type().is_char_device(),
                "{path:?} is not a char device"
            );
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            let addr = read_trimmed(&format!("/sys/class/accel/{name}/pci_addr")).unwrap();
            assert_eq!(addr, format!("0000:{:02x}:00.0", i + 1));
            assert_eq!(
                read_trimmed(&format!("/sys/class/accel/{name}/device_type")).unwrap(),
                "GAUDI2"
            );
            assert_eq!(
                read_trimmed(&format!("/sys/class/accel/{name}/status")).unwrap(),
                "operational"
            );
        }
    }
}

#[test]
fn bus_id_lookups_work_both_ways() {
    guest_only!();
    for i in devices() {
        let bus = format!("{:02x}:00.0", i + 1);
        // libhlthunk's short form gets the 0000: domain.
        let dev = Device::open_by_bus_id(&bus).unwrap();
        assert_eq!(dev.index(), i);
        assert_eq!(dev.bus_id().unwrap(), format!("0000:{bus}"));
        let ctl = Device::open_control(i).unwrap();
        assert_eq!(ctl.bus_id().unwrap(), format!("0000:{bus}"));
    }
}

#[test]
fn hw_ip_info_reports_a_gaudi2_on_both_nodes() {
    guest_only!();
    for i in devices() {
        let ctl = Device::open_control(i).unwrap();
        let hw = ctl.hw_ip_info().unwrap();
        assert_eq!(hw.device_id, 0x1020);
        assert_eq!(hw.dram_enabled, 1);
        assert_eq!(hw.dram_page_size, 0x3000_0000);
        assert_eq!(hw.device_mem_alloc_default_page_size, hw.dram_page_size);
        assert_eq!(hw.dram_size % hw.dram_page_size, 0);
        assert_eq!(hw.dram_size, 127 * 0x3000_0000);
        assert_eq!(hw.dram_base_address, 0x1001_0018_0000_0000);
        assert_eq!(hw.reserved_dram_size, hw.dram_page_size);
        assert_eq!(hw.module_id, i);
        assert_eq!(hlrs::c_string(&hw.card_name), "HL-225");
        let cmp = Device::open_compute(i).unwrap();
        assert_eq!(cmp.hw_ip_info().unwrap(), hw);
        // All of it is free, and none of it belongs to the new context.
        let usage = cmp.dram_usage().unwrap();
        assert_eq!(usage.dram_free_mem, hw.dram_size);
        assert_eq!(usage.ctx_dram_mem, 0);
        assert_eq!(ctl.dram_usage().unwrap().dram_free_mem, hw.dram_size);
    }
}

#[test]
fn libhlthunk_setup_ops_answer_as_it_expects() {
    guest_only!();
    for i in devices() {
        for dev in [
            Device::open_control(i).unwrap(),
            Device::open_compute(i).unwrap(),
        ] {
            assert_eq!(dev.device_status().unwrap(), DeviceStatus::Operational);
            assert_ne!(dev.hw_idle().unwrap().is_idle, 0);
            assert_eq!(dev.dev_mem_alloc_page_sizes().unwrap(), 0);
        }
    }
}

#[test]
fn second_compute_open_is_ebusy() {
    guest_only!();
    for i in devices() {
        let first = Device::open_compute(i).unwrap();
        expect_errno(Device::open_compute(i), EBUSY);
        let stats = first.open_stats().unwrap();
        assert_eq!(stats.is_compute_ctx_active, 1);
        drop(first);
        let again = Device::open_compute(i).unwrap();
        assert_eq!(again.open_stats().unwrap().is_compute_ctx_active, 1);
    }
}

#[test]
fn devices_are_independent() {
    guest_only!();
    let all = devices();
    // Every compute node can be open at the same time.
    let opened: Vec<Device> = all
        .iter()
        .map(|&i| Device::open_compute(i).unwrap())
        .collect();
    assert_eq!(opened.len(), all.len());
    for (d, &i) in opened.iter().zip(&all) {
        assert_eq!(d.hw_ip_info().unwrap().module_id, i);
    }
}

#[test]
fn control_node_opens_many_times_and_refuses_memory() {
    guest_only!();
    for i in devices() {
        let _compute = Device::open_compute(i).unwrap();
        let ctls: Vec<Device> = (0..8).map(|_| Device::open_control(i).unwrap()).collect();
        for c in &ctls {
            assert_eq!(c.hw_ip_info().unwrap().device_id, 0x1020);
            let mut args = HlMemArgs {
                op: HL_MEM_OP_ALLOC,
                arg0: 4096,
                ..Default::default()
            };
            expect_errno(c.memory_args(&mut args), ENOTTY);
        }
        // The notifier ops are compute-node only.
        let mut buf = [0u8; 8];
        expect_errno(
            ctls[0].info_into(HL_INFO_GET_EVENTS, 0, &mut buf),
            EOPNOTSUPP,
        );
    }
}

#[test]
fn bad_info_inputs_get_the_upstream_errno() {
    guest_only!();
    for i in devices() {
        for dev in [
            Device::open_control(i).unwrap(),
            Device::open_compute(i).unwrap(),
        ] {
            let mut hw = [0u8; 304];
            let base = HlInfoArgs {
                return_pointer: hw.as_mut_ptr() as u64,
                return_size: 304,
                op: HL_INFO_HW_IP_INFO,
                arg: 0,
                pad: 0,
            };
            let mut a = HlInfoArgs {
                return_size: 0,
                ..base
            };
            expect_errno(dev.info_args(&mut a), EINVAL);
            let mut a = HlInfoArgs {
                return_pointer: 0,
                ..base
            };
            expect_errno(dev.info_args(&mut a), EINVAL);
            let mut a = HlInfoArgs { pad: 1, ..base };
            expect_errno(dev.info_args(&mut a), EINVAL);
            for op in [5, 19, 20, 39, 41, 0xffff_ffff] {
                let mut a = HlInfoArgs { op, ..base };
                expect_errno(dev.info_args(&mut a), EINVAL);
            }
            // A pointer nobody mapped.
            let mut a = HlInfoArgs {
                return_pointer: 8,
                ..base
            };
            expect_errno(dev.info_args(&mut a), EFAULT);
            // A short buffer is truncated, not an error.
            let mut eight = [0xffu8; 16];
            dev.info_into(HL_INFO_HW_IP_INFO, 0, &mut eight[..8])
                .unwrap();
            assert_eq!(&eight[8..], &[0xff; 8]);
            // Firmware ops the model's CPU-CP does not stand in for
            // (tests/guest/tests/cpucp_info.rs has the ones it answers).
            expect_errno(dev.info_into(HL_INFO_DEV_SIGNED, 0, &mut hw), EOPNOTSUPP);
        }
    }
}

#[test]
fn unknown_ioctls_are_refused() {
    guest_only!();
    for i in devices() {
        let dev = Device::open_compute(i).unwrap();
        let mut buf = [0u8; 64];
        // DEBUG outside debug mode (tests/guest/tests/cpucp_info.rs has the rest).
        expect_errno(
            dev.raw_ioctl::<{ DRM_IOCTL_HL_DEBUG as Opcode }>(&mut buf),
            EFAULT,
        );
        // A CS without chunks (tests/guest/tests/cs.rs has the rest).
        expect_errno(
            dev.raw_ioctl::<{ DRM_IOCTL_HL_CS as Opcode }>(&mut buf),
            EINVAL,
        );
        // Past the end of the driver's table.
        expect_errno(
            dev.raw_ioctl::<{ drm_iowr(0x06, 64) as Opcode }>(&mut buf),
            EINVAL,
        );
        // Not a DRM ioctl at all ('H' instead of 'd').
        expect_errno(
            dev.raw_ioctl::<{ (drm_iowr(0, 24) & !0xff00 | (b'H' as u32) << 8) as Opcode }>(
                &mut buf,
            ),
            ENOTTY,
        );
        let ctl = Device::open_control(i).unwrap();
        expect_errno(
            ctl.raw_ioctl::<{ DRM_IOCTL_HL_CS as Opcode }>(&mut buf),
            ENOTTY,
        );
        expect_errno(
            ctl.raw_ioctl::<{ (drm_iowr(0, 24) & !0xff00 | (b'H' as u32) << 8) as Opcode }>(
                &mut buf,
            ),
            ENOTTY,
        );
    }
}

#[test]
fn memory_ops_before_they_exist() {
    guest_only!();
    for i in devices() {
        let dev = Device::open_compute(i).unwrap();
        let mut args = HlMemArgs {
            op: 7,
            ..Default::default()
        };
        expect_errno(dev.memory_args(&mut args), EINVAL);
    }
}

#[test]
fn module_cannot_be_unloaded_while_a_node_is_open() {
    guest_only!();
    for node in [Node::Compute, Node::Control] {
        let dev = Device::open(node, 0).unwrap();
        let st = std::process::Command::new("rmmod")
            .arg("habanalabs_rs")
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(!st.success(), "rmmod succeeded with {node:?} open");
        assert_eq!(
            read_trimmed("/sys/module/habanalabs_rs/initstate").unwrap(),
            "live"
        );
        assert_eq!(dev.hw_ip_info().unwrap().device_id, 0x1020);
    }
}

#[test]
fn the_make_run_walk_succeeds() {
    guest_only!();
    let out = std::process::Command::new("/bin/hlrs")
        .arg("walk")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("hint honoured"), "{text}");
    assert!(text.contains("usage back to idle: yes"), "{text}");
    // The word written through debugfs data64 is in the process's memory.
    assert!(
        text.contains("debugfs data64 <- ") && text.contains("(same)"),
        "{text}"
    );
}

#[test]
fn a_32_bit_process_reaches_info_and_memory_ioctls_on_both_nodes() {
    guest_only!();
    // An i386 program without libc, built against the upstream uAPI header
    // by scripts/guest.sh: INFO on the control node, INFO, ALLOC, MAP,
    // UNMAP and FREE on the compute node of device 0, all through
    // compat_ioctl (without it, every one is ENOTTY).
    let out = std::process::Command::new("/bin/hl-compat32")
        .output()
        .expect("/bin/hl-compat32 (built by scripts/guest.sh with gcc -m32)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("hl-compat32: ok"),
        "{:?}: {text}",
        out.status
    );
}
