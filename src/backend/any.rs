//! A backend chosen at run time, by name.

use super::{forward_backend, BackendError, BackendKind, Parallel, Pool, Scalar, Simd};

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

/// Evaluates `$e` with `$b` bound to whichever backend `$self` holds.
macro_rules! each_variant {
    ($self:ident, $b:ident => $e:expr) => {
        match $self {
            AnyBackend::Scalar($b) => $e,
            AnyBackend::Simd($b) => $e,
            AnyBackend::Parallel($b) => $e,
            AnyBackend::Pool($b) => $e,
        }
    };
}

forward_backend!(impl[] for AnyBackend, via each_variant);
