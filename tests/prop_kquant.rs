//! Property tests of the Q4_0 and K-quant formats: the scalar dot products
//! against the f64 dot product of the dequantized rows, with a derived
//! error bound; no panic on any bytes or any input floats; the zero-copy
//! casts; the typed length errors.
//!
//! # The error bound
//!
//! Write `u = 2^-24` (f32's unit roundoff) and, for a weight row `w` and an
//! activation row `x`, `M = sum_i |w_i| * |x_i|` over the terms before any
//! cancellation: for the K-quants with mins, `|w_i|` counts the scale part
//! and the min part separately (`|d * sc * q| + |dmin * m|`), since the
//! kernel rounds them separately. Then:
//!
//! * the f64 reference dots the dequantized f32 values: each weight is
//!   off by at most `3u` relative to its terms (`d * sc`, the product
//!   with `q`, `dmin * m`, the subtraction; Q4_0 and Q6_K's products are
//!   exact or one rounding) and each activation `d_x * q8` by `u`, so the
//!   reference is within `4u * M` of the exact dot (the f64 sum adds
//!   `2^-53`-sized errors, absorbed below);
//! * the kernel's integer sums are exact (`|aux32| < 2^24`, so exact in
//!   f32 too); each block rounds `d_w * d_x` and its product with the sum
//!   (2u), and the f32 lanes add `nb` block terms and then the 8 lanes and
//!   the mins (`nb + 9` more roundings on partial sums bounded by `M`).
//!
//! Together: `|kernel - reference| <= (nb + 16) * u * M`, to first order;
//! the test allows `1.01` times that (the second-order terms are below
//! `(nb + 16)^2 u^2`, far under 1%). Scales are drawn from the normal f16
//! range and activations from moderate floats, so no product is
//! subnormal (where relative bounds fail); hostile bytes are covered by
//! the no-panic tests instead.

use bytemuck::Zeroable;
use half::f16;
use inferno_cpu::quant::{
    dequantize_row_q4_0, dequantize_row_q4_k, dequantize_row_q5_k, dequantize_row_q6_k,
    dequantize_row_q8_0, dequantize_row_q8_k, dot_q4_0_act, dot_q4_0_q8_0, dot_q4_k_q8_k,
    dot_q5_k_q8_k, dot_q6_k_q8_k, quantize_row_q4_0, quantize_row_q4_k, quantize_row_q5_k,
    quantize_row_q6_k, quantize_row_q8_0_even, quantize_row_q8_k, BlockQ4K, BlockQ4_0, BlockQ5K,
    BlockQ6K, BlockQ8K, QuantError, QuantizedVector, QK_K,
};
use proptest::prelude::*;

const U: f64 = 1.0 / (1u64 << 24) as f64;

/// An f16 scale in the normal range, either sign, as bytes.
fn normal_scale() -> impl Strategy<Value = [u8; 2]> + Clone {
    (any::<bool>(), -10.0f32..2.0).prop_map(|(neg, e)| {
        let v = 2f32.powf(e);
        f16::from_f32(if neg { -v } else { v }).to_le_bytes()
    })
}

/// `n` random bytes.
fn bytes(n: usize) -> impl Strategy<Value = Vec<u8>> + Clone {
    prop::collection::vec(any::<u8>(), n)
}

fn q4_k_block() -> impl Strategy<Value = BlockQ4K> + Clone {
    (normal_scale(), normal_scale(), bytes(144)).prop_map(|(d, dmin, b)| {
        let mut blk: BlockQ4K = bytemuck::pod_read_unaligned(&b);
        blk.d = d;
        blk.dmin = dmin;
        blk
    })
}

fn q5_k_block() -> impl Strategy<Value = BlockQ5K> + Clone {
    (normal_scale(), normal_scale(), bytes(176)).prop_map(|(d, dmin, b)| {
        let mut blk: BlockQ5K = bytemuck::pod_read_unaligned(&b);
        blk.d = d;
        blk.dmin = dmin;
        blk
    })
}

fn q6_k_block() -> impl Strategy<Value = BlockQ6K> + Clone {
    (normal_scale(), bytes(210)).prop_map(|(d, b)| {
        let mut blk: BlockQ6K = bytemuck::pod_read_unaligned(&b);
        blk.d = d;
        blk
    })
}

fn q4_0_block() -> impl Strategy<Value = BlockQ4_0> + Clone {
    (normal_scale(), bytes(18)).prop_map(|(d, b)| {
        let mut blk: BlockQ4_0 = bytemuck::pod_read_unaligned(&b);
        blk.d = d;
        blk
    })
}

