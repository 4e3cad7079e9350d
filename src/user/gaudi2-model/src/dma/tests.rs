// SPDX-License-Identifier: GPL-2.0

//! Host tests of the DMA table, over real memfds (as QEMU's guest RAM is).

use super::*;
use std::os::unix::fs::FileExt;
use std::sync::mpsc;
use std::sync::Mutex;

const RW: Perm = Perm {
    read: true,
    write: true,
};
const RO: Perm = Perm {
    read: true,
    write: false,
};

/// A memfd of `len` bytes, every byte `fill`.
fn memfd(len: usize, fill: u8) -> File {
    let f =
        File::from(rustix::fs::memfd_create("dma-test", rustix::fs::MemfdFlags::CLOEXEC).unwrap());
    f.write_all_at(&vec![fill; len], 0).unwrap();
    f
}

fn dup(f: &File) -> Option<File> {
    Some(f.try_clone().unwrap())
}

fn fault(addr: u64, kind: FaultKind) -> Result<(), DmaFault> {
    Err(DmaFault { addr, kind })
}

#[test]
fn map_then_read_and_write_the_file() {
    let ram = memfd(0x10000, 0);
    ram.write_all_at(b"guest page", 0x2010).unwrap();
    let mut t = DmaTable::new();
    assert_eq!(t.map(0x10_0000, 0x1000, dup(&ram), 0x2000, RW).unwrap(), 0);
    let mut b = [0; 10];
    t.read(0x10_0010, &mut b).unwrap();
    assert_eq!(&b, b"guest page");
    t.write(0x10_0FF8, b"device!!").unwrap();
    let mut f = [0; 8];
    ram.read_exact_at(&mut f, 0x2FF8).unwrap();
    assert_eq!(&f, b"device!!");
    assert_eq!((t.len(), t.bytes(), t.files()), (1, 0x1000, 1));
}

#[test]
fn a_read_across_two_maps() {
    let a = memfd(0x4000, 0xAA);
    let b = memfd(0x4000, 0xBB);
    let mut t = DmaTable::new();
    t.map(0x1000, 0x1000, dup(&a), 0x3000, RW).unwrap();
    t.map(0x2000, 0x1000, dup(&b), 0, RW).unwrap();
    let mut buf = [0; 16];
    t.read(0x1FF8, &mut buf).unwrap();
    assert_eq!(&buf[..8], &[0xAA; 8]);
    assert_eq!(&buf[8..], &[0xBB; 8]);
    t.write(0x1FFC, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    let (mut x, mut y) = ([0; 4], [0; 4]);
    a.read_exact_at(&mut x, 0x3FFC).unwrap();
    b.read_exact_at(&mut y, 0).unwrap();
    assert_eq!((x, y), ([1, 2, 3, 4], [5, 6, 7, 8]));
}

#[test]
fn an_unmapped_iova_faults() {
    let ram = memfd(0x4000, 0x11);
    let mut t = DmaTable::new();
    let mut buf = [0; 32];
    assert_eq!(t.read(0, &mut buf), fault(0, FaultKind::Unmapped));
    t.map(0x1000, 0x1000, dup(&ram), 0, RW).unwrap();
    assert_eq!(
        t.read(0xFFF, &mut buf[..1]),
        fault(0xFFF, FaultKind::Unmapped)
    );
    assert_eq!(
        t.read(0x1FF0, &mut buf),
        fault(0x2000, FaultKind::Unmapped),
        "runs off the end"
    );
    // A faulting write changes nothing, not even its mapped first part.
    assert_eq!(
        t.write(0x1FF0, &[0x99; 32]),
        fault(0x2000, FaultKind::Unmapped)
    );
    let mut f = [0; 16];
    ram.read_exact_at(&mut f, 0xFF0).unwrap();
    assert_eq!(f, [0x11; 16]);
    assert_eq!(
        t.read(u64::MAX, &mut buf[..1]),
        fault(u64::MAX, FaultKind::Unmapped)
    );
}

#[test]
fn unmap_removes_exactly_the_range() {
    let ram = memfd(0x3000, 0x22);
    let mut t = DmaTable::new();
    t.map(0x10000, 0x3000, dup(&ram), 0, RW).unwrap();
    assert_eq!(t.unmap(0x11000, 0x1000), 0x1000);
    let mut b = [0; 4];
    assert!(t.read(0x10FFC, &mut b).is_ok(), "head kept");
    assert_eq!(t.read(0x11000, &mut b), fault(0x11000, FaultKind::Unmapped));
    assert!(t.read(0x12000, &mut b).is_ok(), "tail kept");
    ram.write_all_at(b"tail", 0x2000).unwrap();
    t.read(0x12000, &mut b).unwrap();
    assert_eq!(&b, b"tail", "the tail keeps its file offset");
    assert_eq!(t.unmap(0x10000, 0), 0);
    assert_eq!(t.unmap(0, u64::MAX), 0x2000, "to the end of the space");
    assert_eq!(
        (t.len(), t.files()),
        (0, 0),
        "the file is unmapped with its last entry"
    );
}

#[test]
fn unmap_all() {
    let ram = memfd(0x2000, 0);
    let mut t = DmaTable::new();
    t.map(0, 0x1000, dup(&ram), 0, RW).unwrap();
    t.map(0x8000, 0x1000, dup(&ram), 0x1000, RW).unwrap();
    assert_eq!(t.unmap_all(), 0x2000);
    let mut b = [0; 1];
    assert_eq!(t.read(0x8000, &mut b), fault(0x8000, FaultKind::Unmapped));
}

#[test]
fn entries_of_one_file_share_its_mapping() {
    let ram = memfd(0x2000, 0x33);
    let mut t = DmaTable::new();
    t.map(0x1000, 0x1000, dup(&ram), 0, RW).unwrap();
    t.map(0x9000, 0x1000, dup(&ram), 0x1000, RW).unwrap();
    assert_eq!(t.files(), 1);
    t.unmap(0x1000, 0x1000);
    let mut b = [0; 8];
    t.read(0x9000, &mut b).unwrap();
    assert_eq!(b, [0x33; 8], "the other entry still reads its file");
    t.unmap(0x9000, 0x1000);
    assert_eq!(t.files(), 0);
}

#[test]
fn an_unmap_while_in_use() {
    // The device reads in a loop (as the engine thread does, one access per
    // lock hold) while the socket thread unmaps: every read either sees the
    // mapped data or faults, and once the unmap has returned none succeeds.
    let ram = memfd(0x1000, 0x5A);
    let table = Arc::new(Mutex::new(DmaTable::new()));
    table
        .lock()
        .unwrap()
        .map(0x1000, 0x1000, dup(&ram), 0, RW)
        .unwrap();
    let (started, wait) = mpsc::channel();
    let t2 = Arc::clone(&table);
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for i in 0..20_000 {
            let mut b = [0; 64];
            let r = t2.lock().unwrap().read(0x1000, &mut b);
            seen.push(r.map(|()| b.iter().all(|&x| x == 0x5A)));
            if i == 0 {
                started.send(()).unwrap();
            }
        }
        seen
    });
    wait.recv().unwrap();
    assert_eq!(table.lock().unwrap().unmap(0x1000, 0x1000), 0x1000);
    let mut b = [0; 64];
    assert_eq!(
        table.lock().unwrap().read(0x1000, &mut b),
        fault(0x1000, FaultKind::Unmapped)
    );
    let seen = reader.join().unwrap();
    assert_eq!(seen[0], Ok(true), "read before the unmap");
    let first_fault = seen.iter().position(Result::is_err).unwrap_or(seen.len());
    assert!(
        seen[..first_fault].iter().all(|r| *r == Ok(true)),
        "no torn data"
    );
    assert!(
        seen[first_fault..].iter().all(Result::is_err),
        "no read after the unmap"
    );
    assert_eq!(table.lock().unwrap().files(), 0);
}

