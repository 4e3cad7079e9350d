//! The INFO ops upstream answers through the device CPU's firmware
//! (CPU-CP), and the DEBUG ioctl, on every device present: each answers
//! with plausible values of an HL-225 (from the model core's firmware, on
//! the simulated devices in the module and on the PCI device behind QEMU
//! alike), and bad arguments get upstream's errno.

use hlrs::{uapi::*, Device};
use hlrs_guest_tests::{expect_errno, guest_only};

const EINVAL: i32 = 22;
const EIO: i32 = 5;
const EFAULT: i32 = 14;
const EOPNOTSUPP: i32 = 95;

fn devices() -> Vec<u32> {
    let v = hlrs::device_indices().expect("/sys/class/accel");
    assert!(!v.is_empty(), "no accel device registered");
    v
}

/// Both nodes of device `i`.
fn nodes(i: u32) -> [Device; 2] {
    [
        Device::open_compute(i).unwrap(),
        Device::open_control(i).unwrap(),
    ]
}

/// HW_IP_INFO's card name and CPU-CP version are what the firmware says of
/// itself (`hl_fw_cpucp_info_get` at the device's creation).
#[test]
fn hw_ip_info_names_the_card_as_its_firmware_does() {
    guest_only!();
    for i in devices() {
        for dev in nodes(i) {
            let hw = dev.hw_ip_info().unwrap();
            assert_eq!(hlrs::c_string(&hw.card_name), "HL-225");
            assert_eq!(
                hlrs::c_string(&hw.cpucp_version),
                "gaudi2-model cpucp stand-in"
            );
        }
    }
}

#[test]
fn clock_rate_is_an_hl225s_mme_clock() {
    guest_only!();
    for i in devices() {
        for dev in nodes(i) {
            let c: HlInfoClkRate = dev.info_value(HL_INFO_CLK_RATE, 0).unwrap();
            assert_eq!((c.cur_clk_rate_mhz, c.max_clk_rate_mhz), (1650, 1650));
        }
    }
}

#[test]
fn utilization_power_and_energy_are_plausible() {
    guest_only!();
    for i in devices() {
        let dev = Device::open_control(i).unwrap();
        let u: HlInfoDeviceUtilization = dev.info_value(HL_INFO_DEVICE_UTILIZATION, 0).unwrap();
        assert!(u.utilization <= 100, "{u:?}");
        let p: HlPowerInfo = dev.info_value(HL_INFO_POWER, 0).unwrap();
        // Between Gaudi2's DC floor (60 W) and an HL-225's 600 W, in mW.
        assert!((60_000..=600_000).contains(&p.power), "{p:?}");
        let e1: HlInfoEnergy = dev.info_value(HL_INFO_TOTAL_ENERGY, 0).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let e2: HlInfoEnergy = dev.info_value(HL_INFO_TOTAL_ENERGY, 0).unwrap();
        assert!(
            e2.total_energy_consumption > e1.total_energy_consumption,
            "{e1:?} {e2:?}"
        );
    }
}

#[test]
fn every_gaudi2_pll_answers_and_a_bad_index_is_eio() {
    guest_only!();
    for i in devices() {
        let dev = Device::open_control(i).unwrap();
        for pll in 0..HL_GAUDI2_PLL_MAX {
            let f: HlPllFrequencyInfo = dev.info_value(HL_INFO_PLL_FREQUENCY, pll).unwrap();
            assert!((100..=3000).contains(&f.output[0]), "PLL {pll}: {f:?}");
        }
        let mme: HlPllFrequencyInfo = dev
            .info_value(HL_INFO_PLL_FREQUENCY, HL_GAUDI2_MME_PLL)
            .unwrap();
        assert_eq!(mme.output[0], 1650);
        // The firmware refuses a PLL Gaudi2 does not have: EIO, nothing copied.
        let mut out = [0xAAu8; 8];
        expect_errno(
            dev.info_into(HL_INFO_PLL_FREQUENCY, HL_GAUDI2_PLL_MAX, &mut out),
            EIO,
        );
        assert_eq!(out, [0xAA; 8]);
    }
}

#[test]
fn pci_counters_and_dram_rows() {
    guest_only!();
    for i in devices() {
        let dev = Device::open_control(i).unwrap();
        let c1: HlInfoPciCounters = dev.info_value(HL_INFO_PCI_COUNTERS, 0).unwrap();
        let c2: HlInfoPciCounters = dev.info_value(HL_INFO_PCI_COUNTERS, 0).unwrap();
        // The firmware's own traffic counts: asking moves bytes.
        assert!(c2.rx_throughput > c1.rx_throughput, "{c1:?} {c2:?}");
        assert!(c1.tx_throughput > 0 && c1.replay_cnt == 0, "{c1:?}");
        let pending: u32 = dev.info_value(HL_INFO_DRAM_PENDING_ROWS, 0).unwrap();
        assert_eq!(pending, 0);
        let mut rows = [0xAAu8; 16];
        dev.info_into(HL_INFO_DRAM_REPLACED_ROWS, 0, &mut rows)
            .unwrap();
        // An 8-byte `cpucp_hbm_row_info`, all zero; nothing past it.
        assert_eq!(&rows[..8], &[0; 8]);
        assert_eq!(&rows[8..], &[0xAA; 8]);
    }
}