/// An activation row of `len` values: moderate floats at one of several
/// magnitudes, with some exact zeros.
fn activations(len: usize) -> impl Strategy<Value = Vec<f32>> + Clone {
    (
        prop::collection::vec(prop_oneof![8 => -4.0f32..4.0, 1 => Just(0.0f32)], len),
        -6i32..6,
    )
        .prop_map(|(v, e)| {
            let s = 2f32.powi(e);
            v.into_iter().map(|x| x * s).collect()
        })
}

/// Weight rows of 1..=4 blocks with matching activations.
fn rows<B: std::fmt::Debug>(
    block: impl Strategy<Value = B> + Clone,
    per_block: usize,
) -> impl Strategy<Value = (Vec<B>, Vec<f32>)> {
    (1usize..=4).prop_flat_map(move |nb| {
        (
            prop::collection::vec(block.clone(), nb),
            activations(nb * per_block),
        )
    })
}

fn f64_dot(w: &[f32], x: &[f32]) -> f64 {
    w.iter()
        .zip(x)
        .map(|(&a, &b)| f64::from(a) * f64::from(b))
        .sum()
}

/// `M` of the module documentation for blocks with 6-bit scales and mins
/// (Q4_K, Q5_K): `sum |d * sc * q| * |x| + |dmin * m| * |x|`.
fn magnitude_k4(
    d: &[f32],
    dmin: &[f32],
    scale_min: impl Fn(usize, usize) -> (u8, u8),
    levels: &[u8],
    x: &[f32],
) -> f64 {
    let mut m = 0.0;
    for (i, (&q, &xv)) in levels.iter().zip(x).enumerate() {
        let (b, j) = (i / QK_K, (i % QK_K) / 32);
        let (sc, mn) = scale_min(b, j);
        let w = f64::from(d[b]).abs() * f64::from(sc) * f64::from(q)
            + f64::from(dmin[b]).abs() * f64::from(mn);
        m += w * f64::from(xv).abs();
    }
    m
}

