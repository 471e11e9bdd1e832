//! Q8_0 quantization against GGML's reference, and every SIMD dot kernel
//! against its scalar twin.
//!
//! The kernel suites run once per instruction set. This file has its own
//! small test runner (`harness = false` in Cargo.toml, see [`main`]) so that
//! a suite whose instruction set this CPU lacks is reported as *ignored,
//! with the reason*, in the test summary, instead of passing without
//! checking anything; the runner ends with a line naming the kernels that
//! were exercised, which `ci/test.sh` compares with the CPU's flags.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use bytemuck::Pod;
use half::{bf16, f16};
use inferno_cpu::matvec::{F32Matrix, Q8Matrix};
use inferno_cpu::quant::dot::{f32_error_bound, q8_0_error_bound};
use inferno_cpu::quant::{
    dequantize_row_q8_0, dequantize_row_q8_0_into, dot_q4_k_q8_k, dot_q5_k_q8_k, dot_q6_k_q8_k,
    quantize_row_q8_0, quantize_row_q8_0_even, quantize_row_q8_k, ActForms, BlockQ4K, BlockQ5K,
    BlockQ6K, BlockQ8K, BlockQ8_0, Kernel, KernelError, QuantError, QuantizedVector, QK8_0, QK_K,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};

/// `n` cases (see [`cases`]), with failures saved to and replayed from
/// `tests/prop_quant.proptest-regressions` (proptest cannot find the
/// source file by itself outside `#[test]` functions; tests run from the
/// package root).
fn config(n: u32) -> Config {
    Config {
        cases: cases(n),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/prop_quant.proptest-regressions",
        ))),
        ..Config::default()
    }
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

/// GGML's `quantize_row_q8_0_ref`, transcribed line by line from C. Where
/// C converts a NaN or infinite float to `int8_t` (undefined behaviour) it
/// uses the crate's documented choice: NaN -> 0, +-inf -> +-127.
fn ggml_reference(x: &[f32]) -> Vec<(u16, [i8; 32])> {
    x.chunks_exact(32)
        .map(|block| {
            let mut amax = 0.0f32; // absolute max
            for &v in block {
                let a = v.abs();
                // #define MAX(a, b) ((a) > (b) ? (a) : (b))
                amax = if amax > a { amax } else { a };
            }
            let d = amax / ((1 << 7) - 1) as f32;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            // GGML_FP32_TO_FP16: round to nearest even, as vcvtps2ph imm 0.
            let d16 = f16::from_f32(d).to_bits();
            let mut qs = [0i8; 32];
            for (q, &v) in qs.iter_mut().zip(block) {
                let x0 = v * id;
                let r = x0.round(); // roundf: half away from zero
                *q = if r.is_nan() {
                    0
                } else {
                    r.clamp(-127.0, 127.0) as i8
                };
            }
            (d16, qs)
        })
        .collect()
}

/// f32 values that exercise every branch of the quantizer: ordinary
/// values, zeros, the extremes, subnormals, infinities and NaN.
fn edgy_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        6 => -10.0f32..10.0,
        1 => prop_oneof![
            Just(0.0f32),
            Just(-0.0),
            Just(f32::MAX),
            Just(f32::MIN),
            Just(f32::MIN_POSITIVE),
            Just(1e-40),
            Just(-1e-45),
            Just(f32::INFINITY),
            Just(f32::NEG_INFINITY),
            Just(f32::NAN),
            Just(127.0),
            Just(-127.0),
            Just(65504.0 * 127.0),
            Just(1e30),
        ],
        1 => any::<f32>(),
    ]
}

fn same_block(got: &BlockQ8_0, want: &(u16, [i8; 32])) -> bool {
    let d = got.scale();
    let d_ok = if d.is_nan() {
        f16::from_bits(want.0).is_nan()
    } else {
        d.to_bits() == want.0
    };
    d_ok && got.qs == want.1
}

fn quantize_matches_ggml_reference() {
    proptest!(config(256), |(x in prop::collection::vec(edgy_f32(), 0..=4 * 32))| {
        let x = &x[..x.len() / 32 * 32];
        let got = quantize_row_q8_0(x).unwrap();
        let want = ggml_reference(x);
        prop_assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            prop_assert!(same_block(g, w), "got {:?}, want {:?}", g, w);
        }
        // The activation path quantizes identically but for ties, which it
        // rounds to even as GGML's run-time quantizer does.
        let mut xq = QuantizedVector::new();
        xq.quantize_from(x).unwrap();
        prop_assert_eq!(xq.to_blocks(), quantize_row_q8_0_even(x).unwrap());
        for (e, r) in xq.to_blocks().iter().zip(&got) {
            prop_assert_eq!(e.d, r.d);
            for (a, b) in e.qs.iter().zip(&r.qs) {
                prop_assert!((i16::from(*a) - i16::from(*b)).abs() <= 1);
            }
        }
    });
}

fn quantize_rounds_exact_halves_like_ggml() {
    proptest!(config(256), |(halves in prop::collection::vec(-254i32..=254, 32), at in 0usize..32, neg in any::<bool>(), scale in prop::sample::select(vec![1.0f32, 0.5, 2.0, 0.25, 1024.0]))| {
        // One element at +-127 * scale makes id = 1 / scale exactly, so the
        // others land exactly on k / 2: every tie of the rounding rule.
        let mut x: Vec<f32> = halves.iter().map(|&h| h as f32 / 2.0 * scale).collect();
        x[at] = if neg { -127.0 } else { 127.0 } * scale;
        let got = quantize_row_q8_0(&x).unwrap();
        let want = ggml_reference(&x);
        prop_assert!(same_block(&got[0], &want[0]), "got {:?}, want {:?}", got[0], want[0]);
    });
}

