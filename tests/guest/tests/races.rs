//! Races on one fd and across processes (issue 12): close/release racing
//! MAP, UNMAP, FREE and INFO on other threads; FREE of a handle racing its
//! MAP; UNMAP racing the same UNMAP; a process killed while another of its
//! threads is inside the MAP of a 1 GiB host buffer; module unload attempted
//! while all of it runs. Each is repeated a bounded number of times; lockdep,
//! KFENCE and kmemleak judge the kernel side on the guest log, and every run
//! must leave the device idle.

use hlrs::{uapi::*, Device};
use hlrs_guest_tests::{debugfs, guest_only};
use std::os::fd::{AsFd, AsRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

const PAGE: u64 = 0x3000_0000;
const EINVAL: i32 = 22;
const EBADF: i32 = 9;

fn idle() -> bool {
    let ctl = Device::open_control(0).unwrap();
    ctl.dram_usage().unwrap().dram_free_mem == ctl.hw_ip_info().unwrap().dram_size
        && debugfs(0, "userptr").lines().count() == 1
        && debugfs(0, "dmabuf").starts_with("exports: 0")
}

/// `rmmod` must be refused while a node is open or mapped.
fn unload_is_refused() {
    let out = std::process::Command::new("rmmod")
        .arg("habanalabs_rs")
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "rmmod succeeded while the device was in use"
    );
    assert!(std::path::Path::new("/sys/module/habanalabs_rs").exists());
}

/// One MEMORY ioctl on a raw fd number, as another thread's view of an fd
/// that may be closed under it: the errno, or 0.
fn raw_memory(fd: i32, args: &mut HlMemArgs) -> i32 {
    // SAFETY: `args` is the argument type of DRM_IOCTL_HL_MEMORY; if `fd` was
    // closed meanwhile the kernel answers EBADF (no other file is opened
    // during these races, so the number is not reused).
    let rc = unsafe { libc::ioctl(fd, DRM_IOCTL_HL_MEMORY as _, args as *mut HlMemArgs) };
    if rc == 0 {
        0
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }
}

fn raw_info(fd: i32) -> i32 {
    let mut status = HlInfoDeviceStatus::default();
    let mut a = HlInfoArgs {
        return_pointer: &mut status as *mut _ as u64,
        return_size: std::mem::size_of::<HlInfoDeviceStatus>() as u32,
        op: HL_INFO_DEVICE_STATUS,
        ..Default::default()
    };
    // SAFETY: as in `raw_memory`; the result goes to `status`.
    let rc = unsafe { libc::ioctl(fd, DRM_IOCTL_HL_INFO as _, &mut a as *mut HlInfoArgs) };
    if rc == 0 {
        0
    } else {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }
}

#[test]
fn close_races_map_unmap_free_and_info() {
    guest_only!();
    for round in 0..40u64 {
        let d = Device::open_compute(0).unwrap();
        let h = d.alloc(PAGE, 0).unwrap();
        let va = d.map(h, 0, 0).unwrap();
        let fd = OwnedFd::from(d).into_raw_fd();
        let start = Arc::new(Barrier::new(5));
        let workers: Vec<_> = (0..4u64)
            .map(|t| {
                let start = start.clone();
                std::thread::spawn(move || {
                    start.wait();
                    let mut seen_ebadf = false;
                    for i in 0..200u64 {
                        let e = match (t + i) % 4 {
                            0 => {
                                let mut a = HlMemArgs {
                                    arg0: 0,
                                    arg1: h,
                                    op: HL_MEM_OP_MAP,
                                    ..Default::default()
                                };
                                raw_memory(fd, &mut a)
                            }
                            1 => {
                                let mut a = HlMemArgs {
                                    arg0: va,
                                    op: HL_MEM_OP_UNMAP,
                                    ..Default::default()
                                };
                                raw_memory(fd, &mut a)
                            }
                            2 => {
                                let mut a = HlMemArgs {
                                    arg0: h,
                                    op: HL_MEM_OP_FREE,
                                    ..Default::default()
                                };
                                raw_memory(fd, &mut a)
                            }
                            _ => raw_info(fd),
                        };
                        assert!(matches!(e, 0 | EINVAL | EBADF), "errno {e}");
                        if e == EBADF {
                            seen_ebadf = true;
                            break;
                        }
                    }
                    seen_ebadf
                })
            })
            .collect();
        start.wait();
        // Close while the others are inside their ioctls (after a varying delay).
        std::thread::sleep(std::time::Duration::from_micros(round * 50));
        // SAFETY: our fd, closed once; the workers only use the number.
        unsafe { libc::close(fd) };
        for w in workers {
            w.join().unwrap();
        }
        // The release ran after the last ioctl: the device is idle again.
        assert!(idle(), "round {round}");
    }
}