#[test]
fn bad_buffers_get_upstreams_errno() {
    guest_only!();
    let ops = [
        HL_INFO_DEVICE_UTILIZATION,
        HL_INFO_CLK_RATE,
        HL_INFO_PCI_COUNTERS,
        HL_INFO_TOTAL_ENERGY,
        HL_INFO_PLL_FREQUENCY,
        HL_INFO_POWER,
        HL_INFO_DRAM_PENDING_ROWS,
        HL_INFO_DRAM_REPLACED_ROWS,
    ];
    for i in devices() {
        let dev = Device::open_compute(i).unwrap();
        let mut out = [0u8; 32];
        for op in ops {
            let base = HlInfoArgs {
                return_pointer: out.as_mut_ptr() as u64,
                return_size: 32,
                op,
                arg: 0,
                pad: 0,
            };
            for bad in [
                HlInfoArgs {
                    return_size: 0,
                    ..base
                },
                HlInfoArgs {
                    return_pointer: 0,
                    ..base
                },
                HlInfoArgs { pad: 1, ..base },
            ] {
                let mut a = bad;
                expect_errno(dev.info_args(&mut a), EINVAL);
            }
            let mut a = HlInfoArgs {
                return_pointer: 8,
                ..base
            };
            expect_errno(dev.info_args(&mut a), EFAULT);
            // A short buffer is truncated, not an error.
            let mut two = [0xAAu8; 4];
            dev.info_into(op, 0, &mut two[..2]).unwrap();
            assert_eq!(&two[2..], &[0xAA; 2]);
        }
    }
}

/// Open the compute node again once the last context's release is over
/// (an open meanwhile answers EBUSY or EAGAIN).
fn reopen(i: u32) -> Device {
    loop {
        match Device::open_compute(i) {
            Ok(d) => return d,
            Err(e) if matches!(hlrs::errno(&e), 11 | 16) => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Err(e) => panic!("open: {e}"),
        }
    }
}

fn debug(dev: &Device, op: u32, enable: u32) -> std::io::Result<()> {
    let mut a = HlDebugArgs {
        op,
        enable,
        ..Default::default()
    };
    dev.debug(&mut a)
}

#[test]
fn debug_mode_and_coresight_ops() {
    guest_only!();
    for i in devices() {
        let dev = Device::open_compute(i).unwrap();
        // Coresight ops outside debug mode: EFAULT, as upstream.
        for op in 0..=HL_DEBUG_OP_TIMESTAMP {
            expect_errno(debug(&dev, op, 1), EFAULT);
        }
        expect_errno(debug(&dev, HL_DEBUG_OP_SET_MODE, 0), EFAULT);
        debug(&dev, HL_DEBUG_OP_SET_MODE, 1).unwrap();
        expect_errno(debug(&dev, HL_DEBUG_OP_SET_MODE, 1), EFAULT);
        // In debug mode: TIMESTAMP does nothing but copy its zeroed output;
        // the trace and monitor blocks are not modelled.
        let mut out = [0xAAu8; 64];
        let mut a = HlDebugArgs {
            op: HL_DEBUG_OP_TIMESTAMP,
            output_ptr: out.as_mut_ptr() as u64,
            output_size: 64,
            ..Default::default()
        };
        dev.debug(&mut a).unwrap();
        assert_eq!(out, [0; 64]);
        let mut a = HlDebugArgs { output_ptr: 8, ..a };
        expect_errno(dev.debug(&mut a), EFAULT);
        for op in HL_DEBUG_OP_ETR..HL_DEBUG_OP_TIMESTAMP {
            expect_errno(debug(&dev, op, 1), EOPNOTSUPP);
        }
        expect_errno(debug(&dev, 8, 1), EINVAL);
        expect_errno(debug(&dev, u32::MAX, 1), EINVAL);
        // Closing the context leaves debug mode.
        drop(dev);
        let dev = reopen(i);
        expect_errno(debug(&dev, HL_DEBUG_OP_TIMESTAMP, 1), EFAULT);
        debug(&dev, HL_DEBUG_OP_SET_MODE, 1).unwrap();
        debug(&dev, HL_DEBUG_OP_SET_MODE, 0).unwrap();
    }
}
