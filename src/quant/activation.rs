//! Activations quantized to Q8_0 (or Q8_K, or rounded to f16 or bf16)
//! once per matvec, in reusable buffers.
//!
//! A matvec reads each weight once but the activation once per row, so the
//! activation is quantized up front into a layout built for the kernels:
//! each block keeps its 32 `i8` values aligned for vector loads, its scale
//! already widened to f32, and the per-lane sums the VNNI kernels need to
//! correct their unsigned-by-signed product. The values are exactly GGML's
//! Q8_0 quantization of the input, ties rounded to even as GGML rounds
//! activations ([`QuantizedVector::to_blocks`] returns
//! them as [`BlockQ8_0`]).
//!
//! F16 and BF16 weights read the activation rounded to f16 or bfloat16
//! (ties to even), as GGML rounds it before its `ggml_vec_dot_f16` and
//! `ggml_vec_dot_bf16`; see [`quant::float`](super::float) for why. Those
//! forms keep the rounded values widened back to f32.

use std::ops::Range;

use bytemuck::{Pod, Zeroable};
use half::f16;

use super::block::{BlockQ8_0, QK8_0};
use super::dot::{selected, Dispatch};
use super::float::{round_bf16, round_f16};
use super::kcommon::QK_K;
use super::kgroup::{Q4_0Act, Q8Group, Q8KAct, Q8KGroup, GROUP_ROWS};
use super::q8_k::BlockQ8K;
use super::quantize::{blocks_for, quantize_block_q8_0_even, QuantError};

/// One quantized activation block, laid out for the kernels.
///
/// Invariant (relied on by the AVX2 kernel's sign trick): every `qs` value
/// lies in `-127..=127`, which [`quantize_block_q8_0`](super::quantize_block_q8_0) guarantees.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C, align(32))]
pub(crate) struct ActBlock {
    /// The 32 quantized values.
    pub(crate) qs: [i8; QK8_0],
    /// `-128 * (qs[4j] + qs[4j+1] + qs[4j+2] + qs[4j+3])` for lane `j`: what
    /// the VNNI kernels add to `sum((w + 128) * x)` per 4-byte lane to get
    /// `sum(w * x)` exactly.
    pub(crate) neg_bias: [i32; 8],
    /// The block's f16 scale, widened (exactly) to f32.
    pub(crate) d: f32,
    _pad: [u8; 28],
}

const _: () = assert!(core::mem::size_of::<ActBlock>() == 96);

impl ActBlock {
    /// The block for scale `d` and values `qs`, computing the lane sums.
    pub(crate) fn new(d: f16, qs: [i8; QK8_0]) -> Self {
        let mut neg_bias = [0i32; 8];
        let (lanes, _) = qs.as_chunks::<4>();
        for (b, lane) in neg_bias.iter_mut().zip(lanes) {
            *b = -128 * lane.iter().map(|&q| i32::from(q)).sum::<i32>();
        }
        Self::from_parts(d, qs, neg_bias)
    }

    /// The block from parts a kernel computed itself; `neg_bias` must be
    /// the lane sums [`ActBlock::new`] would compute.
    pub(crate) fn from_parts(d: f16, qs: [i8; QK8_0], neg_bias: [i32; 8]) -> Self {
        Self {
            qs,
            neg_bias,
            d: d.to_f32(),
            _pad: [0; 28],
        }
    }

    /// Quantizes one block with the portable code (ties to even, as GGML
    /// quantizes activations).
    pub(crate) fn quantize(x: &[f32; QK8_0]) -> Self {
        let (d, qs) = quantize_block_q8_0_even(x);
        Self::new(d, qs)
    }

    /// The block as GGML stores it (the f32 scale narrows back exactly).
    fn to_block(self) -> BlockQ8_0 {
        BlockQ8_0::new(f16::from_f32(self.d), self.qs)
    }
}

/// Two consecutive activation blocks laid out for 512-bit kernels: both
/// blocks' values side by side, both lane-sum vectors side by side, and
/// each block's scale repeated over its eight lanes, so a kernel loads each
/// with one 512-bit load and the low half of every register holds the even
/// block, the high half the odd one (the AVX-512 VNNI matmul, see
/// `quant::dot::x86_64::avx512vnni::dot_q8_x4_pairs`).
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C, align(64))]
pub(crate) struct PairBlock {
    pub(crate) qs: [i8; 2 * QK8_0],
    pub(crate) neg_bias: [i32; 16],
    pub(crate) d: [f32; 16],
}

const _: () = assert!(core::mem::size_of::<PairBlock>() == 192);

impl PairBlock {
    pub(crate) fn new(a: &ActBlock, b: &ActBlock) -> Self {
        let mut p = Self::zeroed();
        p.qs[..QK8_0].copy_from_slice(&a.qs);
        p.qs[QK8_0..].copy_from_slice(&b.qs);
        p.neg_bias[..8].copy_from_slice(&a.neg_bias);
        p.neg_bias[8..].copy_from_slice(&b.neg_bias);
        p.d[..8].fill(a.d);
        p.d[8..].fill(b.d);
        p
    }
}

