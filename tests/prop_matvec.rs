//! The pooled, dynamic-pooled and rayon matvecs return exactly the bytes of
//! the single-core matvec, for random shapes and 1 to 16 threads, and a
//! matmul's rows are exactly the matvecs of its batch rows.
#![cfg(not(feature = "loom"))]

use std::time::Duration;

use inferno_cpu::matvec::{
    matmul_q8_0, matmul_q8_0_rayon, matvec_f32, matvec_f32_pool, matvec_f32_rayon, matvec_q8_0,
    matvec_q8_0_pool, matvec_q8_0_pool_dynamic, matvec_q8_0_rayon, F32Matrix, Q8Matrix,
};
use inferno_cpu::quant::{BlockQ8_0, QuantizedBatch, QuantizedVector, QK8_0};
use inferno_cpu::synth::SplitMix64;
use inferno_cpu::ThreadPool;
use proptest::prelude::*;
use proptest::test_runner::Config;

/// Most weights per case, so a case stays in the milliseconds in debug
/// builds while rows still reach 5000 and columns 4096 (not both at once).
const MAX_WEIGHTS: usize = 1 << 19;

/// Fast deterministic data for large shapes, from one seed that proptest
/// chooses (and shrinks).
struct Rng(SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in [-1, 1).
    fn f32(&mut self) -> f32 {
        self.0.next_signed_f32()
    }

    /// Every byte value, and a finite f16 scale around 1e-3..1e-1.
    fn block(&mut self) -> BlockQ8_0 {
        let bytes = [self.next(), self.next(), self.next(), self.next()];
        let qs: [i8; 32] = bytemuck::cast(bytes);
        let d = half::f16::from_f32(0.001 + 0.1 * self.f32().abs());
        BlockQ8_0::new(d, qs)
    }
}

/// (rows, cols): rows in 1..5000 (often fewer than the threads), cols a
/// multiple of 32 up to 4096, at most `MAX_WEIGHTS` weights.
fn q8_shape() -> impl Strategy<Value = (usize, usize)> {
    prop_oneof![1usize..20, 1usize..5000].prop_flat_map(|rows| {
        let max_nb = (MAX_WEIGHTS / (rows * QK8_0)).clamp(1, 4096 / QK8_0);
        (Just(rows), (1..=max_nb).prop_map(|nb| nb * QK8_0))
    })
}

/// A pool that parks at once: tests oversubscribe the cores, and spinning
/// workers would only slow each other down.
fn pool(threads: usize) -> ThreadPool {
    ThreadPool::builder()
        .threads(threads)
        .spin_time(Duration::ZERO)
        .build()
        .expect("pool")
}

fn rayon_pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("rayon pool")
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

/// `n` cases, or `PROPTEST_CASES` when it is set. Proptest reads that
/// variable only for tests that name no count; the emulated aarch64 run
/// (`ci/aarch64-qemu.sh`) lowers every count with it.
fn cases(n: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(n)
}

