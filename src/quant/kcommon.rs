//! Pieces shared by the Q4_0 and K-quant formats: GGML's rounding function,
//! the packed 6-bit scales of Q4_K and Q5_K, the two scale searches of
//! GGML's reference quantizers, and the length checks.
//!
//! Every float operation here happens in the order GGML's C code performs
//! it (`ggml/src/ggml-quants.c`), with no fused multiply-adds: Rust never
//! contracts `a * b + c`, and GGML's reference quantizers live in
//! `libggml-base`, which is built for the baseline instruction set, so its
//! compiler cannot fuse them either. That is what makes the quantizers write
//! the same bytes as llama.cpp.

use half::f16;

use super::block::f16_bits_to_f32;
use super::quantize::QuantError;

/// Number of weights in one K-quant super-block (GGML's `QK_K`).
pub const QK_K: usize = 256;

/// GGML's `GROUP_MAX_EPS`: a group whose largest magnitude is below this
/// counts as all zeros.
pub(crate) const GROUP_MAX_EPS: f32 = 1e-15;

/// GGML's `nearest_int`: rounds to nearest, ties to even, by adding
/// `1.5 * 2^23` and reading the low mantissa bits.
///
/// Exact for `|v| <= 2^22 - 1`, where it equals `v.round_ties_even()`.
/// Outside that range (and for NaN and infinities) GGML's C code asserts in
/// debug builds and returns these same bits in release builds; this keeps
/// the release behaviour, so quantizing extreme rows stays deterministic
/// and byte-identical, and never panics.
#[inline(always)]
pub(crate) fn nearest_int(v: f32) -> i32 {
    let bits = (v + 12_582_912.0).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

/// An f16 stored as little-endian bytes, widened exactly to f32.
#[inline(always)]
pub(crate) fn f16_le_to_f32(bytes: [u8; 2]) -> f32 {
    f16_bits_to_f32(u16::from_le_bytes(bytes))
}

/// An f32 narrowed to f16 (to nearest, ties to even, as GGML's
/// `GGML_FP32_TO_FP16`) as little-endian bytes.
#[inline(always)]
pub(crate) fn f32_to_f16_le(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_le_bytes()
}

/// The 6-bit scale and min of sub-block `j` (0..8) from Q4_K/Q5_K's 12
/// packed bytes (GGML's `get_scale_min_k4`).
///
/// Bytes 0..4 hold scales 0..4 in their low 6 bits, bytes 4..8 mins 0..4;
/// bytes 8..12 hold the low 4 bits of scales 4..8 (low nibble) and mins
/// 4..8 (high nibble), whose top 2 bits sit in the spare top bits of bytes
/// 0..4 (scales) and 4..8 (mins).
#[inline(always)]
pub(crate) fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// All eight scales then all eight mins of a Q4_K/Q5_K block, each as
/// [`scale_min_k4`] gives it, computed on 32-bit words without a branch:
/// the formula the x86 kernels run in vector registers
/// (`dot::x86_64::avx2::k4_head`), checked here against the per-scale
/// decoding.
#[cfg(test)]
pub(crate) fn scales_mins_k4(q: &[u8; 12]) -> [u8; 16] {
    let word = |i: usize| u32::from_le_bytes([q[4 * i], q[4 * i + 1], q[4 * i + 2], q[4 * i + 3]]);
    let (w0, w1, w2) = (word(0), word(1), word(2));
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const TOP2: u32 = 0x0303_0303;
    // Scales 0-3: low six bits of bytes 0-3; 4-7: low nibbles of bytes
    // 8-11 with the top two bits of bytes 0-3 above them.
    let s_lo = w0 & LOW6;
    let s_hi = (w2 & LOW4) | (((w0 >> 6) & TOP2) << 4);
    // Mins 0-3: low six bits of bytes 4-7; 4-7: high nibbles of bytes
    // 8-11 with the top two bits of bytes 4-7 above them.
    let m_lo = w1 & LOW6;
    let m_hi = ((w2 >> 4) & LOW4) | (((w1 >> 6) & TOP2) << 4);
    let mut out = [0u8; 16];
    for (o, w) in out.chunks_exact_mut(4).zip([s_lo, s_hi, m_lo, m_hi]) {
        o.copy_from_slice(&w.to_le_bytes());
    }
    out
}

/// Packs eight 6-bit scales and mins into Q4_K/Q5_K's 12 bytes, the
/// inverse of [`scale_min_k4`].
pub(crate) fn pack_scale_min_k4(ls: &[u8; 8], lm: &[u8; 8]) -> [u8; 12] {
    let mut q = [0u8; 12];
    for j in 0..8 {
        let (s, m) = (ls[j], lm[j]);
        if j < 4 {
            q[j] = s;
            q[j + 4] = m;
        } else {
            q[j + 4] = (s & 0xf) | ((m & 0xf) << 4);
            q[j - 4] |= (s >> 4) << 6;
            q[j] |= (m >> 4) << 6;
        }
    }
    q
}

/// GGML's `make_qkx2_quants` for 32 values with the squared error: finds a
/// scale and a min so that `x[i] ~ scale * l[i] - the_min` with
/// `l[i]` in `0..=nmax`, minimising the weighted squared error over
/// `nstep + 1` candidate scales around `nmax / (max - min)`. Writes the
/// levels to `l`, returns `(scale, the_min)`.
pub(crate) fn make_qkx2_quants(
    x: &[f32; 32],
    weights: &[f32; 32],
    nmax: i32,
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    l: &mut [u8; 32],
) -> (f32, f32) {
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for (&xi, &w) in x.iter().zip(weights).skip(1) {
        if xi < min {
            min = xi;
        }
        if xi > max {
            max = xi;
        }
        sum_w += w;
        sum_x += w * xi;
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.fill(0);
        return (0.0, -min);
    }
    let nmax_f = nmax as f32;
    let iscale = nmax_f / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for ((li, &xi), &w) in l.iter_mut().zip(x).zip(weights) {
        let q = nearest_int(iscale * (xi - min)).clamp(0, nmax);
        *li = q as u8; // 0..=nmax
        let diff = scale * q as f32 + min - xi;
        best_error += w * (diff * diff);
    }
    let mut laux = [0u8; 32];
    for is in 0..=nstep {
        let iscale = (rmin + rdelta * is as f32 + nmax_f) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for ((la, &xi), &w) in laux.iter_mut().zip(x).zip(weights) {
            let q = nearest_int(iscale * (xi - min)).clamp(0, nmax);
            *la = q as u8;
            let qf = q as f32;
            sum_l += w * qf;
            sum_l2 += w * qf * qf;
            sum_xl += w * qf * xi;
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for ((&la, &xi), &w) in laux.iter().zip(x).zip(weights) {
                let diff = this_scale * f32::from(la) + this_min - xi;
                cur_error += w * (diff * diff);
            }
            if cur_error < best_error {
                *l = laux;
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// GGML's `make_qx_quants` for 16 values with `rmse_type = 1` and no
/// importance weights (each value weighted by its square), as Q6_K's
/// reference quantizer calls it: a symmetric scale with levels
/// `l[i] - nmax` in `-nmax..nmax`, the best of 19 candidate scales around
/// `-max / nmax`. Writes the offset levels (`0..2 * nmax`) to `l`, returns
/// the scale.
pub(crate) fn make_qx_quants_rmse1(x: &[f32; 16], nmax: i32, l: &mut [u8; 16]) -> f32 {
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &xi in x {
        let ax = xi.abs();
        if ax > amax {
            amax = ax;
            max = xi;
        }
    }
    if amax < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let nmax_f = nmax as f32;
    let level = |iscale: f32, xi: f32| nearest_int(iscale * xi).clamp(-nmax, nmax - 1);
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for &xi in x {
            let lf = level(iscale, xi) as f32;
            let w = xi * xi;
            sumlx += w * xi * lf;
            suml2 += w * lf * lf;
        }
        (sumlx, suml2)
    };
    let write = |iscale: f32, l: &mut [u8; 16]| {
        for (li, &xi) in l.iter_mut().zip(x) {
            *li = (level(iscale, xi) + nmax) as u8; // 0..2 * nmax
        }
    };
    let iscale = -nmax_f / max;
    write(iscale, l);
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9i32..=9 {
        if is == 0 {
            continue;
        }
        let iscale = -(nmax_f + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            write(iscale, l);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// Number of blocks of `block` values in a row of `len` values.
pub(crate) fn whole_blocks(len: usize, block: usize) -> Result<usize, QuantError> {
    if len.is_multiple_of(block) {
        Ok(len / block)
    } else {
        Err(QuantError::RowNotWholeBlocks { len, block })
    }
}

/// Checks that an output slice has the length the input requires.
pub(crate) fn check_output(expected: usize, got: usize) -> Result<(), QuantError> {
    if expected == got {
        Ok(())
    } else {
        Err(QuantError::OutputLength { expected, got })
    }
}

/// Checks that the two operands of a dot product hold as many blocks.
pub(crate) fn check_blocks(weights: usize, activations: usize) -> Result<(), QuantError> {
    if weights == activations {
        Ok(())
    } else {
        Err(QuantError::BlockCountMismatch {
            weights,
            activations,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn scales_mins_k4_equals_scale_min_k4() {
        let mut g = crate::synth::SplitMix64::new(5);
        for _ in 0..2000 {
            let q: [u8; 12] = core::array::from_fn(|_| g.next_u64() as u8);
            let all = super::scales_mins_k4(&q);
            for j in 0..8 {
                assert_eq!(
                    (all[j], all[8 + j]),
                    super::scale_min_k4(j, &q),
                    "{q:?} {j}"
                );
            }
        }
    }

    use super::*;

    #[test]
    fn nearest_int_rounds_ties_to_even() {
        for (v, want) in [
            (0.5f32, 0),
            (1.5, 2),
            (2.5, 2),
            (-0.5, 0),
            (-1.5, -2),
            (-2.5, -2),
            (3.49, 3),
            (-3.51, -4),
            (4_194_303.0, 4_194_303),
            (-4_194_303.0, -4_194_303),
        ] {
            assert_eq!(nearest_int(v), want, "{v}");
        }
        // Out of range: no panic, GGML's release-build bits.
        let _ = nearest_int(f32::NAN);
        let _ = nearest_int(f32::INFINITY);
        let _ = nearest_int(-1e30);
    }

    #[test]
    fn scale_min_packing_round_trips() {
        let ls = [0, 1, 17, 63, 32, 5, 63, 48];
        let lm = [63, 2, 0, 31, 33, 62, 7, 16];
        let q = pack_scale_min_k4(&ls, &lm);
        for j in 0..8 {
            assert_eq!(scale_min_k4(j, &q), (ls[j], lm[j]), "{j}");
        }
    }

    #[test]
    fn qx_quants_of_zeros_is_zero() {
        let mut l = [9u8; 16];
        assert_eq!(make_qx_quants_rmse1(&[0.0; 16], 32, &mut l), 0.0);
        assert_eq!(l, [0; 16]);
    }
}
