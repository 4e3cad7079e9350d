// SPDX-License-Identifier: GPL-2.0

//! The module's debugfs files: every `unsafe` of creating them and of their
//! file operations. What they show is safe Rust in `debugfs.rs` and
//! `debugfs_abi.rs`.
//!
//! A file reads in one of four ways ([`Read`]):
//!
//! - **text** (upstream's `seq_file` and `simple_attr` files, and all of
//!   this module's own): a read at offset 0 renders the file afresh, once,
//!   into a buffer that grows by doubling (what is rendered is copied, never
//!   rendered again), and keeps that rendering for the open file; a read at
//!   another offset continues from the rendering kept (the first one made
//!   if there is none), so `cat` sees one consistent rendering and a
//!   `pread(.., 0)` on a long-lived fd sees the state of that read. (The
//!   kernel's Rust `debugfs` files are `seq_file`s, which render the whole
//!   file again at every doubling of their buffer, each time under the locks
//!   the rendering takes.) A renderer's errno is the read's.
//! - **value** (upstream's own `read` of `data32`/`data64`/`clk_gate`): a
//!   read at offset 0 renders into a small buffer on the stack and copies
//!   from it; a read at any other offset is end of file.
//! - **blob** (`debugfs_create_blob`): the bytes a read at offset 0 finds,
//!   kept by reference for the continuation as text is.
//! - **none**: `EINVAL`, as debugfs answers for a file without `read`.
//!
//! A write ([`Write`]) hands the written bytes either trimmed to a `&str`
//! (this module's own files) or raw, at most as many as upstream's parser
//! copies ([`Write::Raw`]: upstream's files parse them with the kernel's
//! `kstrto*` rules, a trailing newline and NUL included).
//!
//! No lock of ours is held while user memory is copied: a rendering is made
//! with none held by this file (the renderers take the module's locks and
//! copy out from under them), and an open file's rendering is shared by
//! reference (`Arc`), its mutex held only to swap or clone that reference.
//!
//! The file operations have `owner = THIS_MODULE`, so an open file pins the
//! module (the kernel's Rust `debugfs` leaves `owner` unset, so its `release`
//! could run after the module is gone).
//!
//! Lifetime: a file's [`Node`] (its `i_private`) and the data it points to
//! belong to the [`Dir`] the file is in, and are freed only after
//! `debugfs_remove` of that directory, which waits for the file callbacks in
//! progress and makes later ones fail (debugfs's proxy file operations);
//! `release`, which still runs after that, touches only the file's own
//! rendering.

use core::{marker::PhantomData, pin::Pin, ptr::null_mut};
use kernel::{
    alloc::KVVec,
    bindings,
    fmt,
    new_mutex,
    prelude::*,
    str::CString,
    sync::{Arc, Mutex},
    uaccess::{UserPtr, UserSlice}, //
};

/// `FMODE_READ` (include/linux/fs.h): the file was opened for reading.
const FMODE_READ: bindings::fmode_t = 1;

/// The longest text a write to one of our own files may carry (`pin ADDR
/// SIZE` is the longest command).
const MAX_WRITE: usize = 2 * 4096 + 64;

/// The most bytes a raw write copies (upstream's largest parser buffer is
/// `kstrtoull_from_user`'s 66 bytes).
pub(crate) const RAW_MAX: usize = 80;

/// The longest text a value file renders (upstream's `tmp_buf[32]`).
const VALUE_LEN: usize = 64;

