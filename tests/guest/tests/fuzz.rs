//! The short, fixed-seed pass of the ioctl fuzzer that `make test` runs
//! (`make fuzz` runs a long one): 200,000 calls on 2 devices with 2 threads
//! each, every errno within its op's documented set, the devices idle after.
//! On the Gaudi2 on PCI, a short pass of the sync-manager family (3,000
//! calls). The kernel side (oops, WARNING, lockdep, KFENCE, kmemleak) is
//! judged on the guest log.

use hlrs::Device;
use hlrs_guest_tests::{guest_only, on_pci};

#[test]
fn fuzz_200k_calls_on_2_devices() {
    guest_only!();
    if hlrs::device_indices().unwrap().len() < 2 {
        eprintln!("needs 2 devices: runs in the devices=4 pass");
        return;
    }
    fuzz(
        &[
            "fuzz",
            "--seed",
            "1",
            "--calls",
            "200000",
            // A bound far above the 60-100 s the pass takes on an idle
            // machine: a slow or busy one is not a failure (the guest's
            // stall limit catches a hang; the progress bar on stderr is the
            // progress it watches).
            "--seconds",
            "1800",
            "--devices",
            "2",
            "--threads",
            "2",
        ],
        200_000,
    );
}

/// The sync-manager family alone (`--sync-only`: SOB writes, monitors,
/// fences released and never released, nested CBs, predicates, CQs,
/// interrupt waits, SIGNAL and WAIT CSs) on the Gaudi2 on PCI (the
/// simulated devices' engines run no nested CBs or `LOAD_AND_EXE`), 2
/// threads on its fd, in the PCI pass (400 calls took
/// 6 to 22 s under TCG: the fences that never release wait out their 1 s
/// CS timeouts): every outcome within the contract, every fence a SOB write releases
/// released, every fence nothing releases timed out and the device working
/// after it.
#[test]
fn fuzz_sync_2000_calls_on_the_pci_device() {
    guest_only!();
    let pci = hlrs::device_indices().unwrap().into_iter().find(|&i| {
        Device::open_compute(i)
            .and_then(|d| d.hw_ip_info())
            .is_ok_and(|h| h.number_of_user_interrupts > 0 && on_pci(i))
    });
    // The Device above is closed: the fuzzer opens the compute node itself.
    let Some(pci) = pci else {
        eprintln!("no device with user interrupts (the Gaudi2 on PCI): runs in the PCI pass");
        return;
    };
    sync_fuzz(pci, 1, 2000);
}

/// `hlrs fuzz --sync-only` on device `device`: `calls` calls from `seed`,
/// 2 threads.
fn sync_fuzz(device: u32, seed: u64, calls: u64) {
    let (device, seed, n) = (device.to_string(), seed.to_string(), calls.to_string());
    fuzz(
        &[
            "--device",
            &device,
            "fuzz",
            "--seed",
            &seed,
            "--calls",
            &n,
            "--seconds",
            "1200",
            "--devices",
            "1",
            "--threads",
            "2",
            "--sync-only",
        ],
        calls,
    );
}

/// The same family on simulated device 0 (host 1's sync manager: its
/// streams' threads, fences asleep on the CP's counters), 1,000 calls, in
/// the simulated pass.
#[test]
fn fuzz_sync_1000_calls_on_a_simulated_device() {
    guest_only!();
    let sim = Device::open_compute(0)
        .and_then(|d| d.hw_ip_info())
        .is_ok_and(|h| h.number_of_user_interrupts > 0 && !on_pci(0));
    if !sim {
        eprintln!("device 0 is not a simulated Gaudi2");
        return;
    }
    sync_fuzz(0, 2, 1000);
}

/// Run `/bin/hlrs` with `args` (a fuzz), its progress bar on stderr; its
/// summary goes to the kernel log; it must succeed having made all
/// `calls`.
fn fuzz(args: &[&str], calls: u64) {
    let mut child = std::process::Command::new("/bin/hlrs")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The progress bar goes straight to this process's stderr (fd 2, past
    // libtest's capture): the guest's stall limit watches it. A newline
    // after it, so that libtest's `... ok` starts a line of its own.
    let mut err = child.stderr.take().unwrap();
    let progress = std::thread::spawn(move || {
        use std::io::Read;
        let mut buf = [0u8; 512];
        while let Ok(n @ 1..) = err.read(&mut buf) {
            raw_stderr(&buf[..n]);
        }
        raw_stderr(b"\n");
    });
    // Once, if the fuzzer still runs after 200 s: where each of its threads
    // is (in the kernel). If it hangs, the guest's stall limit ends the run
    // 300 s later, and these lines say where (once: output is progress to
    // the stall limit).
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut waited = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_secs(1));
                waited += 1;
                if waited == 200 {
                    dump_threads(pid);
                }
            }
        })
    };
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = watch.join();
    let _ = progress.join();
    let summary = String::from_utf8_lossy(&out.stdout);
    for line in summary.lines() {
        std::fs::write("/dev/kmsg", format!("hlrs-fuzz: {line}\n")).unwrap();
    }
    assert!(out.status.success(), "{summary}");
    // The pass really made its calls (not cut short by the time bound).
    assert!(summary.contains(&format!("{calls} calls in")), "{summary}");
}

/// Each thread of process `pid`: its name, state and kernel stack, on
/// stderr (the guest's live channel).
fn dump_threads(pid: u32) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    let mut text = format!("fuzzer {pid} still running; its threads:\n");
    for t in tasks.flatten() {
        let p = t.path();
        let read = |f: &str| std::fs::read_to_string(p.join(f)).unwrap_or_default();
        text.push_str(&format!(
            "  {} {} state {} wchan {}\n{}\n",
            t.file_name().to_string_lossy(),
            read("comm").trim(),
            read("stat").split_whitespace().nth(2).unwrap_or("?"),
            read("wchan"),
            read("stack")
        ));
    }
    raw_stderr(text.as_bytes());
}

/// Write `b` to fd 2 itself (libtest captures what a test prints through
/// `eprint!`, but not this).
fn raw_stderr(b: &[u8]) {
    // SAFETY: a write of `b.len()` readable bytes to fd 2.
    let _ = unsafe { libc::write(2, b.as_ptr().cast(), b.len()) };
}
