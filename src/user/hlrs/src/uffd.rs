//! A page whose first access waits until its owner says so: an anonymous
//! page registered with `userfaultfd` (missing mode). A user copy the driver
//! makes into it (an INFO answer, say) stalls for as long as the owner
//! likes, as one into a FUSE-backed or otherwise slow buffer would; tests
//! and the fuzzer use it to check that no lock of the driver is held across
//! a user copy.

use std::io;

const UFFD_API: u64 = 0xAA;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;
const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;

/// `_IOWR(0xAA, nr, size)`.
const fn uffdio(nr: u64, size: u64) -> u64 {
    (3 << 30) | (size << 16) | (0xAA << 8) | nr
}
const UFFDIO_API: u64 = uffdio(0x3F, 24);
const UFFDIO_REGISTER: u64 = uffdio(0x00, 32);
const UFFDIO_ZEROPAGE: u64 = uffdio(0x04, 32);

/// A userfaultfd with one registered, never touched page: any access to it
/// waits until [`StalledPage::zeropage`] serves the fault.
pub struct StalledPage {
    fd: i32,
    page: *mut libc::c_void,
}

// SAFETY: the fd and the page are process-wide; the page's address is only
// handed to the kernel.
unsafe impl Send for StalledPage {}
// SAFETY: as above.
unsafe impl Sync for StalledPage {}

impl StalledPage {
    /// A new page and its userfaultfd (`ENOSYS`/`EPERM` where the kernel
    /// has none or refuses it).
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain system calls on memory and fds of this function;
        // each result is checked, and what was made is undone on an error.
        unsafe {
            let fd =
                libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK) as i32;
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let mut api = [UFFD_API, 0, 0];
            if libc::ioctl(fd, UFFDIO_API as _, api.as_mut_ptr()) != 0 {
                let e = io::Error::last_os_error();
                libc::close(fd);
                return Err(e);
            }
            let page = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if page == libc::MAP_FAILED {
                let e = io::Error::last_os_error();
                libc::close(fd);
                return Err(e);
            }
            let s = Self { fd, page };
            let mut reg = [page as u64, 4096, UFFDIO_REGISTER_MODE_MISSING, 0];
            if libc::ioctl(fd, UFFDIO_REGISTER as _, reg.as_mut_ptr()) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(s)
        }
    }

    /// The page's address.
    pub fn addr(&self) -> u64 {
        self.page as u64
    }

    /// The address of the next fault, if one comes within `ms`. The fd is
    /// non-blocking: a fault `poll` saw may be gone by the `read` (the
    /// faulting access retried or was woken), and a blocking read then
    /// waited for ever (found by the fuzzer's stalled INFO).
    pub fn next_fault(&self, ms: i32) -> Option<u64> {
        let mut p = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd; then a read of one 32-byte `uffd_msg`.
        unsafe {
            if libc::poll(&mut p, 1, ms) != 1 {
                return None;
            }
            let mut msg = [0u8; 32];
            let n = libc::read(self.fd, msg.as_mut_ptr().cast(), 32);
            if n != 32 || msg[0] != UFFD_EVENT_PAGEFAULT {
                return None;
            }
            Some(u64::from_ne_bytes(msg[16..24].try_into().ok()?))
        }
    }

    /// Serve the fault: the page becomes a zero page, the waiter goes on.
    pub fn zeropage(&self) -> io::Result<()> {
        let mut z = [self.addr(), 4096, 0, 0];
        // SAFETY: UFFDIO_ZEROPAGE on the registered page.
        let rc = unsafe { libc::ioctl(self.fd, UFFDIO_ZEROPAGE as _, z.as_mut_ptr()) };
        // EEXIST: already served (the page is there).
        match rc {
            0 => Ok(()),
            _ => match io::Error::last_os_error() {
                e if e.raw_os_error() == Some(libc::EEXIST) => Ok(()),
                e => Err(e),
            },
        }
    }
}

impl Drop for StalledPage {
    fn drop(&mut self) {
        // SAFETY: the page and the fd made in `new`.
        unsafe {
            libc::munmap(self.page, 4096);
            libc::close(self.fd);
        }
    }
}