/// A renderer into a `Formatter` (the kernel's Rust debugfs signature).
pub(crate) type ShowFn<T> = fn(&T, &mut fmt::Formatter<'_>) -> fmt::Result;

/// A renderer that may fail with an errno, which the read returns.
pub(crate) type TryShowFn<T> = fn(&T, &mut fmt::Formatter<'_>) -> Result;

/// The bytes a blob file serves (see [`Read::Blob`]); `None` is empty.
pub(crate) type BytesFn<T> = fn(&T) -> Option<Arc<KVVec<u8>>>;

/// What a raw write did (see [`Write::Raw`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wrote {
    /// Took it all: the write returns its count.
    All,
    /// Took nothing: the write returns 0 (upstream's answer during a reset).
    Nothing,
}

/// A raw write's handler: the bytes copied (at most the file's cap) and the
/// count the caller wrote.
pub(crate) type RawFn<T> = fn(&T, &[u8], usize) -> Result<Wrote>;

/// How a file reads (see the module documentation).
pub(crate) enum Read<T: 'static> {
    /// No `read`: `EINVAL`.
    None,
    /// Text rendered at a read at offset 0, continued from at other offsets.
    Text(ShowFn<T>),
    /// As `Text`, with a renderer that may fail.
    TryText(TryShowFn<T>),
    /// Rendered (at most [`VALUE_LEN`] bytes) at every read at offset 0;
    /// end of file at any other offset.
    Value(TryShowFn<T>),
    /// A blob's bytes, taken at a read at offset 0.
    Blob(BytesFn<T>),
}

/// How a file takes a write.
pub(crate) enum Write<T: 'static> {
    /// Refused with this errno.
    Refuse(Error),
    /// The text (at most [`MAX_WRITE`] bytes of UTF-8), trimmed.
    Trimmed(fn(&T, &str) -> Result),
    /// The first `cap` bytes as written (fewer if fewer were written; none
    /// are copied when `cap` is 0), with the count written.
    Raw(usize, RawFn<T>),
}

/// What one file shows when read and what a write to it does.
pub(crate) struct FileDef<T: 'static> {
    name: &'static CStr,
    read: Read<T>,
    write: Write<T>,
    /// The file's mode, when not the default of its kind.
    mode: Option<bindings::umode_t>,
}

impl<T> FileDef<T> {
    /// A file of `read` and `write` (mode 0600 if it takes writes, else 0400).
    pub(crate) const fn new(name: &'static CStr, read: Read<T>, write: Write<T>) -> Self {
        Self {
            name,
            read,
            write,
            mode: None,
        }
    }

    /// A read-only text file (mode 0400; a write is `EPERM`).
    pub(crate) const fn ro(name: &'static CStr, show: ShowFn<T>) -> Self {
        Self::new(name, Read::Text(show), Write::Refuse(EPERM))
    }

    /// A read-write text file (mode 0600): `store` gets the written text,
    /// trimmed.
    pub(crate) const fn rw(
        name: &'static CStr,
        show: ShowFn<T>,
        store: fn(&T, &str) -> Result,
    ) -> Self {
        Self::new(name, Read::Text(show), Write::Trimmed(store))
    }

    /// The same file with mode `mode` (upstream's files are mostly 0644).
    pub(crate) const fn with_mode(mut self, mode: bindings::umode_t) -> Self {
        self.mode = Some(mode);
        self
    }

    fn mode(&self) -> bindings::umode_t {
        match (self.mode, &self.write) {
            (Some(mode), _) => mode,
            (None, Write::Refuse(_)) => 0o400,
            (None, _) => 0o600,
        }
    }
}

/// The `i_private` of one file: its definition and the directory's data.
///
/// # Invariants
///
/// `data` points to the data of the [`Dir`] that owns this node, alive and
/// never moved while the node is.
struct Node<T: 'static> {
    data: *const T,
    def: &'static FileDef<T>,
}

impl<T> Node<T> {
    fn data(&self) -> &T {
        // SAFETY: by the invariant the data outlives the node.
        unsafe { &*self.data }
    }
}

/// Renders through `core::fmt` a renderer of either kind; the errno of a
/// failing one is kept in the cell.
struct Show<'a, T: 'static> {
    data: &'a T,
    show: Renderer<T>,
    err: core::cell::Cell<Option<Error>>,
}

#[derive(Clone, Copy)]
enum Renderer<T: 'static> {
    Plain(ShowFn<T>),
    Try(TryShowFn<T>),
}

