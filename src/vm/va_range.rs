// SPDX-License-Identifier: GPL-2.0

//! The VA ranges of one context (upstream `ctx->va_range[HL_VA_RANGE_TYPE_MAX]`,
//! `vm_ctx_init_with_ranges` / `va_range_fini`, common/memory.c:2514-2720).
//!
//! Each range has its own mutex around its [`VaAllocator`], as upstream has one
//! mutex per range. An allocation takes the tree nodes it needs from the
//! allocator's spare cache; when that is not enough they are reserved with the
//! lock dropped, and the allocation is retried.

use crate::{
    asic::{self, AsicProperties, VaSpan},
    hw::backend::MmuKind,
    vm::va_alloc::{AllocOutcome, VaAllocConfig, VaAllocError, VaAllocator, VaRequest},
};
use kernel::{new_mutex, prelude::*, sync::Mutex};

/// The three VA range types (`enum hl_va_range_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VaRangeType {
    /// Host memory mapped with regular (4 KiB) pages.
    Host,
    /// Host memory mapped with huge (2 MiB) pages.
    HostHuge,
    /// Device DRAM.
    Dram,
}

impl VaRangeType {
    /// All types, in upstream's lookup order.
    pub(crate) const ALL: [Self; 3] = [Self::Host, Self::HostHuge, Self::Dram];

    /// The MMU that translates this range.
    pub(crate) fn mmu(self) -> MmuKind {
        match self {
            Self::Dram => MmuKind::Dram,
            Self::Host | Self::HostHuge => MmuKind::Host,
        }
    }

    /// Short name for logs and debugfs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Host => "host",
            Self::HostHuge => "host_huge",
            Self::Dram => "dram",
        }
    }
}

/// The allocator configuration of each range of a Gaudi2 context.
fn config(asic: &AsicProperties, kind: VaRangeType) -> VaAllocConfig {
    match kind {
        // A host buffer whose user VA is 2 MiB aligned gets a 2 MiB aligned
        // device VA even with 4 KiB pages (common/memory.c:1102-1105).
        VaRangeType::Host => VaAllocConfig::new(asic.host_va, asic.host_page_size)
            .with_extra_align(asic.host_huge_page_size)
            .with_hint_reserved(asic::HINTS_HOST_RESERVED),
        VaRangeType::HostHuge => VaAllocConfig::new(asic.host_huge_va, asic.host_huge_page_size)
            .with_hint_reserved(asic::HINTS_HOST_HPAGE_RESERVED),
        VaRangeType::Dram => VaAllocConfig::new(asic.dram_va, asic.dram_page_size)
            .with_hint_reserved(asic::HINTS_DRAM_RESERVED)
            .with_hint_ignored_bits(asic::DRAM_HINTS_ALIGN_MASK),
    }
}

/// The three VA ranges of one context, each with its own mutex around its
/// [`VaAllocator`], as upstream has one mutex per range.
#[pin_data]
pub(crate) struct VaRanges {
    spans: [(VaRangeType, VaSpan); 3],
    #[pin]
    host: Mutex<VaAllocator>,
    #[pin]
    host_huge: Mutex<VaAllocator>,
    #[pin]
    dram: Mutex<VaAllocator>,
}

impl VaRanges {
    /// The ranges of a new context on `asic`: each one free block.
    pub(crate) fn new(asic: &AsicProperties) -> Result<impl PinInit<Self, Error>> {
        let host = VaAllocator::new(&config(asic, VaRangeType::Host));
        let host_huge = VaAllocator::new(&config(asic, VaRangeType::HostHuge));
        let dram = VaAllocator::new(&config(asic, VaRangeType::Dram));
        let spans = [
            (VaRangeType::Host, asic.host_va),
            (VaRangeType::HostHuge, asic.host_huge_va),
            (VaRangeType::Dram, asic.dram_va),
        ];
        let (host, host_huge, dram) = (host?, host_huge?, dram?);
        Ok(try_pin_init!(Self {
            spans,
            host <- new_mutex!(host),
            host_huge <- new_mutex!(host_huge),
            dram <- new_mutex!(dram),
        }))
    }

    /// The allocator of one range.
    pub(crate) fn range(&self, kind: VaRangeType) -> &Mutex<VaAllocator> {
        match kind {
            VaRangeType::Host => &self.host,
            VaRangeType::HostHuge => &self.host_huge,
            VaRangeType::Dram => &self.dram,
        }
    }

    /// The range that holds all of `[addr, addr + size)` (`hl_get_va_range_type`),
    /// checked in upstream's order. Unlike upstream (`hl_mem_area_inside_range`
    /// with an inclusive end), an area ending on a range's last byte is inside.
    /// O(1).
    pub(crate) fn range_type(&self, addr: u64, size: u64) -> Option<VaRangeType> {
        self.spans
            .iter()
            .find(|(_, span)| span.contains_area(addr, size))
            .map(|(k, _)| *k)
    }

    /// Allocate VA in range `kind` (`get_va_block`). O(log n).
    ///
    /// Served from the range's spare tree nodes under its lock when they cover
    /// the request (no memory allocation); otherwise the nodes are reserved
    /// after dropping the lock and the request is placed again under it, so
    /// the range lock is never held across an allocation.
    pub(crate) fn alloc(&self, kind: VaRangeType, req: VaRequest) -> Result<u64, VaAllocError> {
        let range = self.range(kind);
        let cached = range.lock().alloc_cached(req);
        match cached {
            Ok(start) => return Ok(start),
            Err(AllocOutcome::Failed(e)) => return Err(e),
            Err(AllocOutcome::NeedNodes) => {}
        }
        let res = VaAllocator::prepare(GFP_KERNEL).map_err(|_| VaAllocError::NoMemory)?;
        range.lock().alloc_with(req, res)
    }

