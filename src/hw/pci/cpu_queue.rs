// SPDX-License-Identifier: GPL-2.0

//! The CPU-CP channel of the PCI Gaudi2 ([`CpuCp`]): the CPU queues as
//! upstream sets them up and uses them on silicon.
//!
//! - **Setup** (`gaudi2_init_cpu_queues`, gaudi2/gaudi2.c:5299-5365, at
//!   probe): one buffer of coherent DMA memory holds the CPU PQ (256 BDs),
//!   the event queue (64 entries) and the CPU-accessible pool the packets
//!   live in; their bases and lengths go to `CPU_IF_*`, the PQ's PI to 0,
//!   then `QUEUE_INIT` = `READY_FOR_CP`, polled for `READY_FOR_HOST` every
//!   1 ms up to `GAUDI2_CPU_TIMEOUT_USEC` (30 s): a timeout fails the probe
//!   with `EIO`, as upstream. Upstream's queues are larger (4,096 BDs,
//!   a 2 MiB pool); one packet is in flight at a time either way.
//!   The `gic_host_pi_upd_irq` write (a dynamic-loader register) is
//!   skipped: the device boots with the static loader.
//! - **A packet** (`hl_fw_send_cpu_message`, common/firmware_if.c:404-540),
//!   under the queue's mutex (upstream `send_cpu_message_lock`): the
//!   packet (fence set invalid) and its DMA buffer into the pool, a BD
//!   (`ptr`, `len`, `ctl` = the new PI) at the PI's slot, the doorbell
//!   `CPU_IF_PF_PQ_PI`, then the fence polled every 1 ms up to the
//!   timeout (`GAUDI2_MSG_TO_CPU_TIMEOUT_USEC`, 4 s, for a packet sent
//!   with 0). A timeout disables the device CPU (`EAGAIN` from then on);
//!   the BD's `ctl` is scrubbed after an answer.
//! - **Events** ([`PciGaudi2::eq_next`]): the event queue's entries, read
//!   by the engines' MSI-X 0 thread (`super::queues`).
//! - **Unbind** ([`PciGaudi2::detach`]): the queue memory is freed while
//!   the device is still bound; every later packet fails with `ENODEV`.

use super::PciGaudi2;
use crate::asic::cpucp_if::{self as fw, regs as r, CpucpPacket, PACKET_BYTES};
use crate::ffi::cpu_dma::CpuDma;
use crate::hw::cpucp::{finish, CpuCp};
use kernel::{device::Bound, device::Device, io::poll::read_poll_timeout, prelude::*, time::Delta};

/// Bytes of a BD (`struct hl_bd`, include/common/qman_if.h:17-21).
const BD_BYTES: usize = 16;
/// The CPU PQ: 256 BDs at the start of the buffer.
const PQ_BYTES: usize = 4096;
const PQ_ENTRIES: u32 = (PQ_BYTES / BD_BYTES) as u32;
/// The event queue: 64 entries of 64 bytes.
const EQ_OFF: usize = PQ_BYTES;
const EQ_BYTES: usize = 4096;
/// The CPU-accessible pool: the packet, then its DMA buffer.
const POOL_OFF: usize = EQ_OFF + EQ_BYTES;
const POOL_BYTES: usize = 8192;
const PKT_OFF: usize = POOL_OFF;
const BUF_OFF: usize = POOL_OFF + 64;
const TOTAL: usize = POOL_OFF + POOL_BYTES;

/// The queues of one device, under `PciGaudi2::cpu_q`.
pub(crate) struct CpuQueue {
    mem: CpuDma,
    /// The PQ's producer index, modulo twice its entries (upstream
    /// `hl_queue_inc_ptr`).
    pi: u32,
    /// A packet timed out (`device_cpu_disabled`): `EAGAIN` from then on.
    disabled: bool,
    /// The event queue's consumer index (entries).
    eq_ci: u32,
}

/// Entries of the event queue.
const EQ_ENTRIES: u32 = (EQ_BYTES / EQ_ENTRY_BYTES) as u32;
/// Bytes of an event queue entry (`struct hl_eq_entry`: an 8-byte header,
/// `reserved` then `ctl`, and 56 bytes of data; cpucp_if.h:375-395).
const EQ_ENTRY_BYTES: usize = 64;
/// `EQ_CTL_READY_MASK` (cpucp_if.h:398).
const EQ_CTL_READY: u32 = 1 << 31;
/// `EQ_CTL_EVENT_TYPE_SHIFT` / `_MASK` (cpucp_if.h:403-404).
const EQ_CTL_EVENT_TYPE_SHIFT: u32 = 16;
const EQ_CTL_EVENT_TYPE_MASK: u32 = 0x0FFF_0000;

/// Microseconds as a `Delta`.
fn us(v: u64) -> Delta {
    Delta::from_micros(i64::try_from(v).unwrap_or(i64::MAX))
}

