//! Single-thread throughput of the K-quant dot kernels, each available
//! kernel's single-row dot against its four-row form, with the weights in
//! cache (the prefill case, where the work per block, not memory, limits).
//!
//! `cargo bench --bench kquant`. Each timing is the best of many short
//! repetitions (about a millisecond each) of wall time, so on a busy
//! machine a repetition that was preempted does not count; printed as
//! nanoseconds per (weight block x activation row): a K-quant block
//! holds 256 weights, a Q4_0 block 32, with the ratios. The F16 and BF16
//! rows (unquantized weights, the activation rounded to their type) are
//! printed per 32 weights, a Q4_0 block's worth.

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use common::values;
use half::{bf16, f16};
use inferno_cpu::quant::{
    quantize_row_q4_0, quantize_row_q4_k, quantize_row_q5_k, quantize_row_q6_k, quantize_row_q8_k,
    ActForms, BlockQ8K, Kernel, QuantizedVector, QK_K,
};

/// Blocks per row (4096 columns, a Qwen3 hidden size).
const NB: usize = 16;
/// Weight rows per pass (about 150-215 KiB of weights: in L2).
const ROWS: usize = 64;
/// Timed repetitions; the best is reported.
const REPS: usize = 60;
/// Passes over the rows per repetition.
const PASSES: usize = 40;

/// Best wall time of `REPS` runs of `f` (after one warm-up run).
fn best(mut f: impl FnMut()) -> Duration {
    f();
    (0..REPS)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// Times one format: `single(kernel, row, x)` and `x4(kernel, row, xs)`
/// over every row, printing ns per block-row pair.
fn run<W, X: ?Sized>(
    name: &str,
    rows: &[Vec<W>],
    xr: [&X; 4],
    single: impl Fn(Kernel, &[W], &X) -> f32,
    x4: impl Fn(Kernel, &[W], [&X; 4]) -> [f32; 4],
) {
    run_per(name, rows, 1, xr, single, x4);
}

/// [`run`], counting `per` elements of a row as one block.
fn run_per<W, X: ?Sized>(
    name: &str,
    rows: &[Vec<W>],
    per: usize,
    xr: [&X; 4],
    single: impl Fn(Kernel, &[W], &X) -> f32,
    x4: impl Fn(Kernel, &[W], [&X; 4]) -> [f32; 4],
) {
    let pairs = (PASSES * rows.len() * rows[0].len() / per * 4) as f64;
    let mut avx2 = None;
    for kernel in [
        Kernel::Avx2,
        Kernel::AvxVnni,
        Kernel::Avx512Vnni,
        Kernel::Neon,
        Kernel::NeonDot,
        Kernel::Scalar,
    ] {
        if !kernel.is_available() {
            continue;
        }
        let t1 = best(|| {
            for _ in 0..PASSES {
                for r in rows {
                    for x in xr {
                        black_box(single(kernel, black_box(r), x));
                    }
                }
            }
        });
        let t4 = best(|| {
            for _ in 0..PASSES {
                for r in rows {
                    black_box(x4(kernel, black_box(r), xr));
                }
            }
        });
        let (n1, n4) = (t1.as_nanos() as f64 / pairs, t4.as_nanos() as f64 / pairs);
        let base = *avx2.get_or_insert((n1, n4));
        println!(
            "{name} {kernel:<12?} single {n1:7.2} ns  x4 {n4:7.2} ns  (x4 speed-up {:.2}; vs AVX2: single {:.2}, x4 {:.2})",
            n1 / n4,
            base.0 / n1,
            base.1 / n4
        );
    }
}

fn main() {
    let cols = NB * QK_K;
    let xs: Vec<Vec<BlockQ8K>> = (0..4)
        .map(|i| quantize_row_q8_k(&values(100 + i, cols)).unwrap())
        .collect();
    let w: Vec<Vec<f32>> = (0..ROWS).map(|r| values(r as u64, cols)).collect();
    let q4: Vec<_> = w.iter().map(|r| quantize_row_q4_k(r).unwrap()).collect();
    let q5: Vec<_> = w.iter().map(|r| quantize_row_q5_k(r).unwrap()).collect();
    let q6: Vec<_> = w.iter().map(|r| quantize_row_q6_k(r).unwrap()).collect();
    run(
        "Q4_K",
        &q4,
        [&xs[0][..], &xs[1], &xs[2], &xs[3]],
        |k, w, x| k.dot_q4_k_q8_k(w, x).unwrap(),
        |k, w, x| k.dot_q4_k_q8_k_x4(w, x).unwrap(),
    );
    run(
        "Q5_K",
        &q5,
        [&xs[0][..], &xs[1], &xs[2], &xs[3]],
        |k, w, x| k.dot_q5_k_q8_k(w, x).unwrap(),
        |k, w, x| k.dot_q5_k_q8_k_x4(w, x).unwrap(),
    );
    run(
        "Q6_K",
        &q6,
        [&xs[0][..], &xs[1], &xs[2], &xs[3]],
        |k, w, x| k.dot_q6_k_q8_k(w, x).unwrap(),
        |k, w, x| k.dot_q6_k_q8_k_x4(w, x).unwrap(),
    );
    let q40: Vec<_> = w.iter().map(|r| quantize_row_q4_0(r).unwrap()).collect();
    let xq: Vec<QuantizedVector> = (0..4)
        .map(|i| {
            let mut q = QuantizedVector::new();
            q.quantize_from(&values(100 + i, cols)).unwrap();
            q
        })
        .collect();
    run(
        "Q4_0",
        &q40,
        [&xq[0], &xq[1], &xq[2], &xq[3]],
        |k, w, x| k.dot_q4_0(w, x).unwrap(),
        |k, w, x| k.dot_q4_0_x4(w, x).unwrap(),
    );
    let xf: Vec<QuantizedVector> = (0..4)
        .map(|i| {
            let mut q = QuantizedVector::new();
            q.quantize_forms(&values(100 + i, cols), ActForms::F16.union(ActForms::BF16))
                .unwrap();
            q
        })
        .collect();
    let h: Vec<Vec<f16>> = w
        .iter()
        .map(|r| r.iter().map(|&v| f16::from_f32(v)).collect())
        .collect();
    run_per(
        "F16 ",
        &h,
        32,
        [&xf[0], &xf[1], &xf[2], &xf[3]],
        |k, w, x| k.dot_f16_weights(w, x).unwrap(),
        |k, w, x| k.dot_f16_weights_x4(w, x).unwrap(),
    );
    let b: Vec<Vec<bf16>> = w
        .iter()
        .map(|r| r.iter().map(|&v| bf16::from_f32(v)).collect())
        .collect();
    run_per(
        "BF16",
        &b,
        32,
        [&xf[0], &xf[1], &xf[2], &xf[3]],
        |k, w, x| k.dot_bf16_weights(w, x).unwrap(),
        |k, w, x| k.dot_bf16_weights_x4(w, x).unwrap(),
    );
}