impl<'a, T> Show<'a, T> {
    fn new(data: &'a T, show: Renderer<T>) -> Self {
        Self {
            data,
            show,
            err: core::cell::Cell::new(None),
        }
    }

    /// Render into `out`: the renderer's errno, or `ENOMEM` when `out` is full.
    fn render(&self, out: &mut impl fmt::Write) -> Result {
        if write!(out, "{}", self).is_err() {
            return Err(self.err.get().unwrap_or(ENOMEM));
        }
        Ok(())
    }
}

impl<T> core::fmt::Display for Show<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.show {
            Renderer::Plain(show) => show(self.data, f),
            Renderer::Try(show) => show(self.data, f).map_err(|e| {
                self.err.set(Some(e));
                fmt::Error
            }),
        }
    }
}

/// A file's text: a buffer that grows by doubling.
struct Text(KVVec<u8>);

impl fmt::Write for Text {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0
            .extend_from_slice(s.as_bytes(), GFP_KERNEL)
            .map_err(|_| fmt::Error)
    }
}

/// A value's text: at most [`VALUE_LEN`] bytes on the stack.
struct Value {
    buf: [u8; VALUE_LEN],
    len: usize,
}

impl fmt::Write for Value {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        self.buf
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// One rendering of a file: its text, or a blob's bytes.
enum Snapshot {
    Text(Text),
    Bytes(Arc<KVVec<u8>>),
}

impl Snapshot {
    fn bytes(&self) -> &[u8] {
        match self {
            Self::Text(t) => &t.0,
            Self::Bytes(b) => b,
        }
    }

    /// Render `node` (a text or blob file) afresh. O(the file's text).
    fn render<T>(node: &Node<T>) -> Result<Self> {
        let show = match node.def.read {
            Read::Blob(bytes) => {
                return Ok(match bytes(node.data()) {
                    Some(b) => Self::Bytes(b),
                    None => Self::Text(Text(KVVec::new())),
                })
            }
            Read::Text(show) => Renderer::Plain(show),
            Read::TryText(show) => Renderer::Try(show),
            Read::None | Read::Value(_) => return Err(EINVAL),
        };
        let mut text = Text(KVVec::new());
        Show::new(node.data(), show).render(&mut text)?;
        Ok(Self::Text(text))
    }
}

/// The `private_data` of a file opened for reading: the rendering its reads
/// continue from (see the module documentation). The mutex is held only to
/// swap or clone the reference.
type Kept = Mutex<Option<Arc<Snapshot>>>;

/// The file operations of files whose `i_private` is a `Node<T>`.
struct Ops<T>(PhantomData<T>);

impl<T: Send + Sync + 'static> Ops<T> {
    const FOPS: bindings::file_operations = bindings::file_operations {
        owner: kernel::module::this_module::<crate::LocalModule>().as_ptr(),
        open: Some(open),
        read: Some(read::<T>),
        write: Some(write::<T>),
        llseek: Some(bindings::default_llseek),
        release: Some(release),
        ..pin_init::zeroed()
    };
}

/// The node of an open file.
///
/// # Safety
///
/// `file` is an open file of ours (made by [`Dir::create`] with
/// [`Ops::<T>::FOPS`]) and debugfs holds off its removal for the call.
unsafe fn node_of<'a, T>(file: *mut bindings::file) -> &'a Node<T> {
    // SAFETY: per the contract `file` is valid, and its inode's `i_private`
    // is the file's `Node<T>` (set by `Dir::create`), alive while the file
    // exists, which debugfs guarantees for the call.
    unsafe { &*(*(*file).f_inode).i_private.cast::<Node<T>>() }
}

