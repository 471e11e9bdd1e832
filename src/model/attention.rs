//! Causal attention over the KV cache, split by position.
//!
//! A query's positions are cut into parts of [`PART`] positions, fixed by
//! the position alone. Each part is attended on its own (a softmax over
//! its own scores, a weighted sum of its own values) and leaves its
//! result with the largest score and the sum of the exponentials; the
//! parts are then merged in order: part `c`'s result is weighted by
//! `exp(max_c - max) * sum_c`, normalized over the parts.
//!
//! Why parts: a decode step's attention is one task per key/value head
//! otherwise, eight for Qwen3-0.6B, so a machine with more threads than
//! that left the rest idle while a long context was read. With parts a
//! head's positions spread over the threads too. The cut depends on
//! nothing but the position, never on the thread count, and the merge
//! runs in a fixed order, so every thread count gives the same bits; and
//! a prefill runs each token's attention through the same parts and
//! merge, so it gives decode's bits.
//!
//! A query with at most [`PART`] positions has one part, whose result is
//! the output as it is: the softmax and the weighted sum of the whole
//! context, with no merge.

use std::ops::Range;

use half::f16;

use super::kv_cache::try_filled;
use super::ops::exp;
use super::ModelError;
use crate::quant::dot::{Dispatch, KV_PREFETCH_ROWS};
use crate::unsafe_core::prefetch::prefetch_read;

/// Positions per part. A part's scores (two query heads of 256 `f32`)
/// stay in L1 while its values are summed, and a 511-token context gives
/// two parts per key/value head (16 tasks for Qwen3-0.6B's eight heads).
pub(crate) const PART: usize = 256;

/// Parts of a query that sees `n_pos` positions.
pub(crate) fn parts(n_pos: usize) -> usize {
    n_pos.div_ceil(PART)
}

/// The positions of part `c` of a query that sees `n_pos` positions.
pub(crate) fn part_range(c: usize, n_pos: usize) -> Range<usize> {
    c * PART..((c + 1) * PART).min(n_pos)
}

/// One layer's cached keys or values, head after head (`positions x
/// head_dim` values each, `head_stride` apart), in the cache's element
/// type.
#[derive(Clone, Copy, Debug)]
pub(crate) enum KvRows<'a> {
    F16(&'a [f16]),
    F32(&'a [f32]),
}

/// Everything one attention head needs beside its scratch space.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeadJob<'a> {
    /// The layer's cached keys.
    pub k: KvRows<'a>,
    /// The layer's cached values, laid out as the keys.
    pub v: KvRows<'a>,
    /// Values from one key/value head's first row to the next head's.
    pub head_stride: usize,
    /// Width of a head.
    pub head_dim: usize,
    /// `1 / sqrt(head_dim)`.
    pub scale: f32,
    /// Round the query and the softmax weights to `f16` before they meet
    /// the `f16` cache, as GGML does (true with an `f16` cache).
    pub round: bool,
    /// The dot kernel.
    pub dot: Dispatch,
}

/// The result of one part for one key/value head's group of query heads.
#[derive(Clone, Debug)]
pub(crate) struct Partial {
    /// The part's output per query head (`group * head_dim` values): its
    /// values weighted by its own softmax.
    pub out: Vec<f32>,
    /// Per query head: the part's largest score, and the sum (in `f64`,
    /// as every softmax normalizer here) of `exp(score - max)`.
    max: Vec<f32>,
    sum: Vec<f64>,
}

impl Partial {
    /// # Errors
    ///
    /// [`ModelError::Options`] if the memory cannot be allocated.
    pub(crate) fn new(group: usize, head_dim: usize) -> Result<Self, ModelError> {
        let what = || "attention scratch".to_owned();
        Ok(Self {
            out: try_filled(group.saturating_mul(head_dim), 0.0, what)?,
            max: try_filled(group, 0.0, what)?,
            sum: try_filled(group, 0.0, what)?,
        })
    }
}

/// Scores of one part: `group` rows of [`PART`].
#[derive(Clone, Debug)]
pub(crate) struct Scores(Vec<f32>);

