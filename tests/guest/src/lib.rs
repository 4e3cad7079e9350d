//! Helpers shared by the in-guest tests.
//!
//! These tests only make sense inside the test guest, where the module is
//! loaded; `scripts/test.sh` builds them statically and runs them there. On
//! the host they skip themselves (see [`in_guest`]).

/// Whether we run inside the test guest (its `/init` exports `HLRS_GUEST=1`).
pub fn in_guest() -> bool {
    std::env::var_os("HLRS_GUEST").is_some()
}

/// Read a sysfs/procfs file as a trimmed string.
pub fn read_trimmed(path: &str) -> std::io::Result<String> {
    Ok(std::fs::read_to_string(path)?.trim().to_owned())
}

/// Skip a test (return) when not in the guest.
#[macro_export]
macro_rules! guest_only {
    () => {
        if !$crate::in_guest() {
            eprintln!("not in the test guest: skipped");
            return;
        }
    };
}

/// Assert that `r` failed with errno `want`.
pub fn expect_errno<T: std::fmt::Debug>(r: std::io::Result<T>, want: i32) {
    match r {
        Ok(v) => panic!("expected errno {want}, got Ok({v:?})"),
        Err(e) => assert_eq!(hlrs::errno(&e), want, "expected errno {want}, got {e}"),
    }
}

/// Contents of a debugfs file of device `dev`.
pub fn debugfs(dev: u32, file: &str) -> String {
    std::fs::read_to_string(format!("/sys/kernel/debug/habanalabs_rs/{dev}/{file}"))
        .unwrap_or_default()
}

/// Whether device `dev` is the Gaudi2 on PCI (its debugfs `pci` file says
/// so; a simulated device's says "not a PCI device"). Both report the same
/// HW_IP_INFO card name.
pub fn on_pci(dev: u32) -> bool {
    let pci = debugfs(dev, "pci");
    !pci.is_empty() && !pci.starts_with("not a PCI device")
}

/// Start `/bin/hlrs hold ARGS` and wait until it holds its memory; kill the
/// returned child to test teardown of a process that dies.
pub fn spawn_hold(args: &[&str]) -> std::process::Child {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new("/bin/hlrs")
        .arg("hold")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("hlrs hold exited early").unwrap();
        if line == "holding" {
            return child;
        }
    }
}

/// The page-walk oracle's walk of `va` on device `dev` (debugfs `mmu`):
/// the physical address and the hop level of the leaf, or `None` for a fault.
/// For a host page the physical address is where its bus address lands
/// (`host phys`: the IOMMU's translation on a PCI device, whose bus
/// addresses are IOVAs; the bus address itself on a simulated one).
pub fn oracle_walk(dev: u32, va: u64) -> Option<(u64, u32)> {
    walk(dev, va, true)
}

/// As [`oracle_walk`], but the address the walk ends at as the device sees
/// it (for a host page its bus address: what upstream's debugfs `mmu`
/// prints as `phys_addr`).
pub fn oracle_walk_bus(dev: u32, va: u64) -> Option<(u64, u32)> {
    walk(dev, va, false)
}

fn walk(dev: u32, va: u64, host_phys: bool) -> Option<(u64, u32)> {
    std::fs::write(
        format!("/sys/kernel/debug/habanalabs_rs/{dev}/mmu"),
        format!("{va:#x}"),
    )
    .unwrap();
    let out = debugfs(dev, "mmu");
    let last = out.lines().last()?;
    let pa = match last.split(" host phys ").nth(1).filter(|_| host_phys) {
        Some(phys) => phys.split(' ').next()?,
        None => last.split("-> pa ").nth(1)?.split(' ').next()?,
    };
    let leaf = last.split("leaf at hop ").nth(1)?.split(';').next()?;
    Some((
        u64::from_str_radix(pa.trim_start_matches("0x"), 16).ok()?,
        leaf.parse().ok()?,
    ))
}

/// Physical address of a byte of this process, from `/proc/self/pagemap`.
pub fn phys_of(addr: u64) -> u64 {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open("/proc/self/pagemap").unwrap();
    f.seek(SeekFrom::Start(addr / 4096 * 8)).unwrap();
    let mut b = [0u8; 8];
    f.read_exact(&mut b).unwrap();
    let e = u64::from_ne_bytes(b);
    assert!(e & (1 << 63) != 0, "page not present");
    (e & ((1 << 55) - 1)) * 4096 + addr % 4096
}

/// The calling thread's `/proc/thread-self/fail-nth` (the kernel's systematic
/// fault injection), kept open so that arming it and reading it back are
/// single `pwrite`/`pread` calls, as syzkaller does: opening or closing it
/// between arming and the call under test would use up the count.
pub struct FailNth(std::fs::File);

impl FailNth {
    /// Open this thread's file (needs `CONFIG_FAULT_INJECTION`).
    pub fn open() -> Self {
        Self(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/proc/thread-self/fail-nth")
                .expect("CONFIG_FAULT_INJECTION: /proc/thread-self/fail-nth"),
        )
    }

    /// Fail the `n`-th fault-injection point this thread reaches (0: off).
    pub fn arm(&self, n: u32) {
        use std::os::unix::fs::FileExt;
        self.0.write_at(n.to_string().as_bytes(), 0).unwrap();
    }

    /// What is left of the count: 0 when the injected fault was reached.
    pub fn left(&self) -> u32 {
        use std::os::unix::fs::FileExt;
        let mut b = [0u8; 16];
        let n = self.0.read_at(&mut b, 0).unwrap();
        String::from_utf8_lossy(&b[..n]).trim().parse().unwrap()
    }
}

/// Locked (pinned and charged) memory of this process, in kB (`VmLck`).
pub fn vm_locked_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmLck:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A CB in a host buffer of its own, mapped on `d` (unmapped when dropped):
/// `va` and `len` are what a CS chunk names.
pub struct HostCb<'d> {
    d: &'d hlrs::Device,
    _buf: hlrs::HostBuffer,
    /// The CB's device VA.
    pub va: u64,
    /// Its length in bytes.
    pub len: u32,
}

impl Drop for HostCb<'_> {
    fn drop(&mut self) {
        let _ = self.d.unmap(self.va);
    }
}

/// `cb` copied into a new host buffer and mapped on `d`.
pub fn host_cb<'d>(d: &'d hlrs::Device, cb: &hlrs::cs::Cb) -> HostCb<'d> {
    let buf = cb.to_host_buffer().unwrap();
    let va = d.map_host(buf.addr(), buf.len() as u64, 0, 0).unwrap();
    HostCb {
        d,
        _buf: buf,
        va,
        len: cb.len(),
    }
}
