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
    // Checked by: src/unsafe_core/owned.rs::tests::views_stay_in_the_cell_as_it_moves
    // (under Miri) and tests/model_handle.rs::sessions_on_four_threads_match_one_alone
    pub(crate) struct ModelCell {
        owner: GgufFile,

        #[covariant]
        dependent: Qwen3,
    }

    impl {Debug}
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelError;

    /// The committed tiny fixture (a 2-layer Qwen3), embedded so that Miri,
    /// which cannot open files, runs these tests.
    const TINY: &[u8] = include_bytes!("../../tests/fixtures/qwen3-tiny-s7.gguf");

    fn q_addr(q: &Qwen3<'_>) -> usize {
        match &q.weights.layers[0].q {
            crate::matvec::Weight::Q8_0(w) => w.blocks().as_ptr() as usize,
            other => panic!("the fixture's q is {}", other.type_name()),
        }
    }

    /// Built, moved (into a box, a vector, another thread) and dropped,
    /// the cell's views keep pointing into its own file's bytes and read
    /// the same values; Miri checks every access and the frees.
    #[test]
    fn views_stay_in_the_cell_as_it_moves() {
        let cell = ModelCell::try_new(GgufFile::from_bytes(TINY).unwrap(), |f| {
            Qwen3::load(&f.gguf())
        })
        .unwrap();
        let first = q_addr(cell.borrow_dependent());
        let norm = cell.borrow_dependent().weights.output_norm.clone();
        let boxed = Box::new(cell);
        let mut v = vec![*boxed];
        v.reserve(64);
        let cell = v.pop().unwrap();
        let cell = std::thread::spawn(move || {
            assert_eq!(cell.borrow_dependent().weights.output_norm, norm);
            cell
        })
        .join()
        .unwrap();
        assert_eq!(q_addr(cell.borrow_dependent()), first);
        let bytes = cell.borrow_owner().gguf().bytes().as_ptr_range();
        assert!((bytes.start as usize..bytes.end as usize).contains(&first));
    }

    /// A builder that fails or panics after borrowing the file frees the
    /// file once (Miri reports a leak or a double free).
    #[test]
    fn failing_and_panicking_builders_free_the_file_once() {
        let got = ModelCell::try_new(GgufFile::from_bytes(TINY).unwrap(), |f| {
            let q = Qwen3::load(&f.gguf())?;
            assert!(q.config.layers > 0);
            Err::<Qwen3<'_>, ModelError>(ModelError::NoTokens)
        });
        assert!(matches!(got, Err(ModelError::NoTokens)));
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            ModelCell::try_new(GgufFile::from_bytes(TINY).unwrap(), |f| {
                let q = Qwen3::load(&f.gguf())?;
                if q.config.layers > 0 {
                    panic!("loader panicked");
                }
                Ok::<_, ModelError>(q)
            })
        }));
        assert!(caught.is_err());
    }
}
