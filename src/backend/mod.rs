//! Where the forward pass's work runs: one trait, four implementations.
//!
//! | backend | decode products | decode attention | prefill |
//! |---|---|---|---|
//! | [`Scalar`] | scalar kernel, one thread | one thread | one thread |
//! | [`Simd`] | SIMD kernel, one thread | one thread | one thread |
//! | [`Parallel`] | rayon, rows split per thread | rayon, one task per head | rayon |
//! | [`Pool`] | the spinning [`ThreadPool`], rows split per thread | the pool, heads split per thread | rayon |
//!
//! Every output value is computed whole by one thread with one kernel,
//! whichever backend runs it, so [`Simd`], [`Parallel`] and [`Pool`] give
//! the same bytes at every thread count ([`Scalar`] differs from them only
//! in the kernel's summation order).
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

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use rayon::prelude::*;
use thiserror::Error;

use crate::matvec::{Q8Matrix, ShapeError};
use crate::pool::{PoolError, ThreadPool};
use crate::quant::dot::{selected, Dispatch};
use crate::quant::{Kernel, QuantError, QuantizedBatch, QuantizedVector};

/// Why a backend could not be built.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The name is not one of [`BackendKind::ALL`].
    #[error("unknown backend {0:?} (supported: scalar, simd, parallel, pool)")]
    Unknown(String),
    /// A thread count of zero, or more than one for a one-thread backend.
    #[error("the {kind} backend cannot run on {threads} threads{hint}")]
    Threads {
        /// The backend.
        kind: BackendKind,
        /// The count asked for.
        threads: usize,
        /// How to fix it.
        hint: &'static str,
    },
    /// The spinning pool could not start.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// rayon's pool could not start.
    #[error("rayon thread pool: {0}")]
    Rayon(#[from] rayon::ThreadPoolBuildError),
}

/// The four backends, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// [`Scalar`].
    Scalar,
    /// [`Simd`].
    Simd,
    /// [`Parallel`].
    Parallel,
    /// [`Pool`].
    Pool,
}

impl BackendKind {
    /// Every backend, in the order a benchmark lists them.
    pub const ALL: [BackendKind; 4] = [
        BackendKind::Scalar,
        BackendKind::Simd,
        BackendKind::Parallel,
        BackendKind::Pool,
    ];

    /// The backend's name, as [`FromStr`] accepts it.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Scalar => "scalar",
            BackendKind::Simd => "simd",
            BackendKind::Parallel => "parallel",
            BackendKind::Pool => "pool",
        }
    }

    /// Whether the backend runs on one thread whatever it is given.
    pub fn is_single_threaded(self) -> bool {
        matches!(self, BackendKind::Scalar | BackendKind::Simd)
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = BackendError;

    fn from_str(s: &str) -> Result<Self, BackendError> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s.trim())
            .ok_or_else(|| BackendError::Unknown(s.to_string()))
    }
}

/// What the forward pass asks of a backend: its products and its fan-outs.
///
/// Implementations must give every output value to exactly one thread and
/// compute it whole, so results do not depend on the thread count.
pub trait Backend: Send + Sync {
    /// The backend's name (`"pool"`, ...).
    fn name(&self) -> &'static str;

    /// Threads the backend computes on (1 for the single-core ones).
    fn threads(&self) -> usize;

    /// The dot kernel of every product and attention score.
    fn kernel(&self) -> Kernel;

    /// Quantizes a decode activation for [`matvec`](Self::matvec).
    ///
    /// # Errors
    ///
    /// [`QuantError`] if `x.len()` is not a multiple of 32.
    fn quantize(&self, x: &[f32], into: &mut QuantizedVector) -> Result<(), QuantError> {
        into.quantize_with(dispatch_of(self), x)
    }

