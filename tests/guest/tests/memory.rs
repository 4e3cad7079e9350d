//! In-guest tests of device memory (ALLOC / FREE) through the real ioctl.

use hlrs::{errno, uapi::*, Device};
use hlrs_guest_tests::{expect_errno, guest_only};

const EINVAL: i32 = 22;
const ENOMEM: i32 = 12;
const EBUSY: i32 = 16;
const EAGAIN: i32 = 11;
const PAGE: u64 = 0x3000_0000;
const PAGES: u64 = 127;

fn free_mem(d: &Device) -> u64 {
    d.dram_usage().unwrap().dram_free_mem
}

#[test]
fn alloc_and_free_contiguous_and_not() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let start = free_mem(&d);
    assert_eq!(start, PAGES * PAGE);
    let a = d.alloc(3 * PAGE, HL_MEM_CONTIGUOUS).unwrap();
    let b = d.alloc(PAGE + 1, 0).unwrap();
    let c = d.alloc(1, HL_MEM_SHARED).unwrap();
    assert_eq!((a, b, c), (1, 2, 3));
    let u = d.dram_usage().unwrap();
    assert_eq!(u.ctx_dram_mem, 6 * PAGE);
    assert_eq!(u.dram_free_mem, start - 6 * PAGE);
    d.free(b).unwrap();
    assert_eq!(d.dram_usage().unwrap().ctx_dram_mem, 4 * PAGE);
    // The lowest free handle is reused.
    assert_eq!(d.alloc(1, 0).unwrap(), 2);
    for h in [a, 2, c] {
        d.free(h).unwrap();
    }
    assert_eq!(free_mem(&d), start);
    assert_eq!(d.dram_usage().unwrap().ctx_dram_mem, 0);
}

#[test]
fn fill_the_pool_then_free_everything() {
    guest_only!();
    for flags in [0, HL_MEM_CONTIGUOUS] {
        let d = Device::open_compute(0).unwrap();
        let start = free_mem(&d);
        let mut handles = Vec::new();
        loop {
            match d.alloc(PAGE, flags) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    assert_eq!(errno(&e), ENOMEM);
                    break;
                }
            }
        }
        assert_eq!(handles.len() as u64, PAGES);
        assert_eq!(free_mem(&d), 0);
        for h in handles {
            d.free(h).unwrap();
        }
        assert_eq!(free_mem(&d), start);
        // The whole pool in one contiguous allocation works again.
        let all = d.alloc(PAGES * PAGE, HL_MEM_CONTIGUOUS).unwrap();
        expect_errno(d.alloc(1, 0), ENOMEM);
        d.free(all).unwrap();
    }
}

#[test]
fn bad_alloc_and_free_inputs() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let start = free_mem(&d);
    // Size 0: EINVAL and the union comes back zeroed (out.handle == 0).
    let mut a = HlMemArgs {
        arg0: 0,
        arg1: 77,
        op: HL_MEM_OP_ALLOC,
        ..Default::default()
    };
    expect_errno(d.memory_args(&mut a), EINVAL);
    assert_eq!(a, HlMemArgs::default());
    // Sizes whose rounding overflows (upstream wraps them to 0 pages).
    expect_errno(d.alloc(u64::MAX, 0), EINVAL);
    expect_errno(d.alloc(u64::MAX - PAGE + 2, HL_MEM_CONTIGUOUS), EINVAL);
    // More than the pool, also absurdly more (nothing may be sized by it).
    expect_errno(d.alloc(PAGES * PAGE + 1, 0), ENOMEM);
    expect_errno(d.alloc(1 << 62, 0), ENOMEM);
    expect_errno(d.alloc(1 << 62, HL_MEM_CONTIGUOUS), ENOMEM);
    expect_errno(d.alloc(PAGES * PAGE + 1, HL_MEM_CONTIGUOUS), ENOMEM);
    // Unknown flag bits (upstream ignores them).
    for f in [0x10, 0x20, 0x8000_0000] {
        expect_errno(d.alloc(1, f), EINVAL);
    }
    // FREE of handles that do not exist, including 0.
    for h in [0, 1, 5, u64::from(u32::MAX)] {
        expect_errno(d.free(h), EINVAL);
    }
    assert_eq!(free_mem(&d), start);
    // FREE looks only at the low 32 bits of the handle.
    let h = d.alloc(1, 0).unwrap();
    d.free((1 << 32) | h).unwrap();
    assert_eq!(free_mem(&d), start);
    // ALLOC ignores alloc.page_size.
    for ps in [3u64, 4096, 1 << 40] {
        let mut a = HlMemArgs {
            arg0: 1,
            arg1: ps,
            op: HL_MEM_OP_ALLOC,
            ..Default::default()
        };
        d.memory_args(&mut a).unwrap();
        assert_eq!(d.dram_usage().unwrap().ctx_dram_mem, PAGE);
        d.free(a.out_u64()).unwrap();
    }
}

#[test]
fn close_with_live_allocations_frees_them() {
    guest_only!();
    let start;
    {
        let d = Device::open_compute(0).unwrap();
        start = free_mem(&d);
        d.alloc(5 * PAGE, HL_MEM_CONTIGUOUS).unwrap();
        d.alloc(7 * PAGE, HL_MEM_SHARED).unwrap();
        d.alloc(1, 0).unwrap();
        assert_eq!(free_mem(&d), start - 13 * PAGE);
    }
    let ctl = Device::open_control(0).unwrap();
    assert_eq!(free_mem(&ctl), start);
    let d = Device::open_compute(0).unwrap();
    assert_eq!(d.alloc(1, 0).unwrap(), 1);
}

#[test]
fn a_device_in_reset_refuses_memory_ops() {
    guest_only!();
    let status = "/sys/kernel/debug/habanalabs_rs/0/status";
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(1, 0).unwrap();
    std::fs::write(status, "in_reset").unwrap();
    expect_errno(d.alloc(1, 0), EBUSY);
    expect_errno(d.free(h), EBUSY);
    expect_errno(d.hw_idle(), EBUSY);
    // INFO ops of the "any state" set still answer.
    assert_eq!(d.device_status().unwrap(), hlrs::DeviceStatus::InReset);
    assert_eq!(d.hw_ip_info().unwrap().device_id, 0x1020);
    drop(d);
    expect_errno(Device::open_compute(0), EAGAIN);
    std::fs::write(status, "operational").unwrap();
    let d = Device::open_compute(0).unwrap();
    assert_eq!(d.dram_usage().unwrap().ctx_dram_mem, 0);
}

#[test]
fn debugfs_shows_the_pool_and_the_handles() {
    guest_only!();
    let d = Device::open_compute(0).unwrap();
    let h = d.alloc(2 * PAGE, HL_MEM_CONTIGUOUS).unwrap();
    let pool = std::fs::read_to_string("/sys/kernel/debug/habanalabs_rs/0/dram_pool").unwrap();
    assert!(pool.contains("127 total, 2 used, 125 free"), "{pool}");
    assert!(pool.contains("map:         UU."), "{pool}");
    let mem = std::fs::read_to_string("/sys/kernel/debug/habanalabs_rs/0/memory").unwrap();
    let line = mem.lines().nth(1).unwrap();
    assert!(
        line.starts_with(&format!("{h:<7} 1     0x60000000")),
        "{mem}"
    );
    d.free(h).unwrap();
}