/// Eight consecutive activation blocks laid out for the Q4_0 decode rows
/// of AVX2 (`quant::dot::x86_64::avx2_q8::dot_q4_0_groups`) and AVX-512
/// VNNI (`avx512vnni::dot_q4_0_groups`). AVX2 takes two weight blocks per
/// 256-bit register, block `p` in the low half and block `p + 4` in the
/// high half (`p < 4`), the 16 bytes of nibbles giving each block's first
/// 16 levels (low nibbles) and last 16 (high nibbles): so
/// `qs[chunk(p, l)]` holds `x_p[16l..16l + 16]` then
/// `x_{p+4}[16l..16l + 16]`. The chunks are ordered so that the 64 bytes
/// from `qs[4h + 2l]` hold half `l` of blocks `2h`, `2h + 4`, `2h + 1`,
/// `2h + 5`, which AVX-512 meets with four weight blocks in one register
/// (the group is 64-byte aligned). `d` holds the eight scales in block
/// order, and `off` each block's `-8 * sum(x)`, the Q4_0 offset of 8
/// applied to its sum once (exact: at most `8 * 32 * 128` in magnitude).
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C, align(64))]
pub(crate) struct NibbleGroup {
    pub(crate) qs: [[i8; QK8_0]; 8],
    pub(crate) d: [f32; 8],
    pub(crate) off: [i32; 8],
}

const _: () = assert!(core::mem::size_of::<NibbleGroup>() == 320);

impl NibbleGroup {
    /// The group of blocks `b[0..8]`.
    pub(crate) fn new(b: &[ActBlock; 8]) -> Self {
        let mut g = Self::zeroed();
        for p in 0..4 {
            for l in 0..2 {
                let c = &mut g.qs[Self::chunk(p, l)];
                c[..16].copy_from_slice(&b[p].qs[16 * l..16 * l + 16]);
                c[16..].copy_from_slice(&b[p + 4].qs[16 * l..16 * l + 16]);
            }
        }
        for (i, blk) in b.iter().enumerate() {
            g.d[i] = blk.d;
            g.off[i] = -8 * blk.qs.iter().map(|&q| i32::from(q)).sum::<i32>();
        }
        g
    }

    /// The index in `qs` of half `l` (0: values `0..16`, 1: `16..32`) of
    /// blocks `p` and `p + 4` (`p < 4`).
    #[inline(always)]
    pub(crate) const fn chunk(p: usize, l: usize) -> usize {
        4 * (p / 2) + 2 * l + p % 2
    }
}

/// Fills `blocks` (reusing its allocation) with the quantized `x`, with
/// the selected kernel's quantizer (all of them give the same bytes).
fn quantize_into(blocks: &mut Vec<ActBlock>, x: &[f32], k: Dispatch) {
    let (chunks, rest) = x.as_chunks::<QK8_0>();
    debug_assert!(rest.is_empty(), "length checked by the caller");
    // Only a change of length writes the buffer twice.
    blocks.resize(chunks.len(), ActBlock::zeroed());
    k.quantize_act(chunks, blocks);
}

/// Which copies of a batch's blocks, beside the blocks themselves, the
/// products that will read it want: each costs a pass over the batch at
/// every quantization, so a model asks only for its matrices' ones
/// ([`Weight::batch_layouts`](crate::matvec::Weight)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BatchLayouts {
    /// The Q8_0 blocks paired and grouped eight rows at a time (the Q8_0
    /// products; AVX2's Q4_0 GEMM).
    pub(crate) interleaved: bool,
    /// The Q8_K blocks grouped eight rows at a time (the K-quant GEMMs
    /// but AVX-512's sixteen-row one).
    pub(crate) k_groups: bool,
    /// The Q8_0 blocks in AVX-512's sixteen-row Q4_0 GEMM's form.
    pub(crate) q4_0_acts: bool,
    /// The Q8_K blocks in AVX-512's sixteen-row K-quant GEMM's form.
    pub(crate) k_acts: bool,
}

impl BatchLayouts {
    /// Every copy the kernel has a reader for.
    pub(crate) const ALL: Self = Self {
        interleaved: true,
        k_groups: true,
        q4_0_acts: true,
        k_acts: true,
    };
}

/// Something that runs `f(range, part)` over disjoint pieces of a slice,
/// covering it, on however many threads it has: every backend (through
/// `for_each_range`), or [`OnCaller`].
pub(crate) trait Spread {
    fn spread<T: Send, F: Fn(Range<usize>, &mut [T]) + Sync>(&self, data: &mut [T], f: F);
}

/// [`Spread`] on the calling thread, in one piece.
pub(crate) struct OnCaller;

impl Spread for OnCaller {
    fn spread<T: Send, F: Fn(Range<usize>, &mut [T]) + Sync>(&self, data: &mut [T], f: F) {
        f(0..data.len(), data);
    }
}

