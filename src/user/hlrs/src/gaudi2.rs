//! Gaudi2's user-mappable HW blocks: the driver's own table
//! (`src/asic/gaudi2_blocks.rs`, compiled here unchanged), so a runtime can
//! name a block by id and find the device address MAP_BLOCK wants.
//!
//! ```no_run
//! let dev = hlrs::Device::open_compute(0)?;
//! let addr = hlrs::gaudi2::block_addr(4).ok_or(std::io::ErrorKind::NotFound)?;
//! let block = dev.map_hw_block(addr)?;
//! block.write(0x10, 1)?;
//! # Ok::<(), std::io::Error>(())
//! ```

#[path = "../../../asic/gaudi2_blocks.rs"]
#[allow(dead_code)]
mod blocks;

/// One user-mappable block: an offset from [`CFG_BASE`] and a size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserBlock {
    /// Offset from `CFG_BASE`.
    pub address: u64,
    /// Size in bytes.
    pub size: u64,
}

/// Base of the configuration space in the device's address map.
pub const CFG_BASE: u64 = blocks::CFG_BASE;

/// Every user-mappable block, by id (453, as upstream's table).
pub fn user_blocks() -> &'static [UserBlock] {
    &blocks::USER_BLOCKS
}

/// The device address MAP_BLOCK takes for block `id`.
pub fn block_addr(id: usize) -> Option<u64> {
    user_blocks().get(id).map(|b| CFG_BASE + b.address)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_upstreams() {
        assert_eq!(user_blocks().len(), 453);
        assert_eq!(user_blocks()[0].size, 0x10000);
        assert_eq!(block_addr(0), Some(CFG_BASE + user_blocks()[0].address));
        assert_eq!(block_addr(453), None);
        assert!(user_blocks().iter().all(|b| b.size % 4096 == 0));
    }
}