#[test]
fn free_races_map_of_the_same_handle() {
    guest_only!();
    let d = Arc::new(Device::open_compute(0).unwrap());
    let (mut freed_first, mut mapped_first) = (0, 0);
    for _ in 0..300 {
        let h = d.alloc(PAGE, 0).unwrap();
        let go = Arc::new(Barrier::new(2));
        let (d2, go2) = (d.clone(), go.clone());
        let mapper = std::thread::spawn(move || {
            go2.wait();
            d2.map(h, 0, 0)
        });
        go.wait();
        let freed = d.free(h);
        let mapped = mapper.join().unwrap();
        match (freed, mapped) {
            // FREE won: the handle is gone, MAP saw an unknown handle.
            (Ok(()), Err(e)) => {
                assert_eq!(hlrs::errno(&e), EINVAL);
                freed_first += 1;
            }
            // MAP won: FREE was refused (mapped); clean up in order.
            (Err(e), Ok(va)) => {
                assert_eq!(hlrs::errno(&e), EINVAL);
                d.unmap(va).unwrap();
                d.free(h).unwrap();
                mapped_first += 1;
            }
            other => panic!("both or neither succeeded: {other:?}"),
        }
    }
    eprintln!("FREE first {freed_first}, MAP first {mapped_first}");
    assert_eq!(d.dram_usage().unwrap().ctx_dram_mem, 0);
}

#[test]
fn unmap_races_the_same_unmap() {
    guest_only!();
    let d = Arc::new(Device::open_compute(0).unwrap());
    let host = vec![3u8; 64 << 10];
    for i in 0..300u64 {
        let (va, handle) = if i % 2 == 0 {
            let h = d.alloc(PAGE, 0).unwrap();
            (d.map(h, 0, 0).unwrap(), Some(h))
        } else {
            (
                d.map_host(host.as_ptr() as u64, 64 << 10, 0, 0).unwrap(),
                None,
            )
        };
        let go = Arc::new(Barrier::new(2));
        let (d2, go2) = (d.clone(), go.clone());
        let other = std::thread::spawn(move || {
            go2.wait();
            d2.unmap(va).is_ok()
        });
        go.wait();
        let mine = d.unmap(va).is_ok();
        let theirs = other.join().unwrap();
        assert!(
            mine ^ theirs,
            "exactly one UNMAP must win (mine {mine}, theirs {theirs})"
        );
        if let Some(h) = handle {
            d.free(h).unwrap();
        }
    }
    drop(d);
    assert!(idle());
}

#[test]
fn a_process_killed_inside_a_1_gib_host_map() {
    guest_only!();
    // An open node of our own keeps the module in use whatever the child has
    // reached, so the unload attempts below can never succeed by accident.
    let _ctl = Device::open_control(0).unwrap();
    for delay_ms in [20u64, 150, 400] {
        let mut child = std::process::Command::new("/bin/hlrs")
            .args(["hold", "--count", "0", "--host", &(1u64 << 30).to_string()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        // While it pins (or right after), with the module busy: no unload.
        unload_is_refused();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(idle(), "after a kill at {delay_ms} ms");
    }
}

#[test]
fn unload_is_refused_while_threads_hammer_the_device() {
    guest_only!();
    let d = Arc::new(Device::open_compute(0).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let (d, stop, calls) = (d.clone(), stop.clone(), calls.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(h) = d.alloc(1, 0) {
                        if let Ok(va) = d.map(h, 0, 0) {
                            let _ = d.unmap(va);
                        }
                        let _ = d.free(h);
                    }
                    let _ = d.device_status();
                    calls.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for _ in 0..5 {
        unload_is_refused();
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert!(calls.load(Ordering::Relaxed) > 0);
    drop(d);
    assert!(idle());
    let fd_check = Device::open_compute(0).unwrap();
    assert!(fd_check.as_fd().as_raw_fd() >= 0);
}
