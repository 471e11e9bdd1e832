//! The only module of the crate allowed to contain `unsafe` code.
//!
//! Everything here is small, private, and wrapped in a safe API used by the
//! rest of the crate. Every `unsafe` block carries a `// SAFETY: [ID]`
//! comment; `SAFETY.md` at the repository root lists each ID with its
//! invariant and the test, loom model or Miri run that checks it, and
//! `ci/safety-ids.sh` keeps the two in step.
//!
//! * [`pool`]: the spinning thread pool's protocol (mailbox, job word with
//!   share cursor and registered count, park/unpark, panic forwarding)
//!   and the disjoint-chunk API built on it. Its protocol is described in `src/unsafe_core/PROTOCOL.md`.
//! * [`mmap`]: memory-mapping a model file.
//! * [`owned`]: a model handle that owns the file its weights borrow.
//! * [`prefetch`]: the software prefetch hint of the decode matvec.
//! * [`simd`]: the feature-checked calls into `#[target_feature]` kernels.

pub(crate) mod mmap;
pub(crate) mod owned;
pub(crate) mod pool;
pub(crate) mod prefetch;
pub(crate) mod simd;
