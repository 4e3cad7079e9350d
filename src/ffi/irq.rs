// SPDX-License-Identifier: GPL-2.0

//! [`MsixHandlers`]: a PCI function's MSI-X vectors together with the
//! threaded handlers requested on them, the handlers freed before the
//! vectors.
//!
//! `kernel::irq::ThreadedRegistration` of 7.3 borrows the
//! `pci::IrqVectorRegistration` it came from, so a driver's data cannot hold
//! both (a self-referential struct). [`MsixHandlers`] owns the vectors and
//! registers each handler ([`ThreadedIrq`]) by the vector's Linux IRQ
//! number; owning both is what makes the ordering hold (field order), so
//! its API is safe. A handler runs in its IRQ thread (process context: it may
//! take mutexes and call the driver's event sinks), once per interrupt
//! (`IRQF_ONESHOT`: the vector stays masked until the thread returns, and an
//! interrupt raised meanwhile runs it again).
//!
//! A leaf: it imports nothing of the project.

use kernel::{
    bindings,
    error::to_result,
    irq::IrqRequest,
    pci::IrqVectorRegistration,
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
struct ThreadedIrq<T: IrqThread + 'static> {
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
    unsafe fn new(irq: u32, name: &'static CStr, data: Arc<T>) -> Result<Self> {
        let cookie = Arc::as_ptr(&data).cast_mut().cast::<c_void>();
        // `thread_fn::<T>` reads `cookie` as the `T` it is, kept alive by the
        // returned value until `free_irq` in `Drop`. A NULL primary handler
        // with `IRQF_ONESHOT` is the kernel's default "wake the thread".
        // SAFETY: `irq` is allocated (the caller's contract), the callback
        // matches `irq_handler_t` and `cookie` outlives it (above), `name` is static.
        let ret = unsafe {
            bindings::request_threaded_irq(
                irq,
                None,
                Some(thread_fn::<T>),
                bindings::IRQF_ONESHOT as usize,
                name.as_char_ptr(),
                cookie,
            )
        };
        to_result(ret)?;
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

/// A registered handler, whatever it runs (dropped to free it).
trait Registered: Send + Sync {}

impl<T: IrqThread + 'static> Registered for ThreadedIrq<T> {}

/// A PCI function's MSI-X vectors and the threaded handlers on them.
///
/// # Invariants
///
/// Every handler in `handlers` is registered on a vector of `irqs`, and is
/// freed before `irqs` is (fields drop in declaration order).
pub(crate) struct MsixHandlers<'bound> {
    handlers: KVec<KBox<dyn Registered>>,
    irqs: IrqVectorRegistration<'bound>,
}

impl<'bound> MsixHandlers<'bound> {
    /// The vectors `irqs`, no handler yet.
    pub(crate) fn new(irqs: IrqVectorRegistration<'bound>) -> Self {
        Self {
            handlers: KVec::new(),
            irqs,
        }
    }

    /// Run `data`'s thread on vector `index` as `name` until `self` is
    /// dropped. `EINVAL` for a vector not allocated, `ENOMEM`, or
    /// `request_threaded_irq`'s errno. Sleeps.
    pub(crate) fn request<T: IrqThread + 'static>(
        &mut self,
        index: usize,
        name: &'static CStr,
        data: Arc<T>,
    ) -> Result {
        let irq = IrqRequest::from(self.irqs.index(index)?).irq();
        self.handlers.reserve(1, GFP_KERNEL)?;
        // SAFETY: `irq` is a vector of `self.irqs`, which outlives the
        // handler (type invariant: the handlers drop first).
        let h = unsafe { ThreadedIrq::new(irq, name, data) }?;
        let h: KBox<dyn Registered> = KBox::new(h, GFP_KERNEL)?;
        // INVARIANT: registered on a vector of `irqs`; room was reserved.
        let _ = self.handlers.push_within_capacity(h);
        Ok(())
    }
}
