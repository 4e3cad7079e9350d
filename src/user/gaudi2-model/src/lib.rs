// SPDX-License-Identifier: GPL-2.0

//! The Gaudi2 model core, as a userspace library: the very files the kernel
//! module compiles (`src/model.rs`, `src/model/*.rs` of the repository),
//! included by `#[path]` so that there is exactly one copy of the model.
//!
//! The inline module `src` stands for the repository's `src/` directory:
//! `mod model;` inside it loads `src/model.rs` as a non-`mod.rs` file, so
//! the model's own `mod regs;` (and the others) resolve to `src/model/*.rs`
//! exactly as in the kernel build. The model uses only `super::` paths,
//! never `crate::`, so it does not care where it is mounted.

#![no_std]
#![forbid(unsafe_code)]

#[path = "../../.."]
mod src {
    pub mod model;
}

pub use src::model::*;
