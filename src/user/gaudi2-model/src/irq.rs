// SPDX-License-Identifier: GPL-2.0

//! MSI-X as vfio-user delivers it: `VFIO_USER_DEVICE_SET_IRQS` on the MSI-X
//! index hands over one eventfd per vector, and raising a vector is a write
//! of 1 to its eventfd. QEMU's vfio MSI-X emulation reads the eventfd and
//! injects the message programmed in the table it emulates (masking and the
//! pending bits of masked vectors are QEMU's, hw/vfio/pci.c
//! `vfio_msi_interrupt`), so the model needs no table of its own.
//!
//! The SET_IRQS forms handled (the VFIO uAPI's, `linux/vfio.h`
//! `VFIO_DEVICE_SET_IRQS`), for vectors `[start, start + count)`:
//! - `DATA_EVENTFD | ACTION_TRIGGER` with `count` descriptors: assign them;
//!   with none (QEMU sends "all invalid" chunks without descriptors,
//!   hw/vfio-user/device.c `vfio_user_device_io_set_irqs`): deassign;
//! - `DATA_NONE | ACTION_TRIGGER`, `count` 0: deassign every vector
//!   (`vfio_device_irq_disable`); `count` > 0: raise those vectors;
//! - anything on the other indexes (INTx, MSI, ERR, REQ: the device has
//!   none) is accepted when it disables, refused otherwise.

use std::fs::File;
use std::io::{self, Write};

use rustix::io::Errno;
use vfio_bindings::bindings::vfio::{
    VFIO_IRQ_SET_ACTION_MASK, VFIO_IRQ_SET_ACTION_TRIGGER, VFIO_IRQ_SET_ACTION_UNMASK,
    VFIO_IRQ_SET_DATA_BOOL, VFIO_IRQ_SET_DATA_EVENTFD, VFIO_IRQ_SET_DATA_NONE,
    VFIO_PCI_MSIX_IRQ_INDEX,
};

/// A vector that could not be raised: no eventfd was assigned to it (or
/// the number is past the table), or the eventfd write failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dropped;

/// The eventfd of each MSI-X vector.
pub struct Msix {
    fds: Vec<Option<File>>,
}

impl Msix {
    /// `vectors` vectors, none assigned.
    pub fn new(vectors: u16) -> Self {
        Self {
            fds: (0..vectors).map(|_| None).collect(),
        }
    }

    /// Vectors with an eventfd. O(vectors).
    pub fn assigned(&self) -> usize {
        self.fds.iter().filter(|f| f.is_some()).count()
    }

    /// Apply one `SET_IRQS`. Err (`EINVAL`, nothing changed): a form the
    /// device does not have. O(count).
    pub fn set_irqs(
        &mut self,
        index: u32,
        flags: u32,
        start: u32,
        count: u32,
        fds: Vec<File>,
    ) -> io::Result<()> {
        let action = flags
            & (VFIO_IRQ_SET_ACTION_MASK | VFIO_IRQ_SET_ACTION_UNMASK | VFIO_IRQ_SET_ACTION_TRIGGER);
        let data =
            flags & (VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_DATA_BOOL | VFIO_IRQ_SET_DATA_EVENTFD);
        let disables = action == VFIO_IRQ_SET_ACTION_TRIGGER
            && ((data == VFIO_IRQ_SET_DATA_NONE && count == 0)
                || (data == VFIO_IRQ_SET_DATA_EVENTFD && fds.is_empty()));
        if index != VFIO_PCI_MSIX_IRQ_INDEX {
            return if disables {
                Ok(())
            } else {
                Err(Errno::INVAL.into())
            };
        }
        if action != VFIO_IRQ_SET_ACTION_TRIGGER {
            return Err(Errno::INVAL.into());
        }
        if data == VFIO_IRQ_SET_DATA_NONE && count == 0 {
            self.fds.iter_mut().for_each(|f| *f = None);
            return Ok(());
        }
        let range = self.range(start, count)?;
        match data {
            VFIO_IRQ_SET_DATA_NONE => {
                // Loopback: raise them (a missing eventfd is not an error).
                for v in range {
                    let _ = self.raise_index(v);
                }
            }
            VFIO_IRQ_SET_DATA_EVENTFD if fds.is_empty() => {
                self.fds
                    .get_mut(range)
                    .into_iter()
                    .flatten()
                    .for_each(|f| *f = None);
            }
            VFIO_IRQ_SET_DATA_EVENTFD if fds.len() == range.len() => {
                let slots = self.fds.get_mut(range).ok_or(Errno::INVAL)?;
                for (slot, fd) in slots.iter_mut().zip(fds) {
                    *slot = Some(fd);
                }
            }
            _ => return Err(Errno::INVAL.into()),
        }
        Ok(())
    }

