// SPDX-License-Identifier: GPL-2.0

//! Bring-up of a PCI Gaudi2 as upstream's probe does it, up to the point
//! where the driver's MMU owner takes over ([`probe`]):
//!
//! 1. BAR sizes (`gaudi2_early_init`, gaudi2/gaudi2.c:3460-3480): BAR0
//!    exactly 256 MiB and BAR2 exactly 16 KiB, else `ENODEV`; BAR4 is the
//!    DRAM window, whatever its size.
//! 2. `hl_pci_init` (common/pci/pci.c:378-418): memory enabled, bus master,
//!    BAR0 and BAR4 mapped, a 64-bit DMA mask. The iATU is the firmware's
//!    (`iatu_done_by_fw`, gaudi2/gaudi2.c:3482-3489): BAR4 is the window at
//!    `DRAM_PHYS_BASE`.
//! 3. The boot status (`hl_fw_read_preboot_status`, common/firmware_if.c:1728-1750):
//!    `CPU_BOOT_STATUS` polled (25 s, every 10 ms) for a state upstream
//!    accepts ([`crate::asic::gaudi2_regs::boot_status_accepted`]), then the
//!    boot error register; all ones means no device (`ENODEV`), a timeout
//!    or a reported error `EIO` (upstream: `EIO`). A dirty `HW_STATE` would
//!    need the hard reset upstream does then (gaudi2/gaudi2.c:3505-3520),
//!    which this driver does not implement: `EIO`.
//! 4. MSI-X: exactly 128 vectors (`gaudi2_enable_msix`, gaudi2/gaudi2.c:4672-4677),
//!    or the probe fails with `pci_alloc_irq_vectors`'s errno, as upstream's.
//!    The handlers of vectors 21 (completion) and 0 (the event queue) are
//!    requested by the PCI driver once the engines are set up
//!    ([`super::queues`]).
//! 5. The ASIC's geometry: the working HBMs (module parameter `hbms`) and a
//!    DRAM of BAR4's size (at most HBMs x 16 GiB; upstream asks the
//!    firmware, `cpucp_info`), which must hold two DRAM pages (`ENODEV`).
//! 6. The CPU queues and their handshake with the firmware
//!    ([`super::cpu_queue`], `gaudi2_init_cpu_queues`).
//! 7. MMU init up to the hop-0 commits ([`super::mmu`]) and the HMMU page
//!    tables cleared through BAR4 (`gaudi2_mmu_clear_pgt_range`,
//!    gaudi2/gaudi2.c:3432-3450, which memsets them with an EDMA).
//!
//! Skipped from upstream's init: the firmware loading (the model boots
//! "already up") and the CPU-CP packets of late init (`INFO_GET`,
//! `MAX_POWER_GET`, `ENABLE_PCI_ACCESS`: the driver keeps its own
//! geometry), the security and binning masks (a full device, every HMMU),
//! clock gating, the MME/TPC/NIC engines.

use super::{regs::Mmio, PciGaudi2};
use crate::asic::{
    gaudi2_regs::{self as r},
    AsicProperties, DRAM_PHYS_BASE, HMMU_PAGE_TABLES_SIZE,
};
use crate::ffi::{pci::EnabledDevice, pci_dma::DmaStreams};
use kernel::{
    device::{Bound, Core, Device},
    new_mutex,
    pci::{self, IrqType, IrqTypes, IrqVectorRegistration},
    prelude::*,
    sync::Arc,
};

/// What a successful probe holds: the hardware, its interrupt vectors and
/// its enabled state (disabled again last).
pub(crate) struct Probed<'bound> {
    /// The device, MMUs waiting for their hop 0s.
    pub(crate) hw: Arc<PciGaudi2>,
    /// The 128 MSI-X vectors.
    pub(crate) irqs: IrqVectorRegistration<'bound>,
    /// Memory access and bus mastering.
    pub(crate) enabled: EnabledDevice,
    /// The device's geometry.
    pub(crate) asic: AsicProperties,
}

/// Most DRAM a Gaudi2 with `hbms` HBMs has.
const fn dram_max(hbms: u32) -> u64 {
    hbms as u64 * (16 << 30)
}

/// The size checks of `gaudi2_early_init`: BAR0 and BAR2 exactly upstream's.
fn check_bars(pdev: &pci::Device<Core<'_>>) -> Result {
    for (bar, want) in [
        (r::SRAM_CFG_BAR_ID, r::CFG_BAR_SIZE),
        (r::MSIX_BAR_ID, r::MSIX_BAR_SIZE),
    ] {
        let len = pdev.resource_len(bar)?;
        if len != want {
            dev_err!(
                pdev.as_ref(),
                "Not habanalabs_rs? BAR {} size {:#x}, expecting {:#x}\n",
                bar,
                len,
                want
            );
            return Err(ENODEV);
        }
    }
    Ok(())
}

