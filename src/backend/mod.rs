//! Where the forward pass's work runs: one trait, four implementations.
//!
//! | backend | decode products | decode attention | prefill |
//! |---|---|---|---|
//! | [`Scalar`] | scalar kernel, one thread | one thread | one thread |
//! | [`Simd`] | SIMD kernel, one thread | one thread | one thread |
//! | [`Parallel`] | rayon, rows split per thread | rayon, one task per head | rayon |
//! | [`Pool`] | the spinning [`ThreadPool`](crate::ThreadPool), rows split per thread | the pool, heads split per thread | rayon |
//!
//! Every output value is computed whole by one thread with one kernel,
//! whichever backend runs it, so [`Simd`], [`Parallel`] and [`Pool`] give
//! the same bytes at every thread count ([`Scalar`] differs from them only
//! in the kernel's summation order).
//!
//! A backend says who it is ([`name`](Backend::name),
//! [`threads`](Backend::threads), [`kernel`](Backend::kernel)), how it runs
//! a prefill product ([`matmul`](Backend::matmul)) and how it splits work
//! across its threads ([`for_each_range`](Backend::for_each_range)); the
//! decode products and fan-outs are provided on top of those two, and a
//! backend overrides one only to schedule it differently.
//!
//! The trait's methods are generic (closures are passed by value), so a
//! forward pass is compiled once per backend. [`AnyBackend`] picks one at
//! run time by name:
//!
//! ```
//! # #[cfg(not(feature = "loom"))] { // the pool runs on loom's scheduler under `loom`
//! use inferno_cpu::backend::{AnyBackend, Backend};
//! let backend = AnyBackend::new("pool", 2)?;
//! assert_eq!((backend.name(), backend.threads()), ("pool", 2));
//! let err = AnyBackend::new("gpu", 1).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "unknown backend \"gpu\" (supported: scalar, simd, parallel, pool)"
//! );
//! # }
//! # Ok::<(), inferno_cpu::backend::BackendError>(())
//! ```

mod any;
mod kind;
mod parallel;
mod pool;
mod scalar;
mod simd;

use std::ops::Range;

use crate::matvec::{check_batch_any, check_stacked_any, matmul_any_with, stacked_rows_any};
use crate::matvec::{ShapeError, Weight};
use crate::quant::dot::Dispatch;
use crate::quant::{ActForms, Kernel, QuantError, QuantizedBatch, QuantizedVector};

pub use any::AnyBackend;
pub use kind::{BackendError, BackendKind};
pub use parallel::Parallel;
pub use pool::Pool;
pub use scalar::Scalar;
pub use simd::Simd;

/// What the forward pass asks of a backend: its products and its fan-outs.
///
/// Implementations must give every output value to exactly one thread and
/// compute it whole, so results do not depend on the thread count.
pub trait Backend: Send + Sync {
    /// The backend's name (`"pool"`, ...).
    fn name(&self) -> &'static str;

    /// Threads the backend computes on (1 for the single-core ones).
    fn threads(&self) -> usize;

    /// The dot kernel of every product and attention score, by name: the
    /// products run the kernel this names, never one chosen elsewhere.
    fn kernel(&self) -> Kernel;

    /// A prefill product: `out = X W^T` for a batch of activation rows
    /// (quantized into the form `w` reads, [`Weight::forms`]), output row
    /// `i` bit-identical to [`matvec`](Self::matvec) of batch row `i`.
    ///
    /// # Errors
    ///
    /// As [`matmul_q8_0`](crate::matvec::matmul_q8_0); also
    /// [`ShapeError::InputLength`] if the batch lacks the form `w` reads.
    fn matmul(
        &self,
        w: &Weight<'_>,
        xs: &QuantizedBatch,
        out: &mut [f32],
    ) -> Result<(), ShapeError>;

    /// Runs `f(range, &mut data[range])` for each of at most
    /// [`threads`](Self::threads) contiguous ranges that together cover
    /// `data` once: the split every decode fan-out is built on, so each
    /// backend says once how it divides work.
    fn for_each_range<T, F>(&self, data: &mut [T], f: F)
    where
        T: Send,
        F: Fn(Range<usize>, &mut [T]) + Sync;

    /// Quantizes a decode activation into the `forms` the products that
    /// read it need ([`Weight::forms_of`]) for [`matvec`](Self::matvec).
    ///
    /// # Errors
    ///
    /// [`QuantError`] if `x.len()` is not a multiple of 32 (of 256 with
    /// the Q8_K form).
    fn quantize(
        &self,
        x: &[f32],
        forms: ActForms,
        into: &mut QuantizedVector,
    ) -> Result<(), QuantError> {
        into.quantize_forms_with(dispatch_of(self), x, forms)
    }

