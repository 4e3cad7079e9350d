// SPDX-License-Identifier: GPL-2.0

//! Validation of the module parameters, kept apart from `module!` so that it
//! can be tested.

use crate::asic::AsicProperties;
use kernel::prelude::*;

/// Most simulated devices one load may create.
pub(crate) const MAX_DEVICES: u32 = 8;

/// A rejected parameter set: the errno and a message for the kernel log.
#[derive(Debug)]
pub(crate) struct ParamError {
    errno: Error,
    msg: &'static str,
}

impl ParamError {
    const fn new(msg: &'static str) -> Self {
        Self { errno: EINVAL, msg }
    }
    /// The errno `init` returns.
    pub(crate) fn errno(&self) -> Error {
        self.errno
    }
    /// What was wrong, for the log.
    pub(crate) fn msg(&self) -> &'static str {
        self.msg
    }
}

/// The validated configuration of one module load.
#[derive(Debug)]
pub(crate) struct Config {
    /// Number of simulated devices.
    pub(crate) devices: u32,
    /// The ASIC model every simulated device uses.
    pub(crate) asic: AsicProperties,
}

impl Config {
    /// Check the raw parameters and derive the ASIC model. O(1).
    pub(crate) fn validate(devices: u32, hbms: u32, dram_mib: u64) -> Result<Self, ParamError> {
        Self::validate_with_pci(devices, hbms, dram_mib, false)
    }

    /// [`Self::validate`] with the `pci` parameter: with `pci` set, no
    /// simulated device at all (`devices=0`) is allowed too (the PCI
    /// devices are then the only ones, from index 0). O(1).
    pub(crate) fn validate_with_pci(
        devices: u32,
        hbms: u32,
        dram_mib: u64,
        pci: bool,
    ) -> Result<Self, ParamError> {
        if (devices == 0 && !pci) || devices > MAX_DEVICES {
            return Err(ParamError::new(
                "devices must be between 1 and 8 (0 only with pci=1)",
            ));
        }
        if !(crate::asic::GAUDI2_MIN_HBMS..=crate::asic::GAUDI2_HBM_NUM).contains(&hbms) {
            return Err(ParamError::new(
                "hbms must be 5 or 6 (a Gaudi2 runs with at most one binned HBM)",
            ));
        }
        let dram = dram_mib
            .checked_mul(1 << 20)
            .ok_or(ParamError::new("dram_mib is too large"))?;
        let asic = AsicProperties::gaudi2(hbms, dram).map_err(|_| {
            ParamError::new("dram_mib must hold at least two DRAM pages and at most hbms x 16 GiB")
        })?;
        Ok(Self { devices, asic })
    }
}

#[kunit_tests(hlrs_params)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_a_full_gaudi2() -> Result {
        let c = Config::validate(1, 6, 0).map_err(|e| e.errno())?;
        assert_eq!(c.devices, 1);
        assert_eq!(c.asic.dram_size, 96 << 30);
        Ok(())
    }

    #[test]
    fn device_count_is_bounded() {
        assert!(Config::validate(0, 6, 0).is_err());
        assert!(Config::validate(8, 6, 0).is_ok());
        assert!(Config::validate(9, 6, 0).is_err());
        assert!(Config::validate_with_pci(0, 6, 0, true).is_ok());
        assert!(Config::validate_with_pci(9, 6, 0, true).is_err());
    }

    #[test]
    fn hbm_count_is_bounded() {
        assert!(Config::validate(1, 0, 0).is_err());
        assert!(Config::validate(1, 4, 0).is_err());
        assert!(Config::validate(1, 7, 0).is_err());
        assert!(Config::validate(1, 5, 0).is_ok());
    }

    #[test]
    fn dram_size_is_checked_without_overflow() {
        assert!(Config::validate(1, 6, u64::MAX).is_err());
        assert!(Config::validate(1, 6, 768).is_err());
        assert!(Config::validate(1, 6, 1536).is_ok());
        assert!(Config::validate(1, 6, 96 << 10).is_ok());
        assert!(Config::validate(1, 6, (96 << 10) + 1).is_err());
        if let Err(e) = Config::validate(1, 6, 768) {
            assert_eq!(e.errno(), EINVAL);
        }
    }
}
