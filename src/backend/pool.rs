//! The spinning pool for decode, rayon for prefill.

use std::ops::Range;

use super::parallel::{for_each_chunk_rayon, matmul_rayon, rayon_pool, RayonPool};
use super::{dispatch_of, Backend, BackendError, BackendKind};
use crate::matvec::{matvec_pool_stacked, ShapeError, Weight};
use crate::pool::ThreadPool;
use crate::quant::{Kernel, QuantizedBatch, QuantizedVector};

/// The spinning [`ThreadPool`] for every decode product and for attention
/// across heads; rayon (with as many threads) for prefill, whose large
/// products amortise a fork-join and gain from work stealing.
#[derive(Debug)]
pub struct Pool {
    pool: ThreadPool,
    rayon: RayonPool,
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
            return Err(BackendError::zero_threads(BackendKind::Pool));
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
        Kernel::selected()
    }
    fn matmul(
        &self,
        w: &Weight<'_>,
        xs: &QuantizedBatch,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        matmul_rayon(&self.rayon, dispatch_of(self), w, xs, out)
    }
    fn for_each_range<T, F>(&self, data: &mut [T], f: F)
    where
        T: Send,
        F: Fn(Range<usize>, &mut [T]) + Sync,
    {
        self.pool.for_each_chunk_mut(data, f);
    }
    fn matvec(
        &self,
        ws: &[Weight<'_>],
        x: &QuantizedVector,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        // The provided matvec on this split, as one function with
        // `matvec_q8_0_pool`.
        matvec_pool_stacked(&self.pool, dispatch_of(self), ws, x, out)
    }
    fn for_each_chunk<T, F>(&self, data: &mut [T], chunk: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
    {
        for_each_chunk_rayon(&self.rayon, data, chunk, f);
    }
}
