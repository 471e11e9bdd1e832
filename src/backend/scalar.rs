//! The reference backend: the scalar kernel on the calling thread.

use std::ops::Range;

use super::{dispatch_of, matmul_serial, Backend};
use crate::matvec::{ShapeError, Weight};
use crate::quant::{Kernel, QuantizedBatch};

/// Reference kernels on one thread: the baseline every other backend is
/// checked against.
#[derive(Debug, Default, Clone, Copy)]
pub struct Scalar;

impl Backend for Scalar {
    fn name(&self) -> &'static str {
        "scalar"
    }
    fn threads(&self) -> usize {
        1
    }
    fn kernel(&self) -> Kernel {
        Kernel::Scalar
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
        f(0..data.len(), data);
    }
}
