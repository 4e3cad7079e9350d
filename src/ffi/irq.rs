// SPDX-License-Identifier: GPL-2.0

//! [`ThreadedIrq`]: a threaded handler on one of a PCI function's MSI-X
//! vectors, freed when dropped.
//!
//! `kernel::irq::ThreadedRegistration` of 7.3 borrows the
//! `pci::IrqVectorRegistration` it came from, so a driver's data cannot hold
//! both (a self-referential struct). This wrapper takes the vector's Linux
//! IRQ number instead and makes the ordering an explicit contract
//! ([`ThreadedIrq::new`]'s `# Safety`): the handler is freed before the
//! vectors are. The handler runs in its IRQ thread (process context: it may
//! take mutexes and call the driver's event sinks), once per interrupt
//! (`IRQF_ONESHOT`: the vector stays masked until the thread returns, and an
//! interrupt raised meanwhile runs it again).
//!
//! A leaf: it imports nothing of the project.

use kernel::{
    bindings,
    error::to_result,
    prelude::*,
    sync::Arc, //
};

/// What a threaded interrupt runs.
pub(crate) trait IrqThread: Send + Sync {
    /// The interrupt fired: do its work (process context, may sleep).
    fn run(&self);
}

/// A threaded handler of `irq` running `T`, registered until dropped.
///
/// # Invariants
///
/// `request_threaded_irq(irq, NULL, thread_fn::<T>, IRQF_ONESHOT, ..,
/// Arc::as_ptr(&data))` succeeded and is undone once, by `Drop`; `data` is
/// kept alive (this `Arc`) until then.
pub(crate) struct ThreadedIrq<T: IrqThread + 'static> {
    irq: u32,
    data: Arc<T>,
}

/// The IRQ thread: run the handler of the cookie.
///
/// # Safety
///
/// `cookie` is the `Arc::as_ptr` of a live `Arc<T>` ([`ThreadedIrq`]'s
/// invariant: it outlives the registration).
unsafe extern "C" fn thread_fn<T: IrqThread + 'static>(
    _irq: c_int,
    cookie: *mut c_void,
) -> bindings::irqreturn_t {
    // SAFETY: the caller's contract: `cookie` points to a live `T`, shared
    // (only `&self` methods are called).
    let data = unsafe { &*cookie.cast::<T>() };
    data.run();
    bindings::irqreturn_t(bindings::irqreturn::IRQ_HANDLED.0)
}

impl<T: IrqThread + 'static> ThreadedIrq<T> {
    /// Register `data`'s thread on the Linux IRQ `irq` as `name`. Sleeps.
    ///
    /// # Safety
    ///
    /// `irq` is a vector of a PCI function allocated (`pci_alloc_irq_vectors`)
    /// for as long as the returned value lives: the caller drops it before
    /// the vectors are freed.
    pub(crate) unsafe fn new(irq: u32, name: &'static CStr, data: Arc<T>) -> Result<Self> {
        let cookie = Arc::as_ptr(&data).cast_mut().cast::<c_void>();
        // SAFETY: `irq` is allocated (the caller's contract); `thread_fn::<T>`
        // matches `irq_handler_t` and reads `cookie` as the `T` it is, kept
        // alive by the returned value until `free_irq` in `Drop`; `name` is
        // static. A NULL primary handler with `IRQF_ONESHOT` is the kernel's
        // default "wake the thread".
        to_result(unsafe {
            bindings::request_threaded_irq(
                irq,
                None,
                Some(thread_fn::<T>),
                bindings::IRQF_ONESHOT as usize,
                name.as_char_ptr(),
                cookie,
            )
        })?;
        // INVARIANT: registered just above with `Arc::as_ptr(&data)`.
        Ok(Self { irq, data })
    }
}

impl<T: IrqThread + 'static> Drop for ThreadedIrq<T> {
    fn drop(&mut self) {
        let cookie = Arc::as_ptr(&self.data).cast_mut().cast::<c_void>();
        // SAFETY: registered with this cookie (type invariant), freed once;
        // `free_irq` waits for a running thread, so `data` (still held) is
        // not used afterwards.
        unsafe { bindings::free_irq(self.irq, cookie) };
    }
}
