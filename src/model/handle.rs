//! [`Model`]: a loaded model that owns its file, to share between threads
//! and sessions; and [`ModelRef`], what a [`Session`] holds.

use std::path::Path;
use std::sync::Arc;

use crate::backend::Backend;
use crate::gguf::GgufFile;
use crate::tokenizer::Tokenizer;
use crate::unsafe_core::owned::ModelCell;

use super::{ChatTemplate, ModelError, Qwen3, Qwen3Config, Session, SessionOptions};

/// Something that leads to a loaded [`Qwen3`]: what a [`Session`] holds.
///
/// Implemented for [`Qwen3`] and [`Model`], and through `&`, [`Arc`] and
/// [`Box`] of either, so a session can borrow a model (`&Qwen3`, the
/// zero-copy API) or share ownership of one (`Arc<Model>`, a session with
/// no lifetime that other threads can own).
pub trait ModelRef {
    /// The model.
    fn qwen3(&self) -> &Qwen3<'_>;
}

impl ModelRef for Qwen3<'_> {
    fn qwen3(&self) -> &Qwen3<'_> {
        self
    }
}

impl ModelRef for Model {
    fn qwen3(&self) -> &Qwen3<'_> {
        self.cell.borrow_dependent()
    }
}

impl<T: ModelRef + ?Sized> ModelRef for &T {
    fn qwen3(&self) -> &Qwen3<'_> {
        (**self).qwen3()
    }
}

impl<T: ModelRef + ?Sized> ModelRef for Arc<T> {
    fn qwen3(&self) -> &Qwen3<'_> {
        (**self).qwen3()
    }
}

impl<T: ModelRef + ?Sized> ModelRef for Box<T> {
    fn qwen3(&self) -> &Qwen3<'_> {
        (**self).qwen3()
    }
}

/// A Qwen3 model and its tokenizer, owning the file they were read from.
///
/// Load it once, put it in an [`Arc`], and open as many sessions on it as
/// there are conversations: each [`Session`] owns its KV cache and scratch
/// and shares the weights, which are never copied (they are views of the
/// mapped or read file). `Model` is `Send + Sync`; a session holding an
/// `Arc<Model>` is `'static`, and `Send` when its backend is, so it can be
/// kept in a struct beside the model or moved to a worker thread.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // the pool runs on loom's scheduler under `loom`
/// use std::sync::Arc;
/// use inferno_cpu::backend::AnyBackend;
/// use inferno_cpu::model::{argmax, Model, SessionOptions};
/// use inferno_cpu::synth::{model_bytes, SynthConfig};
///
/// // `Model::open("model.gguf")` for a file; here a tiny synthetic one.
/// let model = Arc::new(Model::from_bytes(&model_bytes(&SynthConfig::tiny(), 7)?)?);
/// let prompt = model.tokenizer().encode("hello world", true);
/// let replies: Vec<u32> = std::thread::scope(|s| {
///     let handles: Vec<_> = (0..2)
///         .map(|_| {
///             let model = Arc::clone(&model);
///             let prompt = prompt.clone();
///             s.spawn(move || -> Result<u32, inferno_cpu::model::ModelError> {
///                 let backend = AnyBackend::new("simd", 1).expect("simd exists");
///                 let mut session = model.session(backend, SessionOptions::default())?;
///                 Ok(argmax(session.prefill(&prompt)?))
///             })
///         })
///         .collect();
///     handles.into_iter().map(|h| h.join().unwrap().unwrap()).collect()
/// });
/// assert_eq!(replies[0], replies[1]);
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Model {
    cell: ModelCell,
    tokenizer: Tokenizer,
}