/// An activation vector quantized to Q8_0, reused across matvecs.
///
/// [`quantize_from`](Self::quantize_from) overwrites the contents and keeps
/// the allocation, so a decode loop that quantizes into the same vector
/// allocates only on the first call (or when the length grows).
///
/// ```
/// use inferno_cpu::quant::QuantizedVector;
/// let mut xq = QuantizedVector::new();
/// xq.quantize_from(&[0.5f32; 64])?;
/// assert_eq!(xq.cols(), 64);
/// assert_eq!(xq.to_blocks()[1].qs[0], 127);
/// # Ok::<(), inferno_cpu::quant::QuantError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct QuantizedVector {
    blocks: Vec<ActBlock>,
    /// The Q8_K form (for K-quant weights), when asked for.
    k_blocks: Vec<BlockQ8K>,
    /// The F16 form (for F16 weights): the values rounded to f16, widened.
    h: Vec<f32>,
    /// The BF16 form (for BF16 weights): the values rounded to bfloat16,
    /// widened.
    bh: Vec<f32>,
    /// With the AVX2 or AVX-512 VNNI kernel and the Q8_0 form: each whole
    /// group of eight blocks as a [`NibbleGroup`], which their Q4_0 decode
    /// rows read.
    groups: Vec<NibbleGroup>,
    /// Whether `groups` was built for the current contents.
    grouped: bool,
    cols: usize,
}

/// Which quantized forms of an activation the products that read it need:
/// Q8_0 blocks for Q8_0 and Q4_0 weights, Q8_K blocks for the K-quants,
/// the values rounded to f16 for F16 weights and to bfloat16 for BF16
/// ones (GGML's "vec dot type" of each weight type). A layer of a mixed
/// file can need several (Q4_K for `attn_q`, Q8_0 for `attn_v`, say); the
/// activation is then quantized once per form.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActForms {
    /// Q8_0 blocks of 32.
    pub q8_0: bool,
    /// Q8_K blocks of 256.
    pub q8_k: bool,
    /// The values rounded to f16 (ties to even).
    pub f16: bool,
    /// The values rounded to bfloat16 (ties to even).
    pub bf16: bool,
}

impl ActForms {
    /// Only the Q8_0 form.
    pub const Q8_0: Self = Self {
        q8_0: true,
        q8_k: false,
        f16: false,
        bf16: false,
    };
    /// Only the Q8_K form.
    pub const Q8_K: Self = Self {
        q8_0: false,
        q8_k: true,
        f16: false,
        bf16: false,
    };
    /// Only the f16 form.
    pub const F16: Self = Self {
        q8_0: false,
        q8_k: false,
        f16: true,
        bf16: false,
    };
    /// Only the bfloat16 form.
    pub const BF16: Self = Self {
        q8_0: false,
        q8_k: false,
        f16: false,
        bf16: true,
    };
    /// Every form.
    pub const ALL: Self = Self {
        q8_0: true,
        q8_k: true,
        f16: true,
        bf16: true,
    };

    /// The forms either needs.
    pub fn union(self, other: Self) -> Self {
        Self {
            q8_0: self.q8_0 || other.q8_0,
            q8_k: self.q8_k || other.q8_k,
            f16: self.f16 || other.f16,
            bf16: self.bf16 || other.bf16,
        }
    }

    /// Whether every form of `other` is one of these.
    pub fn contains(self, other: Self) -> bool {
        self.union(other) == self
    }

    /// Whether these are only float forms (F16, BF16), which hold rows of
    /// any length; every other choice, none included, needs whole Q8_0
    /// blocks.
    fn float_only(self) -> bool {
        !self.q8_0 && !self.q8_k && (self.f16 || self.bf16)
    }
}

/// Fills `out` (reusing its allocation) with `round` of each value of `x`
/// if `on`, else empties it.
fn round_into(out: &mut Vec<f32>, x: &[f32], on: bool, round: fn(f32) -> f32) {
    out.clear();
    if on {
        out.extend(x.iter().map(|&v| round(v)));
    }
}

impl QuantizedVector {
    /// An empty vector (zero columns).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty vector with room for `cols` values without reallocating.
    pub fn with_capacity(cols: usize) -> Self {
        Self {
            blocks: Vec::with_capacity(cols.div_ceil(QK8_0)),
            k_blocks: Vec::with_capacity(cols.div_ceil(QK_K)),
            h: Vec::with_capacity(cols),
            bh: Vec::with_capacity(cols),
            groups: Vec::with_capacity(cols / (8 * QK8_0)),
            grouped: false,
            cols: 0,
        }
    }

    /// Quantizes `x` into this vector, replacing its contents.
    ///
    /// # Errors
    ///
    /// [`QuantError::LengthNotMultiple`] if `x.len()` is not a multiple of
    /// 32; the vector is left unchanged.
    pub fn quantize_from(&mut self, x: &[f32]) -> Result<(), QuantError> {
        self.quantize_with(selected().1, x)
    }

