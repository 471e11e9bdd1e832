//! The backends by name, and why one could not be built.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

use crate::pool::PoolError;

/// Why a backend could not be built.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The name is not one of [`BackendKind::ALL`].
    #[error("unknown backend {0:?} (supported: {list})", list = BackendKind::supported())]
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

impl BackendError {
    /// A multi-threaded backend asked for no threads.
    pub(crate) fn zero_threads(kind: BackendKind) -> Self {
        BackendError::Threads {
            kind,
            threads: 0,
            hint: "",
        }
    }
}

/// The four backends, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// [`Scalar`](super::Scalar).
    Scalar,
    /// [`Simd`](super::Simd).
    Simd,
    /// [`Parallel`](super::Parallel).
    Parallel,
    /// [`Pool`](super::Pool).
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

    /// The names of [`ALL`](Self::ALL), comma-separated: what an error
    /// about an unknown name offers instead, kept in step with the list.
    fn supported() -> String {
        Self::ALL.map(Self::name).join(", ")
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
    fn unknown_names_list_every_backend() {
        let err = "gpu".parse::<BackendKind>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown backend \"gpu\" (supported: scalar, simd, parallel, pool)"
        );
    }
}
