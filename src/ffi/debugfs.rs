// SPDX-License-Identifier: GPL-2.0

//! The module's debugfs files: every `unsafe` of creating them and of their
//! file operations. What they show is safe Rust in `debugfs.rs`.
//!
//! The kernel's Rust `debugfs` files are `seq_file`s opened with
//! `single_open`: `seq_read` starts with one page and, each time the text
//! does not fit, doubles the buffer and renders the whole file again, so a
//! file of n lines is rendered O(log n) times, each time under the locks the
//! rendering takes. Here a file is rendered **once**, when it is opened for
//! reading, into a buffer that grows by doubling (what is rendered is
//! copied, never rendered again); `read` serves that snapshot
//! (`simple_read_from_buffer`) and `release` frees it. The renderers copy
//! what they show out from under the context's locks and format it after
//! unlocking (see `debugfs.rs`).
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
//! snapshot.

use core::{fmt::Write as _, marker::PhantomData, ptr::null_mut};
use kernel::{
    alloc::KVVec,
    bindings,
    fmt,
    prelude::*,
    str::CString,
    sync::Arc,
    uaccess::{UserPtr, UserSlice}, //
};

/// `FMODE_READ` (include/linux/fs.h): the file was opened for reading.
const FMODE_READ: bindings::fmode_t = 1;

/// The longest text a write to one of our files may carry (`pin ADDR SIZE`
/// is the longest command).
const MAX_WRITE: usize = 2 * 4096 + 64;

/// What one file shows when read and what a write to it does.
pub(crate) struct FileDef<T: 'static> {
    name: &'static CStr,
    show: fn(&T, &mut fmt::Formatter<'_>) -> fmt::Result,
    /// When set, replaces `show`: a renderer that may refuse with an errno,
    /// which the `open` for reading then returns.
    try_show: Option<TryShowFn<T>>,
    store: Option<fn(&T, &str) -> Result>,
    /// When set, replaces `show`: the file's content is these bytes (a
    /// debugfs blob), shared with the snapshot, not copied.
    bytes: Option<BytesFn<T>>,
    /// The file's mode, when not the default of its kind.
    mode: Option<bindings::umode_t>,
}

/// The bytes a blob file serves (see [`FileDef::blob`]); `None` is empty.
pub(crate) type BytesFn<T> = fn(&T) -> Option<Arc<KVVec<u8>>>;