proptest! {
    // 64 cases each; every case is bounded by MAX_WEIGHTS (or 300 rows of
    // at most 512 columns, times 8 batch rows), so the file stays within
    // seconds in a debug build.
    #![proptest_config(Config::with_cases(cases(64)))]

    #[test]
    fn q8_pool_equals_single(
        (rows, cols) in q8_shape(),
        threads in 1usize..=16,
        chunk in 0usize..100,
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(SplitMix64::new(seed));
        let blocks: Vec<BlockQ8_0> = (0..rows * cols / QK8_0).map(|_| rng.block()).collect();
        let xf: Vec<f32> = (0..cols).map(|_| rng.f32()).collect();
        let w = Q8Matrix::new(&blocks, rows, cols).unwrap();
        let mut x = QuantizedVector::new();
        x.quantize_from(&xf).unwrap();

        let mut single = vec![f32::NAN; rows];
        matvec_q8_0(&w, &x, &mut single).unwrap();
        let pool = pool(threads);
        let mut other = vec![f32::NAN; rows];
        matvec_q8_0_pool(&pool, &w, &x, &mut other).unwrap();
        prop_assert_eq!(bits(&single), bits(&other), "static pool");
        other.fill(f32::NAN);
        matvec_q8_0_pool_dynamic(&pool, &w, &x, &mut other, chunk).unwrap();
        prop_assert_eq!(bits(&single), bits(&other), "dynamic pool");
        other.fill(f32::NAN);
        rayon_pool(threads).install(|| matvec_q8_0_rayon(&w, &x, &mut other)).unwrap();
        prop_assert_eq!(bits(&single), bits(&other), "rayon");
    }

    #[test]
    fn f32_pool_equals_single(
        rows in 1usize..2000,
        cols in 0usize..700,
        threads in 1usize..=16,
        seed in any::<u64>(),
    ) {
        let cols = cols.min(MAX_WEIGHTS / 2 / rows);
        let mut rng = Rng(SplitMix64::new(seed));
        let data: Vec<f32> = (0..rows * cols).map(|_| rng.f32()).collect();
        let x: Vec<f32> = (0..cols).map(|_| rng.f32()).collect();
        let w = F32Matrix::new(&data, rows, cols).unwrap();

        let mut single = vec![f32::NAN; rows];
        matvec_f32(&w, &x, &mut single).unwrap();
        let mut other = vec![f32::NAN; rows];
        matvec_f32_pool(&pool(threads), &w, &x, &mut other).unwrap();
        prop_assert_eq!(bits(&single), bits(&other), "pool");
        other.fill(f32::NAN);
        rayon_pool(threads).install(|| matvec_f32_rayon(&w, &x, &mut other)).unwrap();
        prop_assert_eq!(bits(&single), bits(&other), "rayon");
    }

    #[test]
    fn matmul_rows_equal_matvecs(
        m in 0usize..9,
        rows in 1usize..300,
        nb in 1usize..16,
        threads in 1usize..=16,
        seed in any::<u64>(),
    ) {
        let cols = nb * QK8_0;
        let mut rng = Rng(SplitMix64::new(seed));
        let blocks: Vec<BlockQ8_0> = (0..rows * nb).map(|_| rng.block()).collect();
        let xf: Vec<f32> = (0..m * cols).map(|_| rng.f32()).collect();
        let w = Q8Matrix::new(&blocks, rows, cols).unwrap();
        let mut xs = QuantizedBatch::new();
        xs.quantize_from(&xf, cols).unwrap();

        // The reference: one matvec per batch row (the kernel's row loop,
        // not the matmul's dot-per-row loop).
        let mut want = vec![f32::NAN; m * rows];
        let mut x = QuantizedVector::new();
        for (i, out) in want.chunks_mut(rows).enumerate() {
            x.quantize_from(&xf[i * cols..(i + 1) * cols]).unwrap();
            matvec_q8_0(&w, &x, out).unwrap();
        }
        // Both matmuls against it, each on its own: below
        // MATMUL_PAR_MIN_ROWS batch rows the rayon one is the sequential
        // one, so comparing the two with each other would prove nothing.
        let mut seq = vec![f32::NAN; m * rows];
        matmul_q8_0(&w, &xs, &mut seq).unwrap();
        let mut par = vec![f32::NAN; m * rows];
        rayon_pool(threads).install(|| matmul_q8_0_rayon(&w, &xs, &mut par)).unwrap();
        for i in 0..m {
            let r = i * rows..(i + 1) * rows;
            prop_assert_eq!(bits(&want[r.clone()]), bits(&seq[r.clone()]), "matmul, batch row {}", i);
            prop_assert_eq!(bits(&want[r.clone()]), bits(&par[r]), "rayon matmul, batch row {}", i);
        }
    }
}

#[test]
fn pool_sizes_around_the_row_count() {
    // Fewer rows than threads, as many, and one more.
    let cols = 64;
    let mut rng = Rng(SplitMix64::new(1));
    for threads in [1usize, 2, 5, 16] {
        for rows in [1, threads.saturating_sub(1).max(1), threads, threads + 1] {
            let blocks: Vec<BlockQ8_0> = (0..rows * 2).map(|_| rng.block()).collect();
            let w = Q8Matrix::new(&blocks, rows, cols).unwrap();
            let mut x = QuantizedVector::new();
            x.quantize_from(&(0..cols).map(|_| rng.f32()).collect::<Vec<_>>())
                .unwrap();
            let mut single = vec![f32::NAN; rows];
            matvec_q8_0(&w, &x, &mut single).unwrap();
            assert!(single.iter().all(|v| v.is_finite()));
            let mut pooled = vec![f32::NAN; rows];
            matvec_q8_0_pool(&pool(threads), &w, &x, &mut pooled).unwrap();
            assert_eq!(
                bits(&single),
                bits(&pooled),
                "{rows} rows, {threads} threads"
            );
        }
    }
}