    /// Decode products sharing one input: `out` is the outputs of every
    /// matrix of `ws` one after another (`ws[0]`'s rows first), all in one
    /// fan-out, so fusing q/k/v or gate/up costs one barrier, not three.
    ///
    /// # Errors
    ///
    /// [`ShapeError`] if a matrix's width is not `x.cols()` or `out` does not
    /// hold every matrix's rows.
    fn matvec(
        &self,
        ws: &[Q8Matrix<'_>],
        x: &QuantizedVector,
        out: &mut [f32],
    ) -> Result<(), ShapeError>;

    /// A prefill product: `out = X W^T` for a batch of activation rows,
    /// output row `i` bit-identical to [`matvec`](Self::matvec) of batch row
    /// `i`.
    ///
    /// # Errors
    ///
    /// As [`matmul_q8_0`](crate::matvec::matmul_q8_0).
    fn matmul(
        &self,
        w: &Q8Matrix<'_>,
        xs: &QuantizedBatch,
        out: &mut [f32],
    ) -> Result<(), ShapeError>;

    /// Runs `f(i, &mut items[i])` for every item: the decode fan-out (one
    /// item per attention head).
    fn for_each_mut<T, F>(&self, items: &mut [T], f: F)
    where
        T: Send,
        F: Fn(usize, &mut T) + Sync;

    /// Runs `f(i, chunk_i)` for every `chunk`-long piece of `data`: the
    /// prefill fan-out (one piece per position and head).
    fn for_each_chunk<T, F>(&self, data: &mut [T], chunk: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync;
}

/// The callable form of a backend's kernel (always available: backends
/// only report kernels the CPU runs).
pub(crate) fn dispatch_of<B: Backend + ?Sized>(b: &B) -> Dispatch {
    b.kernel().dispatch().unwrap_or(Dispatch::Scalar)
}

impl<B: Backend + ?Sized> Backend for &B {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn threads(&self) -> usize {
        (**self).threads()
    }
    fn kernel(&self) -> Kernel {
        (**self).kernel()
    }
    fn matvec(
        &self,
        ws: &[Q8Matrix<'_>],
        x: &QuantizedVector,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        (**self).matvec(ws, x, out)
    }
    fn matmul(
        &self,
        w: &Q8Matrix<'_>,
        xs: &QuantizedBatch,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        (**self).matmul(w, xs, out)
    }
    fn for_each_mut<T, F>(&self, items: &mut [T], f: F)
    where
        T: Send,
        F: Fn(usize, &mut T) + Sync,
    {
        (**self).for_each_mut(items, f)
    }
    fn for_each_chunk<T, F>(&self, data: &mut [T], chunk: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
    {
        (**self).for_each_chunk(data, chunk, f)
    }
}

/// Checks a stacked product's shapes.
fn check_stacked(ws: &[Q8Matrix<'_>], x: &QuantizedVector, out: &[f32]) -> Result<(), ShapeError> {
    let mut rows = 0usize;
    for w in ws {
        if w.cols() != x.cols() {
            return Err(ShapeError::InputLength {
                expected: w.cols(),
                got: x.cols(),
            });
        }
        rows = rows.saturating_add(w.rows());
    }
    if rows != out.len() {
        return Err(ShapeError::OutputLength {
            expected: rows,
            got: out.len(),
        });
    }
    Ok(())
}

/// Computes the stacked rows `range` of `ws` into `out` (`range.len()`
/// values), each row one whole dot product with kernel `k`.
fn stacked_rows(
    k: Dispatch,
    ws: &[Q8Matrix<'_>],
    x: &QuantizedVector,
    range: Range<usize>,
    out: &mut [f32],
) {
    let mut base = 0;
    let mut done = 0;
    for w in ws {
        let (lo, hi) = (range.start.max(base), range.end.min(base + w.rows()));
        if lo < hi {
            let n = hi - lo;
            k.matvec_q8(
                w.rows_blocks(lo - base..hi - base),
                w.blocks_per_row(),
                x.act(),
                &mut out[done..done + n],
            );
            done += n;
        }
        base += w.rows();
    }
}

/// A serial matmul with kernel `k`: weight rows outer, so each is read from
/// memory once for the batch.
fn matmul_serial(
    k: Dispatch,
    w: &Q8Matrix<'_>,
    xs: &QuantizedBatch,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    if xs.rows() > 0 && xs.cols() != w.cols() {
        return Err(ShapeError::InputLength {
            expected: w.cols(),
            got: xs.cols(),
        });
    }
    let rows = w.rows();
    if out.len() != xs.rows().saturating_mul(rows) {
        return Err(ShapeError::OutputLength {
            expected: xs.rows().saturating_mul(rows),
            got: out.len(),
        });
    }
    crate::matvec::matmul_q8_0_with(k, w, xs, out);
    Ok(())
}

/// Reference kernels on one thread: the baseline every other backend is
/// checked against.
#[derive(Debug, Default, Clone, Copy)]
pub struct Scalar;

/// The SIMD kernels [`Kernel::selected`] picks, on one thread.
#[derive(Debug, Default, Clone, Copy)]
pub struct Simd;

macro_rules! serial_backend {
    ($ty:ty, $name:literal, $kernel:expr) => {
        impl Backend for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn threads(&self) -> usize {
                1
            }
            fn kernel(&self) -> Kernel {
                $kernel
            }
            fn matvec(
                &self,
                ws: &[Q8Matrix<'_>],
                x: &QuantizedVector,
                out: &mut [f32],
            ) -> Result<(), ShapeError> {
                check_stacked(ws, x, out)?;
                stacked_rows(dispatch_of(self), ws, x, 0..out.len(), out);
                Ok(())
            }
            fn matmul(
                &self,
                w: &Q8Matrix<'_>,
                xs: &QuantizedBatch,
                out: &mut [f32],
            ) -> Result<(), ShapeError> {
                matmul_serial(dispatch_of(self), w, xs, out)
            }
            fn for_each_mut<T, F>(&self, items: &mut [T], f: F)
            where
                T: Send,
                F: Fn(usize, &mut T) + Sync,
            {
                for (i, item) in items.iter_mut().enumerate() {
                    f(i, item);
                }
            }
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
    };
}

serial_backend!(Scalar, "scalar", Kernel::Scalar);
serial_backend!(Simd, "simd", selected().0);

fn rayon_pool(threads: usize) -> Result<rayon::ThreadPool, BackendError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("inferno-rayon-{i}"))
        .build()?;
    // Wait until every thread has started, so a session's first prefill
    // pays no thread start-up, and nothing starts (or allocates) later.
    pool.broadcast(|_| ());
    Ok(pool)
}

/// rayon for everything, decode included: what a fork-join pool gives
/// when every product of a token is split across its threads.
#[derive(Debug)]
pub struct Parallel {
    rayon: rayon::ThreadPool,
}

impl Parallel {
    /// A backend on its own rayon pool of `threads` threads.
    ///
    /// # Errors
    ///
    /// [`BackendError::Threads`] for 0; [`BackendError::Rayon`] if the
    /// threads cannot start.
    pub fn new(threads: usize) -> Result<Self, BackendError> {
        if threads == 0 {
            return Err(zero_threads(BackendKind::Parallel));
        }
        Ok(Self {
            rayon: rayon_pool(threads)?,
        })
    }
}

fn zero_threads(kind: BackendKind) -> BackendError {
    BackendError::Threads {
        kind,
        threads: 0,
        hint: "",
    }
}

/// rayon's parallel matmul for prefill, shared by [`Parallel`] and [`Pool`].
fn matmul_rayon(
    rayon: &rayon::ThreadPool,
    w: &Q8Matrix<'_>,
    xs: &QuantizedBatch,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    rayon.install(|| crate::matvec::matmul_q8_0_rayon(w, xs, out))
}

fn for_each_chunk_rayon<T, F>(rayon: &rayon::ThreadPool, data: &mut [T], chunk: usize, f: F)
where
    T: Send,
    F: Fn(usize, &mut [T]) + Sync,
{
    rayon.install(|| {
        data.par_chunks_mut(chunk.max(1))
            .enumerate()
            .for_each(|(i, c)| f(i, c));
    });
}

impl Backend for Parallel {
    fn name(&self) -> &'static str {
        "parallel"
    }
    fn threads(&self) -> usize {
        self.rayon.current_num_threads()
    }
    fn kernel(&self) -> Kernel {
        selected().0
    }
    fn matvec(
        &self,
        ws: &[Q8Matrix<'_>],
        x: &QuantizedVector,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        check_stacked(ws, x, out)?;
        let k = dispatch_of(self);
        // One contiguous range of rows per thread, as the pool splits them.
        let chunk = out.len().div_ceil(self.threads()).max(1);
        self.rayon.install(|| {
            out.par_chunks_mut(chunk).enumerate().for_each(|(i, part)| {
                let start = i * chunk;
                stacked_rows(k, ws, x, start..start + part.len(), part);
            });
        });
        Ok(())
    }
    fn matmul(
        &self,
        w: &Q8Matrix<'_>,
        xs: &QuantizedBatch,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        matmul_rayon(&self.rayon, w, xs, out)
    }
    fn for_each_mut<T, F>(&self, items: &mut [T], f: F)
    where
        T: Send,
        F: Fn(usize, &mut T) + Sync,
    {
        self.rayon.install(|| {
            items
                .par_iter_mut()
                .enumerate()
                .for_each(|(i, item)| f(i, item));
        });
    }
    fn for_each_chunk<T, F>(&self, data: &mut [T], chunk: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
    {
        for_each_chunk_rayon(&self.rayon, data, chunk, f);
    }
}

/// The spinning [`ThreadPool`] for every decode product and for attention
/// across heads; rayon (with as many threads) for prefill, whose large
/// products amortise a fork-join and gain from work stealing.
#[derive(Debug)]
pub struct Pool {
    pool: ThreadPool,
    rayon: rayon::ThreadPool,
}

impl Pool {
    /// A backend on a new pool of `threads` threads (the caller counts as
    /// one) and a rayon pool of as many.
    ///
    /// # Errors
    ///
    /// [`BackendError::Threads`] for 0; [`BackendError::Pool`] or
    /// [`BackendError::Rayon`] if the threads cannot start.
    pub fn new(threads: usize) -> Result<Self, BackendError> {
        if threads == 0 {
            return Err(zero_threads(BackendKind::Pool));
        }
        Ok(Self {
            pool: ThreadPool::new(threads)?,
            rayon: rayon_pool(threads)?,
        })
    }

    /// The spinning pool, for work of the caller's own between steps.
    pub fn thread_pool(&self) -> &ThreadPool {
        &self.pool
    }
}

impl Backend for Pool {
    fn name(&self) -> &'static str {
        "pool"
    }
    fn threads(&self) -> usize {
        self.pool.threads()
    }
    fn kernel(&self) -> Kernel {
        selected().0
    }
    fn matvec(
        &self,
        ws: &[Q8Matrix<'_>],
        x: &QuantizedVector,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        check_stacked(ws, x, out)?;
        let k = dispatch_of(self);
        self.pool
            .for_each_chunk_mut(out, |rows, part| stacked_rows(k, ws, x, rows, part));
        Ok(())
    }
    fn matmul(
        &self,
        w: &Q8Matrix<'_>,
        xs: &QuantizedBatch,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        matmul_rayon(&self.rayon, w, xs, out)
    }
    fn for_each_mut<T, F>(&self, items: &mut [T], f: F)
    where
        T: Send,
        F: Fn(usize, &mut T) + Sync,
    {
        self.pool.for_each_chunk_mut(items, |range, part| {
            for (i, item) in range.zip(part) {
                f(i, item);
            }
        });
    }
    fn for_each_chunk<T, F>(&self, data: &mut [T], chunk: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
    {
        for_each_chunk_rayon(&self.rayon, data, chunk, f);
    }
}

/// Any of the four backends, chosen at run time.
#[derive(Debug)]
pub enum AnyBackend {
    /// [`Scalar`].
    Scalar(Scalar),
    /// [`Simd`].
    Simd(Simd),
    /// [`Parallel`].
    Parallel(Parallel),
    /// [`Pool`].
    Pool(Pool),
}

impl AnyBackend {
    /// The backend called `name` on `threads` threads.
    ///
    /// # Errors
    ///
    /// [`BackendError::Unknown`] for a name not in [`BackendKind::ALL`]
    /// (the message lists them); as [`with_kind`](Self::with_kind).
    pub fn new(name: &str, threads: usize) -> Result<Self, BackendError> {
        Self::with_kind(name.parse()?, threads)
    }

    /// The backend `kind` on `threads` threads.
    ///
    /// # Errors
    ///
    /// [`BackendError::Threads`] for 0 threads, or more than 1 for `scalar`
    /// and `simd`; thread start-up errors.
    pub fn with_kind(kind: BackendKind, threads: usize) -> Result<Self, BackendError> {
        if kind.is_single_threaded() && threads != 1 {
            return Err(BackendError::Threads {
                kind,
                threads,
                hint: " (it is single-threaded: use 1)",
            });
        }
        Ok(match kind {
            BackendKind::Scalar => AnyBackend::Scalar(Scalar),
            BackendKind::Simd => AnyBackend::Simd(Simd),
            BackendKind::Parallel => AnyBackend::Parallel(Parallel::new(threads)?),
            BackendKind::Pool => AnyBackend::Pool(Pool::new(threads)?),
        })
    }

    /// Which backend this is.
    pub fn kind(&self) -> BackendKind {
        match self {
            AnyBackend::Scalar(_) => BackendKind::Scalar,
            AnyBackend::Simd(_) => BackendKind::Simd,
            AnyBackend::Parallel(_) => BackendKind::Parallel,
            AnyBackend::Pool(_) => BackendKind::Pool,
        }
    }
}

macro_rules! delegate {
    ($self:ident, $b:ident => $e:expr) => {
        match $self {
            AnyBackend::Scalar($b) => $e,
            AnyBackend::Simd($b) => $e,
            AnyBackend::Parallel($b) => $e,
            AnyBackend::Pool($b) => $e,
        }
    };
}

impl Backend for AnyBackend {
    fn name(&self) -> &'static str {
        delegate!(self, b => b.name())
    }
    fn threads(&self) -> usize {
        delegate!(self, b => b.threads())
    }
    fn kernel(&self) -> Kernel {
        delegate!(self, b => b.kernel())
    }
    fn matvec(
        &self,
        ws: &[Q8Matrix<'_>],
        x: &QuantizedVector,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        delegate!(self, b => b.matvec(ws, x, out))
    }
    fn matmul(
        &self,
        w: &Q8Matrix<'_>,
        xs: &QuantizedBatch,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        delegate!(self, b => b.matmul(w, xs, out))
    }
    fn for_each_mut<T, F>(&self, items: &mut [T], f: F)
    where
        T: Send,
        F: Fn(usize, &mut T) + Sync,
    {
        delegate!(self, b => b.for_each_mut(items, f))
    }
    fn for_each_chunk<T, F>(&self, data: &mut [T], chunk: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
    {
        delegate!(self, b => b.for_each_chunk(data, chunk, f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in BackendKind::ALL {
            assert_eq!(k.name().parse::<BackendKind>().unwrap(), k);
        }
        assert!(
            matches!("cuda".parse::<BackendKind>(), Err(BackendError::Unknown(s)) if s == "cuda")
        );
    }

    #[test]
    fn single_threaded_backends_refuse_more_threads() {
        let err = AnyBackend::new("simd", 4).unwrap_err();
        assert!(err.to_string().contains("single-threaded"), "{err}");
        assert!(AnyBackend::new("pool", 0).is_err());
        assert!(AnyBackend::new("parallel", 0).is_err());
    }
}
