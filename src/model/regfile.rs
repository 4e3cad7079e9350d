// SPDX-License-Identifier: GPL-2.0

//! The registers the model keeps but does not interpret: configuration the
//! driver writes (arbitration, protection bits, error masks...) and may read
//! back (`RMWREG32`), in a fixed-size open-addressed table.
//!
//! Hardware has every register; the model keeps the first [`CAPACITY`]
//! distinct ones written (upstream's init writes a few hundred of the
//! blocks this model covers). A write that finds the table full is dropped
//! and reported to the caller (counted in `Stats::regfile_dropped`); a
//! register never written reads 0. Engines' writes only update registers
//! already held ([`RegFile::update`]), so no CB can fill the table.

/// Distinct registers the file holds.
pub const CAPACITY: usize = 1024;

/// An empty slot (no register has this address: registers are 4-byte
/// aligned).
const EMPTY: u32 = u32::MAX;

/// The table: linear probing from a multiplicative hash of the address.
pub struct RegFile {
    /// Register addresses ([`EMPTY`]: free slot).
    keys: [u32; CAPACITY],
    /// The value of the register at the same index.
    vals: [u32; CAPACITY],
}

impl RegFile {
    /// An empty file. O(CAPACITY).
    pub const fn new() -> Self {
        Self {
            keys: [EMPTY; CAPACITY],
            vals: [0; CAPACITY],
        }
    }

    /// The slot `reg` hashes to.
    fn home(reg: u32) -> usize {
        // Fibonacci hashing of the word address; CAPACITY is a power of two.
        let h = (reg >> 2).wrapping_mul(0x9E37_79B9);
        (h as usize) & (CAPACITY - 1)
    }

    /// The slot of `reg`, or the first free slot of its probe sequence, or
    /// `None` when the table is full without it. O(1) expected, O(CAPACITY)
    /// at worst.
    fn slot(&self, reg: u32) -> Option<usize> {
        let start = Self::home(reg);
        (0..CAPACITY)
            .map(|i| (start + i) & (CAPACITY - 1))
            .find(|&i| matches!(self.keys.get(i), Some(&k) if k == reg || k == EMPTY))
    }

    /// The value of `reg` (0 if never written). O(1) expected.
    pub fn get(&self, reg: u32) -> u32 {
        match self.slot(reg) {
            Some(i) if self.keys.get(i) == Some(&reg) => self.vals.get(i).copied().unwrap_or(0),
            _ => 0,
        }
    }

    /// Set `reg` to `val` only if it holds a slot already (an engine's
    /// LBW write, `Gaudi2::store`); false otherwise (the write is
    /// dropped). O(1) expected.
    pub fn update(&mut self, reg: u32, val: u32) -> bool {
        match self.slot(reg) {
            Some(i) if self.keys.get(i) == Some(&reg) => {
                if let Some(v) = self.vals.get_mut(i) {
                    *v = val;
                }
                true
            }
            _ => false,
        }
    }

    /// Set `reg` to `val`; false if the table is full (the write is
    /// dropped). A 0 to a register never written takes no slot (it reads 0
    /// already). O(1) expected.
    pub fn set(&mut self, reg: u32, val: u32) -> bool {
        if reg == EMPTY {
            return false;
        }
        let Some(i) = self.slot(reg) else {
            return val == 0;
        };
        if val == 0 && self.keys.get(i) != Some(&reg) {
            return true;
        }
        match (self.keys.get_mut(i), self.vals.get_mut(i)) {
            (Some(k), Some(v)) => {
                *k = reg;
                *v = val;
                true
            }
            _ => false,
        }
    }
}
