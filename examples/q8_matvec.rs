//! A Q8_0 matrix-vector product three ways: one core, the spinning pool
//! and rayon, on a matrix of Qwen3-0.6B's MLP shape (3072 x 1024). The
//! pooled product is byte-identical to the single-core one.
//!
//! ```sh
//! cargo run --release --example q8_matvec
//! ```

use std::time::{Duration, Instant};

use inferno_cpu::matvec::{matvec_q8_0, matvec_q8_0_pool, matvec_q8_0_rayon, Q8Matrix};
use inferno_cpu::quant::{quantize_row_q8_0, Kernel, QuantizedVector};
use inferno_cpu::ThreadPool;

/// The median time of `runs` calls of `f`.
fn median_time(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (rows, cols) = (3072, 1024);
    // Weights are quantized once, as a model file stores them; a GGUF
    // reader would hand out the same blocks without copying
    // (`Gguf::tensor_q8_0`).
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let weights: Vec<f32> = (0..rows * cols)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    let blocks = quantize_row_q8_0(&weights)?;
    let w = Q8Matrix::new(&blocks, rows, cols)?;

    // The activation is quantized once per product, into a reused buffer.
    let x: Vec<f32> = (0..cols).map(|i| (i as f32 * 0.01).sin()).collect();
    let mut xq = QuantizedVector::new();
    xq.quantize_from(&x)?;

    let pool = ThreadPool::new(inferno_cpu::default_threads().max(2))?;
    let (mut single, mut pooled, mut rayon) = (vec![0.0; rows], vec![0.0; rows], vec![0.0; rows]);
    // Fewer runs in a debug build (CI runs the examples unoptimised).
    let runs = if cfg!(debug_assertions) { 5 } else { 101 };
    let t_single = median_time(runs, || matvec_q8_0(&w, &xq, &mut single).unwrap());
    let t_pool = median_time(runs, || {
        matvec_q8_0_pool(&pool, &w, &xq, &mut pooled).unwrap()
    });
    let t_rayon = median_time(runs, || matvec_q8_0_rayon(&w, &xq, &mut rayon).unwrap());
    assert_eq!(
        single, pooled,
        "the pool computes each row as one core does"
    );

    let gb = w.bytes() as f64 / 1e9;
    println!(
        "{rows}x{cols} Q8_0 ({:.2} MB), kernel {:?}:",
        w.bytes() as f64 / 1e6,
        Kernel::selected()
    );
    for (name, t) in [
        ("one core", t_single),
        (&format!("pool, {} threads", pool.threads()) as &str, t_pool),
        ("rayon", t_rayon),
    ] {
        println!(
            "  {name:<18} {:>8.1} us  {:>6.1} GB/s",
            t.as_secs_f64() * 1e6,
            gb / t.as_secs_f64()
        );
    }
    println!("  pooled result identical to one core: yes");
    Ok(())
}