impl PciGaudi2 {
    /// `gaudi2_init_cpu_queues` (see the module documentation). Probe only;
    /// sleeps.
    pub(super) fn init_cpu_queues(&self, dev: &Device<Bound>) -> Result {
        let mem = CpuDma::new(dev, TOTAL)?;
        let bus = mem.bus();
        let lo = |a: u64| a as u32;
        let hi = |a: u64| (a >> 32) as u32;
        let (eq, pool) = (bus + EQ_OFF as u64, bus + POOL_OFF as u64);
        for (reg, val) in [
            (r::PQ_BASE_ADDR_LOW, lo(bus)),
            (r::PQ_BASE_ADDR_HIGH, hi(bus)),
            (r::EQ_BASE_ADDR_LOW, lo(eq)),
            (r::EQ_BASE_ADDR_HIGH, hi(eq)),
            (r::CQ_BASE_ADDR_LOW, lo(pool)),
            (r::CQ_BASE_ADDR_HIGH, hi(pool)),
            (r::PQ_LENGTH, PQ_BYTES as u32),
            (r::EQ_LENGTH, EQ_BYTES as u32),
            (r::CQ_LENGTH, POOL_BYTES as u32),
            (r::EQ_RD_OFFS, 0),
            (r::PF_PQ_PI, 0),
            (r::QUEUE_INIT, r::READY_FOR_CP),
        ] {
            self.mmio.wreg(reg, val)?;
        }
        self.mmio
            .poll(
                r::QUEUE_INIT,
                |v| v == r::READY_FOR_HOST,
                1000,
                fw::CPU_TIMEOUT_US,
            )
            .map_err(|e| {
                pr_err!(
                    "PCI Gaudi2: failed to communicate with device CPU ({:?})\n",
                    e
                );
                EIO
            })?;
        *self.cpu_q.lock() = Some(CpuQueue {
            mem,
            pi: 0,
            disabled: false,
            eq_ci: 0,
        });
        Ok(())
    }

    /// The next event of the event queue and its first data word, consumed (`hl_irq_handler_eq`,
    /// common/irq.c:290-360: the entry's ready bit cleared, the consumer
    /// index advanced and written to `CPU_IF_EQ_RD_OFFS`,
    /// `gaudi2_update_eq_ci`). `None` when no entry is ready or the queues
    /// are gone. Takes the CPU queue's mutex (waits for a packet in
    /// flight). O(1).
    pub(crate) fn eq_next(&self) -> Option<(u16, [u64; 2])> {
        let mut guard = self.cpu_q.lock();
        let q = Option::as_mut(&mut *guard)?;
        let at = EQ_OFF + (q.eq_ci % EQ_ENTRIES) as usize * EQ_ENTRY_BYTES;
        let ctl = q.mem.read32(at + 4).ok()?;
        if ctl & EQ_CTL_READY == 0 {
            return None;
        }
        let mut data = [0u8; 16];
        q.mem.read(at + 8, &mut data).ok()?;
        let word = |i: usize| {
            data.get(i..i + 8)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map_or(0, u64::from_le_bytes)
        };
        q.mem.write(at + 4, &[0; 4]).ok()?;
        q.eq_ci = (q.eq_ci + 1) % EQ_ENTRIES;
        let _ = self.mmio.wreg(r::EQ_RD_OFFS, q.eq_ci);
        Some((
            ((ctl & EQ_CTL_EVENT_TYPE_MASK) >> EQ_CTL_EVENT_TYPE_SHIFT) as u16,
            [word(0), word(8)],
        ))
    }

    /// Free the queues (unbind). Waits for a packet in flight.
    pub(super) fn free_cpu_queues(&self) {
        drop(self.cpu_q.lock().take());
    }
}

impl CpuQueue {
    /// Put `pkt` (and `buf`) in the pool, its BD in the PQ, and ring.
    fn submit(&mut self, hw: &PciGaudi2, mut pkt: CpucpPacket, buf: Option<&[u8]>) -> Result<u32> {
        if let Some(b) = buf {
            if b.len() > POOL_BYTES - 64 {
                return Err(EINVAL);
            }
            self.mem.write(BUF_OFF, b)?;
            pkt.value = self.mem.bus() + BUF_OFF as u64;
        }
        pkt.fence = u32::MAX;
        self.mem.write(PKT_OFF, &pkt.to_bytes())?;
        let slot = self.pi % PQ_ENTRIES;
        let next = (self.pi + 1) % (2 * PQ_ENTRIES);
        let mut bd = [0u8; BD_BYTES];
        bd[..8].copy_from_slice(&(self.mem.bus() + PKT_OFF as u64).to_le_bytes());
        bd[8..12].copy_from_slice(&(PACKET_BYTES as u32).to_le_bytes());
        bd[12..].copy_from_slice(&next.to_le_bytes());
        self.mem.write(slot as usize * BD_BYTES, &bd)?;
        self.pi = next;
        hw.mmio.wreg(r::PF_PQ_PI, next)?;
        Ok(slot)
    }
}

impl CpuCp for PciGaudi2 {
    fn send(&self, pkt: CpucpPacket, buf: Option<&mut [u8]>, timeout_us: u32) -> Result<u64> {
        let timeout = if timeout_us == 0 {
            fw::MSG_TIMEOUT_US
        } else {
            timeout_us
        };
        let mut guard = self.cpu_q.lock();
        let q = Option::as_mut(&mut *guard).ok_or(ENODEV)?;
        if q.disabled {
            return Err(EAGAIN);
        }
        self.alive()?;
        let slot = q.submit(self, pkt, buf.as_deref())?;
        let fence = read_poll_timeout(
            || q.mem.read32(PKT_OFF + 12),
            |v| *v == fw::FENCE_VAL,
            us(1000),
            us(u64::from(timeout)),
        );
        if let Err(e) = fence {
            if e == ETIMEDOUT {
                pr_err!("PCI Gaudi2: device CPU packet timeout\n");
                q.disabled = true;
            }
            return Err(e);
        }
        let mut answer = [0u8; PACKET_BYTES];
        q.mem.read(PKT_OFF, &mut answer)?;
        if let Some(b) = buf {
            q.mem.read(BUF_OFF, b)?;
        }
        // Scrub the BD's ctl, as upstream, so a wrapped queue never shows
        // the firmware an old PI.
        q.mem
            .write(slot as usize * BD_BYTES + 12, &u32::MAX.to_le_bytes())?;
        finish(&CpucpPacket::from_bytes(&answer))
    }
}
