//! Dispatch + join latency of an (almost) empty job: the persistent pool,
//! warm and after parking, against rayon, back to back and in the decode
//! pattern (serial work on the caller before each dispatch).
//!
//! `cargo bench --bench dispatch`. Each share writes one small chunk of an
//! output slice, so the job is the pattern of a pooled matvec minus the
//! arithmetic. rayon runs `install` + `par_chunks_mut` over the same chunks,
//! called from outside its pool, as an engine's decode loop would.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use inferno_cpu::{default_threads, ThreadPool};
use rayon::prelude::*;

/// Serial work the decode pattern does on the caller before each dispatch:
/// the glue between two matvecs of a decoded token.
const DECODE_GAP: Duration = Duration::from_micros(30);
/// Elements each share writes.
const PER_SHARE: usize = 16;

fn thread_counts() -> Vec<usize> {
    let mut counts = vec![2, default_threads()];
    counts.sort_unstable();
    counts.dedup();
    counts
}

/// Busy work for about `d` (not a sleep: a sleeping caller would hand its
/// core to the workers and hide the cost being measured).
fn serial_work(d: Duration) {
    let start = Instant::now();
    let mut x = 1u64;
    while start.elapsed() < d {
        for _ in 0..64 {
            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

fn pool_job(pool: &ThreadPool, out: &mut [u64]) {
    pool.for_each_chunk_mut(out, |range, chunk| {
        for (i, x) in range.zip(chunk) {
            *x = black_box(i as u64);
        }
    });
}

fn rayon_job(pool: &rayon::ThreadPool, out: &mut [u64]) {
    pool.install(|| {
        out.par_chunks_mut(PER_SHARE)
            .enumerate()
            .for_each(|(c, chunk)| {
                for (i, x) in chunk.iter_mut().enumerate() {
                    *x = black_box((c * PER_SHARE + i) as u64);
                }
            });
    });
}

/// Times only the dispatches of `iters` rounds of "serial work, dispatch".
fn decode_pattern(iters: u64, mut dispatch: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        serial_work(DECODE_GAP);
        let start = Instant::now();
        dispatch();
        total += start.elapsed();
    }
    total
}

fn bench_dispatch(c: &mut Criterion) {
    let mut group = c.benchmark_group("dispatch");
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    for threads in thread_counts() {
        let mut out = vec![0u64; threads * PER_SHARE];
        // The default spin time (2 ms) outlasts the decode gap: warm.
        let warm = ThreadPool::new(threads).unwrap();
        let parked = ThreadPool::builder()
            .threads(threads)
            .spin_time(Duration::ZERO)
            .build()
            .unwrap();
        let rayon = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();

        group.bench_function(BenchmarkId::new("back_to_back/pool_warm", threads), |b| {
            b.iter(|| pool_job(&warm, &mut out))
        });
        group.bench_function(BenchmarkId::new("back_to_back/pool_parked", threads), |b| {
            b.iter(|| pool_job(&parked, &mut out))
        });
        group.bench_function(BenchmarkId::new("back_to_back/rayon", threads), |b| {
            b.iter(|| rayon_job(&rayon, &mut out))
        });
        group.bench_function(BenchmarkId::new("decode/pool_warm", threads), |b| {
            b.iter_custom(|iters| decode_pattern(iters, || pool_job(&warm, &mut out)))
        });
        group.bench_function(BenchmarkId::new("decode/pool_parked", threads), |b| {
            b.iter_custom(|iters| decode_pattern(iters, || pool_job(&parked, &mut out)))
        });
        group.bench_function(BenchmarkId::new("decode/rayon", threads), |b| {
            b.iter_custom(|iters| decode_pattern(iters, || rayon_job(&rayon, &mut out)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_dispatch);
criterion_main!(benches);