/// `open`: a file opened for reading gets an empty [`Kept`]; nothing is
/// rendered yet.
///
/// # Safety
///
/// Only called by debugfs for a file created by [`Dir::create`] with
/// [`Ops::FOPS`], with its removal protection held.
unsafe extern "C" fn open(_inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
    // SAFETY: the file is being opened; nothing else uses `private_data`.
    unsafe { (*file).private_data = null_mut() };
    // SAFETY: `file` is valid for the call.
    if unsafe { (*file).f_mode } & FMODE_READ == 0 {
        return 0;
    }
    let kept = match KBox::pin_init(new_mutex!(None, "debugfs::Kept"), GFP_KERNEL) {
        Ok(kept) => kept,
        Err(_) => return ENOMEM.to_errno(),
    };
    // SAFETY: the mutex is never moved out of its box: `release` takes the
    // pointer back and drops it in place.
    let kept: KBox<Kept> = unsafe { Pin::into_inner_unchecked(kept) };
    // SAFETY: as above; `release` takes it back.
    unsafe { (*file).private_data = KBox::into_raw(kept).cast() };
    0
}

/// `read`: per the file's [`Read`] (see the module documentation).
///
/// # Safety
///
/// Only called by the VFS (through debugfs's proxy, which holds off the
/// file's removal) for a file opened by [`open`], with `buf` a user buffer
/// of `count` bytes and `ppos` the position to read at.
unsafe extern "C" fn read<T: Send + Sync + 'static>(
    file: *mut bindings::file,
    buf: *mut c_char,
    count: usize,
    ppos: *mut bindings::loff_t,
) -> isize {
    // SAFETY: per the contract.
    let node = unsafe { node_of::<T>(file) };
    // SAFETY: `ppos` is valid for the call.
    let at = unsafe { *ppos };
    let snapshot = match node.def.read {
        Read::None => return EINVAL.to_errno() as isize,
        Read::Value(show) => {
            if at != 0 {
                return 0;
            }
            let mut value = Value {
                buf: [0; VALUE_LEN],
                len: 0,
            };
            if let Err(e) = Show::new(node.data(), Renderer::Try(show)).render(&mut value) {
                return e.to_errno() as isize;
            }
            let bytes = value.buf.get(..value.len).unwrap_or(&[]);
            // SAFETY: as below, from the value's bytes on our stack.
            return unsafe { copy_out(buf, count, ppos, bytes) };
        }
        Read::Text(_) | Read::TryText(_) | Read::Blob(_) => {
            // SAFETY: `private_data` is the `Kept` `open` made for a file
            // opened for reading (the VFS reads no other), alive until
            // `release`.
            let Some(kept) = (unsafe { (*file).private_data.cast::<Kept>().as_ref() }) else {
                return EINVAL.to_errno() as isize;
            };
            match kept_or_render(node, kept, at == 0) {
                Ok(s) => s,
                Err(e) => return e.to_errno() as isize,
            }
        }
    };
    // SAFETY: as above, from the snapshot, which our reference keeps alive.
    unsafe { copy_out(buf, count, ppos, snapshot.bytes()) }
}

/// The rendering a read serves: a fresh one (kept for the reads that
/// continue it) when `fresh` or none is kept, else the one kept. The mutex
/// is held only to swap or clone the reference; the one replaced is freed
/// after it is released.
fn kept_or_render<T>(node: &Node<T>, kept: &Kept, fresh: bool) -> Result<Arc<Snapshot>> {
    if !fresh {
        if let Some(s) = kept.lock().clone() {
            return Ok(s);
        }
    }
    let s = Arc::new(Snapshot::render(node)?, GFP_KERNEL)?;
    let old = kept.lock().replace(s.clone());
    drop(old);
    Ok(s)
}

/// `simple_read_from_buffer` of `bytes` at `*ppos`.
///
/// # Safety
///
/// `buf`/`count` is a user buffer and `ppos` a valid position, from the VFS.
unsafe fn copy_out(
    buf: *mut c_char,
    count: usize,
    ppos: *mut bindings::loff_t,
    bytes: &[u8],
) -> isize {
    // SAFETY: per the contract; the source is `bytes.len()` initialised bytes.
    unsafe {
        bindings::simple_read_from_buffer(
            buf.cast(),
            count,
            ppos,
            bytes.as_ptr().cast(),
            bytes.len(),
        )
    }
}