    /// Quantizes `x` into the `forms` asked for (the Q8_K form is GGML's
    /// `quantize_row_q8_K`, what its K-quant dot products take; the F16 and
    /// BF16 forms are `x` rounded as GGML rounds it for its F16 and BF16
    /// dot products), replacing the contents; forms not asked for are left
    /// empty.
    ///
    /// # Errors
    ///
    /// [`QuantError::LengthNotMultiple`] if `x.len()` is not a multiple of
    /// 32 (unless only the F16 and BF16 forms are asked for, which take any
    /// length), or of 256 with the Q8_K form; the vector is left unchanged.
    pub fn quantize_forms(&mut self, x: &[f32], forms: ActForms) -> Result<(), QuantError> {
        self.quantize_forms_with(selected().1, x, forms)
    }

    /// [`quantize_from`](Self::quantize_from) with a given kernel.
    pub(crate) fn quantize_with(&mut self, k: Dispatch, x: &[f32]) -> Result<(), QuantError> {
        self.quantize_forms_with(k, x, ActForms::Q8_0)
    }

    /// [`quantize_forms`](Self::quantize_forms) with a given kernel.
    pub(crate) fn quantize_forms_with(
        &mut self,
        k: Dispatch,
        x: &[f32],
        forms: ActForms,
    ) -> Result<(), QuantError> {
        if !forms.float_only() {
            blocks_for(x.len())?;
        }
        if forms.q8_k && !x.len().is_multiple_of(QK_K) {
            return Err(QuantError::RowNotWholeBlocks {
                len: x.len(),
                block: QK_K,
            });
        }
        if forms.q8_0 {
            quantize_into(&mut self.blocks, x, k);
        } else {
            self.blocks.clear();
        }
        self.grouped = forms.q8_0 && k.decode_uses_nibble_groups();
        self.groups.clear();
        if self.grouped {
            let groups = self.blocks.as_chunks::<8>().0;
            self.groups.extend(groups.iter().map(NibbleGroup::new));
        }
        self.k_blocks.clear();
        if forms.q8_k {
            self.k_blocks.resize(x.len() / QK_K, BlockQ8K::zeroed());
            let (chunks, _) = x.as_chunks::<QK_K>();
            k.quantize_q8_k(chunks, &mut self.k_blocks);
        }
        round_into(&mut self.h, x, forms.f16, round_f16);
        round_into(&mut self.bh, x, forms.bf16, round_bf16);
        self.cols = x.len();
        Ok(())
    }

    /// The forms this vector holds for all of its values (every form, for
    /// zero columns).
    pub fn forms(&self) -> ActForms {
        let n = self.cols;
        ActForms {
            q8_0: self.blocks.len() * QK8_0 == n,
            q8_k: self.k_blocks.len() * QK_K == n,
            f16: self.h.len() == n,
            bf16: self.bh.len() == n,
        }
    }

    /// The F16 form (the values rounded to f16, widened), empty unless
    /// asked for.
    pub(crate) fn f16_act(&self) -> &[f32] {
        &self.h
    }

    /// The BF16 form (the values rounded to bfloat16, widened), empty
    /// unless asked for.
    pub(crate) fn bf16_act(&self) -> &[f32] {
        &self.bh
    }

    /// Number of values (a multiple of 32 unless only float forms were
    /// asked for).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The Q8_K form, empty unless asked for.
    pub(crate) fn k_act(&self) -> &[BlockQ8K] {
        &self.k_blocks
    }

    /// The quantized values as GGML Q8_0 blocks, identical to
    /// [`quantize_row_q8_0_even`](super::quantize_row_q8_0_even) of the input.
    pub fn to_blocks(&self) -> Vec<BlockQ8_0> {
        self.blocks.iter().map(|b| b.to_block()).collect()
    }

    pub(crate) fn act(&self) -> &[ActBlock] {
        &self.blocks
    }

    /// The Q8_0 blocks in groups of eight, where the kernel that quantized
    /// them reads them so (AVX2, AVX-512 VNNI; the blocks after the last
    /// whole group are only in [`act`](Self::act)).
    pub(crate) fn nibble_groups(&self) -> Option<&[NibbleGroup]> {
        Some(&self.groups[..]).filter(|_| self.grouped)
    }
}

