//! Another engine's own kernel on the crate's pool: an f32 matrix-vector
//! product with a fused bias and ReLU, written against `ThreadPool` and its
//! disjoint-write API, with no `unsafe` and no dependency on the crate's
//! own kernels.
//!
//! `for_each_chunk_mut` hands every share a disjoint `&mut` chunk of the
//! output and the row range it covers, so a share writes its rows without
//! locks or atomics, and the borrow checker proves the chunks disjoint.
//! `dispatch` is the lower-level form: `f(share, shares)` on every share,
//! with `split` to cut a range the same way.
//!
//! ```sh
//! cargo run --release --example pool_custom_kernel
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use inferno_cpu::{split, ThreadPool};

/// `out[r] = max(0, w[r] . x + bias[r])` for the rows `rows` of a
/// row-major `w` with `x.len()` columns; `out` holds exactly those rows.
fn dense_relu_rows(
    w: &[f32],
    x: &[f32],
    bias: &[f32],
    rows: std::ops::Range<usize>,
    out: &mut [f32],
) {
    let cols = x.len();
    for (r, y) in rows.zip(out) {
        let row = &w[r * cols..(r + 1) * cols];
        let dot: f32 = row.iter().zip(x).map(|(a, b)| a * b).sum();
        *y = (dot + bias[r]).max(0.0);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (rows, cols) = (2048, 1024);
    let w: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 5e4)
        .collect();
    let x: Vec<f32> = (0..cols).map(|i| (i % 17) as f32 / 17.0).collect();
    let bias: Vec<f32> = (0..rows).map(|r| (r % 5) as f32 / 10.0 - 0.2).collect();

    // One thread as the reference.
    let mut reference = vec![0.0f32; rows];
    dense_relu_rows(&w, &x, &bias, 0..rows, &mut reference);

    // The same kernel on the pool: each share gets its own rows. The pool
    // is created once and reused; a dispatch costs a few atomic operations
    // while the workers spin.
    let pool = ThreadPool::new(inferno_cpu::default_threads().max(2))?;
    let mut out = vec![0.0f32; rows];
    let runs = if cfg!(debug_assertions) { 5 } else { 200 };
    let started = Instant::now();
    for _ in 0..runs {
        pool.for_each_chunk_mut(&mut out, |rows, chunk| {
            dense_relu_rows(&w, &x, &bias, rows, chunk);
        });
    }
    let per_call = started.elapsed() / runs;
    // Every row is computed by the same code whichever thread runs it, so
    // the result is the same bytes as the single-threaded one.
    assert_eq!(out, reference);

    // The lower-level form: a reduction with `dispatch` and `split`. Each
    // share counts the active (positive) outputs of its range.
    let active = AtomicU64::new(0);
    pool.dispatch(|share, shares| {
        let mine = out[split(rows, share, shares)]
            .iter()
            .filter(|&&y| y > 0.0)
            .count();
        active.fetch_add(mine as u64, Ordering::Relaxed);
    });
    let active = active.into_inner();
    assert_eq!(
        active as usize,
        reference.iter().filter(|&&y| y > 0.0).count()
    );

    println!(
        "{rows}x{cols} dense+relu on {} threads: {:.1} us per call, {active} of {rows} outputs active, \
         identical to one thread",
        pool.threads(),
        per_call.as_secs_f64() * 1e6,
    );
    Ok(())
}