fn partial_blocks_are_errors() {
    proptest!(config(256), |(len in 0usize..300)| {
        let x = vec![1.0f32; len];
        let r = quantize_row_q8_0(&x);
        if len % 32 == 0 {
            prop_assert_eq!(r.map(|b| b.len()), Ok(len / 32));
        } else {
            prop_assert_eq!(r, Err(QuantError::LengthNotMultiple { len }));
        }
    });
}

fn dequantize_is_within_half_a_step() {
    proptest!(config(256), |(x in prop::collection::vec(-1e4f32..1e4, 32..=32 * 4))| {
        let x = &x[..x.len() / 32 * 32];
        let blocks = quantize_row_q8_0(x).unwrap();
        let y = dequantize_row_q8_0(&blocks);
        prop_assert_eq!(y.len(), x.len());
        for (b, (xs, ys)) in blocks.iter().zip(x.chunks(32).zip(y.chunks(32))) {
            let d = f64::from(b.scale().to_f32());
            // Rounding to the f32 step gives d/2; rounding d to f16 moves
            // each of up to 127 steps by at most 2^-11 relative.
            let tol = d / 2.0 + 127.0 * d * 2f64.powi(-11) + 1e-30;
            for (&a, &b) in xs.iter().zip(ys) {
                prop_assert!((f64::from(a) - f64::from(b)).abs() <= tol * (1.0 + 1e-6));
            }
        }
    });
}

fn edge_values() {
    let q = |x: [f32; 32]| {
        let b = quantize_row_q8_0(&x).unwrap()[0];
        (b.scale(), b.qs)
    };
    let mut x = [0.0f32; 32];
    // All zeros: d = 0 and every weight 0.
    assert_eq!(q(x), (f16::ZERO, [0; 32]));
    // +-max: 127 and -127 give d = 1 exactly.
    x[3] = 127.0;
    x[4] = -127.0;
    x[5] = 63.5;
    x[6] = -63.5;
    let (d, qs) = q(x);
    assert_eq!(d, f16::ONE);
    assert_eq!((qs[3], qs[4], qs[5], qs[6]), (127, -127, 64, -64));
    // Ramp -16..16: d = 16/127, q = round(v * 127/16).
    let ramp: [f32; 32] = std::array::from_fn(|j| j as f32 - 16.0);
    let (d, qs) = q(ramp);
    assert_eq!(d, f16::from_f32(16.0 / 127.0));
    assert_eq!(
        (qs[0], qs[15], qs[17], qs[18], qs[19]),
        (-127, -8, 8, 16, 24)
    );
    // Huge but finite: the f16 scale overflows to inf, the weights do not.
    let mut x = [0.0f32; 32];
    x[0] = 1e30;
    x[1] = -0.75e30;
    let (d, qs) = q(x);
    assert!(d.is_infinite());
    assert_eq!((qs[0], qs[1]), (127, -95));
    // Tiny: 1/d overflows, so nonzero values saturate; the scale is 0.
    x[0] = 1e-40;
    x[1] = -1e-40;
    let (d, qs) = q(x);
    assert_eq!(d, f16::ZERO);
    assert_eq!((qs[0], qs[1], qs[2]), (127, -127, 0));
    // An infinity makes d = inf, id = 0: all weights 0, and the block
    // dequantizes to NaN (inf * 0).
    let mut x = [1.0f32; 32];
    x[7] = f32::INFINITY;
    let (d, qs) = q(x);
    assert!(d.is_infinite());
    assert_eq!(qs, [0; 32]);
    assert!(dequantize_row_q8_0(&quantize_row_q8_0(&x).unwrap())[0].is_nan());
    // A NaN followed by a larger value is forgotten by GGML's MAX...
    let mut x = [0.5f32; 32];
    x[0] = f32::NAN;
    x[1] = 2.0;
    let (d, qs) = q(x);
    assert_eq!(d, f16::from_f32(2.0 / 127.0));
    assert_eq!((qs[0], qs[1], qs[2]), (0, 127, 32));
    // ...and so is everything before the NaN: 100 saturates to 127.
    let mut x = [0.5f32; 32];
    x[0] = 100.0;
    x[1] = f32::NAN;
    x[2] = 2.0;
    let (d, qs) = q(x);
    assert_eq!(d, f16::from_f32(2.0 / 127.0));
    assert_eq!((qs[0], qs[1], qs[2], qs[3]), (127, 0, 127, 32));
    // A NaN last in the block poisons d, and every weight is 0.
    let mut x = [1.0f32; 32];
    x[31] = f32::NAN;
    let (d, qs) = q(x);
    assert!(d.is_nan());
    assert_eq!(qs, [0; 32]);
    // Dequantize rejects a wrong output length.
    assert_eq!(
        dequantize_row_q8_0_into(&[BlockQ8_0::default()], &mut [0.0; 31]),
        Err(QuantError::OutputLength {
            expected: 32,
            got: 31
        })
    );
}