/// A renderer that may fail with an errno (see [`FileDef::rw_try`]).
pub(crate) type TryShowFn<T> = fn(&T, &mut fmt::Formatter<'_>) -> Result;

/// The `show` of files whose `try_show` renders.
fn show_nothing<T>(_: &T, _: &mut fmt::Formatter<'_>) -> fmt::Result {
    Ok(())
}

impl<T> FileDef<T> {
    /// A read-only file (mode 0400).
    pub(crate) const fn ro(
        name: &'static CStr,
        show: fn(&T, &mut fmt::Formatter<'_>) -> fmt::Result,
    ) -> Self {
        Self {
            name,
            show,
            try_show: None,
            store: None,
            bytes: None,
            mode: None,
        }
    }

    /// A read-only file (mode 0400) serving raw bytes, as `debugfs_create_blob`
    /// does: what `bytes` returns at open, shared by reference for as long
    /// as the file stays open (a later replacement is seen by the next open).
    pub(crate) const fn blob(name: &'static CStr, bytes: BytesFn<T>) -> Self {
        Self {
            name,
            show: show_nothing::<T>,
            try_show: None,
            store: None,
            bytes: Some(bytes),
            mode: None,
        }
    }

    /// The same file with mode `mode` (upstream's files are mostly 0644).
    pub(crate) const fn with_mode(mut self, mode: bindings::umode_t) -> Self {
        self.mode = Some(mode);
        self
    }

    /// A read-write file (mode 0600): `store` gets the written text, trimmed.
    pub(crate) const fn rw(
        name: &'static CStr,
        show: fn(&T, &mut fmt::Formatter<'_>) -> fmt::Result,
        store: fn(&T, &str) -> Result,
    ) -> Self {
        Self {
            name,
            show,
            try_show: None,
            store: Some(store),
            bytes: None,
            mode: None,
        }
    }

    /// A read-write file (mode 0600) whose renderer may fail: an `open`
    /// for reading returns its errno (upstream's `data32` read fails on a
    /// bad address; here the open does, as the file is rendered at open).
    pub(crate) const fn rw_try(
        name: &'static CStr,
        try_show: TryShowFn<T>,
        store: fn(&T, &str) -> Result,
    ) -> Self {
        Self {
            name,
            show: show_nothing::<T>,
            try_show: Some(try_show),
            store: Some(store),
            bytes: None,
            mode: None,
        }
    }

    fn mode(&self) -> bindings::umode_t {
        if let Some(mode) = self.mode {
            mode
        } else if self.store.is_some() {
            0o600
        } else {
            0o400
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

/// Renders a node through `core::fmt`, so the renderers keep the
/// `Formatter` signature of the kernel's Rust debugfs callbacks; the errno
/// of a failing `try_show` is kept in the cell.
struct Show<'a, T: 'static>(&'a Node<T>, core::cell::Cell<Option<Error>>);

impl<T> core::fmt::Display for Show<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.def.try_show {
            None => (self.0.def.show)(self.0.data(), f),
            Some(try_show) => try_show(self.0.data(), f).map_err(|e| {
                self.1.set(Some(e));
                fmt::Error
            }),
        }
    }
}

/// A file's text, rendered once at open: a buffer that grows by doubling.
struct Text(KVVec<u8>);

impl fmt::Write for Text {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0
            .extend_from_slice(s.as_bytes(), GFP_KERNEL)
            .map_err(|_| fmt::Error)
    }
}

/// What an open file serves: its text rendered at open, or a blob's bytes.
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
}

/// The file operations of files whose `i_private` is a `Node<T>`.
struct Ops<T>(PhantomData<T>);

impl<T: Send + Sync + 'static> Ops<T> {
    const FOPS: bindings::file_operations = bindings::file_operations {
        owner: kernel::module::this_module::<crate::LocalModule>().as_ptr(),
        open: Some(open::<T>),
        read: Some(read),
        write: Some(write::<T>),
        llseek: Some(bindings::default_llseek),
        release: Some(release),
        ..pin_init::zeroed()
    };
}

/// `open`: render the file once into a snapshot of its own (only when it is
/// opened for reading; `echo x > file` renders nothing).
///
/// # Safety
///
/// Only called by debugfs for a file created by [`Dir::create`] with
/// [`Ops::<T>::FOPS`], with its removal protection held.
unsafe extern "C" fn open<T: Send + Sync + 'static>(
    inode: *mut bindings::inode,
    file: *mut bindings::file,
) -> c_int {
    // SAFETY: the file is being opened; nothing else uses `private_data`.
    unsafe { (*file).private_data = null_mut() };
    // SAFETY: `file` is valid for the call.
    if unsafe { (*file).f_mode } & FMODE_READ == 0 {
        return 0;
    }
    // SAFETY: `i_private` is the file's `Node<T>` (set by `Dir::create`),
    // alive while the file exists, and debugfs holds off its removal for
    // the call.
    let node = unsafe { &*(*inode).i_private.cast::<Node<T>>() };
    let snapshot = if let Some(bytes) = node.def.bytes {
        match bytes(node.data()) {
            Some(b) => Snapshot::Bytes(b),
            None => Snapshot::Text(Text(KVVec::new())),
        }
    } else {
        let mut text = Text(KVVec::new());
        let show = Show(node, core::cell::Cell::new(None));
        if write!(text, "{}", show).is_err() {
            return show.1.get().unwrap_or(ENOMEM).to_errno();
        }
        Snapshot::Text(text)
    };
    match KBox::new(snapshot, GFP_KERNEL) {
        Ok(text) => {
            // SAFETY: as above; `release` takes the snapshot back.
            unsafe { (*file).private_data = KBox::into_raw(text).cast() };
            0
        }
        Err(_) => ENOMEM.to_errno(),
    }
}

/// `read`: serve the snapshot rendered at open.
///
/// # Safety
///
/// Only called by the VFS for a file opened by [`open`], with `buf` a user
/// buffer of `count` bytes and `ppos` the file position.
unsafe extern "C" fn read(
    file: *mut bindings::file,
    buf: *mut c_char,
    count: usize,
    ppos: *mut bindings::loff_t,
) -> isize {
    // SAFETY: `private_data` is null or the snapshot `open` made, which lives
    // until `release`.
    let Some(snapshot) = (unsafe { (*file).private_data.cast::<Snapshot>().as_ref() }) else {
        return EINVAL.to_errno() as isize;
    };
    let bytes = snapshot.bytes();
    // SAFETY: `buf`/`count`/`ppos` come from the VFS; the source is the
    // snapshot's `len` initialised bytes.
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

/// `write`: hand the written text (at most [`MAX_WRITE`] bytes, trimmed)
/// to the file's `store`.
///
/// # Safety
///
/// As [`open`], with `buf` a user buffer of `count` bytes.
unsafe extern "C" fn write<T: Send + Sync + 'static>(
    file: *mut bindings::file,
    buf: *const c_char,
    count: usize,
    _ppos: *mut bindings::loff_t,
) -> isize {
    // SAFETY: `file` is valid; its inode's `i_private` is the `Node<T>` of
    // the file, protected from removal for the call as in `open`.
    let node = unsafe { &*(*(*file).f_inode).i_private.cast::<Node<T>>() };
    match store(node, buf, count) {
        Ok(()) => count as isize,
        Err(e) => e.to_errno() as isize,
    }
}

fn store<T>(node: &Node<T>, buf: *const c_char, count: usize) -> Result {
    let store = node.def.store.ok_or(EPERM)?;
    if count > MAX_WRITE {
        return Err(EINVAL);
    }
    let mut bytes = KVec::from_elem(0u8, count, GFP_KERNEL)?;
    let dst = bytes.get_mut(..count).ok_or(EINVAL)?;
    UserSlice::new(UserPtr::from_ptr(buf.cast_mut().cast()), count)
        .reader()
        .read_slice(dst)?;
    let text = core::str::from_utf8(dst).map_err(|_| EINVAL)?;
    store(node.data(), text.trim())
}

/// `release`: free the snapshot.
///
/// # Safety
///
/// Only called by the VFS, once, for a file opened by [`open`].
unsafe extern "C" fn release(_inode: *mut bindings::inode, file: *mut bindings::file) -> c_int {
    // SAFETY: `private_data` is null or the snapshot from `KBox::into_raw` in
    // `open`, taken back once, here.
    let snapshot = unsafe { (*file).private_data.cast::<Snapshot>() };
    if !snapshot.is_null() {
        // SAFETY: see above.
        drop(unsafe { KBox::from_raw(snapshot) });
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
