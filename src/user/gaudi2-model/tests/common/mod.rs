// SPDX-License-Identifier: GPL-2.0

//! The test [`Env`] the model's host tests share (`mod common;` in each):
//! host memory as DMA-mapped windows (anything else faults), DRAM and
//! SRAM as byte vectors, MSI-X as a list of vectors, a clock that moves
//! 1 us per reading.

#![allow(dead_code)]

use gaudi2_model::{regs, BusFault, Env};

/// Host memory the device may reach: windows of (bus address, bytes).
pub struct TestEnv {
    host: Vec<(u64, Vec<u8>)>,
    dram: Vec<u8>,
    sram: Vec<u8>,
    /// The MSI-X vectors raised, in order.
    pub msix: Vec<u16>,
    now: u64,
}

impl TestEnv {
    /// `dram` bytes of DRAM, 1 MiB of SRAM, no host memory mapped.
    pub fn new(dram: usize) -> Self {
        Self {
            host: Vec::new(),
            dram: vec![0; dram],
            sram: vec![0; 1 << 20],
            msix: Vec::new(),
            now: 0,
        }
    }

    /// Map `len` zeroed bytes of host memory at bus address `at`.
    pub fn map(&mut self, at: u64, len: usize) {
        self.host.push((at, vec![0; len]));
    }

    /// Unmap the window at `at`.
    pub fn unmap(&mut self, at: u64) {
        self.host.retain(|(a, _)| *a != at);
    }

    /// The window bytes `[addr, addr + len)` lie in.
    pub fn window(&mut self, addr: u64, len: usize) -> Result<&mut [u8], BusFault> {
        for (at, bytes) in self.host.iter_mut() {
            let Some(off) = addr.checked_sub(*at) else {
                continue;
            };
            let Ok(off) = usize::try_from(off) else {
                continue;
            };
            if let Some(s) = off.checked_add(len).and_then(|end| bytes.get_mut(off..end)) {
                return Ok(s);
            }
        }
        Err(BusFault { addr })
    }

    pub fn host_write(&mut self, addr: u64, data: &[u8]) {
        self.window(addr, data.len()).unwrap().copy_from_slice(data);
    }

    pub fn host_read(&mut self, addr: u64, len: usize) -> Vec<u8> {
        self.window(addr, len).unwrap().to_vec()
    }

    pub fn host_u64(&mut self, addr: u64, v: u64) {
        self.host_write(addr, &v.to_le_bytes());
    }

    pub fn host_read_u32(&mut self, addr: u64) -> u32 {
        u32::from_le_bytes(self.host_read(addr, 4).try_into().unwrap())
    }

    pub fn dram_range(&mut self, pa: u64, len: usize) -> Result<&mut [u8], BusFault> {
        let off = pa
            .checked_sub(regs::DRAM_PHYS_BASE)
            .ok_or(BusFault { addr: pa })?;
        let off = usize::try_from(off).map_err(|_| BusFault { addr: pa })?;
        off.checked_add(len)
            .and_then(|end| self.dram.get_mut(off..end))
            .ok_or(BusFault { addr: pa })
    }

    /// The u64 at host bus address `addr`.
    pub fn host_read_u64(&mut self, addr: u64) -> u64 {
        u64::from_le_bytes(self.host_read(addr, 8).try_into().unwrap())
    }

    /// SRAM bytes `[pa, pa + len)`.
    pub fn sram_range(&mut self, pa: u64, len: usize) -> Result<&mut [u8], BusFault> {
        let off = pa
            .checked_sub(regs::SRAM_BASE_ADDR)
            .and_then(|o| usize::try_from(o).ok())
            .ok_or(BusFault { addr: pa })?;
        off.checked_add(len)
            .and_then(|end| self.sram.get_mut(off..end))
            .ok_or(BusFault { addr: pa })
    }

    /// Store `data` in SRAM at `addr` (an SRAM address).
    pub fn sram_put(&mut self, addr: u64, data: &[u8]) {
        self.sram_range(addr, data.len())
            .unwrap()
            .copy_from_slice(data);
    }

    /// The u32 in SRAM at `addr`.
    pub fn sram_u32(&mut self, addr: u64) -> u32 {
        u32::from_le_bytes(self.sram_range(addr, 4).unwrap().try_into().unwrap())
    }

    /// Store the u64 `v` in DRAM at `pa`.
    pub fn dram_u64(&mut self, pa: u64, v: u64) {
        self.dram_range(pa, 8)
            .unwrap()
            .copy_from_slice(&v.to_le_bytes());
    }
}

impl Env for TestEnv {
    fn dma_read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), BusFault> {
        buf.copy_from_slice(self.window(addr, buf.len())?);
        Ok(())
    }
    fn dma_write(&mut self, addr: u64, data: &[u8]) -> Result<(), BusFault> {
        self.window(addr, data.len())?.copy_from_slice(data);
        Ok(())
    }
    fn dram_read(&mut self, pa: u64, buf: &mut [u8]) -> Result<(), BusFault> {
        buf.copy_from_slice(self.dram_range(pa, buf.len())?);
        Ok(())
    }
    fn dram_write(&mut self, pa: u64, data: &[u8]) -> Result<(), BusFault> {
        self.dram_range(pa, data.len())?.copy_from_slice(data);
        Ok(())
    }
    fn sram_read(&mut self, pa: u64, buf: &mut [u8]) -> Result<(), BusFault> {
        buf.copy_from_slice(self.sram_range(pa, buf.len())?);
        Ok(())
    }
    fn sram_write(&mut self, pa: u64, data: &[u8]) -> Result<(), BusFault> {
        self.sram_range(pa, data.len())?.copy_from_slice(data);
        Ok(())
    }
    fn msix(&mut self, vector: u16) {
        self.msix.push(vector);
    }
    fn now_ns(&mut self) -> u64 {
        self.now += 1000;
        self.now
    }
}