/// A finite f16 scale from any bits (the all-ones exponent is folded down).
fn finite_scale() -> impl Strategy<Value = [u8; 2]> {
    any::<u16>().prop_map(|b| {
        let b = if b & 0x7c00 == 0x7c00 { b & !0x4000 } else { b };
        b.to_le_bytes()
    })
}

fn weight_block() -> impl Strategy<Value = BlockQ8_0> {
    (finite_scale(), any::<[i8; 32]>()).prop_map(|(d, qs)| BlockQ8_0 { d, qs })
}

/// A weight row of `nb` blocks (every byte value, -128 included, and every
/// finite scale, subnormals included) and a quantized activation of
/// `32 * nb` values; `nb` covers every tail of the unrolled loops.
fn dot_operands(max_nb: usize) -> impl Strategy<Value = (Vec<BlockQ8_0>, QuantizedVector)> {
    (0..=max_nb).prop_flat_map(|nb| {
        (
            prop::collection::vec(weight_block(), nb),
            prop::collection::vec(-100.0f32..100.0, nb * QK8_0),
        )
            .prop_map(|(w, xf)| {
                let mut x = QuantizedVector::new();
                x.quantize_from(&xf).unwrap();
                (w, x)
            })
    })
}

/// Runs `body` as a property test of `kernel`. The runner ([`main`])
/// reports a kernel this CPU lacks as ignored before calling this; run
/// anyway (`--include-ignored`), the kernel call fails with
/// `KernelError::Unavailable` and so does the test.
fn on_kernel(_kernel: Kernel, _test: &str, body: impl FnOnce(&mut TestRunner)) {
    body(&mut TestRunner::new(config(64)));
}

fn dot_matches_scalar(kernel: Kernel, test: &str) {
    on_kernel(kernel, test, |runner| {
        runner
            .run(&dot_operands(40), |(w, x)| {
                let simd = kernel.dot_q8_0(&w, &x).unwrap();
                let scalar = Kernel::Scalar.dot_q8_0(&w, &x).unwrap();
                let bound = q8_0_error_bound(&w, &x);
                let diff = (f64::from(simd) - f64::from(scalar)).abs();
                prop_assert!(diff <= bound, "{simd} vs {scalar}: {diff} > {bound}");
                Ok(())
            })
            .unwrap();
    });
}

fn matvec_matches_dot(kernel: Kernel, test: &str) {
    on_kernel(kernel, test, |runner| {
        let strategy = (1usize..12).prop_flat_map(|rows| {
            (0usize..9).prop_flat_map(move |nb| {
                (
                    prop::collection::vec(weight_block(), rows * nb),
                    prop::collection::vec(-10.0f32..10.0, nb * QK8_0),
                )
                    .prop_map(move |(w, xf)| (rows, nb, w, xf))
            })
        });
        runner
            .run(&strategy, |(rows, nb, blocks, xf)| {
                let w = Q8Matrix::new(&blocks, rows, nb * QK8_0).unwrap();
                let mut x = QuantizedVector::new();
                x.quantize_from(&xf).unwrap();
                let mut out = vec![f32::NAN; rows];
                kernel.matvec_q8_0(&w, &x, &mut out).unwrap();
                for (r, o) in out.iter().enumerate() {
                    let dot = kernel.dot_q8_0(w.row(r), &x).unwrap();
                    prop_assert_eq!(o.to_bits(), dot.to_bits());
                }
                Ok(())
            })
            .unwrap();
    });
}

fn f32_dot_matches_scalar(kernel: Kernel, test: &str) {
    on_kernel(kernel, test, |runner| {
        let strategy = (0usize..200).prop_flat_map(|n| {
            (
                prop::collection::vec(-1e3f32..1e3, n),
                prop::collection::vec(-1e3f32..1e3, n),
            )
        });
        runner
            .run(&strategy, |(w, x)| {
                let simd = kernel.dot_f32(&w, &x).unwrap();
                let scalar = Kernel::Scalar.dot_f32(&w, &x).unwrap();
                let bound = f32_error_bound(&w, &x);
                let diff = (f64::from(simd) - f64::from(scalar)).abs();
                prop_assert!(diff <= bound, "{simd} vs {scalar}: {diff} > {bound}");
                // Rows through the kernel's matvec are its dot, bit for bit.
                let m = F32Matrix::new(&w, 1, w.len()).unwrap();
                let mut out = [f32::NAN];
                kernel.matvec_f32(&m, &x, &mut out).unwrap();
                prop_assert_eq!(out[0].to_bits(), simd.to_bits());
                Ok(())
            })
            .unwrap();
    });
}

fn scalar_dot_is_within_bound_of_exact() {
    // The scalar kernel against the exact value: every term
    // d_w * d_x * isum is exact in f64 (22 + 20 significant bits), so the
    // f64 sum is far closer to the truth than the f32 bound.
    let mut runner = TestRunner::new(config(128));
    runner
        .run(&dot_operands(40), |(w, x)| {
            let xb = x.to_blocks();
            let exact: f64 = w
                .iter()
                .zip(&xb)
                .map(|(a, b)| {
                    let isum: i64 =
                        a.qs.iter()
                            .zip(&b.qs)
                            .map(|(&p, &q)| i64::from(p) * i64::from(q))
                            .sum();
                    f64::from(a.scale().to_f32()) * f64::from(b.scale().to_f32()) * isum as f64
                })
                .sum();
            let got = Kernel::Scalar.dot_q8_0(&w, &x).unwrap();
            // Each kernel is within half the two-kernel bound of the exact sum.
            let bound = q8_0_error_bound(&w, &x) / 2.0;
            prop_assert!((f64::from(got) - exact).abs() <= bound * (1.0 + 1e-9) + 1e-300);
            Ok(())
        })
        .unwrap();
}