    /// Decode products sharing one input: `out` is the outputs of every
    /// matrix of `ws` one after another (`ws[0]`'s rows first), all in one
    /// fan-out, so fusing q/k/v or gate/up costs one barrier, not three.
    ///
    /// # Errors
    ///
    /// [`ShapeError`] if a matrix's width is not `x.cols()`, `x` lacks the
    /// form a matrix reads, or `out` does not hold every matrix's rows.
    fn matvec(
        &self,
        ws: &[Weight<'_>],
        x: &QuantizedVector,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        check_stacked_any(ws, x, out)?;
        let k = dispatch_of(self);
        self.for_each_range(out, |rows, part| stacked_rows_any(k, ws, x, rows, part));
        Ok(())
    }

    /// Runs `f(i, &mut items[i])` for every item: the decode fan-out (one
    /// item per attention part: a key/value head's run of positions).
    fn for_each_mut<T, F>(&self, items: &mut [T], f: F)
    where
        T: Send,
        F: Fn(usize, &mut T) + Sync,
    {
        self.for_each_range(items, |range, part| {
            for (i, item) in range.zip(part) {
                f(i, item);
            }
        });
    }

    /// Runs `f(i, chunk_i)` for every `chunk`-long piece of `data`: the
    /// prefill fan-out (one piece per position and head). On the calling
    /// thread, in order, unless the backend has a pool for prefill.
    fn for_each_chunk<T, F>(&self, data: &mut [T], chunk: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
    {
        for (i, c) in data.chunks_mut(chunk.max(1)).enumerate() {
            f(i, c);
        }
    }
}

/// Every backend spreads a batch's quantization over its threads as it
/// spreads any other per-row work.
impl<B: Backend + ?Sized> crate::quant::Spread for B {
    fn spread<T: Send, F: Fn(Range<usize>, &mut [T]) + Sync>(&self, data: &mut [T], f: F) {
        self.for_each_range(data, f);
    }
}

/// The callable form of a backend's kernel: a backend names its kernel as
/// a [`Kernel`] (the public name), and the [`Dispatch`] its products call
/// (that kernel with the CPU-feature token that lets it run) is always
/// built from that name, here, so the two cannot disagree. Always
/// available: backends only report kernels the CPU runs.
pub(crate) fn dispatch_of<B: Backend + ?Sized>(b: &B) -> Dispatch {
    b.kernel().dispatch().unwrap_or(Dispatch::Scalar)
}

/// Implements [`Backend`] by handing every method, provided ones included
/// (so an override is never lost), to the backend that `$via!(self, b =>
/// expr)` evaluates `expr` with.
macro_rules! forward_backend {
    (impl[$($gen:tt)*] for $ty:ty, via $via:ident) => {
        impl<$($gen)*> $crate::backend::Backend for $ty {
            fn name(&self) -> &'static str {
                $via!(self, b => b.name())
            }
            fn threads(&self) -> usize {
                $via!(self, b => b.threads())
            }
            fn kernel(&self) -> $crate::quant::Kernel {
                $via!(self, b => b.kernel())
            }
            fn matmul(
                &self,
                w: &$crate::matvec::Weight<'_>,
                xs: &$crate::quant::QuantizedBatch,
                out: &mut [f32],
            ) -> Result<(), $crate::matvec::ShapeError> {
                $via!(self, b => b.matmul(w, xs, out))
            }
            fn for_each_range<T, F>(&self, data: &mut [T], f: F)
            where
                T: Send,
                F: Fn(::std::ops::Range<usize>, &mut [T]) + Sync,
            {
                $via!(self, b => b.for_each_range(data, f))
            }
            fn quantize(
                &self,
                x: &[f32],
                forms: $crate::quant::ActForms,
                into: &mut $crate::quant::QuantizedVector,
            ) -> Result<(), $crate::quant::QuantError> {
                $via!(self, b => b.quantize(x, forms, into))
            }
            fn matvec(
                &self,
                ws: &[$crate::matvec::Weight<'_>],
                x: &$crate::quant::QuantizedVector,
                out: &mut [f32],
            ) -> Result<(), $crate::matvec::ShapeError> {
                $via!(self, b => b.matvec(ws, x, out))
            }
            fn for_each_mut<T, F>(&self, items: &mut [T], f: F)
            where
                T: Send,
                F: Fn(usize, &mut T) + Sync,
            {
                $via!(self, b => b.for_each_mut(items, f))
            }
            fn for_each_chunk<T, F>(&self, data: &mut [T], chunk: usize, f: F)
            where
                T: Send,
                F: Fn(usize, &mut [T]) + Sync,
            {
                $via!(self, b => b.for_each_chunk(data, chunk, f))
            }
        }
    };
}
use forward_backend;

/// The backend behind a reference.
macro_rules! deref {
    ($self:ident, $b:ident => $e:expr) => {{
        let $b = &**$self;
        $e
    }};
}

forward_backend!(impl[B: Backend + ?Sized] for &B, via deref);

/// A serial matmul with kernel `k`: weight rows outer, so each is read from
/// memory once for the batch.
fn matmul_serial(
    k: Dispatch,
    w: &Weight<'_>,
    xs: &QuantizedBatch,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    check_batch_any(w, xs, out)?;
    matmul_any_with(k, w, xs, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_threaded_backends_refuse_more_threads() {
        let err = AnyBackend::new("simd", 4).unwrap_err();
        assert!(err.to_string().contains("single-threaded"), "{err}");
        assert!(AnyBackend::new("pool", 0).is_err());
        assert!(AnyBackend::new("parallel", 0).is_err());
    }
}