impl Scores {
    /// # Errors
    ///
    /// [`ModelError::Options`] if the memory cannot be allocated.
    pub(crate) fn new(group: usize) -> Result<Self, ModelError> {
        let what = || "attention scores".to_owned();
        Ok(Self(try_filled(group.saturating_mul(PART), 0.0, what)?))
    }
}

/// Rounds a group's queries to `f16` where the job says so, once before
/// its parts read them.
pub(crate) fn prepare_queries(job: &HeadJob<'_>, q: &mut [f32]) {
    if job.round {
        job.dot.round_f16(q);
    }
}

/// Attention of the query heads of key/value head `kv` (queries `q`,
/// `group * head_dim` values, already through [`prepare_queries`]) over
/// the cached positions `range` (at most [`PART`]), into `p`.
///
/// The group's heads share their keys and values, so each cached row is
/// read from memory once for all of them. With an `f16` cache the heads
/// go two at a time through `scores_f16_x2` (blocks of positions, its own
/// bits) and `weighted_sum_f16_x2`, a lone last head through the one-head
/// kernels; the group's size is the model's, and a score depends on its
/// row and query alone, never on which part, block or thread computes it.
///
/// # Panics
///
/// If `range` is empty or longer than [`PART`], or the shapes disagree.
pub(crate) fn attend_part(
    job: &HeadJob<'_>,
    kv: usize,
    q: &[f32],
    range: Range<usize>,
    scores: &mut Scores,
    p: &mut Partial,
) {
    let hd = job.head_dim;
    let n = range.len();
    assert!(n > 0 && n <= PART, "attention part of {n} positions");
    let start = kv * job.head_stride + range.start * hd;
    // The cache is read in place: `f16` rows are widened inside the
    // kernels, never copied (a prefill would otherwise convert every row
    // once per later token).
    let row = |t: usize| start + t * hd..start + (t + 1) * hd;
    let queries = q.chunks_exact(hd).enumerate();
    let s = &mut scores.0;
    match job.k {
        // Query heads two at a time (Qwen3 has two to five per key/value
        // head): each key row is widened once for both, a part's rows in
        // one call. A lone last head takes one dot per row.
        KvRows::F16(k) => {
            let keys = &k[start..start + n * hd];
            let mut heads = q.chunks_exact(hd).zip(s.chunks_exact_mut(PART));
            while let Some((q0, s0)) = heads.next() {
                if let Some((q1, s1)) = heads.next() {
                    let out = [&mut s0[..n], &mut s1[..n]];
                    job.dot.scores_f16_x2([q0, q1], keys, job.scale, out);
                    continue;
                }
                for (t, (kr, st)) in keys.chunks_exact(hd).zip(&mut s0[..n]).enumerate() {
                    // The key row `KV_PREFETCH_ROWS` positions on (a hint:
                    // past the cached rows it reads nothing).
                    for line in (0..2 * hd).step_by(64) {
                        prefetch_read(&keys[t * hd..], KV_PREFETCH_ROWS * 2 * hd + line);
                    }
                    *st = job.dot.dot_f16(q0, kr) * job.scale;
                }
            }
        }
        KvRows::F32(k) => {
            for t in 0..n {
                let kr = &k[row(t)];
                for (h, qh) in queries.clone() {
                    s[h * PART + t] = job.dot.dot_f32(qh, kr) * job.scale;
                }
            }
        }
    }
    softmax_part(job, s, p, n);
    match job.v {
        // Query heads two at a time, as their scores: each value row is
        // widened once for both.
        KvRows::F16(v) => {
            let mut heads = s.chunks_exact(PART).zip(p.out.chunks_exact_mut(hd));
            while let Some((p0, o0)) = heads.next() {
                match heads.next() {
                    Some((p1, o1)) => {
                        let ps = [&p0[..n], &p1[..n]];
                        job.dot.weighted_sum_f16_x2([o0, o1], ps, &v[start..], hd);
                    }
                    None => job.dot.weighted_sum_f16(o0, &p0[..n], &v[start..], hd),
                }
            }
        }
        KvRows::F32(v) => {
            for (sh, out) in s.chunks_exact(PART).zip(p.out.chunks_exact_mut(hd)) {
                out.fill(0.0);
                for (t, &w) in sh[..n].iter().enumerate() {
                    for (o, &x) in out.iter_mut().zip(&v[row(t)]) {
                        *o += w * x;
                    }
                }
            }
        }
    }
}