/// F16 and BF16 matrices on every backend: the decode product (stacked
/// with a second matrix of the other type, as q, k and v are) gives the
/// same bytes on `simd`, `pool` and `parallel` at any thread count, each
/// backend's prefill product gives its decode product's bytes for every
/// batch row, and `scalar` is within the f32 error bound of them (rows of
/// any length, not only whole blocks).
#[test]
fn float_weights_agree_on_every_backend() {
    use inferno_cpu::backend::{AnyBackend, Backend};
    use inferno_cpu::matvec::{Bf16Matrix, F16Matrix, Weight};
    use inferno_cpu::quant::dot::f32_error_bound;
    use inferno_cpu::quant::ActForms;

    let backends: Vec<AnyBackend> = [
        ("scalar", 1),
        ("simd", 1),
        ("pool", 2),
        ("pool", 5),
        ("parallel", 3),
    ]
    .into_iter()
    .map(|(name, threads)| AnyBackend::new(name, threads).unwrap())
    .collect();
    let strategy = (1usize..80, 0usize..300, 0usize..7, any::<u64>());
    proptest!(Config::with_cases(cases(32)), |((rows, cols, m, seed) in strategy)| {
        let mut rng = Rng(SplitMix64::new(seed));
        let h: Vec<half::f16> = (0..rows * cols).map(|_| half::f16::from_f32(rng.f32())).collect();
        let b: Vec<half::bf16> = (0..rows * cols).map(|_| half::bf16::from_f32(rng.f32() * 8.0)).collect();
        let ws = [
            Weight::F16(F16Matrix::new(&h, rows, cols).unwrap()),
            Weight::Bf16(Bf16Matrix::new(&b, rows, cols).unwrap()),
        ];
        let xf: Vec<f32> = (0..cols.max(1) * m.max(1)).map(|_| rng.f32() * 4.0).collect();
        let forms = ActForms::F16.union(ActForms::BF16);
        let mut x = QuantizedVector::new();
        x.quantize_forms(&xf[..cols], forms).unwrap();
        let mut simd: Option<Vec<f32>> = None;
        let mut scalar = Vec::new();
        for be in &backends {
            let mut out = vec![f32::NAN; 2 * rows];
            be.matvec(&ws, &x, &mut out).unwrap();
            if be.name() == "scalar" {
                scalar = out;
            } else {
                match &simd {
                    None => simd = Some(out),
                    Some(s) => prop_assert_eq!(bits(s), bits(&out), "{} x{}", be.name(), be.threads()),
                }
            }
            if m > 0 && cols > 0 {
                let mut xs = QuantizedBatch::new();
                xs.quantize_forms(&xf[..m * cols], cols, forms).unwrap();
                for w in &ws {
                    let mut outs = vec![f32::NAN; m * rows];
                    be.matmul(w, &xs, &mut outs).unwrap();
                    let mut xi = QuantizedVector::new();
                    for (i, got) in outs.chunks(rows).enumerate() {
                        xi.quantize_forms(&xf[i * cols..(i + 1) * cols], forms).unwrap();
                        let mut want = vec![f32::NAN; rows];
                        be.matvec(std::slice::from_ref(w), &xi, &mut want).unwrap();
                        prop_assert_eq!(bits(got), bits(&want), "{} {} batch row {}", be.name(), w.type_name(), i);
                    }
                }
            }
        }
        let simd = simd.unwrap();
        for r in 0..2 * rows {
            let (wf, xr): (Vec<f32>, Vec<f32>) = if r < rows {
                (h[r * cols..(r + 1) * cols].iter().map(|v| v.to_f32()).collect(),
                 xf[..cols].iter().map(|&v| half::f16::from_f32(v).to_f32()).collect())
            } else {
                let r = r - rows;
                (b[r * cols..(r + 1) * cols].iter().map(|v| v.to_f32()).collect(),
                 xf[..cols].iter().map(|&v| half::bf16::from_f32(v).to_f32()).collect())
            };
            let bound = f32_error_bound(&wf, &xr);
            let diff = (f64::from(simd[r]) - f64::from(scalar[r])).abs();
            prop_assert!(diff <= bound, "row {}: {} vs {}", r, simd[r], scalar[r]);
        }
    });
}