/// `hl_fw_read_preboot_status` and the `HW_STATE` check, as far as this
/// driver goes (see the module documentation). Sleeps.
fn boot_check(pdev: &pci::Device<Core<'_>>, mmio: &Mmio) -> Result<u32> {
    let status = mmio
        .poll(
            r::CPU_BOOT_STATUS,
            r::boot_status_accepted,
            r::FW_POLL_INTERVAL_US,
            r::PREBOOT_TIMEOUT_US,
        )
        .inspect_err(|e| {
            dev_err!(pdev.as_ref(), "CPU boot ready timeout ({:?})\n", e);
        })
        .map_err(|e| if e == ENODEV { ENODEV } else { EIO })?;
    let err0 = mmio.rreg(r::CPU_BOOT_ERR0)?;
    if err0 & r::BOOT_ERR0_ENABLED != 0 && err0 & !r::BOOT_ERR0_ENABLED != 0 {
        dev_err!(
            pdev.as_ref(),
            "CPU boot failed due to an error ({:#x})\n",
            err0
        );
        return Err(EIO);
    }
    if mmio.rreg(r::HW_STATE)? == r::HW_STATE_DIRTY {
        dev_err!(
            pdev.as_ref(),
            "H/W state is dirty: a hard reset is needed, which this driver does not do\n"
        );
        return Err(EIO);
    }
    Ok(status)
}

/// The CPU queues, the KDMA's buffer, the MMUs' first steps, and the HMMU
/// page tables at `mmu_pgt_addr` cleared through BAR4. Sleeps.
fn bring_up(hw: &PciGaudi2, dev: &Device<Bound>, mmu_pgt_addr: u64) -> Result {
    hw.init_cpu_queues(dev)?;
    hw.init_kdma(dev)?;
    hw.mmu_init_start()?;
    hw.mmio
        .dram_fill(DRAM_PHYS_BASE, mmu_pgt_addr, HMMU_PAGE_TABLES_SIZE, 0)
}

/// Bring the Gaudi2 at `pdev` up to its MMUs' hop-0 commits (see the module
/// documentation), with `hbms` working HBMs. Everything acquired is given
/// back on an error. Sleeps.
pub(crate) fn probe<'bound>(
    pdev: &'bound pci::Device<Core<'_>>,
    hbms: u32,
) -> Result<Probed<'bound>> {
    check_bars(pdev)?;
    let bar4_len = pdev.resource_len(r::DRAM_BAR_ID)?;
    let bar0_start = pdev.resource_start(r::SRAM_CFG_BAR_ID)?;
    let bar4_start = pdev.resource_start(r::DRAM_BAR_ID)?;
    let enabled = EnabledDevice::enable(pdev)?;
    let bar0 = pdev
        .iomap_region(r::SRAM_CFG_BAR_ID, c"habanalabs_rs")?
        .into_devres()?;
    let bar4 = pdev
        .iomap_region(r::DRAM_BAR_ID, c"habanalabs_rs")?
        .into_devres()?;
    let streams = DmaStreams::new(pdev, r::DMA_MASK_BITS)?;
    let mmio = Mmio::new(bar0, bar4, bar4_len);
    let boot = boot_check(pdev, &mmio)?;
    let types = IrqTypes::default().with(IrqType::MsiX);
    let irqs = pdev
        .alloc_irq_vectors(r::MSIX_ENTRIES, r::MSIX_ENTRIES, types)
        .inspect_err(|e| {
            dev_err!(
                pdev.as_ref(),
                "MSI-X: Failed to enable support -- {}/{:?}\n",
                r::MSIX_ENTRIES,
                e
            )
        })?;
    let asic = AsicProperties::gaudi2(hbms, bar4_len.min(dram_max(hbms))).map_err(|_| {
        dev_err!(
            pdev.as_ref(),
            "a DRAM window of {} MiB holds less than two DRAM pages of {} HBMs\n",
            bar4_len >> 20,
            hbms
        );
        ENODEV
    })?;
    let (dram_base, dram_end) = (asic.dram_base, asic.dram_end());
    let hw = Arc::pin_init(
        pin_init!(PciGaudi2 {
            mmio,
            streams,
            mmu_regs <- new_mutex!(()),
            hbms,
            hmmu_mask: r::HMMU_FULL_MASK,
            dram_base,
            dram_end,
            bar0_start,
            bar4_start,
            pdev: {
                let plain: &pci::Device = pdev;
                plain.into()
            },
            cpu_q <- new_mutex!(None),
            skip_inv: kernel::sync::atomic::Atomic::new(0),
            skipped_inv: kernel::sync::atomic::Atomic::new(0),
            mapped_blocks <- new_mutex!([0; super::MAPPED_BLOCK_WORDS]),
            kdma <- new_mutex!(None),
        }),
        GFP_KERNEL,
    )?;
    bring_up(&hw, pdev.as_ref(), asic.mmu_pgt_addr)?;
    dev_info!(
        pdev.as_ref(),
        "Gaudi2: boot status {}, {} MSI-X vectors, DRAM window {} MiB (DRAM {} MiB, {} HBMs)\n",
        boot,
        irqs.len(),
        bar4_len >> 20,
        asic.dram_size >> 20,
        hbms
    );
    Ok(Probed {
        hw,
        irqs,
        enabled,
        asic,
    })
}