    /// `[start, start + count)` if inside the table.
    fn range(&self, start: u32, count: u32) -> io::Result<std::ops::Range<usize>> {
        let s = usize::try_from(start).map_err(|_| Errno::INVAL)?;
        let e = s
            .checked_add(usize::try_from(count).map_err(|_| Errno::INVAL)?)
            .ok_or(Errno::INVAL)?;
        if e > self.fds.len() {
            return Err(Errno::INVAL.into());
        }
        Ok(s..e)
    }

    /// Raise `vector`. O(1) (one eventfd write).
    pub fn raise(&mut self, vector: u16) -> Result<(), Dropped> {
        self.raise_index(usize::from(vector))
    }

    fn raise_index(&mut self, v: usize) -> Result<(), Dropped> {
        let fd = self
            .fds
            .get_mut(v)
            .and_then(Option::as_mut)
            .ok_or(Dropped)?;
        fd.write_all(&1u64.to_ne_bytes()).map_err(|_| Dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::event::{eventfd, EventfdFlags};
    use std::io::Read;

    const TRIGGER_FDS: u32 = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
    const TRIGGER_NONE: u32 = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER;
    const MSIX: u32 = VFIO_PCI_MSIX_IRQ_INDEX;

    /// An eventfd and a second handle on it to read the counter back.
    fn efd() -> (File, File) {
        let f = File::from(eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC).unwrap());
        let g = f.try_clone().unwrap();
        (f, g)
    }

    /// The counter of `f` (0 when it was never written).
    fn fired(f: &mut File) -> u64 {
        let mut b = [0; 8];
        match f.read(&mut b) {
            Ok(8) => u64::from_ne_bytes(b),
            _ => 0,
        }
    }

    #[test]
    fn assigned_vectors_fire_their_eventfd() {
        let mut m = Msix::new(128);
        let ((a, mut ra), (b, mut rb)) = (efd(), efd());
        m.set_irqs(MSIX, TRIGGER_FDS, 20, 2, vec![a, b]).unwrap();
        assert_eq!(m.assigned(), 2);
        m.raise(21).unwrap();
        m.raise(21).unwrap();
        assert_eq!((fired(&mut ra), fired(&mut rb)), (0, 2));
        assert_eq!(m.raise(0), Err(Dropped), "no eventfd");
        assert_eq!(m.raise(500), Err(Dropped), "no such vector");
        m.set_irqs(MSIX, TRIGGER_NONE, 20, 1, vec![]).unwrap();
        assert_eq!(fired(&mut ra), 1, "DATA_NONE raises");
    }

    #[test]
    fn deassign_one_or_all() {
        let mut m = Msix::new(128);
        let ((a, _), (b, _)) = (efd(), efd());
        m.set_irqs(MSIX, TRIGGER_FDS, 0, 2, vec![a, b]).unwrap();
        m.set_irqs(MSIX, TRIGGER_FDS, 0, 1, vec![]).unwrap();
        assert_eq!((m.raise(0), m.raise(1)), (Err(Dropped), Ok(())));
        m.set_irqs(MSIX, TRIGGER_NONE, 0, 0, vec![]).unwrap();
        assert_eq!((m.assigned(), m.raise(1)), (0, Err(Dropped)));
    }

    #[test]
    fn bad_forms_change_nothing() {
        let mut m = Msix::new(128);
        let (a, _) = efd();
        let (b, _) = efd();
        assert!(
            m.set_irqs(MSIX, TRIGGER_FDS, 127, 2, vec![a, b]).is_err(),
            "past the table"
        );
        let (a, _) = efd();
        assert!(
            m.set_irqs(MSIX, TRIGGER_FDS, 0, 2, vec![a]).is_err(),
            "fds != count"
        );
        let (a, _) = efd();
        assert!(m
            .set_irqs(
                MSIX,
                VFIO_IRQ_SET_ACTION_MASK | VFIO_IRQ_SET_DATA_EVENTFD,
                0,
                1,
                vec![a]
            )
            .is_err());
        assert!(m
            .set_irqs(MSIX, TRIGGER_FDS, u32::MAX, u32::MAX, vec![])
            .is_err());
        assert_eq!(m.assigned(), 0);
        let (a, _) = efd();
        assert!(
            m.set_irqs(0, TRIGGER_FDS, 0, 1, vec![a]).is_err(),
            "no INTx"
        );
        assert!(
            m.set_irqs(0, TRIGGER_NONE, 0, 0, vec![]).is_ok(),
            "disabling INTx is fine"
        );
    }
}