fn quantize_matches_scalar(kernel: Kernel, test: &str) {
    on_kernel(kernel, test, |runner| {
        let strategy = prop::collection::vec(edgy_f32(), 0..=8 * 32);
        runner
            .run(&strategy, |x| {
                let x = &x[..x.len() / 32 * 32];
                let mut a = QuantizedVector::new();
                kernel.quantize(x, &mut a).unwrap();
                let mut b = QuantizedVector::new();
                Kernel::Scalar.quantize(x, &mut b).unwrap();
                let (a, b) = (a.to_blocks(), b.to_blocks());
                prop_assert_eq!(a.len(), b.len());
                for (p, q) in a.iter().zip(&b) {
                    let d_same = p.d == q.d || (p.scale().is_nan() && q.scale().is_nan());
                    prop_assert!(d_same && p.qs == q.qs, "{:?} vs {:?}", p, q);
                }
                Ok(())
            })
            .unwrap();
    });
}

fn avx2_quantize_matches_scalar() {
    quantize_matches_scalar(Kernel::Avx2, "avx2_quantize_matches_scalar");
}

fn avx2_dot_matches_scalar() {
    dot_matches_scalar(Kernel::Avx2, "avx2_dot_matches_scalar");
}

fn avx2_matvec_matches_dot() {
    matvec_matches_dot(Kernel::Avx2, "avx2_matvec_matches_dot");
}

fn avx2_f32_dot_matches_scalar() {
    f32_dot_matches_scalar(Kernel::Avx2, "avx2_f32_dot_matches_scalar");
}

/// Q4_K or Q6_K weight rows (any level and scale bytes, finite f16
/// super-scales) with Q8_K activations of as many blocks: quantized ones,
/// or a quarter of the time any bytes with a finite scale.
fn k_operands<B: Pod + std::fmt::Debug>(
    size: usize,
    set_scales: fn(&mut B, [u8; 2], [u8; 2]),
) -> impl Strategy<Value = (Vec<B>, Vec<BlockQ8K>)> {
    (0usize..=6).prop_flat_map(move |nb| {
        (
            prop::collection::vec(
                (
                    prop::collection::vec(any::<u8>(), size),
                    finite_scale(),
                    finite_scale(),
                ),
                nb,
            ),
            prop::collection::vec(-100.0f32..100.0, nb * QK_K),
            // Sometimes raw activation bytes instead: -128 values and sums
            // that do not match the values, which the kernels must treat
            // alike.
            prop::option::weighted(
                0.25,
                (prop::collection::vec(any::<u8>(), nb * 292), -20.0f32..20.0),
            ),
        )
            .prop_map(move |(raw, xf, hostile)| {
                let w = raw
                    .into_iter()
                    .map(|(b, d, dmin)| {
                        let mut blk: B = bytemuck::pod_read_unaligned(&b);
                        set_scales(&mut blk, d, dmin);
                        blk
                    })
                    .collect();
                let x = match hostile {
                    None => quantize_row_q8_k(&xf).unwrap(),
                    Some((bytes, e)) => bytes
                        .chunks_exact(292)
                        .map(|c| {
                            let mut b: BlockQ8K = bytemuck::pod_read_unaligned(c);
                            b.d = 2f32.powf(e);
                            b
                        })
                        .collect(),
                };
                (w, x)
            })
    })
}

/// Bound on `|kernel - exact|` for a K-quant dot: `(nb + 16) * 2^-24 * M`,
/// with `M` the sum of the magnitudes of the terms the kernels add up
/// before any cancellation (`terms`: the scale part of each weight times
/// its activation, and for Q4_K each min times its sum of 16
/// activations), exact in f64; see tests/prop_kquant.rs for the
/// derivation. Two kernels differ by at most twice that.
fn k_error_bound(nb: usize, terms: impl Iterator<Item = f64>) -> f64 {
    (nb as f64 + 16.0) * f64::powi(2.0, -24) * terms.sum::<f64>() * 1.01
}

