//! The selected SIMD kernel on the calling thread.

use std::ops::Range;

use super::{dispatch_of, matmul_serial, Backend, Scalar};
use crate::matvec::{ShapeError, Weight};
use crate::quant::{Kernel, QuantizedBatch};

/// The SIMD kernels [`Kernel::selected`] picks, on one thread: what the
/// multi-threaded backends gain over, with the same bytes out.
#[derive(Debug, Default, Clone, Copy)]
pub struct Simd;

impl Backend for Simd {
    fn name(&self) -> &'static str {
        "simd"
    }
    fn threads(&self) -> usize {
        1
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
        matmul_serial(dispatch_of(self), w, xs, out)
    }
    fn for_each_range<T, F>(&self, data: &mut [T], f: F)
    where
        T: Send,
        F: Fn(Range<usize>, &mut [T]) + Sync,
    {
        // Scalar's schedule: the whole of `data` on this thread.
        Scalar.for_each_range(data, f);
    }
}