fn check_bound(got: f32, want: f64, nb: usize, m: f64) -> Result<(), TestCaseError> {
    let tol = 1.01 * (nb as f64 + 16.0) * U * m;
    prop_assert!(
        (f64::from(got) - want).abs() <= tol,
        "got {got:e}, want {want:e}, off by {:e}, bound {tol:e}",
        (f64::from(got) - want).abs()
    );
    Ok(())
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
    #![proptest_config(ProptestConfig::with_cases(cases(128)))]

    #[test]
    #[cfg_attr(miri, ignore = "proptest is too slow under Miri")]
    fn q4_k_dot_is_within_bound((w, xf) in rows(q4_k_block(), QK_K)) {
        let x = quantize_row_q8_k(&xf).unwrap();
        let xd = dequantize_row_q8_k(&x);
        let want = f64_dot(&dequantize_row_q4_k(&w), &xd);
        let levels: Vec<u8> = w.iter().flat_map(|b| b.levels()).collect();
        let d: Vec<f32> = w.iter().map(|b| b.d_f32()).collect();
        let dmin: Vec<f32> = w.iter().map(|b| b.dmin_f32()).collect();
        let m = magnitude_k4(&d, &dmin, |b, j| w[b].scale_min(j), &levels, &xd);
        check_bound(dot_q4_k_q8_k(&w, &x).unwrap(), want, w.len(), m)?;
    }

    #[test]
    #[cfg_attr(miri, ignore = "proptest is too slow under Miri")]
    fn q5_k_dot_is_within_bound((w, xf) in rows(q5_k_block(), QK_K)) {
        let x = quantize_row_q8_k(&xf).unwrap();
        let xd = dequantize_row_q8_k(&x);
        let want = f64_dot(&dequantize_row_q5_k(&w), &xd);
        let levels: Vec<u8> = w.iter().flat_map(|b| b.levels()).collect();
        let d: Vec<f32> = w.iter().map(|b| b.d_f32()).collect();
        let dmin: Vec<f32> = w.iter().map(|b| b.dmin_f32()).collect();
        let m = magnitude_k4(&d, &dmin, |b, j| w[b].scale_min(j), &levels, &xd);
        check_bound(dot_q5_k_q8_k(&w, &x).unwrap(), want, w.len(), m)?;
    }

    #[test]
    #[cfg_attr(miri, ignore = "proptest is too slow under Miri")]
    fn q6_k_dot_is_within_bound((w, xf) in rows(q6_k_block(), QK_K)) {
        let x = quantize_row_q8_k(&xf).unwrap();
        let xd = dequantize_row_q8_k(&x);
        let wd = dequantize_row_q6_k(&w);
        let want = f64_dot(&wd, &xd);
        let m: f64 = wd.iter().zip(&xd).map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs()).sum();
        check_bound(dot_q6_k_q8_k(&w, &x).unwrap(), want, w.len(), m)?;
    }

    #[test]
    #[cfg_attr(miri, ignore = "proptest is too slow under Miri")]
    fn q4_0_dot_is_within_bound((w, xf) in rows(q4_0_block(), 32)) {
        let x = quantize_row_q8_0_even(&xf).unwrap();
        let xd = dequantize_row_q8_0(&x);
        let wd = dequantize_row_q4_0(&w);
        let want = f64_dot(&wd, &xd);
        let m: f64 = wd.iter().zip(&xd).map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs()).sum();
        let got = dot_q4_0_q8_0(&w, &x).unwrap();
        check_bound(got, want, w.len(), m)?;
        // The quantized-vector form is the same kernel on the same values.
        let mut xq = QuantizedVector::new();
        xq.quantize_from(&xf).unwrap();
        prop_assert_eq!(dot_q4_0_act(&w, &xq).unwrap().to_bits(), got.to_bits());
    }

    /// Any bytes at all (NaN, infinite and subnormal scales, any levels)
    /// dequantize and dot without panicking, and every decoded level is in
    /// its format's range.
    #[test]
    #[cfg_attr(miri, ignore = "proptest is too slow under Miri")]
    fn any_bytes_decode_without_panic(raw in bytes(210 * 4), xb in bytes(292), offset in 0usize..4) {
        let raw = &raw[offset..];
        let q4k: Vec<BlockQ4K> = raw.chunks_exact(144).map(bytemuck::pod_read_unaligned).collect();
        let q5k: Vec<BlockQ5K> = raw.chunks_exact(176).map(bytemuck::pod_read_unaligned).collect();
        let q6k: Vec<BlockQ6K> = raw.chunks_exact(210).map(bytemuck::pod_read_unaligned).collect();
        let q40: Vec<BlockQ4_0> = raw.chunks_exact(18).map(bytemuck::pod_read_unaligned).collect();
        let x1: BlockQ8K = bytemuck::pod_read_unaligned(&xb);
        for b in &q4k {
            prop_assert!(b.levels().iter().all(|&l| l <= 15));
        }
        for b in &q5k {
            prop_assert!(b.levels().iter().all(|&l| l <= 31));
        }
        for b in &q6k {
            prop_assert!(b.levels().iter().all(|&l| (-32..=31).contains(&l)));
        }
        for b in &q40 {
            prop_assert!(b.levels().iter().all(|&l| (-8..=7).contains(&l)));
        }
        let _ = dequantize_row_q4_k(&q4k);
        let _ = dequantize_row_q5_k(&q5k);
        let _ = dequantize_row_q6_k(&q6k);
        let _ = dequantize_row_q4_0(&q40);
        let _ = dequantize_row_q8_k(&[x1]);
        let _ = dot_q4_k_q8_k(&q4k[..1], &[x1]).unwrap();
        let _ = dot_q5_k_q8_k(&q5k[..1], &[x1]).unwrap();
        let _ = dot_q6_k_q8_k(&q6k[..1], &[x1]).unwrap();
    }

    /// Any floats (NaN, infinities, subnormals, extremes) quantize without
    /// panicking in every format.
    #[test]
    #[cfg_attr(miri, ignore = "proptest is too slow under Miri")]
    fn any_floats_quantize_without_panic(x in prop::collection::vec(prop_oneof![
        4 => -10.0f32..10.0,
        1 => prop::sample::select(vec![
            0.0f32, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN,
            f32::MIN_POSITIVE, 1e-40, -1e-45, 1e-16, 65504.0 * 127.0, 1e30,
        ]),
        1 => any::<f32>(),
    ], QK_K)) {
        let _ = quantize_row_q4_0(&x).unwrap();
        let _ = quantize_row_q4_k(&x).unwrap();
        let _ = quantize_row_q5_k(&x).unwrap();
        let _ = quantize_row_q6_k(&x).unwrap();
        let q8 = quantize_row_q8_k(&x).unwrap();
        prop_assert_eq!(q8[0].bsums, BlockQ8K::sums_of(&q8[0].qs));
    }

    /// Q8_K round trip: finite input comes back within half a step (the
    /// step being `|d|`, itself rounded from `max / 127`, so one more ulp
    /// of `max` per level is allowed for).
    #[test]
    #[cfg_attr(miri, ignore = "proptest is too slow under Miri")]
    fn q8_k_round_trip_is_within_half_a_step(x in activations(2 * QK_K)) {
        let blocks = quantize_row_q8_k(&x).unwrap();
        let y = dequantize_row_q8_k(&blocks);
        for (b, (xs, ys)) in blocks.iter().zip(x.chunks(QK_K).zip(y.chunks(QK_K))) {
            prop_assert_eq!(b.bsums, BlockQ8K::sums_of(&b.qs));
            prop_assert!(b.qs.iter().all(|&q| q >= -127));
            let d = f64::from(b.d).abs();
            for (&a, &c) in xs.iter().zip(ys) {
                let tol = d / 2.0 + 128.0 * d * 2.0 * U + 1e-30;
                prop_assert!((f64::from(a) - f64::from(c)).abs() <= tol, "{a} {c} {d}");
            }
        }
    }

    /// Lengths that are not whole blocks are typed errors, never panics.
    #[test]
    #[cfg_attr(miri, ignore = "proptest is too slow under Miri")]
    fn partial_blocks_are_errors(len in 0usize..1100) {
        let x = vec![0.5f32; len];
        let k = quantize_row_q4_k(&x).map(|b| b.len());
        if len % QK_K == 0 {
            prop_assert_eq!(k, Ok(len / QK_K));
        } else {
            prop_assert_eq!(k, Err(QuantError::RowNotWholeBlocks { len, block: QK_K }));
        }
        prop_assert_eq!(quantize_row_q5_k(&x).is_ok(), len % QK_K == 0);
        prop_assert_eq!(quantize_row_q6_k(&x).is_ok(), len % QK_K == 0);
        prop_assert_eq!(quantize_row_q8_k(&x).is_ok(), len % QK_K == 0);
        let r = quantize_row_q4_0(&x).map(|b| b.len());
        if len % 32 == 0 {
            prop_assert_eq!(r, Ok(len / 32));
        } else {
            prop_assert_eq!(r, Err(QuantError::RowNotWholeBlocks { len, block: 32 }));
        }
    }
}

