// SPDX-License-Identifier: GPL-2.0

//! What connects a job on a simulated engine to the driver that submitted
//! it: [`JobOwner`], asked whether to stop ([`Stop`]) and told how the job
//! ended ([`JobEnd`]).

use super::{fault::EngineFault, packets::PacketError};

/// Why a job must stop before its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Its CS was aborted (another job failed, or its context is closing).
    Aborted,
    /// Its CS ran past its timeout.
    TimedOut,
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

/// Who submitted a job: asked whether to go on, told how it ended.
pub(crate) trait JobOwner: Send + Sync {
    /// Whether the job must stop now; polled before every packet and
    /// between the chunks of a DMA. Must not sleep for long.
    fn stop(&self) -> Option<Stop>;

    /// The job ended on engine `engine` (an upstream engine id). Called
    /// once per submitted job, by the engine, with none of its locks held.
    fn done(&self, engine: u16, end: JobEnd);
}