/// Every quantized weight type on every backend: each batch row of a
/// prefill product is that row's decode product, bit for bit (NaN payloads
/// aside), for batches of 0 to 20, 24 and 33 rows (the interleaved GEMM
/// takes eight at a time, the rest the pair and four-row kernels; AVX-512's
/// Q4_0 GEMM eight, four, two and one) and 1 to 39 weight rows (the GEMM
/// takes two or four at a time, AVX-512's Q4_0 GEMM sixteen, the last
/// tile short), weight blocks of any bytes with scales of any size and,
/// now and then, infinite.
#[test]
fn quantized_prefill_rows_equal_decode_rows() {
    use inferno_cpu::backend::{AnyBackend, Backend};
    use inferno_cpu::matvec::{BlockMatrix, Weight};
    use inferno_cpu::quant::{BlockQ4K, BlockQ4_0, BlockQ5K, BlockQ6K};

    let backends: Vec<AnyBackend> = [("simd", 1), ("pool", 2), ("parallel", 3)]
        .into_iter()
        .map(|(name, threads)| AnyBackend::new(name, threads).unwrap())
        .collect();
    let batch = prop_oneof![0usize..=20, Just(24), Just(33)];
    let strategy = (1usize..40, 1usize..=2, batch, any::<u64>());
    let same = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
    };
    // A fixed count (not `PROPTEST_CASES`): emulated runs stay short.
    proptest!(Config::with_cases(16), |((rows, nb, m, seed) in strategy)| {
        let cols = nb * 256;
        let mut rng = Rng(SplitMix64::new(seed));
        let mut raw = |n: usize| -> Vec<u8> { (0..n).map(|_| rng.next() as u8).collect() };
        let scale = |rng: &mut Rng| {
            let v = if rng.next().is_multiple_of(16) { f32::INFINITY } else { rng.f32() };
            half::f16::from_f32(v).to_le_bytes()
        };
        let mut q8: Vec<BlockQ8_0> = bytemuck::cast_slice::<u8, [u8; 34]>(&raw(rows * cols / 32 * 34))
            .iter()
            .map(|b| bytemuck::pod_read_unaligned(b))
            .collect();
        let mut q4: Vec<BlockQ4_0> = bytemuck::cast_slice::<u8, [u8; 18]>(&raw(rows * cols / 32 * 18))
            .iter()
            .map(|b| bytemuck::pod_read_unaligned(b))
            .collect();
        let mut k4: Vec<BlockQ4K> = bytemuck::cast_slice::<u8, [u8; 144]>(&raw(rows * nb * 144))
            .iter()
            .map(|b| bytemuck::pod_read_unaligned(b))
            .collect();
        let mut k5: Vec<BlockQ5K> = bytemuck::cast_slice::<u8, [u8; 176]>(&raw(rows * nb * 176))
            .iter()
            .map(|b| bytemuck::pod_read_unaligned(b))
            .collect();
        let mut k6: Vec<BlockQ6K> = bytemuck::cast_slice::<u8, [u8; 210]>(&raw(rows * nb * 210))
            .iter()
            .map(|b| bytemuck::pod_read_unaligned(b))
            .collect();
        for b in &mut q8 { b.d = scale(&mut rng); }
        for b in &mut q4 { b.d = scale(&mut rng); }
        for b in &mut k4 { (b.d, b.dmin) = (scale(&mut rng), scale(&mut rng)); }
        for b in &mut k5 { (b.d, b.dmin) = (scale(&mut rng), scale(&mut rng)); }
        for b in &mut k6 { b.d = scale(&mut rng); }
        let ws = [
            Weight::Q8_0(Q8Matrix::new(&q8, rows, cols).unwrap()),
            Weight::Q4_0(BlockMatrix::new(&q4, rows, cols).unwrap()),
            Weight::Q4K(BlockMatrix::new(&k4, rows, cols).unwrap()),
            Weight::Q5K(BlockMatrix::new(&k5, rows, cols).unwrap()),
            Weight::Q6K(BlockMatrix::new(&k6, rows, cols).unwrap()),
        ];
        let xf: Vec<f32> = (0..m.max(1) * cols).map(|_| rng.f32() * 4.0).collect();
        for be in &backends {
            for w in &ws {
                let mut xs = QuantizedBatch::new();
                xs.quantize_forms(&xf[..m * cols], cols, w.forms()).unwrap();
                let mut outs = vec![f32::NAN; m * rows];
                be.matmul(w, &xs, &mut outs).unwrap();
                let mut xi = QuantizedVector::new();
                for (i, got) in outs.chunks(rows).enumerate() {
                    xi.quantize_forms(&xf[i * cols..(i + 1) * cols], w.forms()).unwrap();
                    let mut want = vec![f32::NAN; rows];
                    be.matvec(std::slice::from_ref(w), &xi, &mut want).unwrap();
                    prop_assert!(same(got, &want), "{} x{} {} batch row {} of {}", be.name(), be.threads(), w.type_name(), i, m);
                }
            }
        }
    });
}