/// Several activation rows (a prefill batch) quantized to Q8_0, reused
/// across matmuls.
///
/// ```
/// use inferno_cpu::quant::QuantizedBatch;
/// let mut xs = QuantizedBatch::new();
/// xs.quantize_from(&[0.25f32; 4 * 64], 64)?; // 4 rows of 64
/// assert_eq!((xs.rows(), xs.cols()), (4, 64));
/// # Ok::<(), inferno_cpu::quant::QuantError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct QuantizedBatch {
    blocks: Vec<ActBlock>,
    /// The Q8_K form of every row, when asked for.
    k_blocks: Vec<BlockQ8K>,
    /// The F16 form of every row, when asked for.
    h: Vec<f32>,
    /// The BF16 form of every row, when asked for.
    bh: Vec<f32>,
    /// With the AVX-512 VNNI kernel: each row's pairs of blocks
    /// (`cols / 64` per row; an odd last block is only in `blocks`).
    pairs: Vec<PairBlock>,
    /// Whether `pairs` was built for the current contents.
    paired: bool,
    /// With the AVX-512 VNNI or AVX2 kernel and the Q8_0 form (their
    /// Q8_0/Q4_0 GEMM): each full group of eight rows interleaved
    /// ([`Q8Group`], `cols / 32` per group).
    groups: Vec<Q8Group>,
    /// With an x86 kernel (every one has a K-quant GEMM) and the Q8_K
    /// form: each full group of eight rows interleaved ([`Q8KGroup`],
    /// `cols / 256` per group).
    k_groups: Vec<Q8KGroup>,
    /// With AVX-512 VNNI and Q4_0 matrices to read it: every Q8_0 block in
    /// the sixteen-row Q4_0 GEMM's form (`Q4_0Act`).
    q4_0_acts: Vec<Q4_0Act>,
    /// With AVX-512 VNNI and packed Q4_K/Q5_K matrices or Q6_K ones to read
    /// it: every Q8_K block in the sixteen-row K-quant GEMMs' form
    /// (`Q8KAct`).
    k_acts: Vec<Q8KAct>,
    rows: usize,
    cols: usize,
}

impl QuantizedBatch {
    /// An empty batch (zero rows).
    pub fn new() -> Self {
        Self::default()
    }

    /// Quantizes the row-major `x` (rows of `cols` values each) into this
    /// batch, replacing its contents.
    ///
    /// # Errors
    ///
    /// [`QuantError::LengthNotMultiple`] if `cols` is not a multiple of 32;
    /// [`QuantError::BatchShape`] if `cols == 0` or `x.len()` is not a
    /// multiple of `cols`. The batch is left unchanged.
    pub fn quantize_from(&mut self, x: &[f32], cols: usize) -> Result<(), QuantError> {
        self.quantize_forms(x, cols, ActForms::Q8_0)
    }

    /// [`quantize_from`](Self::quantize_from) into the `forms` asked for,
    /// each row as [`QuantizedVector::quantize_forms`] would.
    ///
    /// # Errors
    ///
    /// As [`quantize_from`](Self::quantize_from) (rows of any length if
    /// only the F16 and BF16 forms are asked for); with the Q8_K form,
    /// [`QuantError::RowNotWholeBlocks`] unless `cols` is a multiple of 256.
    pub fn quantize_forms(
        &mut self,
        x: &[f32],
        cols: usize,
        forms: ActForms,
    ) -> Result<(), QuantError> {
        self.quantize_forms_on(&OnCaller, x, cols, forms, BatchLayouts::ALL)
    }