/// `write`: per the file's [`Write`].
///
/// # Safety
///
/// As [`read`], with `buf` a user buffer of `count` bytes.
unsafe extern "C" fn write<T: Send + Sync + 'static>(
    file: *mut bindings::file,
    buf: *const c_char,
    count: usize,
    _ppos: *mut bindings::loff_t,
) -> isize {
    // SAFETY: per the contract.
    let node = unsafe { node_of::<T>(file) };
    let user = UserPtr::from_ptr(buf.cast_mut().cast());
    let r = match node.def.write {
        Write::Refuse(e) => Err(e),
        Write::Trimmed(store) => {
            store_trimmed(node.data(), store, user, count).map(|()| Wrote::All)
        }
        Write::Raw(cap, store) => store_raw(node.data(), cap, store, user, count),
    };
    match r {
        Ok(Wrote::All) => count as isize,
        Ok(Wrote::Nothing) => 0,
        Err(e) => e.to_errno() as isize,
    }
}

/// At most [`MAX_WRITE`] bytes of UTF-8, trimmed, to `store`.
fn store_trimmed<T>(
    data: &T,
    store: fn(&T, &str) -> Result,
    user: UserPtr,
    count: usize,
) -> Result {
    if count > MAX_WRITE {
        return Err(EINVAL);
    }
    let mut bytes = KVec::from_elem(0u8, count, GFP_KERNEL)?;
    UserSlice::new(user, count)
        .reader()
        .read_slice(&mut bytes)?;
    let text = core::str::from_utf8(&bytes).map_err(|_| EINVAL)?;
    store(data, text.trim())
}

/// The first `min(count, cap)` bytes (at most [`RAW_MAX`]) to `store`,
/// copied into a buffer on the stack, as upstream's `kstrto*_from_user` and
/// `simple_attr_write` copy a bounded prefix into a buffer of their own.
fn store_raw<T>(
    data: &T,
    cap: usize,
    store: RawFn<T>,
    user: UserPtr,
    count: usize,
) -> Result<Wrote> {
    let mut buf = [0u8; RAW_MAX];
    let bytes = buf.get_mut(..count.min(cap).min(RAW_MAX)).ok_or(EINVAL)?;
    if !bytes.is_empty() {
        UserSlice::new(user, bytes.len())
            .reader()
            .read_slice(bytes)?;
    }
    store(data, bytes, count)
}

/// `release`: free the open file's [`Kept`] rendering.
///
/// # Safety
///
/// Only called by the VFS, once, for a file opened by [`open`].
unsafe extern "C" fn release(_inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
    // SAFETY: `private_data` is null or the `Kept` from `KBox::into_raw` in
    // `open`, taken back once, here (dropped in place, never moved).
    let kept = unsafe { (*file).private_data.cast::<Kept>() };
    if !kept.is_null() {
        // SAFETY: see above.
        drop(unsafe { KBox::from_raw(kept) });
    }
    0
}

/// A directory's files, allocated and ready to be created; nothing is
/// visible yet ([`Prepared::create`] cannot fail).
pub(crate) struct Prepared<T: Send + Sync + 'static> {
    name: CString,
    data: KBox<T>,
    nodes: KVec<Node<T>>,
}

