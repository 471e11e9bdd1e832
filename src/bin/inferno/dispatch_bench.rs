//! The first part of `inferno bench --kernels`: dispatch + join latency of
//! an almost empty job on the persistent pool (warm, and with its workers
//! parked) against rayon, back to back and in the decode pattern, measured
//! side by side (`--samples` timings per configuration).

use std::hint::black_box;
use std::time::{Duration, Instant};

use inferno_cpu::ThreadPool;
use rayon::prelude::*;

/// Serial work before each dispatch in the decode pattern.
const DECODE_GAP: Duration = Duration::from_micros(30);
/// Elements each share writes.
const PER_SHARE: usize = 16;

/// Busy work for about `d` (a sleep would lend the caller's core to the
/// workers and hide what is being measured).
fn serial_work(d: Duration) {
    let start = Instant::now();
    let mut x = 1u64;
    while start.elapsed() < d {
        for _ in 0..64 {
            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

/// Median and mean of `samples` timings of `f`, each preceded by `gap` of
/// serial work (none when zero). The mean counts the rare slow dispatch (a
/// worker woken from parking) that the median hides.
fn time_ns(samples: usize, gap: Duration, mut f: impl FnMut()) -> [f64; 2] {
    for _ in 0..samples / 10 {
        f();
    }
    let mut times: Vec<u64> = (0..samples)
        .map(|_| {
            if !gap.is_zero() {
                serial_work(gap);
            }
            let start = Instant::now();
            f();
            start.elapsed().as_nanos() as u64
        })
        .collect();
    times.sort_unstable();
    let mean = times.iter().sum::<u64>() as f64 / times.len() as f64;
    [times[times.len() / 2] as f64, mean]
}

/// Nanoseconds per round of a waiting worker's pure-spin loop: one load
/// of a shared word and one `spin_loop` hint (`pause` on x86, ~140 cycles
/// on recent Intel cores, a few on AMD's; `isb`/`yield` on aarch64).
pub fn spin_round_ns() -> f64 {
    let word = std::sync::atomic::AtomicUsize::new(0);
    let rounds = 200_000u32;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..rounds {
            if word.load(std::sync::atomic::Ordering::Acquire) == usize::MAX {
                break;
            }
            std::hint::spin_loop();
        }
        best = best.min(start.elapsed().as_nanos() as f64 / f64::from(rounds));
    }
    best
}

/// One row of the table.
pub struct Row {
    /// Pool size.
    pub threads: usize,
    /// Median ns of pool (warm), pool (parked), rayon; back to back.
    pub back_to_back: [f64; 3],
    /// The same in the decode pattern.
    pub decode: [f64; 3],
    /// Mean ns of pool (warm), back to back and in the decode pattern.
    pub warm_mean: [f64; 2],
}

/// Measures one thread count.
pub fn measure(threads: usize, samples: usize) -> Result<Row, Box<dyn std::error::Error>> {
    let warm = ThreadPool::new(threads)?;
    let parked = ThreadPool::builder()
        .threads(threads)
        .spin_time(Duration::ZERO)
        .build()?;
    let rayon = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let mut out = vec![0u64; threads * PER_SHARE];

    let pool_job = |pool: &ThreadPool, out: &mut [u64]| {
        pool.for_each_chunk_mut(out, |range, chunk| {
            for (i, x) in range.zip(chunk) {
                *x = black_box(i as u64);
            }
        })
    };
    let rayon_job = |out: &mut [u64]| {
        rayon.install(|| {
            out.par_chunks_mut(PER_SHARE)
                .enumerate()
                .for_each(|(c, chunk)| {
                    for (i, x) in chunk.iter_mut().enumerate() {
                        *x = black_box((c * PER_SHARE + i) as u64);
                    }
                })
        })
    };

    let mut run = |gap: Duration, samples: usize| {
        let [warm_median, warm_mean] = time_ns(samples, gap, || pool_job(&warm, &mut out));
        let [parked, _] = time_ns(samples, gap, || pool_job(&parked, &mut out));
        let [rayon, _] = time_ns(samples, gap, || rayon_job(&mut out));
        ([warm_median, parked, rayon], warm_mean)
    };
    let (back_to_back, b2b_mean) = run(Duration::ZERO, samples);
    // The decode pattern is ~30 us per sample: fewer samples.
    let (decode, decode_mean) = run(DECODE_GAP, (samples / 10).max(100));
    Ok(Row {
        threads,
        back_to_back,
        decode,
        warm_mean: [b2b_mean, decode_mean],
    })
}

/// Prints the table for each thread count.
pub fn run(thread_counts: &[usize], samples: usize) -> Result<(), Box<dyn std::error::Error>> {
    println!("dispatch + join latency, median ns of an almost empty job");
    println!(
        "(decode pattern: {} us of serial work on the caller before each dispatch)",
        DECODE_GAP.as_micros()
    );
    println!();
    println!(
        "| threads | pattern      | pool warm | (mean) | pool parked |     rayon | rayon / pool warm |"
    );
    println!(
        "|--------:|--------------|----------:|-------:|------------:|----------:|------------------:|"
    );
    for &threads in thread_counts {
        let row = measure(threads, samples)?;
        for (pattern, [warm, parked, rayon], mean) in [
            ("back to back", row.back_to_back, row.warm_mean[0]),
            ("decode", row.decode, row.warm_mean[1]),
        ] {
            println!(
                "| {:>7} | {:<12} | {:>9.0} | {:>6.0} | {:>11.0} | {:>9.0} | {:>16.1}x |",
                row.threads,
                pattern,
                warm,
                mean,
                parked,
                rayon,
                rayon / warm
            );
        }
    }
    println!();
    println!(
        "a waiting worker's spin round (load + spin_loop hint): {:.1} ns",
        spin_round_ns()
    );
    Ok(())
}
