// SPDX-License-Identifier: GPL-2.0

//! The live dma-buf exports of one context (what debugfs lists), by
//! sequence number; [`super::dmabuf`] adds and removes them.

use crate::vm::page_pack::PhysPgPack;
use kernel::{rbtree::RBTree, sync::Arc};

/// What the context's export list shows (debugfs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExportRecord {
    /// User VA of the mapping.
    pub(crate) va: u64,
    /// Offset within the pack.
    pub(crate) offset: u64,
    /// Bytes exported.
    pub(crate) size: u64,
}

/// The live exports of a context, by sequence number.
pub(crate) struct ExportList {
    pub(super) by_seq: RBTree<u64, (ExportRecord, Arc<PhysPgPack>)>,
    pub(super) next: u64,
}

impl ExportList {
    /// None.
    pub(crate) fn new() -> Self {
        Self {
            by_seq: RBTree::new(),
            next: 0,
        }
    }

    /// Every live export with its pack, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &(ExportRecord, Arc<PhysPgPack>)> {
        self.by_seq.values()
    }
}
