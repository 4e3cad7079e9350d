// SPDX-License-Identifier: GPL-2.0

//! What the command processor asks of the job it runs: [`JobOwner`], asked
//! whether to stop ([`Stop`]: its queue was halted) and told how the job
//! ended ([`JobEnd`]). The simulation's job ([`super::qman::HwJob`])
//! implements it and turns the end into the driver's
//! [`crate::hw::engines::EngineEvent`].

use super::{fault::EngineFault, packets::PacketError};

/// Why a job must stop before its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Its queue was halted and reset (the driver's timeout, an abort, or
    /// its context's close).
    Halted,
}

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JobEnd {
    /// Every packet executed.
    Done,
    /// An access faulted (fetching the CB or executing a packet).
    Fault(EngineFault),
    /// The packet at `addr` cannot be executed.
    BadPacket {
        /// Its device address.
        addr: u64,
        /// Why.
        error: PacketError,
    },
    /// The owner said to stop.
    Stopped(Stop),
}

/// The job being run: asked whether to go on, told how it ended.
pub(crate) trait JobOwner: Send + Sync {
    /// Whether the job must stop now; polled before every packet and
    /// between the chunks of a DMA. Must not sleep for long.
    fn stop(&self) -> Option<Stop>;

    /// The job ended on engine `engine` (an upstream engine id). Called
    /// once per submitted job, by the engine, with none of its locks held.
    fn done(&self, engine: u16, end: JobEnd);
}