impl<T: Send + Sync + 'static> Prepared<T> {
    /// Allocate a directory `name` holding `data` and a file per entry of
    /// `defs`.
    pub(crate) fn new(name: CString, data: T, defs: &'static [FileDef<T>]) -> Result<Self> {
        let data = KBox::new(data, GFP_KERNEL)?;
        let mut nodes = KVec::with_capacity(defs.len(), GFP_KERNEL)?;
        for def in defs {
            // INVARIANT: `data` is heap-allocated and moves into the `Dir`
            // together with the nodes; it is freed after them.
            nodes
                .push_within_capacity(Node { data: &*data, def })
                .map_err(|_| ENOMEM)?;
        }
        Ok(Self { name, data, nodes })
    }

    /// Create the directory under `parent` (the debugfs root when `None`)
    /// and its files. A debugfs failure leaves them out, as the kernel asks
    /// of debugfs users; nothing else can fail.
    pub(crate) fn create<U: Send + Sync + 'static>(self, parent: Option<&Dir<U>>) -> Dir<T> {
        let parent = parent.map_or(null_mut(), |p| p.dentry);
        // SAFETY: `name` is a C string; `parent` is null or a live directory
        // of ours (`Dir` values are dropped children first, see `Dir`).
        let dentry = unsafe { bindings::debugfs_create_dir(self.name.as_char_ptr(), parent) };
        // SAFETY: `dentry` is the directory just made (or an error pointer,
        // which debugfs refuses as a parent).
        let files = unsafe { self.create_files(dentry) };
        Dir {
            dentry,
            files,
            own_dir: true,
            _nodes: self.nodes,
            _data: self.data,
        }
    }

    /// Create the files (not a directory; the name is unused) in `parent`, a
    /// directory someone else made (the DRM core's per-device directory).
    /// Dropping the result removes the files one by one.
    ///
    /// # Safety
    ///
    /// `parent` must be a debugfs directory (or an error pointer or null)
    /// that stays until the returned value is dropped.
    pub(crate) unsafe fn create_in(self, parent: *mut bindings::dentry) -> Dir<T> {
        // SAFETY: per the contract.
        let files = unsafe { self.create_files(parent) };
        Dir {
            dentry: parent,
            files,
            own_dir: false,
            _nodes: self.nodes,
            _data: self.data,
        }
    }

    /// Create a file per node in `dir`; returns their dentries (error
    /// pointers for the ones debugfs refused), as many as fit in the room
    /// reserved by [`Prepared::new`].
    ///
    /// # Safety
    ///
    /// `dir` is a live debugfs directory, an error pointer or null, and the
    /// nodes stay until the files are removed.
    unsafe fn create_files(&self, dir: *mut bindings::dentry) -> KVec<*mut bindings::dentry> {
        let mut files = KVec::new();
        if files.reserve(self.nodes.len(), GFP_KERNEL).is_err() {
            return files;
        }
        // A promoted constant: it lives as long as the module.
        let fops: &'static bindings::file_operations = &Ops::<T>::FOPS;
        for node in self.nodes.iter() {
            // SAFETY: the node lives in the `Dir` the caller makes, which
            // removes the file before freeing it; the fops are static. An
            // error dentry is a missing file.
            let file = unsafe {
                bindings::debugfs_create_file_full(
                    node.def.name.as_char_ptr(),
                    node.def.mode(),
                    dir,
                    core::ptr::from_ref(node).cast_mut().cast(),
                    null_mut(),
                    fops,
                )
            };
            // Room was reserved above.
            let _ = files.push_within_capacity(file);
        }
        files
    }
}

/// A debugfs symbolic link of ours; dropping it removes it.
///
/// # Invariants
///
/// `dentry` is what `debugfs_create_symlink` returned (possibly an error
/// pointer), removed once, by `Drop`.
pub(crate) struct Symlink {
    dentry: *mut bindings::dentry,
}

// SAFETY: the dentry is only passed to debugfs, which is thread-safe.
unsafe impl Send for Symlink {}
// SAFETY: no `&self` method.
unsafe impl Sync for Symlink {}

impl Symlink {
    /// `name` in `parent` pointing to `target`. A debugfs failure leaves it
    /// out (an error pointer, ignored at removal).
    ///
    /// # Safety
    ///
    /// `parent` must be a debugfs directory (or an error pointer or null: the
    /// debugfs root) that stays until the link is dropped.
    pub(crate) unsafe fn new(name: &CStr, parent: *mut bindings::dentry, target: &CStr) -> Self {
        // SAFETY: C strings; `parent` per the contract.
        let dentry = unsafe {
            bindings::debugfs_create_symlink(name.as_char_ptr(), parent, target.as_char_ptr())
        };
        Self { dentry }
    }

