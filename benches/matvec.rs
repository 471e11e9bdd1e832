//! Q8_0 matvec throughput on the decode shapes of Qwen3-0.6B, against the
//! machine's own read bandwidth.
//!
//! ```text
//! cargo bench --bench matvec              # run everything, then print the table
//! cargo bench --bench matvec -- --table   # print the table of the last run only
//! cargo bench --bench matvec -- q8_k      # criterion filter, as usual
//! ```
//!
//! Every matvec bench reports `Throughput::Bytes` of weight bytes read.
//! "warm" runs one matrix over and over (it stays in the last-level cache);
//! "cold" rotates over enough copies (512 MiB) to overflow the last-level
//! cache many times, as decode does, where each matrix comes from DRAM once
//! per token. `lm_head` (165 MB) is always cold. The `bandwidth` group
//! streams a 1 GiB buffer with one thread and with all threads: the
//! ceilings the matvecs are compared with.
//!
//! Variants: `single` (calling thread), `pool_Nt` (`matvec_q8_0_pool`,
//! static split), `pool_dyn_Nt` (atomic-cursor chunks), `rayon_Nt`
//! (`matvec_q8_0_rayon` inside a rayon pool of N threads, called from
//! outside it as a decode loop would).

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, Throughput};
use inferno_cpu::matvec::{
    matvec_q8_0, matvec_q8_0_pool, matvec_q8_0_pool_dynamic, matvec_q8_0_rayon, Q8Matrix,
};
use inferno_cpu::quant::{quantize_row_q8_0_into, BlockQ8_0, Kernel, QuantizedVector};
use inferno_cpu::synth::SplitMix64;
use inferno_cpu::{split, ThreadPool};

/// (name, rows = outputs, cols = inputs).
const SHAPES: [(&str, usize, usize); 6] = [
    ("q", 2048, 1024),
    ("kv", 1024, 1024),
    ("o", 1024, 2048),
    ("gate_up", 3072, 1024),
    ("down", 1024, 3072),
    ("lm_head", 151_936, 1024),
];

/// Bytes the cold copies of one shape span: far past the last-level cache
/// (32 MiB here; 96 MiB on the largest server parts), so every matvec
/// streams its matrix from DRAM.
const COLD_SPAN: usize = 512 << 20;

/// Size of the bandwidth buffer.
const BANDWIDTH_BYTES: usize = 1 << 30;

fn thread_counts() -> Vec<usize> {
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut v = vec![1, 2, all];
    v.sort_unstable();
    v.dedup();
    v
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args()
}

/// Deterministic pseudo-random f32 in [-1, 1).
fn fill(seed: u64, out: &mut [f32]) {
    let mut g = SplitMix64::new(seed);
    for v in out {
        *v = g.next_signed_f32();
    }
}

/// `copies` copies of one quantized `rows x cols` matrix, each in its own
/// allocation (equal contents; the caches only see distinct addresses).
fn matrices(rows: usize, cols: usize, copies: usize) -> Vec<Vec<BlockQ8_0>> {
    let mut row = vec![0.0f32; cols];
    let mut blocks = vec![BlockQ8_0::default(); rows * cols / 32];
    for (r, dst) in blocks.chunks_exact_mut(cols / 32).enumerate() {
        fill(r as u64, &mut row);
        quantize_row_q8_0_into(&row, dst).expect("whole blocks");
    }
    let mut all = vec![blocks; copies];
    all.shrink_to_fit();
    all
}

fn bench_matvec(c: &mut Criterion) {
    let counts = thread_counts();
    let pools: Vec<(usize, ThreadPool)> = counts
        .iter()
        .map(|&n| (n, ThreadPool::new(n).expect("pool")))
        .collect();
    let rayons: Vec<(usize, rayon::ThreadPool)> = counts
        .iter()
        .map(|&n| {
            let p = rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .expect("rayon pool");
            (n, p)
        })
        .collect();
    eprintln!("kernel: {:?}", Kernel::selected());

    for (name, rows, cols) in SHAPES {
        let bytes = rows * cols / 32 * std::mem::size_of::<BlockQ8_0>();
        // A matrix far larger than any last-level cache is cold by itself.
        let cold_copies = if bytes > COLD_SPAN / 4 {
            1
        } else {
            COLD_SPAN.div_ceil(bytes)
        };
        let mut xf = vec![0.0f32; cols];
        fill(u64::MAX, &mut xf);
        let mut x = QuantizedVector::with_capacity(cols);
        x.quantize_from(&xf).expect("whole blocks");
        let mut out = vec![0.0f32; rows];

        let temps: &[(&str, usize)] = if cold_copies == 1 {
            &[("cold", 1)]
        } else {
            &[("warm", 1), ("cold", cold_copies)]
        };
        for &(temp, copies) in temps {
            let mats = matrices(rows, cols, copies);
            let views: Vec<Q8Matrix<'_>> = mats
                .iter()
                .map(|m| Q8Matrix::new(m, rows, cols).expect("shape"))
                .collect();
            let mut g = c.benchmark_group(format!("q8_{name}_{temp}"));
            g.throughput(Throughput::Bytes(bytes as u64));
            let mut i = 0usize;
            let mut next = || {
                i = (i + 1) % views.len();
                &views[i]
            };
            g.bench_function("single", |b| {
                b.iter(|| matvec_q8_0(next(), black_box(&x), &mut out).expect("shape"))
            });
            for (n, pool) in &pools {
                g.bench_function(format!("pool_{n}t"), |b| {
                    b.iter(|| {
                        matvec_q8_0_pool(pool, next(), black_box(&x), &mut out).expect("shape")
                    })
                });
            }
            for (n, pool) in pools.iter().filter(|(n, _)| *n > 1) {
                let chunk = rows.div_ceil(n * 8).max(8);
                g.bench_function(format!("pool_dyn_{n}t"), |b| {
                    b.iter(|| {
                        matvec_q8_0_pool_dynamic(pool, next(), black_box(&x), &mut out, chunk)
                            .expect("shape")
                    })
                });
            }
            for (n, rp) in &rayons {
                g.bench_function(format!("rayon_{n}t"), |b| {
                    b.iter(|| {
                        let w = next();
                        rp.install(|| matvec_q8_0_rayon(w, black_box(&x), &mut out))
                            .expect("shape")
                    })
                });
            }
            g.finish();
        }
    }
}

