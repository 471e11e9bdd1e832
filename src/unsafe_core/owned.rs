//! A model's weights stored beside the file they borrow from.
//!
//! [`Qwen3`] borrows its weight views from a [`GgufFile`]'s bytes. An
//! owned model handle has to hold both in one value, which safe Rust
//! cannot express (a struct borrowing from its own field). `self_cell`
//! builds that value: the owner (the file) goes into a heap allocation
//! whose address never changes, the dependent ([`Qwen3`]) is built from a
//! reference to it, and the dependent is only ever handed out with a
//! lifetime no longer than the borrow of the cell, so no view can outlive
//! the bytes it points into. Dropping the cell drops the dependent first.
//!
//! The `unsafe` code this relies on is the macro's own, expanded here:
//! see `[OWNED-CELL]` in `SAFETY.md`.

use crate::gguf::GgufFile;
use crate::model::Qwen3;

self_cell::self_cell!(
    /// A [`GgufFile`] and the [`Qwen3`] loaded from its bytes.
    // SAFETY: [OWNED-CELL] the macro's `unsafe` code needs the dependent to
    // borrow only from the owner and to be covariant in that lifetime;
    // `#[covariant]` makes the compiler check the second (the macro emits
    // a function that only compiles for covariant types), and the builder
    // closure's signature the first.
    // Checked by: tests/model_handle.rs::sessions_on_four_threads_match_one_alone
    pub(crate) struct ModelCell {
        owner: GgufFile,

        #[covariant]
        dependent: Qwen3,
    }

    impl {Debug}
);
