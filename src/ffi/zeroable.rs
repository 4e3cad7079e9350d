// SPDX-License-Identifier: GPL-2.0

//! The model core's large idle states made in place: the sync manager
//! (about 290 KiB, too big for any stack) is all zeros when idle, which
//! the model core guarantees (`SyncManager::IDLE`, whose links hold index
//! + 1 so that "none" is 0) and this file asserts to `pin_init`.

use crate::model::sm::SyncManager;
use kernel::prelude::*;

// SAFETY: every field of `SyncManager` is an integer, a `bool`, or an array
// or struct of those (no reference, pointer, enum or niche), so all zeros is
// a valid value; it is moreover `SyncManager::IDLE` (checked by the KUnit
// test below).
unsafe impl pin_init::Zeroable for SyncManager {}

/// An initialiser of an idle sync manager, written in place (zeroed).
/// O(its size, about 290 KiB).
pub(crate) fn idle_sync_manager() -> impl Init<SyncManager> {
    pin_init::init_zeroed()
}

#[kunit_tests(hlrs_zeroable)]
mod tests {
    use super::*;
    use crate::model::sm;
    use kernel::alloc::KVBox;

    #[test]
    fn a_zeroed_sync_manager_is_idle() -> Result {
        let z = KVBox::init(idle_sync_manager(), GFP_KERNEL)?;
        // Read as idle: values 0, nothing armed, no CQ, nothing queued.
        assert_eq!(z.queued(), 0);
        assert_eq!(z.counts(), (0, 0, 0));
        for d in 0..sm::DCORES as u32 {
            let objs = sm::OBJS_BASE + d * sm::DCORE_STRIDE;
            for reg in [sm::SOB_OBJ, sm::MON_ARM, sm::MON_STATUS, sm::MON_CONFIG] {
                assert_eq!(z.read(objs + reg + 4 * 77), Some(0));
            }
        }
        Ok(())
    }
}