/// An AVX2-against-scalar test for a format with 6-bit scales and mins
/// (Q4_K, Q5_K: the same accessors, different levels).
macro_rules! k4_dot_matches_scalar {
    ($test:literal, $block:ty, $size:expr, $kernel_dot:ident, $scalar_dot:ident) => {{
        on_kernel(Kernel::Avx2, $test, |runner| {
            let ops = k_operands::<$block>($size, |b, d, dmin| {
                b.d = d;
                b.dmin = dmin;
            });
            runner
                .run(&ops, |(w, x)| {
                    let simd = Kernel::Avx2.$kernel_dot(&w, &x).unwrap();
                    let scalar = $scalar_dot(&w, &x).unwrap();
                    prop_assert_eq!(
                        Kernel::Scalar.$kernel_dot(&w, &x).unwrap().to_bits(),
                        scalar.to_bits()
                    );
                    // The scale parts per value, the min parts per sum of
                    // 16 (what both kernels multiply: the sums, not the
                    // values).
                    let terms = w.iter().zip(&x).flat_map(|(wb, xb)| {
                        let levels = wb.levels();
                        let dx = f64::from(xb.d).abs();
                        let scale_part = (0..QK_K).map(move |i| {
                            let sc = wb.scale_min(i / 32).0;
                            let wt = f64::from(wb.d_f32()) * f64::from(sc) * f64::from(levels[i]);
                            (wt * dx * f64::from(xb.qs[i])).abs()
                        });
                        let min_part = (0..QK_K / 16).map(move |j| {
                            let m = wb.scale_min(j / 2).1;
                            (f64::from(wb.dmin_f32()) * f64::from(m) * dx * f64::from(xb.bsums[j]))
                                .abs()
                        });
                        scale_part.chain(min_part)
                    });
                    let bound = 2.0 * k_error_bound(w.len(), terms);
                    let diff = (f64::from(simd) - f64::from(scalar)).abs();
                    prop_assert!(diff <= bound, "{simd} vs {scalar}: {diff} > {bound}");
                    Ok(())
                })
                .unwrap();
        });
    }};
}

fn avx2_q4_k_dot_matches_scalar() {
    k4_dot_matches_scalar!(
        "avx2_q4_k_dot_matches_scalar",
        BlockQ4K,
        144,
        dot_q4_k_q8_k,
        dot_q4_k_q8_k
    );
}

fn avx2_q5_k_dot_matches_scalar() {
    k4_dot_matches_scalar!(
        "avx2_q5_k_dot_matches_scalar",
        BlockQ5K,
        176,
        dot_q5_k_q8_k,
        dot_q5_k_q8_k
    );
}

fn avx2_q6_k_dot_matches_scalar() {
    on_kernel(Kernel::Avx2, "avx2_q6_k_dot_matches_scalar", |runner| {
        let ops = k_operands::<BlockQ6K>(210, |b, d, _| b.d = d);
        runner
            .run(&ops, |(w, x)| {
                let simd = Kernel::Avx2.dot_q6_k_q8_k(&w, &x).unwrap();
                let scalar = dot_q6_k_q8_k(&w, &x).unwrap();
                prop_assert_eq!(
                    Kernel::Scalar.dot_q6_k_q8_k(&w, &x).unwrap().to_bits(),
                    scalar.to_bits()
                );
                let terms = w.iter().zip(&x).flat_map(|(wb, xb)| {
                    let levels = wb.levels();
                    (0..QK_K).map(move |i| {
                        let wt = f64::from(wb.d_f32())
                            * f64::from(wb.scales[i / 16])
                            * f64::from(levels[i]);
                        (wt * f64::from(xb.d) * f64::from(xb.qs[i])).abs()
                    })
                });
                let bound = 2.0 * k_error_bound(w.len(), terms);
                let diff = (f64::from(simd) - f64::from(scalar)).abs();
                prop_assert!(diff <= bound, "{simd} vs {scalar}: {diff} > {bound}");
                // Mismatched block counts are errors, not panics.
                let mut short = x.clone();
                short.push(BlockQ8K::default());
                prop_assert!(Kernel::Avx2.dot_q6_k_q8_k(&w, &short).is_err());
                Ok(())
            })
            .unwrap();
    });
}

fn avx512vnni_dot_matches_scalar() {
    dot_matches_scalar(Kernel::Avx512Vnni, "avx512vnni_dot_matches_scalar");
}

fn avx512vnni_matvec_matches_dot() {
    matvec_matches_dot(Kernel::Avx512Vnni, "avx512vnni_matvec_matches_dot");
}

/// AVX-VNNI's Q8_0 dot gives AVX-512 VNNI's bits (the same lane-wise
/// computation); where the CPU lacks AVX-512 VNNI there is nothing to
/// compare. (AVX2's sums each block exactly before its float part, so it
/// rounds otherwise: the bound relates it to the others.)
fn avxvnni_equals_avx512vnni_bit_for_bit() {
    if !Kernel::Avx512Vnni.is_available() {
        eprintln!("avxvnni_equals_avx512vnni_bit_for_bit: the CPU lacks AVX-512 VNNI");
        return;
    }
    on_kernel(
        Kernel::AvxVnni,
        "avxvnni_equals_avx512vnni_bit_for_bit",
        |runner| {
            runner
                .run(&dot_operands(40), |(w, x)| {
                    let a = Kernel::AvxVnni.dot_q8_0(&w, &x).unwrap();
                    let b = Kernel::Avx512Vnni.dot_q8_0(&w, &x).unwrap();
                    prop_assert_eq!(a.to_bits(), b.to_bits());
                    Ok(())
                })
                .unwrap();
        },
    );
}

fn avxvnni_dot_matches_scalar() {
    dot_matches_scalar(Kernel::AvxVnni, "avxvnni_dot_matches_scalar");
}

fn avxvnni_matvec_matches_dot() {
    matvec_matches_dot(Kernel::AvxVnni, "avxvnni_matvec_matches_dot");
}

fn neon_dot_matches_scalar() {
    dot_matches_scalar(Kernel::Neon, "neon_dot_matches_scalar");
}

fn neon_matvec_matches_dot() {
    matvec_matches_dot(Kernel::Neon, "neon_matvec_matches_dot");
}

fn neon_f32_dot_matches_scalar() {
    f32_dot_matches_scalar(Kernel::Neon, "neon_f32_dot_matches_scalar");
}