#[test]
fn permissions_and_fileless_maps() {
    let ram = memfd(0x1000, 0x44);
    let mut t = DmaTable::new();
    t.map(0x1000, 0x1000, dup(&ram), 0, RO).unwrap();
    t.map(0x2000, 0x1000, None, 0, RW).unwrap();
    let mut b = [0; 4];
    assert!(t.read(0x1000, &mut b).is_ok());
    assert_eq!(t.write(0x1000, &b), fault(0x1000, FaultKind::Denied));
    assert_eq!(t.read(0x2000, &mut b), fault(0x2000, FaultKind::NoFile));
    let none = Perm {
        read: false,
        write: false,
    };
    t.map(0x3000, 0x1000, dup(&ram), 0, none).unwrap();
    assert_eq!(t.read(0x3000, &mut b), fault(0x3000, FaultKind::Denied));
}

#[test]
fn bad_maps_change_nothing() {
    let ram = memfd(0x2000, 0);
    let mut t = DmaTable::new();
    t.map(0x1000, 0x1000, dup(&ram), 0, RW).unwrap();
    assert!(matches!(
        t.map(0x1000, 0, dup(&ram), 0, RW),
        Err(MapError::Invalid(_))
    ));
    assert!(matches!(
        t.map(u64::MAX, 2, dup(&ram), 0, RW),
        Err(MapError::Invalid(_))
    ));
    assert!(matches!(
        t.map(0x1000, 0x1000, dup(&ram), u64::MAX, RW),
        Err(MapError::Invalid(_))
    ));
    assert!(matches!(
        t.map(0x1000, 0x1000, dup(&ram), 0x1800, RW),
        Err(MapError::Invalid(_))
    ));
    assert_eq!((t.len(), t.bytes()), (1, 0x1000));
    let mut b = [0; 4];
    assert!(t.read(0x1000, &mut b).is_ok(), "the old entry is intact");
    let e: io::Error = MapError::TooMany.into();
    assert_eq!(e.raw_os_error(), Some(Errno::NOSPC.raw_os_error()));
}

#[test]
fn a_map_over_live_entries_replaces_them() {
    let a = memfd(0x2000, 0xAA);
    let b = memfd(0x1000, 0xBB);
    let mut t = DmaTable::new();
    t.map(0x1000, 0x2000, dup(&a), 0, RW).unwrap();
    assert_eq!(t.map(0x2000, 0x1000, dup(&b), 0, RW).unwrap(), 0x1000);
    let (mut x, mut y) = ([0; 1], [0; 1]);
    t.read(0x1FFF, &mut x).unwrap();
    t.read(0x2000, &mut y).unwrap();
    assert_eq!((x[0], y[0]), (0xAA, 0xBB));
    assert_eq!((t.len(), t.files()), (2, 2));
}