/// Each query head's softmax over its first `n` scores in `s` (rows of
/// [`PART`]), its largest score and normalizer into `p`, the weights
/// rounded to `f16` where the job says so.
fn softmax_part(job: &HeadJob<'_>, s: &mut [f32], p: &mut Partial, n: usize) {
    for (h, sh) in s.chunks_exact_mut(PART).enumerate() {
        let sh = &mut sh[..n];
        (p.max[h], p.sum[h]) = job.dot.softmax(sh);
        if job.round {
            job.dot.round_f16(sh);
        }
    }
}

/// [`attend_part`] for two tokens of a prefill at once: the group's
/// queries `q[i]` of token `i` over the positions `ranges[i]` into
/// `p[i]`, where both ranges start at the same position and the first is
/// no longer than the second (the same part of two consecutive tokens).
/// Each token gets [`attend_part`]'s bits.
///
/// With an `f16` cache and an even group, the query heads go four at a
/// time (two heads of each token) through `scores_f16_x4` and
/// `weighted_sum_f16_x4`, each key and value row read and widened once
/// for both tokens: each query's scores and sums are what the pair
/// kernels give it, and the first token's scores of the rows past its
/// range (rows of the second token, already cached) are computed and
/// left unread. Otherwise the tokens go one after the other.
///
/// # Panics
///
/// As [`attend_part`], or if the ranges do not start together or the
/// first is the longer.
pub(crate) fn attend_part_pair(
    job: &HeadJob<'_>,
    kv: usize,
    q: [&[f32]; 2],
    ranges: [Range<usize>; 2],
    scores: [&mut Scores; 2],
    p: [&mut Partial; 2],
) {
    let hd = job.head_dim;
    let [r0, r1] = ranges;
    let [s0, s1] = scores;
    let [p0, p1] = p;
    let (n0, n1) = (r0.len(), r1.len());
    assert!(
        r0.start == r1.start && 0 < n0 && n0 <= n1 && n1 <= PART,
        "attention pair of parts {r0:?} and {r1:?}"
    );
    let even_group = hd > 0 && (q[0].len() / hd).is_multiple_of(2);
    let (KvRows::F16(k), KvRows::F16(v), true) = (job.k, job.v, even_group) else {
        attend_part(job, kv, q[0], r0, s0, p0);
        attend_part(job, kv, q[1], r1, s1, p1);
        return;
    };
    let start = kv * job.head_stride + r1.start * hd;
    // The cache is read in place, as in `attend_part`.
    let keys = &k[start..start + n1 * hd];
    fn heads(q: &[f32], hd: usize) -> impl Iterator<Item = (&[f32], &[f32])> {
        q.chunks_exact(2 * hd).map(move |pair| pair.split_at(hd))
    }
    // Head `h`'s first `n` scores.
    fn weights(s: &[f32], h: usize, n: usize) -> &[f32] {
        &s[h * PART..][..n]
    }
    let (sa, sb) = (&mut s0.0, &mut s1.0);
    for (h, ((a0, a1), (b0, b1))) in heads(q[0], hd).zip(heads(q[1], hd)).enumerate() {
        let (sa0, sa1) = sa[2 * h * PART..(2 * h + 2) * PART].split_at_mut(PART);
        let (sb0, sb1) = sb[2 * h * PART..(2 * h + 2) * PART].split_at_mut(PART);
        let out = [
            &mut sa0[..n1],
            &mut sa1[..n1],
            &mut sb0[..n1],
            &mut sb1[..n1],
        ];
        job.dot
            .scores_f16_x4([a0, a1, b0, b1], keys, job.scale, out);
    }
    softmax_part(job, sa, p0, n0);
    softmax_part(job, sb, p1, n1);
    for (h, (oa, ob)) in p0
        .out
        .chunks_exact_mut(2 * hd)
        .zip(p1.out.chunks_exact_mut(2 * hd))
        .enumerate()
    {
        let (oa0, oa1) = oa.split_at_mut(hd);
        let (ob0, ob1) = ob.split_at_mut(hd);
        let ps = [
            weights(sa, 2 * h, n0),
            weights(sa, 2 * h + 1, n0),
            weights(sb, 2 * h, n1),
            weights(sb, 2 * h + 1, n1),
        ];
        job.dot
            .weighted_sum_f16_x4([oa0, oa1, ob0, ob1], ps, &v[start..], hd);
    }
}

