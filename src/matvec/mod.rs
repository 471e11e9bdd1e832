//! Matrix-vector and matrix-matrix products over Q8_0 and f32 weights.
//!
//! Decode is a chain of matrix-vector products whose speed is set by how
//! fast the weights stream from memory. Every entry point here computes
//! each output row as one whole dot product, by one thread, with the
//! kernel [`Kernel::selected`](crate::quant::Kernel::selected) picked once
//! per process; so the single-core, pooled and rayon variants return the
//! same bytes at any thread count, and a batch row of a matmul equals the
//! matvec of that row.
//!
//! | entry point | threads | meant for |
//! |---|---|---|
//! | [`matvec_q8_0`], [`matvec_f32`] | caller only | the reference; tiny matrices |
//! | [`matvec_q8_0_pool`], [`matvec_f32_pool`] | a [`ThreadPool`](crate::ThreadPool) | decode |
//! | [`matvec_q8_0_pool_dynamic`] | a pool, chunks from an atomic cursor | busy or uneven cores |
//! | [`matvec_q8_0_rayon`], [`matvec_f32_rayon`] | rayon's global pool | comparison only |
//! | [`matmul_q8_0`] | caller only | 2-3 activation rows |
//! | [`matmul_q8_0_rayon`] | rayon, from [`MATMUL_PAR_MIN_ROWS`] rows | prefill |
//!
//! The pooled matvec splits rows statically with [`split`](crate::split)
//! (one contiguous range per thread, written straight into `out`). It was
//! measured against the atomic-cursor variant ([`matvec_q8_0_pool_dynamic`])
//! on the Qwen3-0.6B decode shapes of `benches/matvec.rs`, two threads on
//! a two-core machine, three runs: from cache the static split was faster
//! in 13 of 15 shape-runs (by up to 10%, behind by at most 1.2% in the
//! other two); from DRAM the two were within run-to-run noise, the static
//! one ahead on the largest matrix in every run (lm_head, 2-8%); with
//! a niced CPU hog on the second core the static split kept a 1.4x lead
//! over single-core on k/v where the cursor kept 1.1x. So the static split
//! is the default. Neither split waits for a worker the OS is not running:
//! shares are claimed, not assigned, so a dispatch waits only for the
//! workers that registered in its job, and the running threads claim the
//! static shares (whole row ranges) of one that did not. A claimed share
//! is still waited for: a worker preempted in the middle of its work holds
//! the dispatch up until it finishes the rest of its static range, or,
//! with the cursor, the piece it is on.
//!
//! The activation is quantized by the caller, once, into a reusable
//! [`QuantizedVector`](crate::quant::QuantizedVector); several matvecs
//! sharing an input (q, k and v) can share it. The matvecs allocate
//! nothing; the matmuls allocate one small list of output slices per call.
//!
//! ```
//! # #[cfg(not(feature = "loom"))] { // the pool runs on loom's scheduler under `loom`
//! use inferno_cpu::matvec::{matvec_q8_0, matvec_q8_0_pool, Q8Matrix};
//! use inferno_cpu::quant::{quantize_row_q8_0, QuantizedVector};
//! use inferno_cpu::ThreadPool;
//!
//! let (rows, cols) = (8, 64);
//! let weights: Vec<f32> = (0..rows * cols).map(|i| (i % 7) as f32 - 3.0).collect();
//! let blocks = quantize_row_q8_0(&weights)?;
//! let w = Q8Matrix::new(&blocks, rows, cols)?;
//!
//! let mut x = QuantizedVector::new();
//! x.quantize_from(&vec![0.5f32; cols])?;
//!
//! let mut single = vec![0.0; rows];
//! matvec_q8_0(&w, &x, &mut single)?;
//! let pool = ThreadPool::new(3)?;
//! let mut pooled = vec![0.0; rows];
//! matvec_q8_0_pool(&pool, &w, &x, &mut pooled)?;
//! assert_eq!(single, pooled); // bit for bit
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod f32;
mod matrix;
mod q8;
mod weight;