fn neon_dot_dot_matches_scalar() {
    dot_matches_scalar(Kernel::NeonDot, "neon_dot_dot_matches_scalar");
}

fn neon_dot_matvec_matches_dot() {
    matvec_matches_dot(Kernel::NeonDot, "neon_dot_matvec_matches_dot");
}

fn neon_dot_f32_dot_matches_scalar() {
    f32_dot_matches_scalar(Kernel::NeonDot, "neon_dot_f32_dot_matches_scalar");
}

/// `sdot` with interleaved byte pairs builds the plain NEON kernel's lanes,
/// so the two agree bit for bit (every byte value, -128 included, in the
/// weights and every quantized activation byte).
fn neon_dot_equals_neon_bit_for_bit() {
    let test = "neon_dot_equals_neon_bit_for_bit";
    on_kernel(Kernel::NeonDot, test, |runner| {
        runner
            .run(&dot_operands(40), |(w, x)| {
                let a = Kernel::NeonDot.dot_q8_0(&w, &x).unwrap();
                let b = Kernel::Neon.dot_q8_0(&w, &x).unwrap();
                prop_assert_eq!(a.to_bits(), b.to_bits());
                Ok(())
            })
            .unwrap();
    });
}

/// F16 or BF16 weight rows and activations for the float dots: lengths
/// 0 to 300 (every tail of the 32-, 16-, 8- and 4-value steps), weights
/// of every finite f16 value (subnormals included), or bfloat16 values
/// from 2^-133 (subnormal) up to 2^64, activations within +-1e4 (finite
/// once rounded to f16), some of them tiny.
fn float_operands() -> impl Strategy<Value = (Vec<u16>, Vec<f32>)> {
    (0usize..300).prop_flat_map(|n| {
        (
            prop::collection::vec(any::<u16>(), n),
            prop::collection::vec(
                prop_oneof![4 => -1e4f32..1e4, 1 => -1e-6f32..1e-6, 1 => Just(0.0)],
                n,
            ),
        )
    })
}

/// `kernel`'s F16 (`bf16: false`) or BF16 weight dot against the scalar
/// kernel's, within `f32_error_bound` of the widened operands plus
/// `2^-149` per product (a BF16 product that underflows f32 is rounded
/// once by the scalar kernel and fused into the sum by an FMA), and
/// `kernel`'s four-row form, bit for bit. A vector without the form, or
/// of another length, is an error.
fn float_dot_matches_scalar(kernel: Kernel, bf16_weights: bool, test: &str) {
    on_kernel(kernel, test, |runner| {
        runner
            .run(&float_operands(), |(bits, x)| {
                let forms = if bf16_weights {
                    ActForms::BF16
                } else {
                    ActForms::F16
                };
                let n = x.len();
                let mut xq = QuantizedVector::new();
                xq.quantize_forms(&x, forms).unwrap();
                let (simd, scalar, x4, wf) = if bf16_weights {
                    // Exponents above 2^64 folded down: no product overflows.
                    let w: Vec<bf16> = bits[..n]
                        .iter()
                        .map(|&b| {
                            bf16::from_bits(if (b >> 7) & 0xff > 0xbf {
                                b & !0x4000
                            } else {
                                b
                            })
                        })
                        .collect();
                    (
                        kernel.dot_bf16_weights(&w, &xq).unwrap(),
                        Kernel::Scalar.dot_bf16_weights(&w, &xq).unwrap(),
                        kernel.dot_bf16_weights_x4(&w, [&xq; 4]).unwrap(),
                        w.iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
                    )
                } else {
                    let w: Vec<f16> = bits[..n]
                        .iter()
                        .map(|&b| {
                            f16::from_bits(if b & 0x7c00 == 0x7c00 { b & !0x4000 } else { b })
                        })
                        .collect();
                    (
                        kernel.dot_f16_weights(&w, &xq).unwrap(),
                        Kernel::Scalar.dot_f16_weights(&w, &xq).unwrap(),
                        kernel.dot_f16_weights_x4(&w, [&xq; 4]).unwrap(),
                        w.iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
                    )
                };
                let rounded: Vec<f32> = x[..n]
                    .iter()
                    .map(|&v| {
                        if bf16_weights {
                            bf16::from_f32(v).to_f32()
                        } else {
                            f16::from_f32(v).to_f32()
                        }
                    })
                    .collect();
                let bound = f32_error_bound(&wf, &rounded) + n as f64 * 2f64.powi(-149);
                let diff = (f64::from(simd) - f64::from(scalar)).abs();
                prop_assert!(diff <= bound, "{simd} vs {scalar}: {diff} > {bound}");
                for v in x4 {
                    prop_assert_eq!(v.to_bits(), simd.to_bits());
                }
                // The wrong form, or a row one value short: errors.
                let other_form = if bf16_weights {
                    ActForms::F16
                } else {
                    ActForms::BF16
                };
                let mut other = QuantizedVector::new();
                other.quantize_forms(&x, other_form).unwrap();
                if n > 0 {
                    if bf16_weights {
                        let w = vec![bf16::ONE; n];
                        prop_assert!(kernel.dot_bf16_weights(&w, &other).is_err());
                        prop_assert!(kernel.dot_bf16_weights(&w[1..], &xq).is_err());
                        prop_assert!(kernel
                            .dot_bf16_weights_x4(&w, [&xq, &xq, &other, &xq])
                            .is_err());
                    } else {
                        let w = vec![f16::ONE; n];
                        prop_assert!(kernel.dot_f16_weights(&w, &other).is_err());
                        prop_assert!(kernel.dot_f16_weights(&w[1..], &xq).is_err());
                        prop_assert!(kernel
                            .dot_f16_weights_x4(&w, [&xq, &xq, &other, &xq])
                            .is_err());
                    }
                }
                Ok(())
            })
            .unwrap();
    });
}