/// [`attend`] for two consecutive tokens of a prefill, the first seeing
/// `n_pos` positions and the second `n_pos + 1`: the parts both have go
/// through [`attend_part_pair`], the second token's last part, if it has
/// one more, through [`attend_part`]; each token's parts are merged in
/// order into `out[i]`. Each token gets [`attend`]'s bits.
pub(crate) fn attend_pair(
    job: &HeadJob<'_>,
    kv: usize,
    q: [&[f32]; 2],
    n_pos: usize,
    scores: [&mut Scores; 2],
    parts: [&mut [Partial]; 2],
    out: [&mut [f32]; 2],
) {
    let n = [n_pos, n_pos + 1];
    let np = n.map(self::parts);
    let [s0, s1] = scores;
    let [pa, pb] = parts;
    for c in 0..np[1] {
        let r1 = part_range(c, n[1]);
        if c < np[0] {
            let r0 = part_range(c, n[0]);
            attend_part_pair(
                job,
                kv,
                q,
                [r0, r1],
                [&mut *s0, &mut *s1],
                [&mut pa[c], &mut pb[c]],
            );
        } else {
            attend_part(job, kv, q[1], r1, s1, &mut pb[c]);
        }
    }
    let [o0, o1] = out;
    merge(pa[..np[0]].iter(), job.head_dim, o0);
    merge(pb[..np[1]].iter(), job.head_dim, o1);
}

/// The output of a group of query heads (`out`, `group * head_dim`
/// values) from its parts, in position order: the one part's output as it
/// is, else each part's output weighted by `exp(max_c - max) * sum_c`
/// over the parts' total, added part after part.
///
/// # Panics
///
/// If there are no parts or a part's shape is not `out`'s.
pub(crate) fn merge<'a, I>(parts: I, head_dim: usize, out: &mut [f32])
where
    I: Iterator<Item = &'a Partial> + Clone,
{
    let mut it = parts.clone();
    let first = it.next().expect("attention: no parts to merge");
    if it.next().is_none() {
        out.copy_from_slice(&first.out);
        return;
    }
    for (h, oh) in out.chunks_exact_mut(head_dim).enumerate() {
        let max = parts
            .clone()
            .map(|p| p.max[h])
            .fold(f32::NEG_INFINITY, f32::max);
        // A part whose every score is -inf (a dot product that
        // overflowed) weighs nothing, as those positions do in one
        // softmax; its own output, 0/0, is left out, not multiplied by 0.
        let counts = |p: &Partial| p.max[h] > f32::NEG_INFINITY || max == f32::NEG_INFINITY;
        let weight = |p: &Partial| f64::from(exp(p.max[h] - max)) * p.sum[h];
        let total: f64 = parts.clone().filter(|p| counts(p)).map(weight).sum();
        let at = h * head_dim..(h + 1) * head_dim;
        oh.fill(0.0);
        for p in parts.clone().filter(|p| counts(p)) {
            let w = (weight(p) / total) as f32;
            for (o, &x) in oh.iter_mut().zip(&p.out[at.clone()]) {
                *o += w * x;
            }
        }
    }
}