/// The Q8_0 and Q4_0 GEMM unpacks sixteen weight rows per pass over the
/// batch's groups: weight-row counts on both sides of a tile and of a
/// 64-row task, with a batch of two whole groups and a rest and an odd
/// number of blocks a row (the last one in the even accumulators), each
/// prefill row still that row's decode product, bit for bit.
#[test]
fn b32_gemm_tiles_cut_anywhere() {
    use inferno_cpu::backend::{AnyBackend, Backend};
    use inferno_cpu::matvec::{BlockMatrix, Weight};
    use inferno_cpu::quant::BlockQ4_0;

    let backends: Vec<AnyBackend> = [("simd", 1), ("parallel", 3)]
        .into_iter()
        .map(|(name, threads)| AnyBackend::new(name, threads).unwrap())
        .collect();
    let (cols, m) = (96, 19);
    for rows in [1, 15, 16, 17, 31, 33, 63, 64, 65, 80] {
        let mut rng = Rng(SplitMix64::new(rows as u64));
        let q8: Vec<BlockQ8_0> = (0..rows * cols / 32).map(|_| rng.block()).collect();
        let q4: Vec<BlockQ4_0> = (0..rows * cols / 32)
            .map(|_| {
                let mut b = [0u8; 18];
                b.iter_mut().for_each(|v| *v = rng.next() as u8);
                b[..2].copy_from_slice(&half::f16::from_f32(rng.f32()).to_le_bytes());
                bytemuck::pod_read_unaligned(&b)
            })
            .collect();
        let ws = [
            Weight::Q8_0(Q8Matrix::new(&q8, rows, cols).unwrap()),
            Weight::Q4_0(BlockMatrix::new(&q4, rows, cols).unwrap()),
        ];
        let xf: Vec<f32> = (0..m * cols).map(|_| rng.f32() * 4.0).collect();
        for be in &backends {
            for w in &ws {
                let mut xs = QuantizedBatch::new();
                xs.quantize_forms(&xf, cols, w.forms()).unwrap();
                let mut outs = vec![f32::NAN; m * rows];
                be.matmul(w, &xs, &mut outs).unwrap();
                let mut xi = QuantizedVector::new();
                for (i, got) in outs.chunks(rows).enumerate() {
                    xi.quantize_forms(&xf[i * cols..(i + 1) * cols], w.forms())
                        .unwrap();
                    let mut want = vec![f32::NAN; rows];
                    be.matvec(std::slice::from_ref(w), &xi, &mut want).unwrap();
                    assert_eq!(
                        bits(got),
                        bits(&want),
                        "{} x{} {} with {rows} rows, batch row {i}",
                        be.name(),
                        be.threads(),
                        w.type_name()
                    );
                }
            }
        }
    }
}
