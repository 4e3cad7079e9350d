// SPDX-License-Identifier: GPL-2.0

//! The engine thread: runs the model's queued engine work
//! ([`Device::step`]) while there is some, so MMIO handlers never run it
//! inline (a doorbell write returns at once, as on hardware).
//!
//! It sleeps on a [`Kick`] until a register write leaves work pending, then
//! takes the device lock for one bounded step at a time, releasing it
//! between steps so that MMIO and DMA map messages interleave with long
//! engine work.

use std::sync::{Arc, Condvar, Mutex};

use crate::device::{lock, Device};

/// The engine thread's doorbell: "work may be pending" or "stop".
#[derive(Default)]
pub struct Kick {
    state: Mutex<State>,
    cv: Condvar,
}

#[derive(Default)]
struct State {
    kicked: bool,
    stop: bool,
}

impl Kick {
    /// A doorbell nobody rang.
    pub fn new() -> Self {
        Self::default()
    }

    /// Wake the engine thread (work may be pending).
    pub fn kick(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).kicked = true;
        self.cv.notify_one();
    }

    /// Ask the engine thread to end.
    pub fn stop(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        self.cv.notify_one();
    }

    /// Wait for a kick (true) or a stop (false).
    fn wait(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while !s.kicked && !s.stop {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.kicked = false;
        !s.stop
    }
}

/// The engine thread's body: step the model while work is pending, sleep
/// otherwise, until [`Kick::stop`]. Returns the steps run.
pub fn run(dev: Arc<Mutex<Device>>, kick: Arc<Kick>) -> u64 {
    let mut steps = 0u64;
    while kick.wait() {
        loop {
            let more = {
                let mut d = lock(&dev);
                if !d.pending() {
                    break;
                }
                steps = steps.saturating_add(1);
                d.step()
            };
            if !more {
                break;
            }
            // Let a waiting MMIO or DMA message in between two steps.
            std::thread::yield_now();
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_ends_the_thread() {
        let dev = Arc::new(Mutex::new(Device::new(16 << 20).unwrap()));
        let kick = Arc::new(Kick::new());
        let t = {
            let (d, k) = (Arc::clone(&dev), Arc::clone(&kick));
            std::thread::spawn(move || run(d, k))
        };
        kick.kick();
        kick.stop();
        // Nothing was pending: the kicks ran no step.
        assert_eq!(t.join().unwrap(), 0);
    }
}