/// The attention output of one group for a query that sees `n_pos`
/// positions, its parts run one after another on this thread into
/// `parts` (at least [`parts`]`(n_pos)` of them).
pub(crate) fn attend(
    job: &HeadJob<'_>,
    kv: usize,
    q: &[f32],
    n_pos: usize,
    scores: &mut Scores,
    parts: &mut [Partial],
    out: &mut [f32],
) {
    let np = self::parts(n_pos);
    for (c, p) in parts[..np].iter_mut().enumerate() {
        attend_part(job, kv, q, part_range(c, n_pos), scores, p);
    }
    merge(parts[..np].iter(), job.head_dim, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `x` rounded to `f16`, as the cache stores it.
    fn to_f16(x: &[f32]) -> Vec<f16> {
        x.iter().map(|&v| f16::from_f32(v)).collect()
    }

    /// Attention scores `q . k * scale` of 200 and 197.5: far past where
    /// `exp` overflows in `f32`, as a head with large QK-norm weights gets.
    /// The weights are softmax([200, 197.5]) = [1 / (1 + e^-2.5), e^-2.5 /
    /// (1 + e^-2.5)], in both cache types (every input is exact in `f16`).
    #[test]
    fn attention_with_scores_past_exp_overflow() {
        let q = [10.0f32; 4];
        // One kv head of width 4, two positions.
        let k = [10.0f32, 10.0, 10.0, 10.0, 9.875, 9.875, 9.875, 9.875];
        let v = [1.0f32, 0.0, 2.0, 4.0, 0.0, 1.0, 2.0, -4.0];
        let w1 = (-2.5f64).exp() / (1.0 + (-2.5f64).exp());
        let w0 = 1.0 - w1;
        let want: Vec<f64> = (0..4)
            .map(|i| w0 * f64::from(v[i]) + w1 * f64::from(v[4 + i]))
            .collect();
        let (k16, v16) = (to_f16(&k), to_f16(&v));
        for (kr, vr, round, tol) in [
            (KvRows::F32(&k), KvRows::F32(&v), false, 1e-5),
            // The weights rounded to f16 as GGML rounds them.
            (KvRows::F16(&k16), KvRows::F16(&v16), true, 1e-2),
        ] {
            let job = HeadJob {
                k: kr,
                v: vr,
                head_stride: 8,
                head_dim: 4,
                scale: 0.5,
                round,
                dot: Dispatch::Scalar,
            };
            let mut qr = q;
            prepare_queries(&job, &mut qr);
            let mut out = [0.0f32; 4];
            let (mut s, mut parts) = (Scores::new(1).unwrap(), [Partial::new(1, 4).unwrap()]);
            attend(&job, 0, &qr, 2, &mut s, &mut parts, &mut out);
            for (i, (&got, &w)) in out.iter().zip(&want).enumerate() {
                assert!(
                    got.is_finite() && (f64::from(got) - w).abs() < tol,
                    "round {round}: out[{i}] = {got}, want {w}"
                );
            }
        }
    }

    #[test]
    fn attention_over_one_position_returns_its_value() {
        let k = [0.5f32; 8];
        let v: Vec<f32> = (0..8).map(|i| i as f32).collect();
        let job = HeadJob {
            k: KvRows::F32(&k),
            v: KvRows::F32(&v),
            head_stride: 4,
            head_dim: 4,
            scale: 0.5,
            round: false,
            dot: Dispatch::Scalar,
        };
        let q = [1.0, 2.0, 3.0, 4.0, -1.0, 0.0, 0.5, 2.0];
        let mut out = [0.0f32; 8];
        let (mut s, mut parts) = (Scores::new(2).unwrap(), [Partial::new(2, 4).unwrap()]);
        // Two kv heads of one position each (capacity 1, so 4 values apart):
        // heads 2 and 3 read kv head 1, values 4..8.
        attend(&job, 1, &q, 1, &mut s, &mut parts, &mut out);
        assert_eq!(out, [4.0, 5.0, 6.0, 7.0, 4.0, 5.0, 6.0, 7.0]);
    }

    /// Over more positions than a part holds, the merged parts give the
    /// softmax-weighted values of the whole context, computed in `f64`
    /// (within the rounding of `f32`, and of `f16` weights where the job
    /// rounds), for one, two and four query heads per group and both cache
    /// types, including a last part of one position.
    #[test]
    fn merged_parts_equal_one_softmax_over_every_position() {
        let hd = 8;
        for (n, group) in [
            (PART + 1, 1),
            (2 * PART + 37, 2),
            (3 * PART, 4),
            (700, 2),
            (300, 5),
        ] {
            // A deterministic spread of keys and values in [-1, 1).
            let val = |i: usize, salt: usize| {
                ((i * 2_654_435_761 + salt * 97) % 2001) as f32 / 1000.0 - 1.0
            };
            let k: Vec<f32> = (0..n * hd).map(|i| val(i, 1)).collect();
            let v: Vec<f32> = (0..n * hd).map(|i| val(i, 2)).collect();
            let q: Vec<f32> = (0..group * hd).map(|i| 3.0 * val(i, 3)).collect();
            let (k16, v16) = (to_f16(&k), to_f16(&v));
            for (kr, vr, round, tol) in [
                (KvRows::F32(&k), KvRows::F32(&v), false, 1e-5),
                (KvRows::F16(&k16), KvRows::F16(&v16), true, 2e-3),
            ] {
                let job = HeadJob {
                    k: kr,
                    v: vr,
                    head_stride: n * hd,
                    head_dim: hd,
                    scale: 1.0 / (hd as f32).sqrt(),
                    round,
                    dot: crate::quant::dot::selected().1,
                };
                let mut qr = q.clone();
                prepare_queries(&job, &mut qr);
                let mut out = vec![0.0f32; group * hd];
                let mut s = Scores::new(group).unwrap();
                let mut parts = vec![Partial::new(group, hd).unwrap(); parts(n)];
                attend(&job, 0, &qr, n, &mut s, &mut parts, &mut out);
                let (kf, vf): (Vec<f64>, Vec<f64>) = match (kr, vr) {
                    (KvRows::F16(a), KvRows::F16(b)) => (
                        a.iter().map(|x| f64::from(x.to_f32())).collect(),
                        b.iter().map(|x| f64::from(x.to_f32())).collect(),
                    ),
                    _ => (
                        k.iter().map(|&x| f64::from(x)).collect(),
                        v.iter().map(|&x| f64::from(x)).collect(),
                    ),
                };
                for h in 0..group {
                    let qh = &qr[h * hd..(h + 1) * hd];
                    let sc: Vec<f64> = (0..n)
                        .map(|t| {
                            let d: f64 = (0..hd).map(|i| f64::from(qh[i]) * kf[t * hd + i]).sum();
                            d * f64::from(job.scale)
                        })
                        .collect();
                    let m = sc.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = sc.iter().map(|s| (s - m).exp()).collect();
                    let z: f64 = e.iter().sum();
                    for i in 0..hd {
                        let want: f64 = (0..n).map(|t| e[t] / z * vf[t * hd + i]).sum();
                        let got = f64::from(out[h * hd + i]);
                        assert!(
                            (got - want).abs() < tol,
                            "n {n}, group {group}, round {round}: head {h} [{i}] = {got}, want {want}"
                        );
                    }
                }
            }
        }
    }

    /// A part whose every score overflowed to -inf weighs nothing in the
    /// merge (as its positions would in one softmax), not NaN.
    #[test]
    fn a_part_of_minus_infinite_scores_weighs_nothing() {
        let n = PART + 4;
        let mut k = vec![f32::MAX; n * 2];
        k[PART * 2..].fill(1.0);
        let v: Vec<f32> = (0..n * 2).map(|i| (i % 7) as f32).collect();
        let job = HeadJob {
            k: KvRows::F32(&k),
            v: KvRows::F32(&v),
            head_stride: n * 2,
            head_dim: 2,
            scale: 1.0,
            round: false,
            dot: Dispatch::Scalar,
        };
        let mut out = [0.0f32; 2];
        let mut s = Scores::new(1).unwrap();
        let mut parts = vec![Partial::new(1, 2).unwrap(); 2];
        attend(&job, 0, &[-1.0, -1.0], n, &mut s, &mut parts, &mut out);
        // The last four positions have equal scores: the mean of their values.
        let want: Vec<f32> = (0..2)
            .map(|i| (PART..n).map(|t| v[t * 2 + i]).sum::<f32>() / 4.0)
            .collect();
        assert_eq!(out.to_vec(), want);
    }

    /// `attend_pair` gives each of its two tokens `attend`'s bits, on every
    /// kernel: groups of one to five query heads, widths with and without
    /// a remainder of 32, positions around the parts' boundaries (the
    /// second token with one more part than the first), both cache types,
    /// the cache cut right after the second token's row (as
    /// `KvCache::layer` cuts it, so a read past it panics), scratch left
    /// dirty, and in one pass of each setting some cached values replaced
    /// by arbitrary `f16` bit patterns (infinities and NaN among them).
    #[cfg_attr(miri, ignore = "thousands of attention calls: slow under Miri")]
    #[test]
    fn attend_pair_is_two_attends() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let bits = |x: &[f32]| -> Vec<u32> {
            x.iter()
                .map(|v| if v.is_nan() { 0x7fc0_0000 } else { v.to_bits() })
                .collect()
        };
        for kernel in crate::quant::dot::Kernel::ALL {
            let Some(dot) = kernel.dispatch() else {
                continue;
            };
            for group in 1..=5usize {
                for hd in [8usize, 32, 40, 128] {
                    for n_pos in [1usize, 2, 15, 16, 17, 255, 256, 257, 511, 512] {
                        for hostile in [false, true] {
                            // Key/value head 1 of 2, each `n_pos + 1` rows.
                            let stride = (n_pos + 1) * hd;
                            let len = 2 * stride;
                            let mut val = |scale: f32| {
                                let u = (next() >> 40) as f32 / (1u64 << 24) as f32;
                                (2.0 * u - 1.0) * scale
                            };
                            let k: Vec<f32> = (0..len).map(|_| val(8.0)).collect();
                            let v: Vec<f32> = (0..len).map(|_| val(4.0)).collect();
                            let q: Vec<f32> = (0..2 * group * hd).map(|_| val(8.0)).collect();
                            let (mut k16, mut v16) = (to_f16(&k), to_f16(&v));
                            if hostile {
                                for x in k16.iter_mut().chain(v16.iter_mut()) {
                                    if next() % 50 == 0 {
                                        *x = f16::from_bits(next() as u16);
                                    }
                                }
                            }
                            for (kr, vr, round) in [
                                (KvRows::F16(&k16), KvRows::F16(&v16), true),
                                (KvRows::F32(&k), KvRows::F32(&v), false),
                            ] {
                                let job = HeadJob {
                                    k: kr,
                                    v: vr,
                                    head_stride: stride,
                                    head_dim: hd,
                                    scale: 1.0 / (hd as f32).sqrt(),
                                    round,
                                    dot,
                                };
                                let (mut qa, mut qb) =
                                    (q[..group * hd].to_vec(), q[group * hd..].to_vec());
                                prepare_queries(&job, &mut qa);
                                prepare_queries(&job, &mut qb);
                                let np = parts(n_pos + 1);
                                let partials = || vec![Partial::new(group, hd).unwrap(); np];
                                let dirty = || {
                                    let mut s = Scores::new(group).unwrap();
                                    s.0.fill(f32::NAN);
                                    s
                                };
                                let (mut s0, mut s1) = (dirty(), dirty());
                                let (mut p0, mut p1) = (partials(), partials());
                                let mut got = vec![vec![7.0f32; group * hd]; 2];
                                let [oa, ob] = &mut got[..] else {
                                    unreachable!()
                                };
                                attend_pair(
                                    &job,
                                    1,
                                    [&qa, &qb],
                                    n_pos,
                                    [&mut s0, &mut s1],
                                    [&mut p0, &mut p1],
                                    [oa, ob],
                                );
                                let (mut s, mut p) = (dirty(), partials());
                                let mut want = vec![vec![-7.0f32; group * hd]; 2];
                                attend(&job, 1, &qa, n_pos, &mut s, &mut p, &mut want[0]);
                                attend(&job, 1, &qb, n_pos + 1, &mut s, &mut p, &mut want[1]);
                                for t in 0..2 {
                                    assert!(
                                        bits(&got[t]) == bits(&want[t]),
                                        "{kernel:?} group {group} hd {hd} n_pos {n_pos} \
                                         f16 {round} hostile {hostile}: token {t} differs"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn parts_cut_by_position() {
        assert_eq!(parts(1), 1);
        assert_eq!(parts(PART), 1);
        assert_eq!(parts(PART + 1), 2);
        assert_eq!(part_range(0, PART + 1), 0..PART);
        assert_eq!(part_range(1, PART + 1), PART..PART + 1);
    }
}