    /// [`quantize_forms`](Self::quantize_forms) with the blocks spread over
    /// `on`'s threads (a prefill quantizes up to hundreds of rows before
    /// each product). Each block is quantized alone, so the result does not
    /// depend on how the blocks are spread. `layouts` says which copies of
    /// the blocks the products that read the batch want
    /// ([`Weight::batch_layouts`](crate::matvec::Weight)); a product that
    /// finds one missing takes its other kernels (or builds its form
    /// itself), with the same bits.
    pub(crate) fn quantize_forms_on(
        &mut self,
        on: &impl Spread,
        x: &[f32],
        cols: usize,
        forms: ActForms,
        layouts: BatchLayouts,
    ) -> Result<(), QuantError> {
        if !forms.float_only() {
            blocks_for(cols)?;
        }
        if cols == 0 || !x.len().is_multiple_of(cols) {
            return Err(QuantError::BatchShape { len: x.len(), cols });
        }
        if forms.q8_k && !cols.is_multiple_of(QK_K) {
            return Err(QuantError::RowNotWholeBlocks {
                len: cols,
                block: QK_K,
            });
        }
        let k = selected().1;
        if !forms.q8_k {
            self.k_blocks.clear();
        }
        let k_grouped = forms.q8_k && k.matmul_uses_k_groups() && layouts.k_groups;
        if !k_grouped {
            self.k_groups.clear();
        }
        let k_acts = forms.q8_k && k.matmul_uses_k4_rows16() && layouts.k_acts;
        if !k_acts {
            self.k_acts.clear();
        }
        if forms.q8_k {
            // Resized, not cleared first: every block is written below, and
            // zeroing the whole buffer on one thread at every call was most
            // of what kept a two-thread batch quantization from scaling.
            self.k_blocks.resize(x.len() / QK_K, BlockQ8K::zeroed());
            let (chunks, _) = x.as_chunks::<QK_K>();
            on.spread(&mut self.k_blocks, |range, part| {
                k.quantize_q8_k(&chunks[range], part)
            });
            if k_acts {
                self.k_acts.resize(self.k_blocks.len(), Q8KAct::zeroed());
                let k_blocks = &self.k_blocks;
                on.spread(&mut self.k_acts, |range, part| {
                    for (a, b) in part.iter_mut().zip(&k_blocks[range]) {
                        *a = Q8KAct::new(b);
                    }
                });
            }
            if k_grouped {
                let nb = cols / QK_K;
                let k_blocks = &self.k_blocks;
                let groups = k_blocks.len() / (GROUP_ROWS * nb) * nb;
                self.k_groups.resize(groups, Q8KGroup::zeroed());
                on.spread(&mut self.k_groups, |range, part| {
                    for (i, g) in range.zip(part) {
                        let first = i / nb * GROUP_ROWS * nb;
                        let rows: [&[BlockQ8K]; GROUP_ROWS] = core::array::from_fn(|a| {
                            &k_blocks[first + a * nb..first + (a + 1) * nb]
                        });
                        g.fill(rows, i % nb);
                    }
                });
            }
        }
        round_into(&mut self.h, x, forms.f16, round_f16);
        round_into(&mut self.bh, x, forms.bf16, round_bf16);
        self.rows = x.len() / cols;
        self.cols = cols;
        if !forms.q8_0 {
            self.blocks.clear();
            self.pairs.clear();
            self.groups.clear();
            self.q4_0_acts.clear();
            self.paired = false;
            return Ok(());
        }
        let (chunks, _) = x.as_chunks::<QK8_0>();
        // Only a change of length writes the buffer twice.
        self.blocks.resize(chunks.len(), ActBlock::zeroed());
        on.spread(&mut self.blocks, |range, part| {
            k.quantize_act(&chunks[range], part)
        });
        if k.matmul_uses_q4_0_rows16() && layouts.q4_0_acts {
            self.q4_0_acts.resize(self.blocks.len(), Q4_0Act::zeroed());
            let blocks = &self.blocks;
            on.spread(&mut self.q4_0_acts, |range, part| {
                for (a, b) in part.iter_mut().zip(&blocks[range]) {
                    *a = Q4_0Act::new(b);
                }
            });
        } else {
            self.q4_0_acts.clear();
        }
        self.paired = layouts.interleaved && k.matmul_uses_pairs();
        if !self.paired {
            self.pairs.clear();
        }
        if !layouts.interleaved || !k.matmul_uses_b32_groups() {
            self.groups.clear();
        } else {
            let nb = cols / QK8_0;
            let blocks = &self.blocks;
            let groups = blocks.len() / (GROUP_ROWS * nb) * nb;
            self.groups.resize(groups, Q8Group::zeroed());
            on.spread(&mut self.groups, |range, part| {
                for (i, g) in range.zip(part) {
                    let first = i / nb * GROUP_ROWS * nb;
                    let rows: [&[ActBlock]; GROUP_ROWS] =
                        core::array::from_fn(|a| &blocks[first + a * nb..first + (a + 1) * nb]);
                    g.fill(rows, i % nb);
                }
            });
        }
        if self.paired {
            // Pair `j` of row `r` is blocks `2j` and `2j + 1` of the row
            // (an odd last block has no pair), built on every thread.
            let nb = cols / QK8_0;
            let per_row = nb / 2;
            let blocks = &self.blocks;
            self.pairs.resize(self.rows * per_row, PairBlock::zeroed());
            on.spread(&mut self.pairs, |range, part| {
                for (i, p) in range.zip(part) {
                    let at = i / per_row * nb + i % per_row * 2;
                    *p = PairBlock::new(&blocks[at], &blocks[at + 1]);
                }
            });
        }
        Ok(())
    }

    /// Number of activation rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values per row (a multiple of 32 unless only float forms were
    /// asked for).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `i` as GGML Q8_0 blocks.
    ///
    /// # Panics
    ///
    /// If `i >= self.rows()`.
    pub fn row_blocks(&self, i: usize) -> Vec<BlockQ8_0> {
        self.act_row(i).iter().map(|b| b.to_block()).collect()
    }

    /// Row `i`'s pairs of blocks, if the batch was quantized for a kernel
    /// that uses them.
    pub(crate) fn pair_row(&self, i: usize) -> Option<&[PairBlock]> {
        let per_row = self.cols / (2 * QK8_0);
        self.pairs
            .get(i * per_row..(i + 1) * per_row)
            .filter(|_| self.paired)
    }

    pub(crate) fn act_row(&self, i: usize) -> &[ActBlock] {
        assert!(i < self.rows, "row {i} out of range for {} rows", self.rows);
        let nb = self.cols / QK8_0;
        self.blocks.get(i * nb..(i + 1) * nb).unwrap_or(&[])
    }

    /// Every row's Q8_0 blocks, row after row.
    pub(crate) fn act_blocks(&self) -> &[ActBlock] {
        &self.blocks
    }