#[test]
fn casts_from_file_bytes_at_any_offset() {
    let raw = vec![0x5au8; 1 + 2 * 210];
    for off in 0..2 {
        let n = |size: usize| (raw.len() - off) / size * size;
        let b = &raw[off..];
        assert_eq!(
            bytemuck::try_cast_slice::<u8, BlockQ4K>(&b[..n(144)])
                .unwrap()
                .len(),
            n(144) / 144
        );
        assert_eq!(
            bytemuck::try_cast_slice::<u8, BlockQ5K>(&b[..n(176)])
                .unwrap()
                .len(),
            n(176) / 176
        );
        assert_eq!(
            bytemuck::try_cast_slice::<u8, BlockQ6K>(&b[..n(210)])
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            bytemuck::try_cast_slice::<u8, BlockQ4_0>(&b[..n(18)])
                .unwrap()
                .len(),
            n(18) / 18
        );
        // A length that is not whole blocks is an error, not a panic.
        assert!(bytemuck::try_cast_slice::<u8, BlockQ4K>(&b[..145]).is_err());
    }
}

#[test]
fn dot_and_dequantize_lengths_are_checked() {
    let w = [BlockQ4K::zeroed(); 2];
    let x = [BlockQ8K::zeroed(); 3];
    assert_eq!(
        dot_q4_k_q8_k(&w, &x),
        Err(QuantError::BlockCountMismatch {
            weights: 2,
            activations: 3
        })
    );
    assert!(dot_q5_k_q8_k(&[BlockQ5K::zeroed()], &x).is_err());
    assert!(dot_q6_k_q8_k(&[BlockQ6K::zeroed()], &x).is_err());
    let mut xq = QuantizedVector::new();
    xq.quantize_from(&[1.0; 64]).unwrap();
    assert_eq!(
        dot_q4_0_act(&[BlockQ4_0::zeroed()], &xq),
        Err(QuantError::BlockCountMismatch {
            weights: 1,
            activations: 2
        })
    );
    assert_eq!(
        inferno_cpu::quant::dequantize_row_q6_k_into(&[BlockQ6K::zeroed()], &mut [0.0; 255]),
        Err(QuantError::OutputLength {
            expected: 256,
            got: 255
        })
    );
}

#[test]
fn block_layouts_match_the_gguf_type_table() {
    use inferno_cpu::gguf::GgmlType;
    let cases = [
        (
            GgmlType::Q4_0,
            size_of::<BlockQ4_0>(),
            inferno_cpu::quant::QK4_0,
        ),
        (GgmlType::Q4_K, size_of::<BlockQ4K>(), QK_K),
        (GgmlType::Q5_K, size_of::<BlockQ5K>(), QK_K),
        (GgmlType::Q6_K, size_of::<BlockQ6K>(), QK_K),
        (GgmlType::Q8_K, size_of::<BlockQ8K>(), QK_K),
    ];
    for (t, size, block) in cases {
        assert_eq!(t.type_size(), size as u64, "{t:?}");
        assert_eq!(t.block_size(), block as u64, "{t:?}");
    }
}