impl Model {
    /// Memory-maps the GGUF file at `path` and loads it: only the header
    /// and the small norm weights are read up front.
    ///
    /// The file must not be modified or truncated while the model lives
    /// (see [`GgufFile::open`]); [`read`](Self::read) has no such condition.
    ///
    /// # Errors
    ///
    /// The file's [`GgufError`](crate::gguf::GgufError) (as
    /// [`ModelError::Gguf`]), any error of [`Qwen3::load`], or
    /// [`ModelError::Tokenizer`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ModelError> {
        Self::from_file(GgufFile::open(path)?)
    }

    /// Reads the GGUF file at `path` into memory (huge-page-advised on
    /// Linux, which makes decode faster than from a map) and loads it.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub fn read(path: impl AsRef<Path>) -> Result<Self, ModelError> {
        Self::from_file(GgufFile::read(path)?)
    }

    /// Loads a model from a whole GGUF file held in memory (copied into an
    /// aligned buffer).
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ModelError> {
        Self::from_file(GgufFile::from_bytes(bytes)?)
    }

    /// Loads the model and tokenizer of an opened file, taking ownership
    /// of it.
    ///
    /// # Errors
    ///
    /// Any error of [`Qwen3::load`], or [`ModelError::Tokenizer`].
    ///
    /// Where the selected kernel reads packed rows (AVX-512 VNNI: Q4_K,
    /// Q5_K and Q4_0; AVX2 the same) and the file was read into memory (not
    /// mapped), the layers' projections of those types are first packed in
    /// place, eight rows at a time
    /// ([`PackedQ4KMatrix`](crate::matvec::PackedQ4KMatrix),
    /// [`PackedQ5KMatrix`](crate::matvec::PackedQ5KMatrix),
    /// [`PackedQ4_0Matrix`](crate::matvec::PackedQ4_0Matrix)): the same
    /// results from every backend, read in the order those kernels load
    /// them. [`file`](Self::file) then shows those tensors packed
    /// ([`TensorLayout::Q4KRows8`](crate::gguf::TensorLayout), `Q5KRows8`
    /// or `Q4_0Rows8`).
    pub fn from_file(mut file: GgufFile) -> Result<Self, ModelError> {
        pack_for_decode(&mut file);
        let tokenizer = Tokenizer::from_gguf(&file.gguf())?;
        let cell = ModelCell::try_new(file, |file| Qwen3::load(&file.gguf()))?;
        Ok(Self { cell, tokenizer })
    }

    /// The model: configuration and weights.
    ///
    /// The weights are views of the file this `Model` owns, so nothing
    /// borrowed from them outlives the `Model`: not the `Qwen3`, not one
    /// of its matrices (copied out of it or not), and a thread that is
    /// not scoped cannot take them.
    ///
    /// ```compile_fail,E0505
    /// use inferno_cpu::model::Model;
    /// use inferno_cpu::synth::{model_bytes, SynthConfig};
    ///
    /// let model = Model::from_bytes(&model_bytes(&SynthConfig::tiny(), 7).unwrap()).unwrap();
    /// let q = model.qwen3().weights.layers[0].q; // a `Copy` view
    /// drop(model);
    /// assert!(q.rows() > 0); // error: `model` dropped while borrowed
    /// ```
    ///
    /// ```compile_fail,E0597
    /// use std::sync::Arc;
    /// use inferno_cpu::model::Model;
    /// use inferno_cpu::synth::{model_bytes, SynthConfig};
    ///
    /// let model = Arc::new(Model::from_bytes(&model_bytes(&SynthConfig::tiny(), 7).unwrap()).unwrap());
    /// let q = model.qwen3();
    /// // error: `model` does not live long enough (`spawn` needs `'static`)
    /// std::thread::spawn(move || q.weights.layers[0].q.rows()).join().unwrap();
    /// ```
    pub fn qwen3(&self) -> &Qwen3<'_> {
        self.cell.borrow_dependent()
    }

    /// The hyperparameters.
    pub fn config(&self) -> &Qwen3Config {
        &self.qwen3().config
    }

    /// The tokenizer read from the file's metadata.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The chat format of the file ([`ChatTemplate::from_gguf`]).
    ///
    /// # Errors
    ///
    /// As [`ChatTemplate::from_gguf`].
    pub fn chat_template(&self) -> Result<ChatTemplate, ModelError> {
        ChatTemplate::from_gguf(&self.file().gguf())
    }

    /// The file the model was loaded from (its metadata, its tensors).
    ///
    /// Tensors [`from_file`](Self::from_file) packed for the eight-row
    /// kernel show their packed bytes ([`TensorInfo::layout`](crate::gguf::TensorInfo::layout)
    /// says which); [`Gguf::data_in_file_order`](crate::gguf::Gguf::data_in_file_order)
    /// and [`Writer::from_gguf`](crate::gguf::Writer::from_gguf) give the
    /// file's bytes back.
    pub fn file(&self) -> &GgufFile {
        self.cell.borrow_owner()
    }

    /// A new session on this model, sharing it.
    ///
    /// # Errors
    ///
    /// As [`Session::new`].
    pub fn session<B: Backend>(
        self: &Arc<Self>,
        backend: B,
        opts: SessionOptions,
    ) -> Result<Session<Arc<Self>, B>, ModelError> {
        Session::new(Arc::clone(self), backend, opts)
    }
}

