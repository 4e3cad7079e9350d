//! Several threads sharing one compute fd: ALLOC/MAP/UNMAP/FREE of device memory
//! and host mappings at the same time, with INFO calls on the control node.
//! Lockdep, KFENCE and kmemleak in the guest kernel watch the locking.

use hlrs::{uapi::*, Device};
use hlrs_guest_tests::{debugfs, guest_only};
use std::sync::Arc;

const PAGE: u64 = 0x3000_0000;

#[test]
fn threads_share_one_context() {
    guest_only!();
    let d = Arc::new(Device::open_compute(0).unwrap());
    let ctl = Arc::new(Device::open_control(0).unwrap());
    let idle = ctl.dram_usage().unwrap().dram_free_mem;
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let d = d.clone();
            let ctl = ctl.clone();
            std::thread::spawn(move || {
                let host = vec![t as u8; 64 << 10];
                let mut seed = 0x1234_5678_9abc_def0u64 ^ (t + 1);
                let mut ok = 0u32;
                for _ in 0..150 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    match seed % 3 {
                        0 => {
                            let flags = if seed & 8 != 0 { HL_MEM_CONTIGUOUS } else { 0 };
                            if let Ok(h) = d.alloc((seed % 3 + 1) * PAGE, flags) {
                                if let Ok(va) = d.map(h, 0, 0) {
                                    d.unmap(va).unwrap();
                                }
                                d.free(h).unwrap();
                                ok += 1;
                            }
                        }
                        1 => {
                            let off = seed % 4096;
                            let va = d.map_host(host.as_ptr() as u64 + off, 8192, 0, 0).unwrap();
                            d.unmap(va).unwrap();
                            ok += 1;
                        }
                        _ => {
                            ctl.hw_ip_info().unwrap();
                            ctl.dram_usage().unwrap();
                            ok += 1;
                        }
                    }
                }
                ok
            })
        })
        .collect();
    let done: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(done > 300);
    assert_eq!(ctl.dram_usage().unwrap().dram_free_mem, idle);
    assert_eq!(debugfs(0, "userptr").lines().count(), 1);
    assert!(debugfs(0, "mmu").contains("mappings:        0"));
}