pub use self::f32::{matvec_f32, matvec_f32_pool, matvec_f32_rayon};
pub use matrix::{
    Bf16Matrix, BlockMatrix, F16Matrix, F32Matrix, PackedMatrix, PackedQ4KMatrix, PackedQ4_0Matrix,
    PackedQ5KMatrix, Q8Matrix, ShapeError,
};
pub use q8::{
    matmul_q8_0, matmul_q8_0_rayon, matvec_q8_0, matvec_q8_0_pool, matvec_q8_0_pool_dynamic,
    matvec_q8_0_rayon, MATMUL_PAR_MIN_ROWS,
};
pub use weight::Weight;
pub(crate) use weight::{
    check_batch_any, check_stacked_any, matmul_any_rayon, matmul_any_with, matvec_pool_stacked,
    stacked_rows_any,
};

/// Reads every byte of `bytes` once, with the widest loads the
/// [selected](crate::quant::Kernel::selected) kernel has, the software
/// prefetch the decode products use and no other work, and returns a
/// checksum of them (so the reads cannot be optimised away): the wrapping
/// sum of the `u64` words (native byte order) of the whole 256-byte runs
/// that follow, back to back, the slice's first 64-byte boundary, plus
/// each byte outside those runs as a number. (A word sum because summing
/// bytes cost a Zen 4 core 7-9% of its read speed over huge pages.) The
/// same value with every kernel, and from [`read_bytes_plain`] and
/// [`read_bytes_narrow`].
///
/// A decode matvec streams its weights from memory once; this is the same
/// stream without the arithmetic, so its speed over bytes far larger than
/// the caches is the bandwidth a matvec can at best reach (`inferno bench`
/// runs it on every pool thread over the loaded model for its roofline).
///
/// ```
/// assert_eq!(inferno_cpu::matvec::read_bytes(&[1, 2, 3, 250]), 256);
/// ```
pub fn read_bytes(bytes: &[u8]) -> u64 {
    crate::quant::dot::selected().1.sum_bytes(bytes, true)
}

/// [`read_bytes`] without the software prefetch: the same loads and sum,
/// and nothing asked for ahead. The hints help the matvecs everywhere the
/// crate is measured, but they can slow a loop that does nothing but read:
/// on an AMD EPYC (Zen 3) VM, 12.2-12.9 GB/s with them against
/// 14.9-15.7 without, on one thread, three alternated runs. `inferno bench`
/// takes the fastest of this probe, [`read_bytes`] and
/// [`read_bytes_narrow`] as the machine's read bandwidth.
///
/// ```
/// let bytes = [7u8; 1000];
/// assert_eq!(
///     inferno_cpu::matvec::read_bytes_plain(&bytes),
///     inferno_cpu::matvec::read_bytes(&bytes),
/// );
/// ```
pub fn read_bytes_plain(bytes: &[u8]) -> u64 {
    crate::quant::dot::selected().1.sum_bytes(bytes, false)
}

/// [`read_bytes_plain`] with the portable loop's loads instead of the
/// selected kernel's widest ones (on x86_64, the baseline's 128-bit SSE2
/// loads, as the compiler vectorises it), no prefetch; the same checksum.
/// Wide loads are not the fastest way to read everywhere: on an AMD EPYC
/// (Zen 4) VM, over a model mapped from the page cache (4 KiB pages), the
/// 512-bit probes read 16.8-17.4 GB/s on one thread and this one
/// 21.1-22.1 (three runs each); over huge pages the 512-bit ones read
/// faster. `inferno bench` takes the fastest of the three.
///
/// ```
/// let bytes = [7u8; 1000];
/// assert_eq!(
///     inferno_cpu::matvec::read_bytes_narrow(&bytes),
///     inferno_cpu::matvec::read_bytes(&bytes),
/// );
/// ```
pub fn read_bytes_narrow(bytes: &[u8]) -> u64 {
    crate::quant::dot::Dispatch::Scalar.sum_bytes(bytes, false)
}

/// `Ok` if `got == expected`, else the error `make` builds.
fn expect_len(
    expected: usize,
    got: usize,
    make: fn(usize, usize) -> ShapeError,
) -> Result<(), ShapeError> {
    if expected == got {
        Ok(())
    } else {
        Err(make(expected, got))
    }
}

fn input_len(expected: usize, got: usize) -> ShapeError {
    ShapeError::InputLength { expected, got }
}

fn output_len(expected: usize, got: usize) -> ShapeError {
    ShapeError::OutputLength { expected, got }
}

/// Rows per rayon task for `rows` rows over rayon's current thread count:
/// one contiguous range per thread, as the pool's static split.
fn rayon_chunk(rows: usize) -> usize {
    rows.div_ceil(rayon::current_num_threads()).max(1)
}