    /// Give VA back (`add_va_block`). `EINVAL` if it is not exactly one
    /// allocation of that range. O(log n), never allocates.
    pub(crate) fn free(&self, kind: VaRangeType, start: u64, size: u64) -> Result {
        self.range(kind).lock().free(start, size)
    }

    /// Drop every allocation of every range (`va_range_fini` at teardown);
    /// returns how many were still live.
    pub(crate) fn clear(&self) -> usize {
        VaRangeType::ALL
            .iter()
            .map(|&k| self.range(k).lock().clear())
            .sum()
    }

    /// Whether every range is one free block again.
    pub(crate) fn is_pristine(&self) -> bool {
        VaRangeType::ALL
            .iter()
            .all(|&k| self.range(k).lock().is_pristine())
    }
}

#[kunit_tests(hlrs_va_range)]
mod tests {
    use super::*;

    /// The VA ranges of a new context on `asic` (and nothing in place of the
    /// device the ranges need none of).
    fn vm_of(asic: &AsicProperties) -> Result<((), Pin<KBox<VaRanges>>)> {
        Ok(((), KBox::pin_init(VaRanges::new(asic)?, GFP_KERNEL)?))
    }

    #[test]
    fn range_type_lookup_has_no_off_by_one() -> Result {
        let asic = AsicProperties::gaudi2(6, 0)?;
        let (_d, vm) = vm_of(&asic)?;
        let host_end = asic.host_va.end;
        assert_eq!(
            vm.range_type(asic.host_va.start, 4096),
            Some(VaRangeType::Host)
        );
        // The last page of each range is inside it (upstream says no).
        assert_eq!(
            vm.range_type(host_end - 4096, 4096),
            Some(VaRangeType::Host)
        );
        assert_eq!(vm.range_type(host_end - 4096, 8192), None);
        assert_eq!(vm.range_type(host_end, 4096), Some(VaRangeType::HostHuge));
        let dram_last = asic.dram_va.end - asic.dram_page_size;
        assert_eq!(
            vm.range_type(dram_last, asic.dram_page_size),
            Some(VaRangeType::Dram)
        );
        assert_eq!(vm.range_type(0, 4096), None);
        assert_eq!(vm.range_type(u64::MAX, 2), None);
        assert_eq!(vm.range_type(asic.dram_va.start, 0), None);
        Ok(())
    }

    #[test]
    fn each_range_allocates_from_its_start() -> Result {
        let asic = AsicProperties::gaudi2(6, 0)?;
        let (_d, vm) = vm_of(&asic)?;
        let page = asic.dram_page_size;
        let a = vm
            .alloc(VaRangeType::Dram, VaRequest::new(2 * page))
            .map_err(Error::from)?;
        assert_eq!(a, asic.dram_va.start);
        let b = vm
            .alloc(VaRangeType::Dram, VaRequest::new(1))
            .map_err(Error::from)?;
        assert_eq!(b, a + 2 * page);
        let h = vm
            .alloc(VaRangeType::Host, VaRequest::new(4096))
            .map_err(Error::from)?;
        assert_eq!(h, asic.host_va.start);
        let hh = vm
            .alloc(VaRangeType::HostHuge, VaRequest::new(1))
            .map_err(Error::from)?;
        assert_eq!(hh, asic.host_huge_va.start);
        assert!(!vm.is_pristine());
        vm.free(VaRangeType::Dram, a, 2 * page)?;
        assert_eq!(vm.free(VaRangeType::Dram, a, 2 * page), Err(EINVAL));
        // Teardown drops what is left and reports it.
        assert_eq!(vm.clear(), 3);
        assert!(vm.is_pristine());
        Ok(())
    }

    #[test]
    fn dram_hints_and_the_reserved_span() -> Result {
        let asic = AsicProperties::gaudi2(6, 0)?;
        let (_d, vm) = vm_of(&asic)?;
        let page = asic.dram_page_size;
        // A page-aligned hint (low 48 bits a page multiple) is honoured exactly.
        let hint = asic.dram_va.start + 10 * page;
        let got = vm
            .alloc(VaRangeType::Dram, VaRequest::new(page).with_hint(hint))
            .map_err(Error::from)?;
        assert_eq!(got, hint);
        // Forced and occupied: a distinct error (upstream: ENOMEM).
        let again = vm.alloc(
            VaRangeType::Dram,
            VaRequest::new(page).with_forced_hint(hint),
        );
        assert_eq!(again.map_err(Error::from), Err(EADDRINUSE));
        // Not page aligned: ignored without FORCE_HINT...
        let off = vm.alloc(
            VaRangeType::Dram,
            VaRequest::new(page).with_hint(hint + 4096),
        );
        assert_eq!(off.map_err(Error::from), Ok(asic.dram_va.start));
        // ...and refused with it.
        let forced = vm.alloc(
            VaRangeType::Dram,
            VaRequest::new(page).with_forced_hint(hint + 4096),
        );
        assert_eq!(forced.map_err(Error::from), Err(EINVAL));
        // A hint inside the reserved span is honoured, no-hint allocations never land there.
        let r = asic::HINTS_DRAM_RESERVED;
        let start = asic.dram_va.start;
        let first_in = start + (r.start - start).div_ceil(page) * page;
        let got = vm
            .alloc(
                VaRangeType::Dram,
                VaRequest::new(page).with_forced_hint(first_in),
            )
            .map_err(Error::from)?;
        assert_eq!(got, first_in);
        Ok(())
    }
}