    /// `name` in the directory `dir` of ours pointing to `target`.
    pub(crate) fn in_dir<U: Send + Sync + 'static>(
        name: &CStr,
        dir: &Dir<U>,
        target: &CStr,
    ) -> Self {
        // SAFETY: `dir` is ours and outlives the link if the caller drops
        // the link first (as `Dir` requires of what is created in it).
        unsafe { Self::new(name, dir.dentry, target) }
    }
}

impl Drop for Symlink {
    fn drop(&mut self) {
        // SAFETY: made by `debugfs_create_symlink`, removed once, here.
        unsafe { bindings::debugfs_remove(self.dentry) };
    }
}

/// The debugfs directory `name` at the debugfs root made by someone else
/// (`accel`, the DRM core's), held while the value lives.
pub(crate) struct Lookup {
    dentry: *mut bindings::dentry,
}

// SAFETY: the dentry reference may be dropped from any thread.
unsafe impl Send for Lookup {}
// SAFETY: no `&self` method touches it except to read the pointer.
unsafe impl Sync for Lookup {}

impl Lookup {
    /// `debugfs_lookup(name, NULL)`; `None` if it does not exist.
    pub(crate) fn root(name: &CStr) -> Option<Self> {
        // SAFETY: a C string and the debugfs root.
        let dentry = unsafe { bindings::debugfs_lookup(name.as_char_ptr(), null_mut()) };
        if dentry.is_null() {
            return None;
        }
        Some(Self { dentry })
    }

    /// The directory, for [`Symlink::new`] (alive while `self` is).
    pub(crate) fn dentry(&self) -> *mut bindings::dentry {
        self.dentry
    }
}

impl Drop for Lookup {
    fn drop(&mut self) {
        // SAFETY: the reference `debugfs_lookup` took, given back once.
        unsafe { bindings::dput(self.dentry) };
    }
}

/// A debugfs directory of ours and the data its files show; dropping it
/// removes the directory and its files, then frees the data.
///
/// # Invariants
///
/// `dentry` is what `debugfs_create_dir` returned (possibly an error
/// pointer); the files in it have `_nodes` as their `i_private`, which point
/// to `_data`. A directory created under another is dropped before it.
pub(crate) struct Dir<T: Send + Sync + 'static> {
    dentry: *mut bindings::dentry,
    /// The files' dentries (removed one by one when the directory is not
    /// ours).
    files: KVec<*mut bindings::dentry>,
    /// Whether `dentry` is ours to remove (with its files).
    own_dir: bool,
    _nodes: KVec<Node<T>>,
    _data: KBox<T>,
}

// SAFETY: the dentry is only passed to debugfs (thread-safe); the nodes and
// the data are shared with the file callbacks, which only read them (`T:
// Sync`) from any thread.
unsafe impl<T: Send + Sync + 'static> Send for Dir<T> {}
// SAFETY: as above: no `&self` method touches the nodes or the data.
unsafe impl<T: Send + Sync + 'static> Sync for Dir<T> {}

impl<T: Send + Sync + 'static> Drop for Dir<T> {
    fn drop(&mut self) {
        // Removal waits for the file callbacks in progress, after which no
        // callback reaches the nodes or the data, which are freed after this.
        if !self.own_dir {
            for file in self.files.iter() {
                // SAFETY: made by `debugfs_create_file_full` in a directory
                // that outlives us (`create_in`), removed once, here.
                unsafe { bindings::debugfs_remove(*file) };
            }
            return;
        }
        // SAFETY: `dentry` came from `debugfs_create_dir` (error pointers
        // are ignored by `debugfs_remove`) and is removed once, here.
        unsafe { bindings::debugfs_remove(self.dentry) };
    }
}