/// The scalar F16 and BF16 dots sum exact products in f64: within
/// `2^-24` of the exact sum's magnitude plus `n * 2^-53` of the sum of
/// magnitudes (and `2^-149` per underflowing BF16 product).
fn scalar_float_dots_are_near_exact() {
    let mut runner = TestRunner::new(config(128));
    runner
        .run(&float_operands(), |(bits, x)| {
            let n = x.len();
            let mut xq = QuantizedVector::new();
            xq.quantize_forms(&x, ActForms::F16.union(ActForms::BF16))
                .unwrap();
            let wh: Vec<f16> = bits[..n]
                .iter()
                .map(|&b| f16::from_bits(b & 0xbfff))
                .collect();
            let wb: Vec<bf16> = bits[..n]
                .iter()
                .map(|&b| bf16::from_bits(b & 0xbfff))
                .collect();
            let check = |got: f32, w: Vec<f64>, r: Vec<f64>| {
                let exact: f64 = w.iter().zip(&r).map(|(a, b)| a * b).sum();
                let mag: f64 = w.iter().zip(&r).map(|(a, b)| (a * b).abs()).sum();
                let bound = exact.abs() * 2f64.powi(-24)
                    + mag * n as f64 * 2f64.powi(-53)
                    + n as f64 * 2f64.powi(-149);
                (f64::from(got) - exact).abs() <= bound
            };
            let r16 = x[..n].iter().map(|&v| f64::from(f16::from_f32(v).to_f32()));
            let r16: Vec<f64> = r16.collect();
            let rb: Vec<f64> = x[..n]
                .iter()
                .map(|&v| f64::from(bf16::from_f32(v).to_f32()))
                .collect();
            let got = Kernel::Scalar.dot_f16_weights(&wh, &xq).unwrap();
            let w: Vec<f64> = wh.iter().map(|v| f64::from(v.to_f32())).collect();
            prop_assert!(check(got, w, r16), "f16 {}", got);
            let got = Kernel::Scalar.dot_bf16_weights(&wb, &xq).unwrap();
            let w: Vec<f64> = wb.iter().map(|v| f64::from(v.to_f32())).collect();
            prop_assert!(check(got, w, rb), "bf16 {}", got);
            Ok(())
        })
        .unwrap();
}

fn avx2_f16_weight_dot_matches_scalar() {
    float_dot_matches_scalar(Kernel::Avx2, false, "avx2_f16_weight_dot_matches_scalar");
}

fn avx2_bf16_weight_dot_matches_scalar() {
    float_dot_matches_scalar(Kernel::Avx2, true, "avx2_bf16_weight_dot_matches_scalar");
}

fn neon_f16_weight_dot_matches_scalar() {
    float_dot_matches_scalar(Kernel::Neon, false, "neon_f16_weight_dot_matches_scalar");
}

fn neon_bf16_weight_dot_matches_scalar() {
    float_dot_matches_scalar(Kernel::Neon, true, "neon_bf16_weight_dot_matches_scalar");
}

fn scalar_matvec_matches_dot() {
    matvec_matches_dot(Kernel::Scalar, "scalar_matvec_matches_dot");
}

fn unavailable_kernels_are_errors() {
    for k in Kernel::ALL {
        if !k.is_available() {
            let x = QuantizedVector::new();
            assert_eq!(k.dot_q8_0(&[], &x), Err(KernelError::Unavailable(k)));
        }
    }
    assert!(Kernel::selected().is_available());
}

/// One test of this file: its name, the kernel it needs (reported as
/// ignored where the CPU lacks it), and its body.
struct Trial {
    name: &'static str,
    kernel: Option<Kernel>,
    body: fn(),
}

macro_rules! trials {
    ($( $name:ident $(on $kernel:ident)? ),* $(,)?) => {
        vec![$(Trial {
            name: stringify!($name),
            kernel: None $(.or(Some(Kernel::$kernel)))?,
            body: $name,
        }),*]
    };
}