/// Packs `file`'s layers' projections eight rows at a time, in place, for
/// the types the selected kernel reads packed (AVX-512 VNNI: Q4_K, Q5_K
/// and Q4_0; AVX2 the same; no others), where the file was read
/// into memory ([`GgufFile::read`] or
/// [`from_bytes`](GgufFile::from_bytes), not [`open`](GgufFile::open));
/// returns how many it packed. [`Model`] does this on load; a
/// [`Qwen3::load`] of the file afterwards gives the same results, faster.
///
/// On an AMD EPYC (Zen 4) VM, one thread, a Q4_K_M Qwen3-0.6B's Q4_K
/// products (and a Q5_K_M one's Q5_K products) read the packed rows front to back, where eight rows read a
/// block at a time are a pattern the hardware prefetchers do not follow,
/// and skip the kernel's transposes; a Q4_0 one's products get each
/// block's eight rows' sums one per lane, with nothing to reduce (the
/// Zen 4 section of `BENCHMARKS.md` has the measurements). On an AMD EPYC (Zen 3)
/// VM, AVX2, a Q4_K_M (Q5_K_M) file's Q4_K (Q5_K) products read eight
/// packed rows with the rows in a register's lanes, and prefill unpacks
/// each row's levels from the packed words (the Zen 3 section of `BENCHMARKS.md`).
///
/// ```
/// use inferno_cpu::gguf::GgufFile;
/// use inferno_cpu::model::{pack_for_decode, Qwen3};
/// use inferno_cpu::synth::{model_bytes, FileType, SynthConfig};
///
/// let cfg = SynthConfig::small().with_file_type(FileType::Q4KM);
/// let mut file = GgufFile::from_bytes(&model_bytes(&cfg, 7)?)?;
/// let packed = pack_for_decode(&mut file); // 0 without AVX-512 VNNI or AVX2
/// let model = Qwen3::load(&file.gguf())?;
/// assert_eq!(model.config.layers, 2);
/// # let _ = packed;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn pack_for_decode(file: &mut GgufFile) -> usize {
    use crate::gguf::GgmlType;
    let k = crate::quant::dot::selected().1;
    file.pack_rows8(|info| {
        let reads_packed = match info.ggml_type {
            GgmlType::Q4_K => k.reads_packed_q4_k(),
            GgmlType::Q5_K => k.reads_packed_q5_k(),
            GgmlType::Q4_0 => k.reads_packed_q4_0(),
            _ => false,
        };
        reads_packed && is_projection(&info.name)
    })
}