fn bench_bandwidth(c: &mut Criterion) {
    let words = BANDWIDTH_BYTES / 8;
    // Written once, so every page is mapped before timing.
    let buf: Vec<u64> = (0..words as u64).collect();
    let mut g = c.benchmark_group("bandwidth");
    g.throughput(Throughput::Bytes(BANDWIDTH_BYTES as u64));
    for n in thread_counts() {
        let pool = ThreadPool::new(n).expect("pool");
        g.bench_function(format!("read_{n}t"), |b| {
            b.iter(|| {
                let total = AtomicU64::new(0);
                pool.dispatch(|id, n| {
                    let part = &buf[split(words, id, n)];
                    let s = part.iter().fold(0u64, |a, &v| a.wrapping_add(v));
                    total.fetch_add(s, Ordering::Relaxed);
                });
                black_box(total.into_inner())
            })
        });
    }
    g.finish();
}

fn bench_quantize(c: &mut Criterion) {
    let mut g = c.benchmark_group("quantize");
    for cols in [1024, 3072] {
        let mut xf = vec![0.0f32; cols];
        fill(7, &mut xf);
        let mut x = QuantizedVector::with_capacity(cols);
        g.throughput(Throughput::Bytes((cols * 4) as u64));
        g.bench_function(format!("activation_{cols}"), |b| {
            b.iter(|| x.quantize_from(black_box(&xf)).expect("whole blocks"))
        });
    }
    g.finish();
}

/// Where criterion writes its results (its own default rule).
fn criterion_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return home.into();
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| "target".into(), PathBuf::from);
    target.join("criterion")
}

/// Mean time in ns of one bench from the last run, from criterion's
/// `estimates.json` (`"mean":{...,"point_estimate":X,...}`).
fn mean_ns(group: &str, id: &str) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(id)
        .join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let mean = &text[text.find("\"mean\"")?..];
    let pe = &mean[mean.find("\"point_estimate\":")? + "\"point_estimate\":".len()..];
    let end = pe.find([',', '}'])?;
    pe[..end].trim().parse().ok()
}

/// Prints the GB/s (10^9 bytes per second) table of the last run.
fn print_table() {
    let counts = thread_counts();
    let all = *counts.last().unwrap_or(&1);
    let bw = |n: usize| {
        mean_ns("bandwidth", &format!("read_{n}t")).map(|ns| BANDWIDTH_BYTES as f64 / ns)
    };
    let (bw1, bw_all) = (bw(1), bw(all));
    let fmt = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1}"));
    let pct = |v: Option<f64>, of: Option<f64>| match (v, of) {
        (Some(v), Some(of)) => format!("{:.0}%", 100.0 * v / of),
        _ => "-".to_owned(),
    };
    println!();
    println!("kernel: {:?}", Kernel::selected());
    println!(
        "read bandwidth: {} GB/s on 1 thread, {} GB/s on {all} threads",
        fmt(bw1),
        fmt(bw_all)
    );
    let mut ids = vec!["single".to_owned()];
    ids.extend(counts.iter().map(|n| format!("pool_{n}t")));
    ids.extend(
        counts
            .iter()
            .filter(|&&n| n > 1)
            .map(|n| format!("pool_dyn_{n}t")),
    );
    ids.extend(counts.iter().map(|n| format!("rayon_{n}t")));
    println!();
    println!(
        "| shape (rows x cols) | MB | cache | {} | single / bw 1t | pool_{all}t / bw {all}t |",
        ids.join(" | ")
    );
    println!("|---|---|---|{}---|---|", "---|".repeat(ids.len()));
    for (name, rows, cols) in SHAPES {
        let bytes = (rows * cols / 32 * std::mem::size_of::<BlockQ8_0>()) as f64;
        for temp in ["warm", "cold"] {
            let group = format!("q8_{name}_{temp}");
            let gbs: Vec<Option<f64>> = ids
                .iter()
                .map(|id| mean_ns(&group, id).map(|ns| bytes / ns))
                .collect();
            if gbs.iter().all(Option::is_none) {
                continue;
            }
            let single = gbs[0];
            let pool_all = gbs[counts.len()];
            println!(
                "| {name} ({rows}x{cols}) | {:.1} | {temp} | {} | {} | {} |",
                bytes / 1e6,
                gbs.iter().map(|&v| fmt(v)).collect::<Vec<_>>().join(" | "),
                pct(single, bw1),
                pct(pool_all, bw_all),
            );
        }
    }
    println!("\nGB/s = 10^9 bytes of Q8_0 weights per second (criterion mean).");
}

fn main() {
    if std::env::args().any(|a| a == "--table") {
        print_table();
        return;
    }
    let mut c = config();
    bench_bandwidth(&mut c);
    bench_quantize(&mut c);
    bench_matvec(&mut c);
    c.final_summary();
    let listing = std::env::args().any(|a| a == "--list");
    if !listing {
        print_table();
    }
}