fn all_trials() -> Vec<Trial> {
    trials![
        quantize_matches_ggml_reference,
        quantize_rounds_exact_halves_like_ggml,
        partial_blocks_are_errors,
        dequantize_is_within_half_a_step,
        edge_values,
        scalar_dot_is_within_bound_of_exact,
        scalar_float_dots_are_near_exact,
        scalar_matvec_matches_dot on Scalar,
        unavailable_kernels_are_errors,
        avx2_quantize_matches_scalar on Avx2,
        avx2_dot_matches_scalar on Avx2,
        avx2_matvec_matches_dot on Avx2,
        avx2_f32_dot_matches_scalar on Avx2,
        avx2_q4_k_dot_matches_scalar on Avx2,
        avx2_q5_k_dot_matches_scalar on Avx2,
        avx2_q6_k_dot_matches_scalar on Avx2,
        avx2_f16_weight_dot_matches_scalar on Avx2,
        avx2_bf16_weight_dot_matches_scalar on Avx2,
        avx512vnni_dot_matches_scalar on Avx512Vnni,
        avx512vnni_matvec_matches_dot on Avx512Vnni,
        avxvnni_dot_matches_scalar on AvxVnni,
        avxvnni_matvec_matches_dot on AvxVnni,
        avxvnni_equals_avx512vnni_bit_for_bit on AvxVnni,
        neon_dot_matches_scalar on Neon,
        neon_matvec_matches_dot on Neon,
        neon_f32_dot_matches_scalar on Neon,
        neon_f16_weight_dot_matches_scalar on Neon,
        neon_bf16_weight_dot_matches_scalar on Neon,
        neon_dot_dot_matches_scalar on NeonDot,
        neon_dot_matvec_matches_dot on NeonDot,
        neon_dot_f32_dot_matches_scalar on NeonDot,
        neon_dot_equals_neon_bit_for_bit on NeonDot,
    ]
}

enum Outcome {
    Passed,
    Failed,
    Ignored(String),
}

/// A libtest-like runner: takes name filters, `--exact`, `--skip NAME`,
/// `--list`, `--ignored`, `--include-ignored` and `--test-threads N`
/// (other libtest flags are accepted and ignored), prints `test NAME ...
/// ok|FAILED|ignored, REASON` and libtest's summary line, then
/// `kernels exercised: ...` and `kernels not on this CPU: ...`.
fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut filters, mut skips) = (Vec::new(), Vec::new());
    let (mut exact, mut list, mut only_ignored, mut include_ignored) = (false, false, false, false);
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--exact" => exact = true,
            "--list" => list = true,
            "--ignored" => only_ignored = true,
            "--include-ignored" => include_ignored = true,
            "--skip" => skips.extend(args.next()),
            "--test-threads" => threads = args.next().and_then(|n| n.parse().ok()).unwrap_or(1),
            "--format" | "--color" | "--logfile" | "-Z" => drop(args.next()),
            a if a.starts_with("--test-threads=") => {
                threads = a["--test-threads=".len()..].parse().unwrap_or(1);
            }
            a if a.starts_with('-') => {}
            a => filters.push(a.to_owned()),
        }
    }
    let all = all_trials();
    let total = all.len();
    let chosen: Vec<Trial> = all
        .into_iter()
        .filter(|t| {
            let hit = |f: &String| {
                if exact {
                    t.name == f
                } else {
                    t.name.contains(f.as_str())
                }
            };
            (filters.is_empty() || filters.iter().any(hit)) && !skips.iter().any(hit)
        })
        .collect();
    if list {
        for t in &chosen {
            println!("{}: test", t.name);
        }
        return ExitCode::SUCCESS;
    }
    let filtered_out = total - chosen.len();
    println!("\nrunning {} tests", chosen.len());
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<(usize, Outcome)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, chosen.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(t) = chosen.get(i) else { break };
                let lacking = t.kernel.filter(|k| !k.is_available());
                let outcome = match lacking {
                    Some(k) if !include_ignored => Outcome::Ignored(format!("CPU lacks {k:?}")),
                    _ if only_ignored && lacking.is_none() => continue,
                    _ => match std::panic::catch_unwind(t.body) {
                        Ok(()) => Outcome::Passed,
                        Err(_) => Outcome::Failed,
                    },
                };
                let line = match &outcome {
                    Outcome::Passed => format!("test {} ... ok", t.name),
                    Outcome::Failed => format!("test {} ... FAILED", t.name),
                    Outcome::Ignored(why) => format!("test {} ... ignored, {why}", t.name),
                };
                let _ = writeln!(std::io::stdout().lock(), "{line}");
                outcomes.lock().unwrap().push((i, outcome));
            });
        }
    });
    let outcomes = outcomes.into_inner().unwrap();
    let count = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|(_, o)| f(o)).count();
    let passed = count(|o| matches!(o, Outcome::Passed));
    let failed = count(|o| matches!(o, Outcome::Failed));
    let ignored = count(|o| matches!(o, Outcome::Ignored(_)));
    if failed > 0 {
        println!("\nfailures:");
        for (i, o) in &outcomes {
            if matches!(o, Outcome::Failed) {
                println!("    {}", chosen[*i].name);
            }
        }
    }
    println!(
        "\ntest result: {}. {passed} passed; {failed} failed; {ignored} ignored; 0 measured; \
         {filtered_out} filtered out; finished in {:.2}s",
        if failed == 0 { "ok" } else { "FAILED" },
        started.elapsed().as_secs_f64()
    );
    // A kernel counts as exercised when at least one of its suites ran and
    // passed here; the lists are in `Kernel::ALL` order.
    let (mut exercised, mut lacking) = (Vec::new(), Vec::new());
    for k in Kernel::ALL {
        let ran = outcomes
            .iter()
            .any(|(i, o)| chosen[*i].kernel == Some(k) && matches!(o, Outcome::Passed));
        if ran {
            exercised.push(format!("{k:?}"));
        } else if !k.is_available() {
            lacking.push(format!("{k:?}"));
        }
    }
    println!("kernels exercised: {}", exercised.join(" "));
    println!("kernels not on this CPU: {}\n", lacking.join(" "));
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(101)
    }
}