    /// Every row's Q8_K blocks, row after row (empty unless asked for).
    pub(crate) fn k_blocks(&self) -> &[BlockQ8K] {
        &self.k_blocks
    }

    /// Row `i`'s Q8_K form, empty unless asked for.
    pub(crate) fn k_row(&self, i: usize) -> &[BlockQ8K] {
        let nb = self.cols / QK_K;
        self.k_blocks.get(i * nb..(i + 1) * nb).unwrap_or(&[])
    }

    /// Rows `8g..8g + 8` interleaved, if the batch was quantized to Q8_0
    /// for a kernel that uses the groups and has those rows.
    pub(crate) fn group(&self, g: usize) -> Option<&[Q8Group]> {
        let nb = self.cols / QK8_0;
        self.groups
            .get(g * nb..(g + 1) * nb)
            .filter(|s| !s.is_empty())
    }

    /// Every row's Q8_0 blocks in the sixteen-row Q4_0 GEMM's form, row
    /// after row, if the batch was quantized with them.
    pub(crate) fn q4_0_acts(&self) -> Option<&[Q4_0Act]> {
        Some(&self.q4_0_acts[..]).filter(|a| !a.is_empty() && a.len() == self.blocks.len())
    }

    /// Every row's Q8_K blocks in the sixteen-row K-quant GEMM's form, row
    /// after row, if the batch was quantized with them.
    pub(crate) fn k_acts(&self) -> Option<&[Q8KAct]> {
        Some(&self.k_acts[..]).filter(|a| !a.is_empty() && a.len() == self.k_blocks.len())
    }

    /// Rows `8g..8g + 8` interleaved, if the batch was quantized to Q8_K
    /// for a kernel that uses the groups and has those rows.
    pub(crate) fn k_group(&self, g: usize) -> Option<&[Q8KGroup]> {
        let nb = self.cols / QK_K;
        self.k_groups
            .get(g * nb..(g + 1) * nb)
            .filter(|s| !s.is_empty())
    }

    /// Row `i`'s F16 form, empty unless asked for.
    pub(crate) fn f16_row(&self, i: usize) -> &[f32] {
        let n = self.cols;
        self.h.get(i * n..(i + 1) * n).unwrap_or(&[])
    }

    /// Row `i`'s BF16 form, empty unless asked for.
    pub(crate) fn bf16_row(&self, i: usize) -> &[f32] {
        let n = self.cols;
        self.bh.get(i * n..(i + 1) * n).unwrap_or(&[])
    }