/// Whether `name` is a layer's projection (`blk.N.attn_q.weight` and the
/// like): the matrices whose decode products [`Model::from_file`] packs.
/// Not the token embedding (read a row per token) or the output
/// projection (often that same tensor).
fn is_projection(name: &str) -> bool {
    use super::layout::Role;
    let Some(rest) = name.strip_prefix("blk.") else {
        return false;
    };
    let Some((layer, tail)) = rest.split_once('.') else {
        return false;
    };
    !layer.is_empty()
        && layer.bytes().all(|b| b.is_ascii_digit())
        && [
            Role::Q,
            Role::K,
            Role::V,
            Role::Output,
            Role::Gate,
            Role::Up,
            Role::Down,
        ]
        .iter()
        .any(|r| tail.strip_suffix(".weight") == Some(r.stem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send + 'static>() {}

    #[test]
    fn model_is_send_sync_and_sessions_are_send() {
        assert_send_sync::<Model>();
        assert_send::<Session<Arc<Model>, crate::backend::AnyBackend>>();
    }

    /// The committed tiny fixture, embedded so that Miri (which cannot
    /// open files, and cannot run the rayon threads `synth` writes with)
    /// runs this test too.
    const TINY: &[u8] = include_bytes!("../../tests/fixtures/qwen3-tiny-s7.gguf");

    #[test]
    #[cfg_attr(
        miri,
        ignore = "forward passes take minutes under Miri; views_survive_moves_of_the_model reads the views there"
    )]
    fn owned_session_matches_borrowed_session() {
        let owned = Arc::new(Model::from_bytes(TINY).unwrap());
        let file = GgufFile::from_bytes(TINY).unwrap();
        let gguf = file.gguf();
        let borrowed = Qwen3::load(&gguf).unwrap();
        let ids = [1, 5, 9, 2];
        let backend = crate::backend::Scalar;
        let mut a = owned.session(backend, SessionOptions::default()).unwrap();
        let mut b = Session::new(&borrowed, backend, SessionOptions::default()).unwrap();
        assert_eq!(a.prefill(&ids).unwrap(), b.prefill(&ids).unwrap());
        assert_eq!(a.decode(7).unwrap(), b.decode(7).unwrap());
        // The session keeps the model alive after every other handle is
        // gone, and a session moved to another thread still reads it.
        drop(owned);
        let (mut a, got) = std::thread::spawn(move || {
            let got = a.decode(3).unwrap().to_vec();
            (a, got)
        })
        .join()
        .unwrap();
        assert_eq!(got, b.decode(3).unwrap());
        assert_eq!(a.decode(4).unwrap(), b.decode(4).unwrap());
    }

    /// Packing forced on whatever CPU runs the test (the model packs only
    /// where the kernel reads packed rows; elsewhere the packed
    /// matrices go through the other kernels' fallbacks): a Q4_K_M and a
    /// Q5_K_M model's projections packed give the unpacked file's logits
    /// bit for bit on every backend, decode and prefill; packing again
    /// packs nothing; writing the packed file out gives the original file.
    #[test]
    #[cfg(not(feature = "loom"))] // the pool runs on loom's scheduler under `loom`
    #[cfg_attr(miri, ignore = "forward passes take minutes under Miri")]
    fn forced_packing_gives_the_file_s_bits_on_every_kernel() {
        use crate::backend::{AnyBackend, Backend};
        use crate::synth::{model_bytes, FileType, SynthConfig};
        fn logits<B: Backend>(model: &Qwen3<'_>, b: B, prefill: bool) -> Vec<u32> {
            let opts = SessionOptions {
                max_positions: 32,
                ..SessionOptions::default()
            };
            let mut s = Session::new(model, b, opts).unwrap();
            let prompt = [3u32, 141, 59, 265, 358, 97, 93, 238, 46];
            let mut out = Vec::new();
            if prefill {
                out.extend(s.prefill_all(&prompt).unwrap().iter().map(|v| v.to_bits()));
            } else {
                for &t in &prompt {
                    out.extend(s.decode(t).unwrap().iter().map(|v| v.to_bits()));
                }
            }
            out.extend(s.decode(7).unwrap().iter().map(|v| v.to_bits()));
            out
        }
        for file_type in [FileType::Q4KM, FileType::Q5KM, FileType::Q4_0] {
            let bytes = model_bytes(&SynthConfig::small().with_file_type(file_type), 5).unwrap();
            let plain_file = GgufFile::from_bytes(&bytes).unwrap();
            let plain = Qwen3::load(&plain_file.gguf()).unwrap();
            let mut file = GgufFile::from_bytes(&bytes).unwrap();
            let packed = file.pack_rows8(|info| is_projection(&info.name));
            assert!(packed > 0, "{file_type:?}: nothing packed");
            assert_eq!(file.pack_rows8(|info| is_projection(&info.name)), 0);
            let model = Qwen3::load(&file.gguf()).unwrap();
            assert!(matches!(
                model.weights.layers[0].q,
                crate::matvec::Weight::Q4KPacked(_)
                    | crate::matvec::Weight::Q5KPacked(_)
                    | crate::matvec::Weight::Q4_0Packed(_)
            ));
            for (name, threads) in [("scalar", 1), ("simd", 1), ("parallel", 3), ("pool", 2)] {
                for prefill in [false, true] {
                    let b = || AnyBackend::new(name, threads).unwrap();
                    assert!(
                        logits(&plain, b(), prefill) == logits(&model, b(), prefill),
                        "{file_type:?}: {name} x{threads}, prefill {prefill}"
                    );
                }
            }
            let written = crate::gguf::Writer::from_gguf(&file.gguf())
                .unwrap()
                .to_bytes()
                .unwrap();
            assert!(written == bytes, "{file_type:?}: the written file differs");
        }
    }

    /// `TINY` with the first occurrence of `from` replaced by `to` (of the
    /// same length).
    fn edited(from: &[u8], to: &[u8]) -> Vec<u8> {
        assert_eq!(from.len(), to.len());
        let mut bytes = TINY.to_vec();
        let at = bytes
            .windows(from.len())
            .position(|w| w == from)
            .expect("present");
        bytes[at..at + from.len()].copy_from_slice(to);
        bytes
    }

    /// A loader that fails or panics after borrowing the file frees the
    /// file once and leaks nothing (Miri checks both), whether the error
    /// comes from `Qwen3::load` or from the builder itself; a tokenizer
    /// that fails before the cell is built drops the file normally.
    #[test]
    fn failed_and_panicking_builds_free_the_file_once() {
        // The weights load but one tensor is missing: the builder's error.
        let missing = edited(b"output_norm.weight", b"output_norx.weight");
        assert!(matches!(
            Model::from_bytes(&missing),
            Err(ModelError::Gguf(_))
        ));
        // The tokenizer's key is gone: an error before the cell exists.
        let no_tokens = edited(b"tokenizer.ggml.tokens", b"tokenizer.ggml.tokenz");
        assert!(Model::from_bytes(&no_tokens).is_err());
        // A builder that returns an error after building the dependent.
        let file = GgufFile::from_bytes(TINY).unwrap();
        let got = ModelCell::try_new(file, |file| {
            let q = Qwen3::load(&file.gguf())?;
            assert!(q.config.layers > 0);
            Err::<Qwen3<'_>, ModelError>(ModelError::Tokenizer(
                crate::tokenizer::TokenizerError::EmptyVocab,
            ))
        });
        assert!(got.is_err());
        // A builder that panics holding a built dependent.
        let file = GgufFile::from_bytes(TINY).unwrap();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            ModelCell::try_new(file, |file| {
                let q = Qwen3::load(&file.gguf())?;
                if q.config.layers > 0 {
                    panic!("loader panicked");
                }
                Ok::<_, ModelError>(q)
            })
        }));
        assert!(caught.is_err());
    }

    /// The weight views stay where they were while the `Model` value moves
    /// (into a box, a vector, another thread) and still read the file's
    /// bytes there: the decode gives the same logits after every move.
    #[test]
    fn views_survive_moves_of_the_model() {
        let model = Model::from_bytes(TINY).unwrap();
        let at = |m: &Model| match &m.qwen3().weights.layers[0].q {
            crate::matvec::Weight::Q8_0(w) => w.blocks().as_ptr() as usize,
            other => panic!("the fixture's q is {}", other.type_name()),
        };
        let first = at(&model);
        // What the views read: a forward pass natively; under Miri, where
        // one takes minutes, an embedding row and a norm weight, read
        // through the same views.
        let decode = |m: &Model| {
            if cfg!(miri) {
                let w = &m.qwen3().weights;
                let mut row = vec![0.0; m.config().hidden];
                w.embedding.row_into(2, &mut row).unwrap();
                row.extend_from_slice(&w.output_norm);
                return row;
            }
            let mut s = Session::new(m, crate::backend::Scalar, SessionOptions::default()).unwrap();
            s.prefill(&[2, 3]).unwrap().to_vec()
        };
        let want = decode(&model);
        let boxed = Box::new(model);
        assert_eq!(at(&boxed), first);
        let mut v = vec![*boxed];
        v.reserve(100);
        assert_eq!(at(&v[0]), first);
        let model = v.pop().unwrap();
        let (model, got) = std::thread::spawn(move || {
            let got = decode(&model);
            (model, got)
        })
        .join()
        .unwrap();
        assert_eq!(at(&model), first);
        assert_eq!(got, want);
        // The file the views borrow is the cell's own.
        let bytes = model.file().gguf().bytes().as_ptr_range();
        assert!((bytes.start as usize..bytes.end as usize).contains(&first));
    }
}