    /// The forms this batch holds for all of its rows (every form, for an
    /// empty batch).
    pub fn forms(&self) -> ActForms {
        let n = self.rows * self.cols;
        ActForms {
            q8_0: self.blocks.len() * QK8_0 == n,
            q8_k: self.k_blocks.len() * QK_K == n,
            f16: self.h.len() == n,
            bf16: self.bh.len() == n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::quantize_row_q8_0_even;

    #[test]
    fn matches_row_quantizer_and_bias() {
        let x: Vec<f32> = (0..96).map(|i| (i as f32 - 40.0) * 0.37).collect();
        let mut xq = QuantizedVector::with_capacity(96);
        xq.quantize_from(&x).unwrap();
        assert_eq!(xq.to_blocks(), quantize_row_q8_0_even(&x).unwrap());
        for b in xq.act() {
            for (j, &nb) in b.neg_bias.iter().enumerate() {
                let s: i32 = b.qs[4 * j..4 * j + 4].iter().map(|&q| i32::from(q)).sum();
                assert_eq!(nb, -128 * s);
            }
        }
    }

    #[test]
    fn reuses_allocation_and_rejects_bad_lengths() {
        let mut xq = QuantizedVector::with_capacity(64);
        xq.quantize_from(&[1.0; 64]).unwrap();
        let ptr = xq.act().as_ptr();
        xq.quantize_from(&[2.0; 32]).unwrap();
        assert_eq!(xq.act().as_ptr(), ptr);
        assert_eq!(xq.cols(), 32);
        assert_eq!(
            xq.quantize_from(&[1.0; 31]),
            Err(QuantError::LengthNotMultiple { len: 31 })
        );
        assert_eq!(xq.cols(), 32);

        let mut xs = QuantizedBatch::new();
        assert_eq!(
            xs.quantize_from(&[1.0; 96], 64),
            Err(QuantError::BatchShape { len: 96, cols: 64 })
        );
        assert_eq!(
            xs.quantize_from(&[], 0),
            Err(QuantError::BatchShape { len: 0, cols: 0 })
        );
        xs.quantize_from(&[1.0; 128], 64).unwrap();
        assert_eq!(
            xs.row_blocks(1),
            crate::quant::quantize_row_q8_0_even(&[1.0; 64]).unwrap()
        );
    }

    /// A batch quantized again and again (growing, shrinking, with other
    /// forms) holds exactly what a fresh batch holds for the same input:
    /// its buffers are resized, not cleared, so nothing of an earlier
    /// batch may show through.
    #[cfg_attr(miri, ignore = "safe code only, and slow under Miri")]
    #[test]
    fn a_reused_batch_equals_a_fresh_one() {
        fn state(xs: &QuantizedBatch) -> Vec<u8> {
            let mut out = Vec::new();
            for i in 0..xs.rows() {
                out.extend_from_slice(bytemuck::cast_slice(xs.act_row(i)));
                out.extend_from_slice(bytemuck::cast_slice(xs.k_row(i)));
                out.extend_from_slice(bytemuck::cast_slice(xs.pair_row(i).unwrap_or(&[])));
            }
            for g in 0..xs.rows() / GROUP_ROWS + 1 {
                out.extend_from_slice(bytemuck::cast_slice(xs.group(g).unwrap_or(&[])));
                for kg in xs.k_group(g).unwrap_or(&[]) {
                    out.extend_from_slice(bytemuck::cast_slice(&kg.qs));
                    out.extend_from_slice(bytemuck::cast_slice(&kg.bs32));
                    out.extend_from_slice(bytemuck::cast_slice(&kg.bs16));
                    out.extend_from_slice(bytemuck::cast_slice(&kg.d));
                }
            }
            out.extend_from_slice(
                format!("{:?} {} {}", xs.forms(), xs.rows(), xs.cols()).as_bytes(),
            );
            out
        }
        let mut reused = QuantizedBatch::new();
        let steps = [
            (17, 512, ActForms::ALL),
            (9, 256, ActForms::Q8_K),
            (24, 768, ActForms::Q8_0),
            (3, 256, ActForms::ALL),
            (16, 1024, ActForms::Q8_0.union(ActForms::Q8_K)),
            (8, 256, ActForms::F16),
            (11, 768, ActForms::ALL),
        ];
        for (n, (rows, cols, forms)) in steps.into_iter().enumerate() {
            let x: Vec<f32> = (0..rows * cols)
                .map(|i| ((i * 31 + n * 7) % 97) as f32 / 9.0 - 5.0)
                .collect();
            reused.quantize_forms(&x, cols, forms).unwrap();
            let mut fresh = QuantizedBatch::new();
            fresh.quantize_forms(&x, cols, forms).unwrap();
            assert!(
                state(&reused) == state(&fresh),
                "step {n}: {rows} x {cols}, {forms:?}"
            );
        }
    }

    #[test]
    fn float_forms_are_rounded_values_of_any_length() {
        let x: Vec<f32> = (0..40).map(|i| 1.0 + i as f32 * 1e-4).collect();
        let mut xq = QuantizedVector::with_capacity(64);
        // Only float forms: any length; no Q8 form held.
        xq.quantize_forms(&x, ActForms::F16.union(ActForms::BF16))
            .unwrap();
        assert_eq!(xq.cols(), 40);
        let held = xq.forms();
        assert!(
            held.f16 && held.bf16 && !held.q8_0 && !held.q8_k,
            "{held:?}"
        );
        for (i, &v) in x.iter().enumerate() {
            assert_eq!(xq.f16_act()[i], f16::from_f32(v).to_f32());
            assert_eq!(xq.bf16_act()[i], half::bf16::from_f32(v).to_f32());
        }
        // Reused allocations; a Q8_0 form still needs whole blocks, and a
        // refused call leaves the vector as it was.
        let ptr = xq.f16_act().as_ptr();
        xq.quantize_forms(&x[..32], ActForms::ALL.union(ActForms::Q8_0))
            .unwrap_err();
        assert_eq!(xq.cols(), 40);
        xq.quantize_forms(&x[..32], ActForms::Q8_0.union(ActForms::F16))
            .unwrap();
        assert_eq!(xq.f16_act().as_ptr(), ptr);
        let held = xq.forms();
        assert!(
            held.f16 && held.q8_0 && !held.bf16 && !held.q8_k,
            "{held:?}"
        );
        assert!(xq.forms().contains(ActForms::F16));
        assert!(!xq.forms().contains(ActForms::BF16));
        assert_eq!(
            xq.quantize_forms(&x, ActForms::Q8_0.union(ActForms::F16)),
            Err(QuantError::LengthNotMultiple { len: 40 })
        );

        let mut xs = QuantizedBatch::new();
        xs.quantize_forms(&x, 20, ActForms::BF16).unwrap();
        assert_eq!((xs.rows(), xs.cols()), (2, 20));
        assert_eq!(xs.bf16_row(1), &xq_bf16(&x[20..])[..]);
        assert!(xs.f16_row(1).is_empty() && xs.act_row(1).is_empty());
        assert!(xs.forms().bf16 && !xs.forms().f16);
        assert!(xs.quantize_forms(&x, 20, ActForms::Q8_0).is_err());
    }

    fn xq_bf16(x: &[f32]) -> Vec<f32> {
        x.iter()
            .map(|&v| half::bf16::from_f32(v).to_f32())
            .collect()
    }
}
