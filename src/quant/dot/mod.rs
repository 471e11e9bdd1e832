//! Dot-product kernels, one per instruction set, chosen once at run time.
//!
//! | [`Kernel`] | where | integer part per block |
//! |---|---|---|
//! | `Scalar` | everywhere | 32 `i32` multiply-adds |
//! | `Avx2` | x86_64 with AVX2, FMA, F16C | `vpsignb`, `vpmaddubsw`, `vpmaddwd` |
//! | `Avx512Vnni` | x86_64 with AVX-512 F/VL/BW/VNNI too | one 256-bit `vpdpbusd` |
//! | `AvxVnni` | x86_64 with AVX-VNNI (VEX) too | one `vpdpbusd` |
//! | `NeonDot` | aarch64 with the dot-product extension | `zip1`, `zip2`, two `sdot` |
//! | `Neon` | aarch64 | `smull`, `sadalp` |
//!
//! [`Kernel::selected`] detects the best kernel the CPU supports on first
//! use and caches it; setting the environment variable
//! [`FORCE_SCALAR_ENV`] (`INFERNO_FORCE_SCALAR=1`) before that first use
//! selects the scalar kernel instead, e.g. to compare against it or to
//! test the portable path on a machine with SIMD, and [`KERNEL_ENV`]
//! (`INFERNO_KERNEL=avx2`) selects any kernel the CPU runs, e.g. to
//! measure the AVX2 kernels on a CPU with AVX-512.
//!
//! # How far a SIMD result may be from the scalar one
//!
//! All kernels compute each block's integer dot product `isum_b` exactly,
//! and `d_w * d_x` exactly (two f16 values widened to f32 multiply without
//! rounding). They differ only in how the f32 terms are combined: the
//! scalar kernel adds `t_b = (d_w * d_x) * isum_b` to one accumulator in
//! block order; AVX2 adds the same terms to four partial sums by block
//! index mod 4 (`x86_64::avx2_q8`); the other SIMD kernels split each
//! `isum_b` into 8 (x86) or 4 (NEON) exact integer lanes and
//! fuse-multiply-add `d_w * d_x * lane` into several lane accumulators
//! before a final horizontal sum.
//!
//! Each result is a sum of the `nb` blocks' terms (or their lane parts),
//! computed by a tree of at most `nb + 6` rounded operations deep per term,
//! so by the standard bound for floating-point summation (barring
//! underflow) each result is within `gamma(nb + 6) * S` of the exact sum,
//! where `gamma(n) = n * u / (1 - n * u)`, `u = 2^-24`, and
//! `S = sum_b |d_w * d_x| * sum_j |w_j * x_j|` bounds the sum of the
//! magnitudes of every term and lane part. Hence
//!
//! `|simd - scalar| <= 2 * gamma(nb + 6) * S`,
//!
//! which [`q8_0_error_bound`] computes and the test suite checks for every
//! kernel. The same argument gives `2 * gamma(len + 6) * sum |w_i * x_i|`
//! for the f32 kernels ([`f32_error_bound`]). `Avx512Vnni` and `AvxVnni`
//! produce identical lanes and combine them identically, so they agree bit
//! for bit; so do `NeonDot` and `Neon`. `Avx2` rounds otherwise, within
//! the same bound.
//!
//! The K-quant dots (Q4_K, Q5_K, Q6_K weights with Q8_K activations) follow
//! the same plan: `Avx512Vnni` and `AvxVnni` build the AVX2 kernel's exact
//! integer lanes with `vpdpwssd` (one instruction where AVX2 needs
//! `vpmaddwd` and `vpaddd`) and combine them with the AVX2 kernel's f32
//! operations, so all three agree bit for bit; `Neon` and `NeonDot` build
//! the scalar kernel's eight integer lanes with NEON and then run the
//! scalar kernel's f32 operations, so they return the scalar bits. Every
//! kernel's four-row
//! form (one weight row, four activation rows, for a prefill) runs its
//! single-row dot's operations per row, so it returns the single-row bits.
//!
//! The F16 and BF16 weight dots ([`Kernel::dot_f16_weights`],
//! [`Kernel::dot_bf16_weights`]) read the activation rounded to the
//! weight's type, as GGML does (`quant::float` says why), so every product
//! is exact in f32 and only the sums differ: the scalar kernel adds the
//! products in f64 as GGML's reference code does, the SIMD kernels
//! (`x86_64::float`, AVX2 code that all three x86 kernels run, and
//! `aarch64::float`, NEON code that both NEON kernels run) in f32 lane
//! accumulators, within [`f32_error_bound`] of it.

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
pub(crate) mod scalar;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86_64;

use std::sync::OnceLock;

use half::{bf16, f16};
use thiserror::Error;

use super::activation::{ActBlock, PairBlock, QuantizedVector};
use super::block::{BlockQ8_0, QK8_0};
use super::kgroup::{
    self, B32Levels, B32Signed, K4Levels, K4Rows16, Q4_0Act, Q4_0Rows16, Q6Levels, Q6Rows16,
    Q8Group, Q8KAct, Q8KGroup, GROUP_ROWS, ROWS16,
};
use super::packed::{BlockQ4Kx8, BlockQ4_0x8, BlockQ5Kx8, PackedBlock};
use super::q4_0::{BlockQ4_0, QK4_0};
use super::q4_k::BlockQ4K;
use super::q5_k::BlockQ5K;
use super::q6_k::BlockQ6K;
use super::q8_k::BlockQ8K;
use super::quantize::QuantError;
use crate::matvec::{F32Matrix, Q8Matrix, ShapeError};
#[cfg(target_arch = "x86_64")]
use crate::unsafe_core::simd::{Avx2Token, Avx512VnniToken, AvxVnniToken};
#[cfg(target_arch = "aarch64")]
use crate::unsafe_core::simd::{NeonDotToken, NeonToken};

/// Environment variable that, set to `1` before the first kernel use,
/// makes [`Kernel::selected`] return [`Kernel::Scalar`].
pub const FORCE_SCALAR_ENV: &str = "INFERNO_FORCE_SCALAR";

/// Environment variable that, set before the first kernel use to a
/// kernel's [`name`](Kernel::name) (`INFERNO_KERNEL=avx2`), makes
/// [`Kernel::selected`] return that kernel if this CPU runs it
/// ([`FORCE_SCALAR_ENV`] still wins). A name that is unknown or names a
/// kernel this CPU lacks leaves the choice to the CPU;
/// [`Kernel::from_env`] reports it, which is how `inferno` refuses it
/// (even where [`FORCE_SCALAR_ENV`] would have won: a bad setting is
/// reported, not ignored). The value is taken as it is, spaces included.
pub const KERNEL_ENV: &str = "INFERNO_KERNEL";

/// Why [`KERNEL_ENV`] names no kernel this process can select.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum KernelEnvError {
    /// The value is not a kernel's name.
    #[error("{KERNEL_ENV}={0:?} names no kernel; expected one of scalar, avx2, avx512vnni, avxvnni, neondot, neon")]
    Unknown(String),
    /// The kernel exists but this CPU (or target) lacks its instruction set.
    #[error("{KERNEL_ENV}: the {} kernel is not available on this CPU", .0.name())]
    Unavailable(Kernel),
}

/// How many cached positions ahead decode attention asks for the key and
/// value rows it will read (`scores_f16_x2`, `weighted_sum_f16_x2`).
///
/// A head's rows are contiguous, but after a 511-token prompt a
/// Qwen3-0.6B decode step reads 58.6 MB of them from memory with little
/// arithmetic per row, and with the hardware prefetchers alone the
/// attention read them at about 5 GB/s on one thread of an Intel Xeon.
/// Thirty-two rows of a 128-wide `f16` head are 8 KiB, the distance the
/// weight products use (`x86_64::PREFETCH_AHEAD`); once the scores were
/// computed sixteen positions at a time, 16 rows (4 KiB) left a Zen 5
/// core's decode attention 10% slower than 32, and 48 or 64 measured the
/// same as 32.
pub(crate) const KV_PREFETCH_ROWS: usize = 32;

/// [`KV_PREFETCH_ROWS`] where the x86 kernels ask for the rows in L2
/// instead of L1 (AMD Zen 4: `x86_64::weights_to_l2`), as they do the
/// weights. On an AMD EPYC (Zen 4) VM, one thread, a Q8_0 Qwen3-0.6B's
/// decode attention after a 511-token prompt took 4.0-4.2 ms per token
/// with 32 rows asked for in L1 and 3.4-3.6 with 64 (16 KiB) in L2
/// (`inferno bench --trace`, alternated runs); 96 rows measured as 64, and
/// asking for the first rows of the next head or of the values before
/// they were read gained nothing. There, the value pass asks for nothing:
/// with the key pass's side-by-side rows (`avx512vnni::rows128`), a
/// Q4_0 decode attention after a 511-token prompt took 3.1-3.2 ms per
/// token against 3.9-4.0 before (one row at a time, the value rows asked
/// for too), and a head's values alone streamed at 11 ns a row against
/// 13 with the hints.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) const KV_PREFETCH_ROWS_L2: usize = 64;

/// Where and how far ahead a decode product that computes its rows one
/// whole row at a time asks for the rows it will read: each row's lines
/// together, just before the row is computed, `ahead` bytes past it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RowPrefetch {
    /// Bytes between the row being computed and the first line asked for.
    ahead: usize,
    /// Whether the lines are asked for in L2 (`prefetcht2`) rather than L1.
    to_l2: bool,
}

impl RowPrefetch {
    /// The longest row (16 lines) whose lines are still asked for in L1 on
    /// AMD Zen 4 ([`for_rows`](Self::for_rows)).
    #[cfg(target_arch = "x86_64")]
    const L1_ROW_MAX: usize = 1024;

    /// This CPU's choice for rows of `row_bytes` bytes: L1 hints 8 KiB
    /// ahead, except on AMD Zen 4 (`x86_64::weights_to_l2`, where the Q8_0
    /// products' rows always go to L2) for rows longer than 16 lines, which
    /// are asked for in L2, 16 KiB ahead. Off x86_64 a hint is a no-op.
    ///
    /// These are the hints of Q4_0, F16 and BF16 rows, and of the K-quant
    /// rows computed one at a time; the Q8_0 and Q6_K products ask for
    /// theirs inside their row loops, in pieces (`x86_64`'s `matvec_q8`
    /// and `matvec_q6_k`), which beat both on Zen 4 (and Q6_K's L1 hints
    /// in pieces beat a row's burst on Zen 3).
    ///
    /// On a Zen 4 core a row's burst of L1 hints stalls the product once the
    /// burst is long, and is the better hint while it is short. One thread,
    /// `inferno bench --trace` on a Q4_K_M Qwen3-0.6B, two alternated
    /// rounds, when its Q6_K rows still took these hints: the `lm_head`
    /// (840-byte rows) took 5.18-5.26 ms per
    /// token with L1 hints against 5.61-5.65 with L2 ones, the `ffn_down`
    /// products (2,520-byte Q6_K rows in half the layers) 3.20-3.39 against
    /// 2.62-2.64. `STREAM_COLS=3072 cargo bench --bench stream`: Q6_K at
    /// 0.66 of the read probe's speed with L1 hints, 0.93 with L2 ones;
    /// Q4_0 (1,728-byte rows) 0.42 against 0.78.
    pub(crate) fn for_rows(row_bytes: usize) -> Self {
        #[cfg(target_arch = "x86_64")]
        if x86_64::weights_to_l2() && row_bytes > Self::L1_ROW_MAX {
            return Self::L2;
        }
        #[cfg(target_arch = "x86_64")]
        return Self::L1;
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = row_bytes;
            Self {
                ahead: 8192,
                to_l2: false,
            }
        }
    }

    /// Hints into L1, [`PREFETCH_AHEAD`](x86_64::PREFETCH_AHEAD) bytes on.
    #[cfg(target_arch = "x86_64")]
    pub(crate) const L1: Self = Self {
        ahead: x86_64::PREFETCH_AHEAD,
        to_l2: false,
    };

    /// Hints into L2, [`PREFETCH_AHEAD_L2`](x86_64::PREFETCH_AHEAD_L2)
    /// bytes on.
    #[cfg(target_arch = "x86_64")]
    pub(crate) const L2: Self = Self {
        ahead: x86_64::PREFETCH_AHEAD_L2,
        to_l2: true,
    };

    /// Asks for the lines `ahead` bytes past bytes `*line..end` of `row`,
    /// from `*line` a line (64 bytes) at a time, and leaves `*line` at the
    /// first byte not asked for (a hint: any offset is allowed, wrapping
    /// around). From 0 to the row's length, the whole row; in steps, the
    /// row in pieces, each line once.
    #[inline(always)]
    pub(crate) fn lines_to<T>(self, row: &[T], line: &mut usize, end: usize) {
        while *line < end {
            let offset = self.ahead.wrapping_add(*line);
            if self.to_l2 {
                crate::unsafe_core::prefetch::prefetch_read_l2(row, offset);
            } else {
                crate::unsafe_core::prefetch::prefetch_read(row, offset);
            }
            *line += 64;
        }
    }
}

/// An instruction set the dot kernels are written for.
///
/// The public name of a dot kernel: what callers choose (the
/// explicit-kernel methods below) and print. The crate-internal
/// `Kernel::dispatch` turns it into the callable `Dispatch`.
///
/// Every variant exists on every target so code and tests can name them;
/// [`is_available`](Self::is_available) says whether this CPU runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kernel {
    /// Portable Rust; the reference every other kernel is tested against.
    Scalar,
    /// x86_64 AVX2 with FMA and F16C.
    Avx2,
    /// x86_64 AVX-512 VNNI (256-bit forms, with AVX-512 VL; the K-quant
    /// kernels at 512 bits need AVX-512 BW too, which the kernel requires).
    Avx512Vnni,
    /// x86_64 AVX-VNNI, the VEX-encoded VNNI of CPUs without AVX-512.
    AvxVnni,
    /// aarch64 NEON with the dot-product extension (`sdot`).
    NeonDot,
    /// aarch64 NEON.
    Neon,
}

/// Why an explicit-kernel call was rejected.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum KernelError {
    /// This CPU (or target) lacks the kernel's instruction set.
    #[error("the {0:?} kernel is not available on this CPU")]
    Unavailable(Kernel),
    /// The operands' shapes do not match.
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// The input cannot be quantized.
    #[error(transparent)]
    Quant(#[from] QuantError),
}

impl Kernel {
    /// Every kernel, fastest first within each architecture.
    pub const ALL: [Kernel; 6] = [
        Kernel::Avx512Vnni,
        Kernel::AvxVnni,
        Kernel::Avx2,
        Kernel::NeonDot,
        Kernel::Neon,
        Kernel::Scalar,
    ];

    /// Whether this CPU can run the kernel.
    pub fn is_available(self) -> bool {
        self.dispatch().is_some()
    }

    /// The kernel's name as [`KERNEL_ENV`] and [`Kernel::from_name`] take
    /// it: `scalar`, `avx2`, `avx512vnni`, `avxvnni`, `neondot`, `neon`.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Avx2 => "avx2",
            Kernel::Avx512Vnni => "avx512vnni",
            Kernel::AvxVnni => "avxvnni",
            Kernel::NeonDot => "neondot",
            Kernel::Neon => "neon",
        }
    }

    /// The kernel named `name` (as [`Kernel::name`] spells it, in any
    /// case), if there is one.
    ///
    /// ```
    /// use inferno_cpu::quant::Kernel;
    /// assert_eq!(Kernel::from_name("AVX2"), Some(Kernel::Avx2));
    /// assert_eq!(Kernel::from_name("sse"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Kernel> {
        Self::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name))
    }

    /// The kernel [`KERNEL_ENV`] asks for: `Ok(None)` if it is unset or
    /// empty.
    ///
    /// # Errors
    ///
    /// [`KernelEnvError`] if it names no kernel, or one this CPU lacks
    /// ([`Kernel::selected`] then ignores it).
    pub fn from_env() -> Result<Option<Kernel>, KernelEnvError> {
        requested(std::env::var_os(KERNEL_ENV).as_deref())
    }

    /// The fastest kernel this CPU runs, ignoring [`FORCE_SCALAR_ENV`] and
    /// [`KERNEL_ENV`].
    pub fn best_available() -> Kernel {
        Self::ALL
            .into_iter()
            .find(|k| k.is_available())
            .unwrap_or(Kernel::Scalar)
    }

    /// The kernel every matvec of this crate uses: detected on first call
    /// and cached for the life of the process. [`Kernel::Scalar`] if
    /// [`FORCE_SCALAR_ENV`] was `1` at that first call, else the kernel
    /// [`KERNEL_ENV`] named if this CPU runs it. The choice is made
    /// in one place, the crate-internal `selected()`, which caches it with
    /// its `Dispatch`; this returns its kernel half.
    pub fn selected() -> Kernel {
        selected().0
    }

    /// [`QuantizedVector::quantize_from`] with this kernel's quantizer
    /// (every kernel writes the same bytes; they differ in speed).
    ///
    /// # Errors
    ///
    /// [`KernelError::Unavailable`] if the CPU lacks the kernel;
    /// [`KernelError::Quant`] if `x.len()` is not a multiple of 32.
    pub fn quantize(self, x: &[f32], into: &mut QuantizedVector) -> Result<(), KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        Ok(into.quantize_with(k, x)?)
    }

    /// Dot product of a Q8_0 weight row with a quantized activation, with
    /// this kernel.
    ///
    /// ```
    /// use inferno_cpu::quant::{quantize_row_q8_0, Kernel, QuantizedVector};
    /// let w = quantize_row_q8_0(&[0.5f32; 64])?;
    /// let mut x = QuantizedVector::new();
    /// x.quantize_from(&[2.0f32; 64])?;
    /// let dot = Kernel::Scalar.dot_q8_0(&w, &x)?;
    /// assert!((dot - 64.0).abs() < 0.1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`KernelError::Unavailable`] if the CPU lacks the kernel;
    /// [`KernelError::Shape`] if `w` does not hold `x.cols() / 32` blocks.
    pub fn dot_q8_0(self, w: &[BlockQ8_0], x: &QuantizedVector) -> Result<f32, KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        if w.len() * QK8_0 != x.cols() {
            return Err(ShapeError::InputLength {
                expected: w.len() * QK8_0,
                got: x.cols(),
            }
            .into());
        }
        Ok(k.dot_q8(w, x.act()))
    }

    /// Dot product of a Q4_K weight row with Q8_K activations, with this
    /// kernel: the AVX2 code for `Avx2`, the same code with `vpdpwssd` in
    /// place of `vpmaddwd` + `vpaddd` for `Avx512Vnni` and `AvxVnni` (the
    /// same integer lanes and f32 operations, so the same bits as `Avx2`),
    /// NEON code with the scalar [`dot_q4_k_q8_k`](crate::quant::dot_q4_k_q8_k)'s
    /// bits for `Neon` and `NeonDot`, the scalar kernel otherwise. The x86
    /// code sums in another order, so its result is within the scalar
    /// kernel's error bound of the exact value rather than equal to the
    /// scalar bits.
    ///
    /// # Errors
    ///
    /// [`KernelError::Unavailable`] if the CPU lacks the kernel;
    /// [`KernelError::Quant`] if the rows hold different numbers of blocks.
    pub fn dot_q4_k_q8_k(self, w: &[BlockQ4K], x: &[BlockQ8K]) -> Result<f32, KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        crate::quant::kcommon::check_blocks(w.len(), x.len())?;
        Ok(k.dot_q4_k(w, x))
    }

    /// Dot product of a Q5_K weight row with Q8_K activations, with this
    /// kernel; as [`dot_q4_k_q8_k`](Self::dot_q4_k_q8_k) for Q5_K.
    ///
    /// # Errors
    ///
    /// [`KernelError::Unavailable`] if the CPU lacks the kernel;
    /// [`KernelError::Quant`] if the rows hold different numbers of blocks.
    pub fn dot_q5_k_q8_k(self, w: &[BlockQ5K], x: &[BlockQ8K]) -> Result<f32, KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        crate::quant::kcommon::check_blocks(w.len(), x.len())?;
        Ok(k.dot_q5_k(w, x))
    }

    /// Dot product of a Q6_K weight row with Q8_K activations, with this
    /// kernel; as [`dot_q4_k_q8_k`](Self::dot_q4_k_q8_k) for Q6_K.
    ///
    /// # Errors
    ///
    /// [`KernelError::Unavailable`] if the CPU lacks the kernel;
    /// [`KernelError::Quant`] if the rows hold different numbers of blocks.
    pub fn dot_q6_k_q8_k(self, w: &[BlockQ6K], x: &[BlockQ8K]) -> Result<f32, KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        crate::quant::kcommon::check_blocks(w.len(), x.len())?;
        Ok(k.dot_q6_k(w, x))
    }

    /// [`dot_q4_k_q8_k`](Self::dot_q4_k_q8_k) of one weight row with four
    /// activation rows: each result is that call's, bit for bit (NaN
    /// payloads aside), and the kernel unpacks each weight block once for
    /// the four rows, the form a prefill's matmul runs.
    ///
    /// # Errors
    ///
    /// [`KernelError::Unavailable`] if the CPU lacks the kernel;
    /// [`KernelError::Quant`] if a row holds another number of blocks than
    /// `w`.
    pub fn dot_q4_k_q8_k_x4(
        self,
        w: &[BlockQ4K],
        x: [&[BlockQ8K]; 4],
    ) -> Result<[f32; 4], KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        check_rows(w.len(), x)?;
        Ok(k.dot_q4_k_x4(w, x))
    }

    /// [`dot_q5_k_q8_k`](Self::dot_q5_k_q8_k) of one weight row with four
    /// activation rows, as [`dot_q4_k_q8_k_x4`](Self::dot_q4_k_q8_k_x4).
    ///
    /// # Errors
    ///
    /// As [`dot_q4_k_q8_k_x4`](Self::dot_q4_k_q8_k_x4).
    pub fn dot_q5_k_q8_k_x4(
        self,
        w: &[BlockQ5K],
        x: [&[BlockQ8K]; 4],
    ) -> Result<[f32; 4], KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        check_rows(w.len(), x)?;
        Ok(k.dot_q5_k_x4(w, x))
    }

    /// [`dot_q6_k_q8_k`](Self::dot_q6_k_q8_k) of one weight row with four
    /// activation rows, as [`dot_q4_k_q8_k_x4`](Self::dot_q4_k_q8_k_x4).
    ///
    /// # Errors
    ///
    /// As [`dot_q4_k_q8_k_x4`](Self::dot_q4_k_q8_k_x4).
    pub fn dot_q6_k_q8_k_x4(
        self,
        w: &[BlockQ6K],
        x: [&[BlockQ8K]; 4],
    ) -> Result<[f32; 4], KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        check_rows(w.len(), x)?;
        Ok(k.dot_q6_k_x4(w, x))
    }

    /// Dot product of a Q4_0 weight row with a quantized activation, with
    /// this kernel. The x86 kernels sum in the Q8_0 kernels' order, so
    /// their result is within [`q8_0_error_bound`]'s distance (with the
    /// Q4_0 levels as weights) of the scalar
    /// [`dot_q4_0_act`](crate::quant::dot_q4_0_act), not its bits; the
    /// three x86 kernels give the same bits.
    ///
    /// # Errors
    ///
    /// [`KernelError::Unavailable`] if the CPU lacks the kernel;
    /// [`KernelError::Shape`] if `w` does not hold `x.cols() / 32` blocks.
    pub fn dot_q4_0(self, w: &[BlockQ4_0], x: &QuantizedVector) -> Result<f32, KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        check_cols(w.len() * QK4_0, x.cols())?;
        Ok(k.dot_q4_0(w, x.act()))
    }

    /// [`dot_q4_0`](Self::dot_q4_0) of one weight row with four quantized
    /// activations: each result is that call's, bit for bit (NaN payloads
    /// aside), with each weight block unpacked once for the four.
    ///
    /// # Errors
    ///
    /// [`KernelError::Unavailable`] if the CPU lacks the kernel;
    /// [`KernelError::Shape`] if `w` does not hold `x[i].cols() / 32`
    /// blocks for some `i`.
    pub fn dot_q4_0_x4(
        self,
        w: &[BlockQ4_0],
        x: [&QuantizedVector; 4],
    ) -> Result<[f32; 4], KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        for xi in x {
            check_cols(w.len() * QK4_0, xi.cols())?;
        }
        Ok(k.dot_q4_0_x4(w, x.map(|xi| xi.act())))
    }

    /// Dot product of two f32 slices, with this kernel (the f32 parts of
    /// `Avx512Vnni` and `AvxVnni` are that of `Avx2`, and `NeonDot`'s is
    /// that of `Neon`).
    ///
    /// # Errors
    ///
    /// [`KernelError::Unavailable`] if the CPU lacks the kernel;
    /// [`KernelError::Shape`] if the lengths differ.
    pub fn dot_f32(self, w: &[f32], x: &[f32]) -> Result<f32, KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        if w.len() != x.len() {
            return Err(ShapeError::InputLength {
                expected: w.len(),
                got: x.len(),
            }
            .into());
        }
        Ok(k.dot_f32(w, x))
    }

    /// [`matvec_q8_0`](crate::matvec::matvec_q8_0) with this kernel instead
    /// of the selected one: `out[r]` is exactly
    /// [`dot_q8_0`](Self::dot_q8_0) of row `r`.
    ///
    /// # Errors
    ///
    /// [`KernelError::Unavailable`] if the CPU lacks the kernel;
    /// [`KernelError::Shape`] if `x` or `out` do not fit `w`.
    pub fn matvec_q8_0(
        self,
        w: &Q8Matrix<'_>,
        x: &QuantizedVector,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        check_lengths(w.cols(), x.cols(), w.rows(), out.len())?;
        k.matvec_q8(w.blocks(), w.blocks_per_row(), x.act(), out);
        Ok(())
    }

    /// [`matvec_f32`](crate::matvec::matvec_f32) with this kernel instead
    /// of the selected one: `out[r]` is exactly [`dot_f32`](Self::dot_f32)
    /// of row `r`.
    ///
    /// # Errors
    ///
    /// [`KernelError::Unavailable`] if the CPU lacks the kernel;
    /// [`KernelError::Shape`] if `x` or `out` do not fit `w`.
    pub fn matvec_f32(
        self,
        w: &F32Matrix<'_>,
        x: &[f32],
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        check_lengths(w.cols(), x.len(), w.rows(), out.len())?;
        k.matvec_f32(w.data(), w.cols(), x, out);
        Ok(())
    }

    /// The callable form of the kernel, if the CPU runs it.
    pub(crate) fn dispatch(self) -> Option<Dispatch> {
        match self {
            Kernel::Scalar => Some(Dispatch::Scalar),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => Avx2Token::new().map(Dispatch::Avx2),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512Vnni => Avx512VnniToken::new().map(Dispatch::Avx512Vnni),
            #[cfg(target_arch = "x86_64")]
            Kernel::AvxVnni => AvxVnniToken::new().map(Dispatch::AvxVnni),
            #[cfg(target_arch = "aarch64")]
            Kernel::NeonDot => NeonDotToken::new().map(Dispatch::NeonDot),
            #[cfg(target_arch = "aarch64")]
            Kernel::Neon => NeonToken::new().map(Dispatch::Neon),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}

/// Checks an activation's length against a weight row's.
fn check_cols(expected: usize, got: usize) -> Result<(), ShapeError> {
    if expected != got {
        return Err(ShapeError::InputLength { expected, got });
    }
    Ok(())
}

/// Checks that each of four activation rows holds `nb` blocks.
fn check_rows(nb: usize, x: [&[BlockQ8K]; 4]) -> Result<(), QuantError> {
    for xi in x {
        crate::quant::kcommon::check_blocks(nb, xi.len())?;
    }
    Ok(())
}

/// Checks a matvec's input and output lengths against the matrix.
fn check_lengths(cols: usize, x_len: usize, rows: usize, out_len: usize) -> Result<(), ShapeError> {
    if cols != x_len {
        return Err(ShapeError::InputLength {
            expected: cols,
            got: x_len,
        });
    }
    if rows != out_len {
        return Err(ShapeError::OutputLength {
            expected: rows,
            got: out_len,
        });
    }
    Ok(())
}

/// `[dot(row 0), .., dot(row 7)]` of eight packed rows, each unpacked
/// into a scratch row this thread keeps (allocated on its first call and
/// grown to the longest row seen, so a decode step allocates nothing
/// after the first): how the kernels without an eight-row form read
/// packed rows.
///
/// # Panics
///
/// If `w.len() != x.len()`.
fn unpacked_dots<P: PackedBlock, X>(w: &[P], x: &[X], dot: impl Fn(&[P::Row]) -> f32) -> [f32; 8]
where
    P::Row: 'static,
{
    use std::any::Any;
    use std::cell::RefCell;
    assert_eq!(w.len(), x.len(), "packed dot: block counts differ");
    std::thread_local! {
        // One scratch per row type, as `Vec<P::Row>` behind `Any`.
        static ROWS: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
    }
    let compute = |row: &mut Vec<P::Row>| {
        core::array::from_fn(|r| {
            row.clear();
            row.extend(w.iter().map(|b| b.row(r)));
            dot(row)
        })
    };
    // A dot that panics leaves the scratch borrowed only until it unwinds
    // out of here; a nested call (none exists) would take a fresh row.
    ROWS.with(|rows| match rows.try_borrow_mut() {
        Ok(mut rows) => {
            let slot = match rows.iter().position(|b| b.is::<Vec<P::Row>>()) {
                Some(i) => i,
                None => {
                    rows.push(Box::new(Vec::<P::Row>::new()));
                    rows.len() - 1
                }
            };
            match rows[slot].downcast_mut::<Vec<P::Row>>() {
                Some(row) => compute(row),
                None => compute(&mut Vec::new()),
            }
        }
        Err(_) => compute(&mut Vec::new()),
    })
}

/// The kernel the crate uses and its callable form, chosen (by [`choose`])
/// and cached on first call: the one place the choice is made.
/// [`Kernel::selected`] returns the kernel half; the matvecs call the
/// `Dispatch` half.
pub(crate) fn selected() -> (Kernel, Dispatch) {
    static SELECTED: OnceLock<(Kernel, Dispatch)> = OnceLock::new();
    *SELECTED.get_or_init(|| {
        let kernel = choose(
            std::env::var_os(FORCE_SCALAR_ENV).as_deref(),
            std::env::var_os(KERNEL_ENV).as_deref(),
        );
        // `choose` only returns kernels whose dispatch exists.
        let dispatch = kernel.dispatch().unwrap_or(Dispatch::Scalar);
        (kernel, dispatch)
    })
}

/// The kernel to select given the values of [`FORCE_SCALAR_ENV`] and
/// [`KERNEL_ENV`].
fn choose(force_scalar: Option<&std::ffi::OsStr>, named: Option<&std::ffi::OsStr>) -> Kernel {
    if force_scalar.is_some_and(|v| v == "1") {
        return Kernel::Scalar;
    }
    match requested(named) {
        Ok(Some(k)) => k,
        _ => Kernel::best_available(),
    }
}

/// The kernel a [`KERNEL_ENV`] value asks for (see [`Kernel::from_env`]).
fn requested(value: Option<&std::ffi::OsStr>) -> Result<Option<Kernel>, KernelEnvError> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let text = value.to_string_lossy();
    let kernel =
        Kernel::from_name(&text).ok_or_else(|| KernelEnvError::Unknown(text.into_owned()))?;
    if kernel.is_available() {
        Ok(Some(kernel))
    } else {
        Err(KernelEnvError::Unavailable(kernel))
    }
}

/// One weight row of a K-quant type, for the kernels that take any of them.
#[derive(Clone, Copy, Debug)]
pub(crate) enum KRow<'a> {
    Q4K(&'a [BlockQ4K]),
    Q5K(&'a [BlockQ5K]),
    Q6K(&'a [BlockQ6K]),
}

/// A [`Kernel`] together with the CPU-feature token that proves it may
/// run, built by [`Kernel::dispatch`] (only `Dispatch::Scalar`, which needs
/// no token, is also named directly). What the matvecs call.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Dispatch {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2(Avx2Token),
    #[cfg(target_arch = "x86_64")]
    Avx512Vnni(Avx512VnniToken),
    #[cfg(target_arch = "x86_64")]
    AvxVnni(AvxVnniToken),
    #[cfg(target_arch = "aarch64")]
    NeonDot(NeonDotToken),
    #[cfg(target_arch = "aarch64")]
    Neon(NeonToken),
}

impl Dispatch {
    /// See `scalar::dot_q8`.
    #[inline]
    pub(crate) fn dot_q8(self, w: &[BlockQ8_0], x: &[ActBlock]) -> f32 {
        match self {
            Dispatch::Scalar => scalar::dot_q8(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_q8(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_q8(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.dot_q8(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.dot_q8(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.dot_q8(w, x),
        }
    }

    /// `dot_q8` of one weight row with four activation rows, bit for bit
    /// (NaN payloads aside: the compiler may order an add's operands either
    /// way, and Rust leaves NaN payloads unspecified)
    /// (the SIMD kernels share the weight-side work; the scalar one makes
    /// four calls).
    #[inline]
    pub(crate) fn dot_q8_x4(self, w: &[BlockQ8_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_q8_x4(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_q8_x4(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.dot_q8_x4(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.dot_q8_x4(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.dot_q8_x4(w, x),
            _ => x.map(|xi| self.dot_q8(w, xi)),
        }
    }

    /// Whether the Q4_0 decode row reads the activation's groups of eight
    /// blocks ([`NibbleGroup`](super::activation::NibbleGroup), built when
    /// a vector is quantized): AVX2's and AVX-512 VNNI's
    /// [`dot_q4_0_decode`](Self::dot_q4_0_decode).
    #[inline]
    pub(crate) fn decode_uses_nibble_groups(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Dispatch::Avx2(_) | Dispatch::Avx512Vnni(_) = self {
            return true;
        }
        false
    }

    /// The Q4_0 x Q8_0 dot of a decode row against a quantized vector,
    /// [`dot_q4_0`](Self::dot_q4_0)'s bits (NaN payloads and signs
    /// aside), from the activation's groups of eight blocks where the
    /// kernel reads them (AVX2 and AVX-512 VNNI, which share AVX2's
    /// rounding of Q4_0).
    ///
    /// # Panics
    ///
    /// If `w.len()` differs from the vector's block count.
    #[inline]
    pub(crate) fn dot_q4_0_decode(self, w: &[BlockQ4_0], x: &QuantizedVector) -> f32 {
        match (self, x.nibble_groups()) {
            #[cfg(target_arch = "x86_64")]
            (Dispatch::Avx2(t), Some(g)) => t.dot_q4_0_groups(w, g, x.act()),
            #[cfg(target_arch = "x86_64")]
            (Dispatch::Avx512Vnni(t), Some(g)) => t.dot_q4_0_groups(w, g, x.act()),
            _ => self.dot_q4_0(w, x.act()),
        }
    }

    /// Whether this is the AVX-512 VNNI kernel: what its layout predicates
    /// (paired rows, packed rows, the sixteen-row GEMMs) come down to.
    #[inline]
    fn is_avx512_vnni(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Dispatch::Avx512Vnni(_) = self {
            return true;
        }
        false
    }

    /// Whether [`dot_q8_x4_pairs`](Self::dot_q8_x4_pairs) uses the paired
    /// layout (so a batch should build it).
    #[inline]
    pub(crate) fn matmul_uses_pairs(self) -> bool {
        self.is_avx512_vnni()
    }

    /// [`dot_q8_x4`](Self::dot_q8_x4), bit for bit, reading the rows from
    /// their paired layout where the kernel has a 512-bit form (AVX-512
    /// VNNI), else from `x`.
    #[inline]
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
    pub(crate) fn dot_q8_x4_pairs(
        self,
        w: &[BlockQ8_0],
        pairs: [&[PairBlock]; 4],
        x: [&[ActBlock]; 4],
    ) -> [f32; 4] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_q8_x4_pairs(w, pairs, x),
            _ => self.dot_q8_x4(w, x),
        }
    }

    /// `[dot_q8_x4_pairs(w[0], ..), dot_q8_x4_pairs(w[1], ..)]`, bit for
    /// bit: two weight rows against the same four activation rows.
    #[inline]
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
    pub(crate) fn dot_q8_2x4_pairs(
        self,
        w: [&[BlockQ8_0]; 2],
        pairs: [&[PairBlock]; 4],
        x: [&[ActBlock]; 4],
    ) -> [[f32; 4]; 2] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_q8_2x4_pairs(w, pairs, x),
            _ => w.map(|wr| self.dot_q8_x4(wr, x)),
        }
    }

    /// Whether [`gemm_k4_4x8`](Self::gemm_k4_4x8) and
    /// [`gemm_q6_4x8`](Self::gemm_q6_4x8) run a vector kernel (every x86
    /// kernel: so a batch should build its interleaved K-quant groups and
    /// a prefill should use them).
    #[inline]
    pub(crate) fn matmul_uses_k_groups(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Dispatch::Avx2(_) | Dispatch::AvxVnni(_) | Dispatch::Avx512Vnni(_) = self {
            return true;
        }
        false
    }

    /// Whether a Q8_0 or Q4_0 prefill runs a GEMM over the batch's
    /// interleaved Q8_0 groups (so a batch should build them):
    /// [`gemm_b32_2x8`](Self::gemm_b32_2x8) with AVX-512 VNNI,
    /// [`gemm_b32s_2x8`](Self::gemm_b32s_2x8) and
    /// [`gemm_q4_0_4x8`](Self::gemm_q4_0_4x8) with AVX2
    /// ([`matmul_uses_b32_signed`](Self::matmul_uses_b32_signed)).
    #[inline]
    pub(crate) fn matmul_uses_b32_groups(self) -> bool {
        self.matmul_uses_pairs() || self.matmul_uses_b32_signed()
    }

    /// Whether the Q8_0 GEMM is [`gemm_b32s_2x8`](Self::gemm_b32s_2x8)
    /// over signed weights and the Q4_0 one
    /// [`gemm_q4_0_4x8`](Self::gemm_q4_0_4x8) (AVX2) rather than
    /// [`gemm_b32_2x8`](Self::gemm_b32_2x8) (AVX-512 VNNI, Q8_0 only: its
    /// Q4_0 runs [`gemm_q4_0_rows16`](Self::gemm_q4_0_rows16)). AVX-VNNI keeps
    /// its four-row kernels: there one `vpdpbusd`, the offset folded in,
    /// does what `vpsignb`, `vpmaddubsw` and `vpmaddwd` do in this GEMM,
    /// so the GEMM's saving (the scale product) may not pay for its
    /// broadcasts, and no AVX-VNNI machine was at hand to measure it.
    #[inline]
    pub(crate) fn matmul_uses_b32_signed(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Dispatch::Avx2(_) = self {
            return true;
        }
        false
    }

    /// `gemm_k4_reference(w, x)`: four Q4_K/Q5_K weight rows against eight
    /// interleaved activation rows, each result the single-row dot's bits.
    #[inline]
    pub(crate) fn gemm_k4_4x8(self, w: [&[K4Levels]; 4], x: &[Q8KGroup]) -> [[f32; GROUP_ROWS]; 4] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.gemm_k4_4x8(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.gemm_k4_4x8(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().gemm_k4_4x8(w, x),
            _ => kgroup::gemm_k4_reference(w, x),
        }
    }

    /// `gemm_b32_reference::<Q8_0_SHIFT>(w, x)`: two Q8_0 weight rows
    /// (unsigned: their values plus 128) against eight interleaved
    /// activation rows, each result the VNNI kernels' single-row
    /// `dot_q8`'s bits. AVX-512 VNNI's Q8_0 prefill runs it.
    #[inline]
    pub(crate) fn gemm_b32_2x8(
        self,
        w: [&[B32Levels]; 2],
        x: &[Q8Group],
    ) -> [[f32; GROUP_ROWS]; 2] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.gemm_b32_2x8(w, x),
            _ => kgroup::gemm_b32_reference::<{ kgroup::Q8_0_SHIFT }>(w, x),
        }
    }

    /// `gemm_b32s_reference(w, x)`: one Q8_0 or Q4_0 weight row, as signed
    /// bytes, against eight interleaved activation rows, each result the
    /// bits of AVX2's single-row dots (`x86_64::avx2_q8` says how they
    /// round). The AVX2 kernel's prefill runs it two rows at a time
    /// ([`gemm_b32s_2x8`](Self::gemm_b32s_2x8);
    /// [`matmul_uses_b32_signed`](Self::matmul_uses_b32_signed)): the
    /// VNNI kernels' dots round otherwise. A Q4_0 prefill runs
    /// [`gemm_q4_0_4x8`](Self::gemm_q4_0_4x8) instead.
    #[inline]
    pub(crate) fn gemm_b32s_1x8(self, w: &[B32Signed], x: &[Q8Group]) -> [f32; GROUP_ROWS] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.gemm_b32s_1x8(w, x),
            _ => kgroup::gemm_b32s_reference(w, x),
        }
    }

    /// `[gemm_b32s_1x8(w[0], x), gemm_b32s_1x8(w[1], x)]`, bit for bit:
    /// two weight rows against the same eight activation rows. The AVX2
    /// kernel's Q8_0 prefill runs it.
    #[inline]
    pub(crate) fn gemm_b32s_2x8(
        self,
        w: [&[B32Signed]; 2],
        x: &[Q8Group],
    ) -> [[f32; GROUP_ROWS]; 2] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.gemm_b32s_2x8(w, x),
            _ => w.map(|wr| self.gemm_b32s_1x8(wr, x)),
        }
    }

    /// `gemm_q4_0_reference(w, x)`: one Q4_0 weight row, as its levels,
    /// against eight interleaved activation rows, each result the bits of
    /// AVX2's single-row `dot_q4_0` (and of
    /// [`gemm_b32s_1x8`](Self::gemm_b32s_1x8) of the row's signed form).
    /// The AVX2 kernel's Q4_0 prefill runs it four rows at a time
    /// ([`gemm_q4_0_4x8`](Self::gemm_q4_0_4x8)).
    #[inline]
    pub(crate) fn gemm_q4_0_1x8(self, w: &[B32Levels], x: &[Q8Group]) -> [f32; GROUP_ROWS] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.gemm_q4_0_1x8(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.avx2().gemm_q4_0_1x8(w, x),
            _ => kgroup::gemm_q4_0_reference(w, x),
        }
    }

    /// [`gemm_q4_0_1x8`](Self::gemm_q4_0_1x8) of each of four Q4_0
    /// weight rows against the same eight activation rows, bit for bit.
    /// The AVX2 kernel's Q4_0 prefill runs it.
    #[inline]
    pub(crate) fn gemm_q4_0_4x8(
        self,
        w: [&[B32Levels]; 4],
        x: &[Q8Group],
    ) -> [[f32; GROUP_ROWS]; 4] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.gemm_q4_0_4x8(w, x),
            _ => w.map(|wr| self.gemm_q4_0_1x8(wr, x)),
        }
    }

    /// Whether Q4_0 prefill products run
    /// [`gemm_q4_0_rows16`](Self::gemm_q4_0_rows16) (AVX-512 VNNI), over
    /// the activation rows themselves, rather than the interleaved groups.
    #[inline]
    pub(crate) fn matmul_uses_q4_0_rows16(self) -> bool {
        self.is_avx512_vnni()
    }

    /// `gemm_q4_0_rows16_reference(w, x)` (`quant::kgroup`): sixteen
    /// interleaved Q4_0 weight rows against `T` activation rows, each value
    /// AVX2's `dot_q4_0`, which AVX-512 VNNI's Q4_0 dots share.
    #[inline]
    pub(crate) fn gemm_q4_0_rows16<const T: usize>(
        self,
        w: &[Q4_0Rows16],
        x: [&[Q4_0Act]; T],
    ) -> [[f32; ROWS16]; T] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.gemm_q4_0_rows16(w, x),
            _ => kgroup::gemm_q4_0_rows16_reference(w, x),
        }
    }

    /// Whether packed Q4_K and Q5_K prefill products run
    /// [`gemm_k4_rows16`](Self::gemm_k4_rows16), and Q6_K ones
    /// [`gemm_q6_rows16`](Self::gemm_q6_rows16) (AVX-512 VNNI), rather than
    /// the interleaved groups' [`gemm_k4_4x8`](Self::gemm_k4_4x8) and
    /// [`gemm_q6_4x8`](Self::gemm_q6_4x8).
    #[inline]
    pub(crate) fn matmul_uses_k4_rows16(self) -> bool {
        self.matmul_uses_q4_0_rows16()
    }

    /// `gemm_k4_rows16_reference(w, x)` (`quant::kgroup`): sixteen
    /// interleaved Q4_K or Q5_K weight rows against `T` activation rows,
    /// each value the single-row dot's bits.
    #[inline]
    pub(crate) fn gemm_k4_rows16<const T: usize>(
        self,
        w: &[K4Rows16],
        x: [&[Q8KAct]; T],
    ) -> [[f32; ROWS16]; T] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.gemm_k4_rows16(w, x),
            _ => kgroup::gemm_k4_rows16_reference(w, x),
        }
    }

    /// `gemm_q6_rows16_reference(w, x)` (`quant::kgroup`): sixteen
    /// interleaved Q6_K weight rows against `T` activation rows (their
    /// sums their values'), each value the x86 single-row dot's bits (the
    /// AVX-512 kernel's; elsewhere the reference, which prefill does not
    /// call: it runs this GEMM where it runs
    /// [`gemm_k4_rows16`](Self::gemm_k4_rows16)).
    #[inline]
    pub(crate) fn gemm_q6_rows16<const T: usize>(
        self,
        w: &[Q6Rows16],
        x: [&[Q8KAct]; T],
    ) -> [[f32; ROWS16]; T] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.gemm_q6_rows16(w, x),
            _ => kgroup::gemm_q6_rows16_reference(w, x),
        }
    }

    /// Fills a [`Q6Rows16`] tile with block `b` of row `r` of `rows` at
    /// `tile[b]`'s lane `r`, as `Q6Rows16::set_row` would: on AVX-512
    /// VNNI in registers (each row's levels rebuilt, then transposed),
    /// elsewhere a row at a time.
    ///
    /// # Panics
    ///
    /// If a row's block count differs from `tile.len()`.
    #[inline]
    pub(crate) fn q6_tile_rows(self, tile: &mut [Q6Rows16], rows: [&[BlockQ6K]; ROWS16]) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.q6_tile_rows(tile, rows),
            _ => {
                for (r, row) in rows.iter().enumerate() {
                    assert_eq!(row.len(), tile.len(), "q6_tile_rows: block counts differ");
                    for (t, b) in tile.iter_mut().zip(*row) {
                        t.set_row(r, b);
                    }
                }
            }
        }
    }

    /// `k4_tile_levels_reference(t, qs, qh)` (`quant::kgroup`): a sixteen-row
    /// K-quant tile's levels from two packed groups' block.
    #[inline]
    pub(crate) fn k4_tile_levels(
        self,
        t: &mut K4Rows16,
        qs: [&[[[u8; 8]; 8]; 16]; 2],
        qh: Option<[&[[[u8; 8]; 8]; 4]; 2]>,
    ) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(tk) => tk.k4_tile_levels(t, qs, qh),
            _ => kgroup::k4_tile_levels_reference(t, qs, qh),
        }
    }

    /// `K4Rows16::set_head` of rows `0..8` from `heads[0]` and `8..16`
    /// from `heads[1]` (two packed groups' heads): the same tile bits, on
    /// AVX-512 VNNI sixteen heads at once.
    #[inline]
    pub(crate) fn k4_tile_heads(self, t: &mut K4Rows16, heads: [&[[u8; 16]; 8]; 2]) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(tk) => tk.k4_tile_heads(t, heads),
            _ => {
                for (g, group) in heads.iter().enumerate() {
                    for (r, head) in group.iter().enumerate() {
                        t.set_head(8 * g + r, head);
                    }
                }
            }
        }
    }

    /// `gemm_q6_reference(w, x)`, as [`gemm_k4_4x8`](Self::gemm_k4_4x8).
    #[inline]
    pub(crate) fn gemm_q6_4x8(self, w: [&[Q6Levels]; 4], x: &[Q8KGroup]) -> [[f32; GROUP_ROWS]; 4] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.gemm_q6_4x8(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.gemm_q6_4x8(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().gemm_q6_4x8(w, x),
            _ => kgroup::gemm_q6_reference(w, x),
        }
    }

    /// See `scalar::matvec_q8`; every row gets exactly `dot_q8`'s result.
    #[inline]
    pub(crate) fn matvec_q8(self, w: &[BlockQ8_0], nb: usize, x: &[ActBlock], out: &mut [f32]) {
        match self {
            Dispatch::Scalar => scalar::matvec_q8(w, nb, x, out),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.matvec_q8(w, nb, x, out),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.matvec_q8(w, nb, x, out),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.matvec_q8(w, nb, x, out),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.matvec_q8(w, nb, x, out),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.matvec_q8(w, nb, x, out),
        }
    }

    /// The Q4_0 x Q8_0 dot: each x86 kernel's lanes and f32 sums are those
    /// of a Q8_0 kernel's (AVX2's and AVX-512 VNNI's, which share AVX2's
    /// rounding and bits; AVX-VNNI's, lane-wise); the scalar kernel is
    /// `q4_0::dot_q4_0_act_blocks`.
    ///
    /// # Panics
    ///
    /// If `w.len() != x.len()`.
    #[inline]
    pub(crate) fn dot_q4_0(self, w: &[BlockQ4_0], x: &[ActBlock]) -> f32 {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_q4_0(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.avx2().dot_q4_0(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.dot_q4_0(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.neon().dot_q4_0(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.dot_q4_0(w, x),
            _ => {
                assert_eq!(w.len(), x.len(), "dot_q4_0: block counts differ");
                crate::quant::q4_0::dot_q4_0_act_blocks(w, x)
            }
        }
    }

    /// `[dot_q4_0(w, x[0]), .., dot_q4_0(w, x[3])]`, bit for bit (NaN
    /// payloads aside; the x86 kernels unpack each weight block once, the
    /// scalar one makes four calls).
    ///
    /// # Panics
    ///
    /// If any `x[i].len() != w.len()`.
    #[inline]
    pub(crate) fn dot_q4_0_x4(self, w: &[BlockQ4_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_q4_0_x4(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.avx2().dot_q4_0_x4(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.dot_q4_0_x4(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.neon().dot_q4_0_x4(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.dot_q4_0_x4(w, x),
            _ => {
                for xi in x {
                    assert_eq!(w.len(), xi.len(), "dot_q4_0: block counts differ");
                }
                x.map(|xi| self.dot_q4_0(w, xi))
            }
        }
    }

    /// The Q4_K x Q8_K dot (block counts checked by the caller).
    #[inline]
    pub(crate) fn dot_q4_k(self, w: &[BlockQ4K], x: &[BlockQ8K]) -> f32 {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_q4_k(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_q4_k(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.dot_q4_k(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.neon().dot_q4_k(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.dot_q4_k(w, x),
            _ => crate::quant::q4_k::dot_q4_k_blocks(w, x),
        }
    }

    /// Whether [`dot_q4_k_rows8`](Self::dot_q4_k_rows8) and its Q5_K
    /// form share work across rows (AVX-512 VNNI in one pass over eight
    /// rows, AVX2 four rows at a time), rather than running eight
    /// single-row dots.
    #[inline]
    pub(crate) fn has_k_rows8(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Dispatch::Avx512Vnni(_) | Dispatch::Avx2(_) = self {
            return true;
        }
        false
    }

    /// Whether this kernel reads eight-row packed Q4_K blocks
    /// ([`BlockQ4Kx8`]) as they lie, in decode and in prefill (AVX-512
    /// VNNI, AVX2). Only then does packing a model's projections pay;
    /// every other kernel would unpack each row again.
    ///
    /// On AVX2 decode reads them with the rows in the lanes
    /// (`avx2::dot_q4_k_packed8`: 1.40-1.46x the row-major decode kernel
    /// with the weights in L2 on an AMD EPYC (Zen 3) VM), and the prefill
    /// GEMM unpacks each row's levels from the packed words.
    #[inline]
    pub(crate) fn reads_packed_q4_k(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Dispatch::Avx512Vnni(_) | Dispatch::Avx2(_) = self {
            return true;
        }
        false
    }

    /// Whether this kernel reads eight-row packed Q5_K blocks
    /// ([`BlockQ5Kx8`]) as they lie (AVX-512 VNNI, AVX2), as
    /// [`reads_packed_q4_k`](Self::reads_packed_q4_k) for Q4_K.
    #[inline]
    pub(crate) fn reads_packed_q5_k(self) -> bool {
        self.reads_packed_q4_k()
    }

    /// `[dot_q4_k(w[0], x), .., dot_q4_k(w[7], x)]`, bit for bit (NaN
    /// payloads aside): eight decode rows against one activation.
    ///
    /// # Panics
    ///
    /// If a row's block count differs from `x.len()`.
    #[inline]
    pub(crate) fn dot_q4_k_rows8(self, w: [&[BlockQ4K]; 8], x: &[BlockQ8K]) -> [f32; 8] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_q4_k_rows8(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_q4_k_rows8(w, x),
            _ => w.map(|wr| {
                assert_eq!(wr.len(), x.len(), "dot_q4_k_rows8: block counts differ");
                self.dot_q4_k(wr, x)
            }),
        }
    }

    /// Whether decode reads Q4_0 matrices packed eight rows at a time
    /// ([`BlockQ4_0x8`]) as they lie (AVX-512 VNNI, AVX2: the rows in the
    /// lanes), so a model packs them at load. Elsewhere a packed matrix
    /// still works, each row unpacked into a scratch row first.
    #[inline]
    pub(crate) fn reads_packed_q4_0(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if let Dispatch::Avx512Vnni(_) | Dispatch::Avx2(_) = self {
            return true;
        }
        false
    }

    /// `dot_q4_0` (as [`dot_q4_0_decode`](Self::dot_q4_0_decode) gives it)
    /// of each of eight rows packed ([`BlockQ4_0x8`]) with `x`, bit for bit
    /// (NaN payloads aside). On AVX-512 VNNI and AVX2 one pass over the
    /// packed blocks as they lie; elsewhere each row unpacked into a
    /// scratch row (see [`unpacked_dots`]), then this kernel's dot.
    ///
    /// # Panics
    ///
    /// If `w.len()` is not `x`'s block count.
    #[inline]
    pub(crate) fn dot_q4_0_packed8(self, w: &[BlockQ4_0x8], x: &QuantizedVector) -> [f32; 8] {
        match (self, x.nibble_groups()) {
            #[cfg(target_arch = "x86_64")]
            (Dispatch::Avx512Vnni(t), Some(g)) => t.dot_q4_0_packed8(w, g, x.act()),
            #[cfg(target_arch = "x86_64")]
            (Dispatch::Avx2(t), Some(g)) => t.dot_q4_0_packed8(w, g, x.act()),
            _ => unpacked_dots(w, x.act(), |row| self.dot_q4_0_decode(row, x)),
        }
    }

    /// [`dot_q4_k_rows8`](Self::dot_q4_k_rows8) of eight rows packed
    /// ([`BlockQ4Kx8`]): `dot_q4_k` of each row, bit for bit (NaN payloads
    /// aside). On AVX-512 VNNI and AVX2 one pass over the packed blocks as
    /// they lie; elsewhere each row unpacked into a scratch row (see
    /// [`unpacked_dots`]), then this kernel's `dot_q4_k`.
    ///
    /// # Panics
    ///
    /// If `w.len() != x.len()`.
    #[inline]
    pub(crate) fn dot_q4_k_packed8(self, w: &[BlockQ4Kx8], x: &[BlockQ8K]) -> [f32; 8] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_q4_k_packed8(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_q4_k_packed8(w, x),
            _ => unpacked_dots(w, x, |row| self.dot_q4_k(row, x)),
        }
    }

    /// [`dot_q4_k_packed8`](Self::dot_q4_k_packed8) for Q5_K rows
    /// ([`BlockQ5Kx8`]): `dot_q5_k` of each, bit for bit.
    ///
    /// # Panics
    ///
    /// If `w.len() != x.len()`.
    #[inline]
    pub(crate) fn dot_q5_k_packed8(self, w: &[BlockQ5Kx8], x: &[BlockQ8K]) -> [f32; 8] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_q5_k_packed8(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_q5_k_packed8(w, x),
            _ => unpacked_dots(w, x, |row| self.dot_q5_k(row, x)),
        }
    }

    /// [`dot_q4_k_rows8`](Self::dot_q4_k_rows8) for Q5_K rows.
    ///
    /// # Panics
    ///
    /// If a row's block count differs from `x.len()`.
    #[inline]
    pub(crate) fn dot_q5_k_rows8(self, w: [&[BlockQ5K]; 8], x: &[BlockQ8K]) -> [f32; 8] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_q5_k_rows8(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_q5_k_rows8(w, x),
            _ => w.map(|wr| {
                assert_eq!(wr.len(), x.len(), "dot_q5_k_rows8: block counts differ");
                self.dot_q5_k(wr, x)
            }),
        }
    }

    /// The Q5_K x Q8_K dot (block counts checked by the caller).
    #[inline]
    pub(crate) fn dot_q5_k(self, w: &[BlockQ5K], x: &[BlockQ8K]) -> f32 {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_q5_k(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_q5_k(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.dot_q5_k(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.neon().dot_q5_k(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.dot_q5_k(w, x),
            _ => crate::quant::q5_k::dot_q5_k_blocks(w, x),
        }
    }

    /// The Q6_K x Q8_K dot (block counts checked by the caller).
    #[inline]
    pub(crate) fn dot_q6_k(self, w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_q6_k(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_q6_k(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.dot_q6_k(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.neon().dot_q6_k(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.dot_q6_k(w, x),
            _ => crate::quant::q6_k::dot_q6_k_blocks(w, x),
        }
    }

    /// [`Dispatch::dot_q6_k`], bit for bit, for activation blocks whose
    /// `bsums` hold the sums of their values, as every block this crate
    /// quantizes does (a [`QuantizedVector`]'s are): the x86 kernels take
    /// the levels' offset of 32 off once per block from those sums, half
    /// the multiplies of `dot_q6_k`, which cannot trust the sums of blocks
    /// it is handed. On an AMD EPYC (Zen 4) VM, the Q6_K decode products
    /// with weights in L2 (`STREAM_KB=256 cargo bench --bench stream`) went
    /// from 24.4 to 26.5-26.7 GB/s (28.4 with the kernels' four-block
    /// horizontal sums).
    #[inline]
    pub(crate) fn dot_q6_k_summed(self, w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_q6_k_summed(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_q6_k_summed(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.dot_q6_k_summed(w, x),
            _ => self.dot_q6_k(w, x),
        }
    }

    /// `out[r] = dot_q6_k_summed(row r of w, x)` for the `out.len()` rows
    /// of `nb` blocks: a decode product, whose activation `x` was quantized
    /// by this crate. The x86 kernels prefetch inside their row loop (see
    /// `x86_64`'s `matvec_q6_k`); the others compute row by row.
    ///
    /// # Panics
    ///
    /// If `x.len() != nb` or `w.len() != nb * out.len()`.
    #[inline]
    pub(crate) fn matvec_q6_k(self, w: &[BlockQ6K], nb: usize, x: &[BlockQ8K], out: &mut [f32]) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.matvec_q6_k(w, nb, x, out),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.matvec_q6_k(w, nb, x, out),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.matvec_q6_k(w, nb, x, out),
            _ => scalar::for_rows(w, nb, x.len(), out, |row| self.dot_q6_k_summed(row, x)),
        }
    }

    /// `[dot_q4_k(w, x[0]), .., dot_q4_k(w, x[3])]`, bit for bit (NaN
    /// payloads aside): one weight row against four activation rows of a
    /// prefill, each weight block unpacked once for the four.
    ///
    /// # Panics
    ///
    /// If any `x[i].len() != w.len()`.
    #[inline]
    pub(crate) fn dot_q4_k_x4(self, w: &[BlockQ4K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_q4_k_x4(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_q4_k_x4(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.dot_q4_k_x4(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.neon().dot_q4_k_x4(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.dot_q4_k_x4(w, x),
            _ => crate::quant::q4_k::dot_q4_k_blocks_x4(w, x),
        }
    }

    /// `[dot_q5_k(w, x[0]), .., dot_q5_k(w, x[3])]`, bit for bit (NaN
    /// payloads aside), as [`dot_q4_k_x4`](Self::dot_q4_k_x4).
    ///
    /// # Panics
    ///
    /// If any `x[i].len() != w.len()`.
    #[inline]
    pub(crate) fn dot_q5_k_x4(self, w: &[BlockQ5K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_q5_k_x4(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_q5_k_x4(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.dot_q5_k_x4(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.neon().dot_q5_k_x4(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.dot_q5_k_x4(w, x),
            _ => crate::quant::q5_k::dot_q5_k_blocks_x4(w, x),
        }
    }

    /// `[dot_q6_k(w, x[0]), .., dot_q6_k(w, x[3])]`, bit for bit (NaN
    /// payloads aside), as [`dot_q4_k_x4`](Self::dot_q4_k_x4).
    ///
    /// # Panics
    ///
    /// If any `x[i].len() != w.len()`.
    #[inline]
    pub(crate) fn dot_q6_k_x4(self, w: &[BlockQ6K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_q6_k_x4(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_q6_k_x4(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.dot_q6_k_x4(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.neon().dot_q6_k_x4(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.dot_q6_k_x4(w, x),
            _ => crate::quant::q6_k::dot_q6_k_blocks_x4(w, x),
        }
    }

    /// `dot_*_k(w, x[i])` for eight activation rows, bit for bit (NaN
    /// payloads aside), with `w`'s type: the x86 kernels unpack each
    /// weight block once for all eight, the others run two four-row forms.
    ///
    /// # Panics
    ///
    /// If any `x[i].len()` differs from the row's block count.
    #[inline]
    pub(crate) fn dot_k_x8(self, w: KRow<'_>, x: [&[BlockQ8K]; 8]) -> [f32; 8] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_k_x8(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_k_x8(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.dot_k_x8(w, x),
            _ => {
                let (lo, hi) = ([x[0], x[1], x[2], x[3]], [x[4], x[5], x[6], x[7]]);
                let four = |x: [&[BlockQ8K]; 4]| match w {
                    KRow::Q4K(w) => self.dot_q4_k_x4(w, x),
                    KRow::Q5K(w) => self.dot_q5_k_x4(w, x),
                    KRow::Q6K(w) => self.dot_q6_k_x4(w, x),
                };
                let (a, b) = (four(lo), four(hi));
                core::array::from_fn(|i| if i < 4 { a[i] } else { b[i - 4] })
            }
        }
    }

    /// See `scalar::quantize_act`; every kernel writes the same bytes.
    #[inline]
    pub(crate) fn quantize_act(self, x: &[[f32; QK8_0]], out: &mut [ActBlock]) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.quantize_act(x, out),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.avx2().quantize_act(x, out),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().quantize_act(x, out),
            _ => scalar::quantize_act(x, out),
        }
    }

    /// `out[i] = quantize_block_q8_k(&x[i])`, byte for byte with every
    /// kernel (the x86 ones run its operations on eight or sixteen values
    /// at a time).
    ///
    /// # Panics
    ///
    /// If `x.len() != out.len()`.
    #[inline]
    pub(crate) fn quantize_q8_k(self, x: &[[f32; super::QK_K]], out: &mut [BlockQ8K]) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.quantize_q8_k(x, out),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.quantize_q8_k(x, out),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().quantize_q8_k(x, out),
            _ => {
                assert_eq!(x.len(), out.len(), "quantize_q8_k: block counts differ");
                for (o, c) in out.iter_mut().zip(x) {
                    *o = super::q8_k::quantize_block_q8_k(c);
                }
            }
        }
    }

    /// `out.extend(row.iter().map(f))`, with the x86 kernels' instruction
    /// sets (a GEMM's unpacking of a weight row into the levels its kernel
    /// reads: the same levels everywhere, the byte loops wider). With the
    /// portable build a Q5_K_M prefill of 128 tokens took 1-5% longer on an
    /// AMD Zen 4 core (one thread, four alternated pairs).
    #[inline]
    pub(crate) fn unpack_row<B, L>(self, row: &[B], out: &mut Vec<L>, f: impl Fn(&B) -> L) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.unpack_row(row, out, f),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.unpack_row(row, out, f),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().unpack_row(row, out, f),
            _ => out.extend(row.iter().map(f)),
        }
    }

    /// See `scalar::dot_f32`.
    #[inline]
    pub(crate) fn dot_f32(self, w: &[f32], x: &[f32]) -> f32 {
        match self {
            Dispatch::Scalar => scalar::dot_f32(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_f32(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.avx2().dot_f32(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().dot_f32(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.neon().dot_f32(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.dot_f32(w, x),
        }
    }

    /// See `scalar::dot_f16`. x86 kernels widen eight lanes at a time and
    /// sum as `dot_f32` does, so on x86 the result is `dot_f32` of the
    /// widened row; elsewhere (aarch64 included) the scalar kernel runs,
    /// which sums left to right: within `f32_error_bound` of NEON's
    /// `dot_f32` but not its bits, and without NEON's speed.
    #[inline]
    pub(crate) fn dot_f16(self, x: &[f32], k: &[f16]) -> f32 {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_f16(x, k),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.avx2().dot_f16(x, k),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().dot_f16(x, k),
            _ => scalar::dot_f16(x, k),
        }
    }

    /// The bandwidth probes' checksum of `bytes` (`scalar::sum_bytes`),
    /// read with the widest loads the kernel has, with the decode products'
    /// software prefetch or without (the same value from every kernel
    /// either way).
    #[inline]
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
    pub(crate) fn sum_bytes(self, bytes: &[u8], prefetch: bool) -> u64 {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.sum_bytes(bytes, prefetch),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.sum_bytes(bytes, prefetch),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().sum_bytes(bytes, prefetch),
            _ => scalar::sum_bytes(bytes),
        }
    }

    /// `[dot_f16(x[0], k), dot_f16(x[1], k)]`, bit for bit (the x86
    /// kernels widen each key chunk once for both).
    #[inline]
    pub(crate) fn dot_f16_x2(self, x: [&[f32]; 2], k: &[f16]) -> [f32; 2] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_f16_x2(x, k),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.dot_f16_x2(x, k),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().dot_f16_x2(x, k),
            _ => x.map(|xi| self.dot_f16(xi, k)),
        }
    }

    /// Attention scores of two queries against `out[0].len()` consecutive
    /// key rows of `q[0].len()` values in `k`: `out[h][t] = dot(q[h], row
    /// t) * scale`. The x86 kernels sum eight (AVX2) or sixteen (AVX-512)
    /// positions' lanes together, for widths that are a multiple of 32
    /// (each its own bits, the same for a row wherever it sits); the rest
    /// run [`dot_f16_x2`](Self::dot_f16_x2) row by row.
    ///
    /// # Panics
    ///
    /// If the queries or the outputs differ in length, or `k` holds fewer
    /// rows than asked for.
    #[inline]
    pub(crate) fn scores_f16_x2(self, q: [&[f32]; 2], k: &[f16], scale: f32, out: [&mut [f32]; 2]) {
        let hd = q[0].len();
        #[cfg(target_arch = "x86_64")]
        if hd > 0 && hd.is_multiple_of(32) {
            match self {
                Dispatch::Avx2(t) => return t.scores_f16_x2(q, k, scale, out),
                Dispatch::Avx512Vnni(t) => return t.scores_f16_x2(q, k, scale, out),
                Dispatch::AvxVnni(t) => return t.avx2().scores_f16_x2(q, k, scale, out),
                Dispatch::Scalar => {}
            }
        }
        let [o0, o1] = out;
        assert!(
            q[1].len() == hd && o1.len() == o0.len(),
            "scores_f16_x2: shapes differ"
        );
        for (t, (a, b)) in o0.iter_mut().zip(o1.iter_mut()).enumerate() {
            let row = &k[t * hd..(t + 1) * hd];
            for line in (0..2 * hd).step_by(64) {
                crate::unsafe_core::prefetch::prefetch_read(row, KV_PREFETCH_ROWS * 2 * hd + line);
            }
            let [x, y] = self.dot_f16_x2(q, row);
            (*a, *b) = (x * scale, y * scale);
        }
    }

    /// [`scores_f16_x2`](Self::scores_f16_x2) of four queries against the
    /// same key rows: each query's scores bit for bit what
    /// `scores_f16_x2` gives it (as the first or the second of a pair).
    /// The AVX-512 kernel reads and widens each key row once for all four
    /// (two tokens of a prefill, two query heads each); the others run
    /// two pairs.
    ///
    /// # Panics
    ///
    /// As [`scores_f16_x2`](Self::scores_f16_x2).
    #[inline]
    pub(crate) fn scores_f16_x4(self, q: [&[f32]; 4], k: &[f16], scale: f32, out: [&mut [f32]; 4]) {
        #[cfg(target_arch = "x86_64")]
        if let Dispatch::Avx512Vnni(t) = self {
            if !q[0].is_empty() && q[0].len().is_multiple_of(32) {
                return t.scores_f16_x4(q, k, scale, out);
            }
        }
        let [o0, o1, o2, o3] = out;
        self.scores_f16_x2([q[0], q[1]], k, scale, [o0, o1]);
        self.scores_f16_x2([q[2], q[3]], k, scale, [o2, o3]);
    }

    /// In-place softmax of `x` with its largest value and normalizer
    /// (`model::ops::softmax`), the same bits from every kernel: the x86
    /// ones run the portable code compiled for their vector width.
    #[inline]
    pub(crate) fn softmax(self, x: &mut [f32]) -> (f32, f64) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.softmax(x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.softmax(x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().softmax(x),
            _ => crate::model::ops::softmax(x),
        }
    }

    /// `model::ops::swiglu(gate, up)`, the same bits: the x86 kernels run
    /// its `expf` (`model::ops::exp_f64`, in `f64`) on eight or sixteen
    /// values at a time, where the portable loop takes one.
    #[inline]
    pub(crate) fn swiglu(self, gate: &mut [f32], up: &[f32]) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.swiglu(gate, up),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.swiglu(gate, up),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().swiglu(gate, up),
            _ => crate::model::ops::swiglu(gate, up),
        }
    }

    /// `model::ops::round_f16(x)`, the same values: the x86 kernels convert
    /// eight or sixteen values an instruction (F16C, AVX-512), where the
    /// portable code goes through `half`'s slice conversions, a call per
    /// eight values. Attention rounds its queries and weights so.
    #[inline]
    pub(crate) fn round_f16(self, x: &mut [f32]) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.round_f16(x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.round_f16(x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().round_f16(x),
            _ => crate::model::ops::round_f16(x),
        }
    }

    /// `dst[i] = f16::from_f32(src[i])` for the shorter of the two (the
    /// `f16` cache's writes), the x86 kernels eight values an instruction.
    #[inline]
    pub(crate) fn to_f16(self, src: &[f32], dst: &mut [f16]) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.to_f16(src, dst),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.avx2().to_f16(src, dst),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().to_f16(src, dst),
            _ => {
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d = f16::from_f32(s);
                }
            }
        }
    }

    /// `sample::argmax_lanes(x)`: the x86 kernels run the portable code
    /// compiled for their vector width.
    #[inline]
    pub(crate) fn argmax(self, x: &[f32]) -> u32 {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.argmax(x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.argmax(x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().argmax(x),
            _ => crate::sample::argmax_lanes(x),
        }
    }

    /// `weighted_sum_f16` of two weight vectors over the same rows, bit for
    /// bit (the x86 kernels widen each row once for both).
    #[inline]
    pub(crate) fn weighted_sum_f16_x2(
        self,
        out: [&mut [f32]; 2],
        ps: [&[f32]; 2],
        v: &[f16],
        stride: usize,
    ) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.weighted_sum_f16_x2(out, ps, v, stride),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.weighted_sum_f16_x2(out, ps, v, stride),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().weighted_sum_f16_x2(out, ps, v, stride),
            _ => {
                let [o0, o1] = out;
                self.weighted_sum_f16(o0, ps[0], v, stride);
                self.weighted_sum_f16(o1, ps[1], v, stride);
            }
        }
    }

    /// `weighted_sum_f16` of four weight vectors, each of its own length
    /// (`out[h]` over the first `ps[h].len()` rows), over the same rows,
    /// bit for bit. The AVX-512 kernel widens each row once for all the
    /// outputs that reach it; the others run pairs of equal length with
    /// [`weighted_sum_f16_x2`](Self::weighted_sum_f16_x2), single ones
    /// otherwise.
    ///
    /// # Panics
    ///
    /// If the outputs differ in length, or a row runs past the end of `v`.
    #[inline]
    pub(crate) fn weighted_sum_f16_x4(
        self,
        out: [&mut [f32]; 4],
        ps: [&[f32]; 4],
        v: &[f16],
        stride: usize,
    ) {
        #[cfg(target_arch = "x86_64")]
        if let Dispatch::Avx512Vnni(t) = self {
            return t.weighted_sum_f16_x4(out, ps, v, stride);
        }
        let hd = out[0].len();
        assert!(
            out.iter().all(|o| o.len() == hd),
            "weighted_sum_f16: shapes differ"
        );
        let [o0, o1, o2, o3] = out;
        for (pair, p) in [[o0, o1], [o2, o3]]
            .into_iter()
            .zip([[ps[0], ps[1]], [ps[2], ps[3]]])
        {
            if p[0].len() == p[1].len() {
                self.weighted_sum_f16_x2(pair, p, v, stride);
            } else {
                let [a, b] = pair;
                self.weighted_sum_f16(a, p[0], v, stride);
                self.weighted_sum_f16(b, p[1], v, stride);
            }
        }
    }

    /// See `scalar::weighted_sum_f16`; every kernel writes the same bits
    /// (those of `axpy_f16` row after row).
    #[inline]
    pub(crate) fn weighted_sum_f16(self, out: &mut [f32], ps: &[f32], v: &[f16], stride: usize) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.weighted_sum_f16(out, ps, v, stride),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.avx2().weighted_sum_f16(out, ps, v, stride),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().weighted_sum_f16(out, ps, v, stride),
            _ => scalar::weighted_sum_f16(out, ps, v, stride),
        }
    }

    /// See `scalar::matvec_f32`; every row gets exactly `dot_f32`'s result.
    #[inline]
    pub(crate) fn matvec_f32(self, w: &[f32], cols: usize, x: &[f32], out: &mut [f32]) {
        match self {
            Dispatch::Scalar => scalar::matvec_f32(w, cols, x, out),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.matvec_f32(w, cols, x, out),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.avx2().matvec_f32(w, cols, x, out),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().matvec_f32(w, cols, x, out),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.neon().matvec_f32(w, cols, x, out),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.matvec_f32(w, cols, x, out),
        }
    }
}

/// F16 and BF16 weight rows (`quant::float`; kernels in
/// `x86_64::float` and `aarch64::float`).
impl Kernel {
    /// Dot product of an F16 weight row with the F16 form of an activation
    /// (the activation rounded to f16, as GGML rounds it for its F16
    /// products; quantize `x` with [`ActForms::F16`](crate::quant::ActForms::F16)),
    /// with this kernel. The scalar kernel sums the (exact) products in
    /// f64 as GGML's reference code does; the SIMD kernels sum them in f32
    /// lanes, so they are within [`f32_error_bound`] of the widened
    /// operands of it, not its bits (all x86 kernels run the same code, as
    /// do both NEON ones).
    ///
    /// ```
    /// use half::f16;
    /// use inferno_cpu::quant::{ActForms, Kernel, QuantizedVector};
    /// let w = vec![f16::from_f32(0.5); 64];
    /// let mut x = QuantizedVector::new();
    /// x.quantize_forms(&[2.0f32; 64], ActForms::F16)?;
    /// assert_eq!(Kernel::Scalar.dot_f16_weights(&w, &x)?, 64.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`KernelError::Unavailable`] if the CPU lacks the kernel;
    /// [`KernelError::Shape`] if `w` does not hold `x.cols()` values or
    /// `x` lacks the F16 form.
    pub fn dot_f16_weights(self, w: &[f16], x: &QuantizedVector) -> Result<f32, KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        check_float_form(w.len(), x, x.f16_act())?;
        Ok(k.dot_f16w(w, x.f16_act()))
    }

    /// [`dot_f16_weights`](Self::dot_f16_weights) of one weight row with
    /// four activations: each result is that call's, bit for bit, with
    /// each weight chunk widened once for the four (the prefill form).
    ///
    /// # Errors
    ///
    /// As [`dot_f16_weights`](Self::dot_f16_weights), for each of `x`.
    pub fn dot_f16_weights_x4(
        self,
        w: &[f16],
        x: [&QuantizedVector; 4],
    ) -> Result<[f32; 4], KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        for xi in x {
            check_float_form(w.len(), xi, xi.f16_act())?;
        }
        Ok(k.dot_f16w_x4(w, x.map(|xi| xi.f16_act())))
    }

    /// Dot product of a BF16 weight row with the BF16 form of an
    /// activation (rounded to bfloat16, as GGML rounds it; quantize `x`
    /// with [`ActForms::BF16`](crate::quant::ActForms::BF16)), as
    /// [`dot_f16_weights`](Self::dot_f16_weights).
    ///
    /// # Errors
    ///
    /// [`KernelError::Unavailable`] if the CPU lacks the kernel;
    /// [`KernelError::Shape`] if `w` does not hold `x.cols()` values or
    /// `x` lacks the BF16 form.
    pub fn dot_bf16_weights(self, w: &[bf16], x: &QuantizedVector) -> Result<f32, KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        check_float_form(w.len(), x, x.bf16_act())?;
        Ok(k.dot_bf16w(w, x.bf16_act()))
    }

    /// [`dot_bf16_weights`](Self::dot_bf16_weights) of one weight row with
    /// four activations, each result that call's, bit for bit.
    ///
    /// # Errors
    ///
    /// As [`dot_bf16_weights`](Self::dot_bf16_weights), for each of `x`.
    pub fn dot_bf16_weights_x4(
        self,
        w: &[bf16],
        x: [&QuantizedVector; 4],
    ) -> Result<[f32; 4], KernelError> {
        let k = self.dispatch().ok_or(KernelError::Unavailable(self))?;
        for xi in x {
            check_float_form(w.len(), xi, xi.bf16_act())?;
        }
        Ok(k.dot_bf16w_x4(w, x.map(|xi| xi.bf16_act())))
    }
}

/// Checks a float weight row's length against an activation and that the
/// activation holds the form (`form`, of `x.cols()` values) it reads.
fn check_float_form(len: usize, x: &QuantizedVector, form: &[f32]) -> Result<(), ShapeError> {
    check_cols(len, x.cols())?;
    check_cols(len, form.len())
}

/// F16 and BF16 weight rows against activations rounded to their type.
impl Dispatch {
    /// An F16 weight row against an activation rounded to f16 (widened):
    /// `quant::float::dot_f16_scalar` for the scalar kernel, the
    /// `float` kernels of each architecture otherwise.
    ///
    /// # Panics
    ///
    /// If `w.len() != x.len()`.
    #[inline]
    pub(crate) fn dot_f16w(self, w: &[f16], x: &[f32]) -> f32 {
        match self {
            Dispatch::Scalar => super::float::dot_f16_scalar(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_f16w(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.avx2().dot_f16w(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().dot_f16w(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.neon().dot_f16w(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.dot_f16w(w, x),
        }
    }

    /// `[dot_f16w(w, x[0]), .., dot_f16w(w, x[3])]`, bit for bit.
    ///
    /// # Panics
    ///
    /// If any `x[i].len() != w.len()`.
    #[inline]
    pub(crate) fn dot_f16w_x4(self, w: &[f16], x: [&[f32]; 4]) -> [f32; 4] {
        match self {
            Dispatch::Scalar => {
                for xi in x {
                    assert_eq!(w.len(), xi.len(), "float dot: lengths differ");
                }
                x.map(|xi| super::float::dot_f16_scalar(w, xi))
            }
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_f16w_x4(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.avx2().dot_f16w_x4(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().dot_f16w_x4(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.neon().dot_f16w_x4(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.dot_f16w_x4(w, x),
        }
    }

    /// A BF16 weight row against an activation rounded to bfloat16
    /// (widened), as [`dot_f16w`](Self::dot_f16w).
    ///
    /// # Panics
    ///
    /// If `w.len() != x.len()`.
    #[inline]
    pub(crate) fn dot_bf16w(self, w: &[bf16], x: &[f32]) -> f32 {
        match self {
            Dispatch::Scalar => super::float::dot_bf16_scalar(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_bf16w(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.avx2().dot_bf16w(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().dot_bf16w(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.neon().dot_bf16w(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.dot_bf16w(w, x),
        }
    }

    /// `[dot_bf16w(w, x[0]), .., dot_bf16w(w, x[3])]`, bit for bit.
    ///
    /// # Panics
    ///
    /// If any `x[i].len() != w.len()`.
    #[inline]
    pub(crate) fn dot_bf16w_x4(self, w: &[bf16], x: [&[f32]; 4]) -> [f32; 4] {
        match self {
            Dispatch::Scalar => {
                for xi in x {
                    assert_eq!(w.len(), xi.len(), "float dot: lengths differ");
                }
                x.map(|xi| super::float::dot_bf16_scalar(w, xi))
            }
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(t) => t.dot_bf16w_x4(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(t) => t.avx2().dot_bf16w_x4(w, x),
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(t) => t.avx2().dot_bf16w_x4(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(t) => t.neon().dot_bf16w_x4(w, x),
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(t) => t.dot_bf16w_x4(w, x),
        }
    }
}

/// `gamma(n) = n u / (1 - n u)` with `u = 2^-24`, the relative error bound
/// of an `n`-deep chain of rounded f32 operations (infinite once `n u >= 1`).
fn gamma(n: usize) -> f64 {
    let nu = n as f64 * f64::from(f32::EPSILON) / 2.0;
    if nu >= 1.0 {
        f64::INFINITY
    } else {
        nu / (1.0 - nu)
    }
}

/// The largest difference allowed between two kernels' [`Kernel::dot_q8_0`]
/// results for these operands (see the [module documentation](self)).
///
/// # Panics
///
/// If `w` does not hold `x.cols() / 32` blocks.
pub fn q8_0_error_bound(w: &[BlockQ8_0], x: &QuantizedVector) -> f64 {
    let x = x.act();
    assert_eq!(w.len(), x.len(), "q8_0_error_bound: block counts differ");
    let s: f64 = w
        .iter()
        .zip(x)
        .map(|(wb, xb)| {
            let d = f64::from(wb.scale().to_f32()) * f64::from(xb.d);
            let abs: i64 = wb
                .qs
                .iter()
                .zip(&xb.qs)
                .map(|(&a, &b)| i64::from(a).abs() * i64::from(b).abs())
                .sum();
            d.abs() * abs as f64
        })
        .sum();
    2.0 * gamma(w.len() + 6) * s
}

/// The largest difference allowed between two kernels' [`Kernel::dot_f32`]
/// results for these operands: `2 * gamma(len + 6) * sum |w_i * x_i|`.
///
/// # Panics
///
/// If the lengths differ.
pub fn f32_error_bound(w: &[f32], x: &[f32]) -> f64 {
    assert_eq!(w.len(), x.len(), "f32_error_bound: lengths differ");
    let s: f64 = w
        .iter()
        .zip(x)
        .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
        .sum();
    2.0 * gamma(w.len() + 6) * s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel this CPU should get, worked out from its features with
    /// the standard library's detection macros directly, not through the
    /// feature tokens `best_available` uses, so a wrong preference order or
    /// a wrong token shows up as a difference.
    fn expected_best() -> Kernel {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            use std::is_x86_feature_detected as has;
            let avx2 = has!("avx2") && has!("fma") && has!("f16c");
            if avx2 && has!("avx512f") && has!("avx512vl") && has!("avx512bw") && has!("avx512vnni")
            {
                return Kernel::Avx512Vnni;
            }
            if avx2 && has!("avxvnni") {
                return Kernel::AvxVnni;
            }
            if avx2 {
                return Kernel::Avx2;
            }
        }
        #[cfg(all(target_arch = "aarch64", not(miri)))]
        {
            use std::arch::is_aarch64_feature_detected as has;
            if has!("dotprod") {
                return Kernel::NeonDot;
            }
            if has!("neon") {
                return Kernel::Neon;
            }
        }
        Kernel::Scalar
    }

    /// The kernel a dispatch value calls.
    fn kernel_of(d: Dispatch) -> Kernel {
        match d {
            Dispatch::Scalar => Kernel::Scalar,
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx2(_) => Kernel::Avx2,
            #[cfg(target_arch = "x86_64")]
            Dispatch::Avx512Vnni(_) => Kernel::Avx512Vnni,
            #[cfg(target_arch = "x86_64")]
            Dispatch::AvxVnni(_) => Kernel::AvxVnni,
            #[cfg(target_arch = "aarch64")]
            Dispatch::NeonDot(_) => Kernel::NeonDot,
            #[cfg(target_arch = "aarch64")]
            Dispatch::Neon(_) => Kernel::Neon,
        }
    }

    #[test]
    fn best_available_is_the_fastest_kernel_the_cpu_has() {
        // VNNI over AVX2 on x86 where the CPU has it, `sdot` over plain
        // NEON on aarch64, scalar under Miri and elsewhere.
        assert_eq!(Kernel::best_available(), expected_best());
        let best = expected_best();
        assert!(best.is_available() && Kernel::Scalar.is_available());
        // Every kernel listed before the best one in `ALL` (a faster one)
        // is unavailable, and the best one's dispatch is its own.
        let pos = Kernel::ALL.iter().position(|&k| k == best).unwrap();
        for k in &Kernel::ALL[..pos] {
            assert!(
                !k.is_available(),
                "{k:?} is available but {best:?} is expected"
            );
        }
        assert_eq!(best.dispatch().map(kernel_of), Some(best));
    }

    #[test]
    fn selected_kernel_follows_the_cpu_and_the_env_variable() {
        use std::ffi::OsStr;
        assert_eq!(choose(Some(OsStr::new("1")), None), Kernel::Scalar);
        assert_eq!(choose(None, None), expected_best());
        assert_eq!(choose(Some(OsStr::new("0")), None), expected_best());
        // A named kernel this CPU runs is chosen, whatever its case; one it
        // lacks, or no kernel at all, leaves the CPU's choice; forcing the
        // scalar kernel wins over a name.
        for k in Kernel::ALL {
            let named = OsStr::new(k.name());
            let want = if k.is_available() { k } else { expected_best() };
            assert_eq!(choose(None, Some(named)), want, "{k:?}");
            let upper = k.name().to_ascii_uppercase();
            assert_eq!(choose(None, Some(OsStr::new(&upper))), want, "{k:?}");
            assert_eq!(choose(Some(OsStr::new("1")), Some(named)), Kernel::Scalar);
            let expected = if k.is_available() {
                Ok(Some(k))
            } else {
                Err(KernelEnvError::Unavailable(k))
            };
            assert_eq!(requested(Some(named)), expected);
        }
        assert_eq!(choose(None, Some(OsStr::new("sse4"))), expected_best());
        assert_eq!(
            requested(Some(OsStr::new("sse4"))),
            Err(KernelEnvError::Unknown("sse4".to_owned()))
        );
        assert_eq!(requested(Some(OsStr::new(""))), Ok(None));
        assert_eq!(requested(None), Ok(None));
        let forced = std::env::var_os(FORCE_SCALAR_ENV).is_some_and(|v| v == "1");
        let want = if forced {
            Kernel::Scalar
        } else {
            choose(None, std::env::var_os(KERNEL_ENV).as_deref())
        };
        let (kernel, dispatch) = selected();
        assert_eq!((kernel, kernel_of(dispatch)), (want, want));
        assert_eq!(Kernel::selected(), want);
    }

    #[test]
    fn unavailable_or_mismatched_calls_are_errors() {
        let mut x = QuantizedVector::new();
        x.quantize_from(&[1.0; 64]).unwrap();
        let w = [BlockQ8_0::default(); 1];
        assert_eq!(
            Kernel::Scalar.dot_q8_0(&w, &x),
            Err(KernelError::Shape(ShapeError::InputLength {
                expected: 32,
                got: 64
            }))
        );
        for k in Kernel::ALL {
            if !k.is_available() {
                assert_eq!(k.dot_f32(&[], &[]), Err(KernelError::Unavailable(k)));
            }
        }
    }

    #[test]
    fn gamma_grows_and_saturates() {
        assert!(gamma(1) > 0.0 && gamma(1) < 1e-7);
        assert!(gamma(100) > gamma(10));
        assert_eq!(gamma(1 << 24), f64::INFINITY);
    }

    /// The AVX2 `f16` attention kernels: `dot_f16` gives the bits of AVX2
    /// `dot_f32` on the widened row, `axpy_f16` those of the scalar kernel,
    /// for every length (the 32- and 8-lane steps and the tail) and values
    /// spanning `f16`'s range, subnormals and infinities included (a NaN
    /// matches any NaN).
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx2_f16_kernels_match_scalar() {
        use proptest::prelude::*;
        let Some(t) = Avx2Token::new() else {
            eprintln!("avx2_f16_kernels_match_scalar: skipped, the CPU lacks AVX2/FMA/F16C");
            return;
        };
        let f16s = prop::collection::vec(any::<u16>().prop_map(f16::from_bits), 0..300);
        proptest!(|(k in f16s, seed in any::<u32>(), p in -4.0f32..4.0)| {
            let x: Vec<f32> = (0..k.len())
                .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed) as f32 / u32::MAX as f32 - 0.5)
                .collect();
            let (a, b) = (t.dot_f16(&x, &k), scalar_dot_f16_via_dot_f32(t, &x, &k));
            prop_assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "{} vs {}", a, b);
            let mut o1 = x.clone();
            let mut o2 = x.clone();
            t.axpy_f16(&mut o1, p, &k);
            scalar::axpy_f16(&mut o2, p, &k);
            for (u, v) in o1.iter().zip(&o2) {
                prop_assert!(u.to_bits() == v.to_bits() || (u.is_nan() && v.is_nan()));
            }
        });
    }

    /// `dot_f16` is documented as `dot_f32` of the widened row.
    #[cfg(target_arch = "x86_64")]
    fn scalar_dot_f16_via_dot_f32(t: Avx2Token, x: &[f32], k: &[f16]) -> f32 {
        let wide: Vec<f32> = k.iter().map(|v| v.to_f32()).collect();
        t.dot_f32(x, &wide)
    }

    /// The portable kernels: `dot_f16` is `dot_f32` of the widened row,
    /// `axpy_f16` one product and one sum per element.
    #[test]
    fn scalar_f16_kernels() {
        let k: Vec<f16> = [1.5f32, -2.0, 0.25, 65504.0]
            .iter()
            .map(|&v| f16::from_f32(v))
            .collect();
        let x = [2.0f32, 1.0, 4.0, 0.0];
        assert_eq!(scalar::dot_f16(&x, &k), 3.0 - 2.0 + 1.0);
        let mut out = [1.0f32; 4];
        scalar::axpy_f16(&mut out, 0.5, &k);
        assert_eq!(out, [1.75, 0.0, 1.125, 32753.0]);
    }

    /// The 512-bit AVX-512 VNNI four-row kernel over paired activations
    /// gives `dot_q8`'s bits for each row, for even and odd block counts
    /// (an odd last block goes through the 256-bit path), scales of any
    /// sign and weights down to -128.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx512_pairs_equal_dot_q8() {
        use proptest::prelude::*;
        // A batch builds its pairs for the selected kernel only.
        let (Kernel::Avx512Vnni, k) = selected() else {
            eprintln!(
                "avx512_pairs_equal_dot_q8: skipped, AVX-512 VNNI is not the selected kernel"
            );
            return;
        };
        let weights = (0usize..9)
            .prop_flat_map(|nb| prop::collection::vec((any::<[i8; QK8_0]>(), -2.0f32..2.0), nb));
        proptest!(|(w in weights, seed in any::<u32>())| {
            let w: Vec<BlockQ8_0> = w
                .iter()
                .map(|(qs, d)| BlockQ8_0 { d: f16::from_f32(*d).to_le_bytes(), qs: *qs })
                .collect();
            let nb = w.len();
            let vals: Vec<f32> = (0..4 * nb * QK8_0)
                .map(|i| {
                    let h = (seed ^ i as u32).wrapping_mul(2_654_435_761);
                    (h >> 8) as f32 / (1u32 << 24) as f32 - 0.5
                })
                .collect();
            let mut xs = crate::quant::QuantizedBatch::new();
            if nb == 0 {
                return Ok(());
            }
            xs.quantize_from(&vals, nb * QK8_0).unwrap();
            let rows = [0, 1, 2, 3].map(|i| xs.act_row(i));
            let pairs = [0, 1, 2, 3].map(|i| xs.pair_row(i).expect("pairs built for AVX-512 VNNI"));
            let got = k.dot_q8_x4_pairs(&w, pairs, rows);
            for (g, x) in got.iter().zip(rows) {
                prop_assert_eq!(g.to_bits(), k.dot_q8(&w, x).to_bits());
            }
            // Two weight rows at once: the reversed row as the second.
            let w2: Vec<BlockQ8_0> = w.iter().rev().copied().collect();
            let both = k.dot_q8_2x4_pairs([&w, &w2], pairs, rows);
            for (i, x) in rows.iter().enumerate() {
                prop_assert_eq!(both[0][i].to_bits(), k.dot_q8(&w, x).to_bits());
                prop_assert_eq!(both[1][i].to_bits(), k.dot_q8(&w2, x).to_bits());
            }
        });
    }

    /// Every kernel's two-query `f16` dot gives `dot_f16`'s bits for each
    /// query, for every length (32- and 8-lane steps and the tail) and
    /// values across `f16`'s range (a NaN matches any NaN).
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn dot_f16_x2_is_two_dot_f16() {
        use proptest::prelude::*;
        let f16s = prop::collection::vec(any::<u16>().prop_map(f16::from_bits), 0..300);
        for kernel in Kernel::ALL {
            let Some(d) = kernel.dispatch() else { continue };
            proptest!(|(k in f16s.clone(), seed in any::<u32>())| {
                let q: Vec<Vec<f32>> = (0..2u32)
                    .map(|h| {
                        (0..k.len())
                            .map(|i| ((i as u32 ^ h.wrapping_mul(77)).wrapping_mul(2_654_435_761) ^ seed) as f32 / u32::MAX as f32 - 0.5)
                            .collect()
                    })
                    .collect();
                let got = d.dot_f16_x2([&q[0], &q[1]], &k);
                for (g, qi) in got.iter().zip(&q) {
                    let want = d.dot_f16(qi, &k);
                    prop_assert!(g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()), "{:?}: {} vs {}", kernel, g, want);
                }
            });
        }
    }

    /// Every kernel's attention scores over consecutive `f16` key rows are
    /// each row's dot product times the scale, within the `f32` error bound
    /// of the exact one; a row's score has the same bits wherever the row
    /// sits in the call (the rows shifted by one position, so every row
    /// moves within the AVX-512 kernel's blocks of sixteen); and where no
    /// block kernel runs they are `dot_f16_x2`'s bits.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn scores_f16_x2_are_each_rows_dot() {
        use proptest::prelude::*;
        let case = (
            prop::sample::select(vec![8usize, 32, 40, 64, 96, 128, 160]),
            0usize..40,
        )
            .prop_flat_map(|(hd, n)| {
                let vals = prop::collection::vec(-8.0f32..8.0, (n + 1) * hd);
                let q = prop::collection::vec(-2.0f32..2.0, 2 * hd);
                (Just(hd), Just(n), vals, q)
            });
        for kernel in Kernel::ALL {
            let Some(d) = kernel.dispatch() else { continue };
            proptest!(|((hd, n, vals, q) in case.clone())| {
                let k: Vec<f16> = vals.iter().map(|&v| f16::from_f32(v)).collect();
                let (q0, q1) = q.split_at(hd);
                let scale = 0.125;
                let mut s = vec![vec![0.0f32; n + 1]; 2];
                let [a, b] = &mut s[..] else { unreachable!() };
                d.scores_f16_x2([q0, q1], &k, scale, [&mut a[..], &mut b[..]]);
                let mut shifted = vec![vec![0.0f32; n]; 2];
                let [c, e] = &mut shifted[..] else { unreachable!() };
                d.scores_f16_x2([q0, q1], &k[hd..], scale, [&mut c[..], &mut e[..]]);
                for (h, qh) in [q0, q1].into_iter().enumerate() {
                    for t in 0..=n {
                        let row: Vec<f32> = k[t * hd..(t + 1) * hd].iter().map(|x| x.to_f32()).collect();
                        let exact: f64 = row.iter().zip(qh).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
                        let got = s[h][t];
                        let bound = f32_error_bound(&row, qh) * f64::from(scale) + f64::from(f32::EPSILON) * (exact * f64::from(scale)).abs();
                        prop_assert!((f64::from(got) - exact * f64::from(scale)).abs() <= bound,
                            "{kernel:?} hd {hd} row {t}: {got} vs {}", exact * f64::from(scale));
                        if t > 0 {
                            prop_assert_eq!(shifted[h][t - 1].to_bits(), got.to_bits(), "{:?} row {} moved", kernel, t);
                        }
                        let blocks = !matches!(d, Dispatch::Scalar) && cfg!(target_arch = "x86_64") && hd.is_multiple_of(32);
                        if !blocks {
                            let want = d.dot_f16_x2([q0, q1], &k[t * hd..(t + 1) * hd])[h] * scale;
                            prop_assert_eq!(got.to_bits(), want.to_bits());
                        }
                    }
                }
            });
        }
    }

    /// AVX-512's straight-line scores of 128-wide heads (`scores128`, its
    /// whole groups of sixteen rows) are its general loop's, bit for bit:
    /// two and four queries, from no row to three groups of sixteen and a
    /// part of one.
    #[cfg(target_arch = "x86_64")]
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn avx512_scores128_equal_the_general_loop() {
        use proptest::prelude::*;
        use std::sync::atomic::Ordering::Relaxed;
        let Some(d) = Kernel::Avx512Vnni.dispatch() else {
            eprintln!("avx512_scores128_equal_the_general_loop: the CPU lacks AVX-512 VNNI");
            return;
        };
        let hd = 128;
        let case = (0usize..60).prop_flat_map(move |n| {
            let vals = prop::collection::vec(-300.0f32..300.0, n * hd);
            let q = prop::collection::vec(-4.0f32..4.0, 4 * hd);
            (Just(n), vals, q)
        });
        let run = |general: bool, k: &[f16], q: &[f32], n: usize| {
            x86_64::GENERAL_SCORES_IN_TESTS.store(general, Relaxed);
            let mut two = vec![vec![0.0f32; n]; 2];
            let [a, b] = &mut two[..] else { unreachable!() };
            d.scores_f16_x2([&q[..hd], &q[hd..2 * hd]], k, 0.125, [a, b]);
            let mut four = vec![vec![0.0f32; n]; 4];
            let [a, b, c, e] = &mut four[..] else {
                unreachable!()
            };
            let qs: Vec<&[f32]> = q.chunks_exact(hd).collect();
            d.scores_f16_x4([qs[0], qs[1], qs[2], qs[3]], k, 0.125, [a, b, c, e]);
            x86_64::GENERAL_SCORES_IN_TESTS.store(false, Relaxed);
            (two, four)
        };
        let bits = |v: &[Vec<f32>]| -> Vec<Vec<u32>> {
            v.iter()
                .map(|r| r.iter().map(|x| x.to_bits()).collect())
                .collect()
        };
        proptest!(|((n, vals, q) in case)| {
            let k: Vec<f16> = vals.iter().map(|&v| f16::from_f32(v)).collect();
            let (two, four) = run(false, &k, &q, n);
            let (two_g, four_g) = run(true, &k, &q, n);
            prop_assert_eq!(bits(&two), bits(&two_g), "two queries, {} rows", n);
            prop_assert_eq!(bits(&four), bits(&four_g), "four queries, {} rows", n);
        });
    }

    /// Every kernel's `round_f16` and `to_f16` are the portable ones, bit
    /// for bit (NaN payloads aside), over lengths with and without a
    /// remainder of eight and sixteen, values past `f16`'s range, at its
    /// rounding boundaries and subnormals, infinities, NaN and zeros of
    /// both signs; `to_f16` into destinations shorter and longer than the
    /// source converts the shorter length and writes nothing else.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn f16_conversions_are_the_portable_ones() {
        use proptest::prelude::*;
        let value = prop_oneof![
            8 => -70000.0f32..70000.0,
            2 => -1.0f32..1.0,
            1 => prop::sample::select(vec![
                f32::NEG_INFINITY, f32::INFINITY, f32::NAN, 65504.0, 65520.0, 65519.99,
                6.0e-8, 3.0e-8, 2.9e-8, -0.0, 0.0, 1.0 + f32::powi(2.0, -11),
            ]),
        ];
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for kernel in Kernel::ALL {
            let Some(d) = kernel.dispatch() else { continue };
            let case = (prop::collection::vec(value.clone(), 0..70), 0usize..80);
            proptest!(|((x, dst_len) in case.clone())| {
                let (mut got, mut want) = (x.clone(), x.clone());
                d.round_f16(&mut got);
                crate::model::ops::round_f16(&mut want);
                for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    prop_assert!(same(g, w), "{:?} round_f16 {}: {} vs {}", kernel, x[i], g, w);
                }
                // A destination shorter or longer than the source: the
                // shorter length converted, nothing else written.
                let sentinel = f16::from_bits(0x7bff);
                let mut h = vec![sentinel; dst_len];
                d.to_f16(&x, &mut h);
                let n = x.len().min(dst_len);
                for (i, (&g, &v)) in h.iter().zip(&x).enumerate() {
                    let w = f16::from_f32(v);
                    prop_assert!(g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                        "{:?} to_f16 {}: {} vs {}", kernel, x[i], g, w);
                }
                prop_assert!(h[n..].iter().all(|v| v.to_bits() == sentinel.to_bits()));
            });
        }
    }

    /// Every kernel's softmax is the portable one, bit for bit (the
    /// scaled values, the largest value and the normalizer), over lengths
    /// with and without a remainder of eight and sixteen and scores that
    /// include infinities, NaN, values past `exp`'s range and zeros of
    /// both signs.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn softmax_kernels_are_the_portable_softmax() {
        use proptest::prelude::*;
        let value = prop_oneof![
            8 => -100.0f32..100.0,
            1 => prop::sample::select(vec![f32::NEG_INFINITY, f32::INFINITY, f32::NAN, -1e30, 1e30, 0.0, -0.0]),
        ];
        // Or only -1 and zeros of both signs, where the largest value is
        // a zero whose sign a vectorized maximum could pick either way.
        let xs = prop_oneof![
            prop::collection::vec(value, 0..300),
            prop::collection::vec(prop::sample::select(vec![-1.0f32, -0.0, 0.0]), 0..70),
        ];
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for kernel in Kernel::ALL {
            let Some(d) = kernel.dispatch() else { continue };
            proptest!(|(x in xs.clone())| {
                let (mut got, mut want) = (x.clone(), x);
                let (gm, gs) = d.softmax(&mut got);
                let (wm, ws) = crate::model::ops::softmax(&mut want);
                prop_assert!(same(gm, wm), "{:?}: max {} vs {}", kernel, gm, wm);
                prop_assert!(gs.to_bits() == ws.to_bits() || (gs.is_nan() && ws.is_nan()), "{:?}: sum {} vs {}", kernel, gs, ws);
                for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    prop_assert!(same(g, w), "{:?}: [{}] {} vs {}", kernel, i, g, w);
                }
            });
        }
    }

    /// Every kernel's SwiGLU gives the portable loop's bits: gates across
    /// `exp_f64`'s own range and past it (where a group of values falls
    /// back to the portable loop), infinities, NaN and zeros of both
    /// signs, any length (the last values past a whole register).
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn swiglu_kernels_are_the_portable_swiglu() {
        use proptest::prelude::*;
        let value = prop_oneof![
            8 => -20.0f32..20.0,
            2 => -95.0f32..95.0,
            1 => prop::sample::select(vec![
                f32::NEG_INFINITY, f32::INFINITY, f32::NAN, -1e30, 1e30, 0.0, -0.0,
                88.0, -88.0, 87.99999, -87.99999, 1e-40, -1e-40,
            ]),
        ];
        let case = (0usize..80).prop_flat_map(move |n| {
            (
                prop::collection::vec(value.clone(), n),
                prop::collection::vec(-4.0f32..4.0, n),
            )
        });
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for kernel in Kernel::ALL {
            let Some(d) = kernel.dispatch() else { continue };
            proptest!(|((gate, up) in case.clone())| {
                let (mut got, mut want) = (gate.clone(), gate);
                d.swiglu(&mut got, &up);
                crate::model::ops::swiglu(&mut want, &up);
                for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    prop_assert!(same(g, w), "{:?}: [{}] {} vs {}", kernel, i, g, w);
                }
            });
        }
    }

    /// Every kernel's weighted sum of `f16` rows gives the bits of
    /// `axpy_f16` applied row after row from zero, for head widths with and
    /// without a 32-lane remainder, strides wider than a row, and values
    /// across `f16`'s range (a NaN matches any NaN).
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn weighted_sum_f16_is_axpy_in_order() {
        use proptest::prelude::*;
        let case = (0usize..170, 0usize..9, 0usize..20).prop_flat_map(|(hd, n, extra)| {
            let stride = hd + extra;
            (
                // Exactly the values the rows need: the last row ends the
                // slice.
                prop::collection::vec(
                    any::<u16>().prop_map(f16::from_bits),
                    n.saturating_sub(1) * stride + hd,
                ),
                prop::collection::vec(-2.0f32..2.0, n),
                Just((hd, stride)),
            )
        });
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else { continue };
            proptest!(|((v, ps, (hd, stride)) in case.clone())| {
                let mut got = vec![7.0f32; hd];
                k.weighted_sum_f16(&mut got, &ps, &v, stride);
                let mut want = vec![0.0f32; hd];
                for (t, &p) in ps.iter().enumerate() {
                    scalar::axpy_f16(&mut want, p, &v[t * stride..t * stride + hd]);
                }
                let same = |a: &f32, b: &f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
                for (a, b) in got.iter().zip(&want) {
                    prop_assert!(same(a, b), "{:?}: {} vs {}", kernel, a, b);
                }
                // Two weight vectors at once: the second reversed.
                let ps2: Vec<f32> = ps.iter().rev().map(|p| p * 0.5).collect();
                let mut want2 = vec![0.0f32; hd];
                k.weighted_sum_f16(&mut want2, &ps2, &v, stride);
                let (mut g0, mut g1) = (vec![3.0f32; hd], vec![-1.0f32; hd]);
                k.weighted_sum_f16_x2([&mut g0, &mut g1], [&ps, &ps2], &v, stride);
                for ((a, b), (c, d)) in g0.iter().zip(&want).zip(g1.iter().zip(&want2)) {
                    prop_assert!(same(a, b) && same(c, d), "{:?}: x2 differs", kernel);
                }
            });
        }
    }

    /// The four-query attention kernels give each query what the pair
    /// kernels give it: `scores_f16_x4` the bits of two `scores_f16_x2`
    /// calls, and `weighted_sum_f16_x4` (weights of four lengths, from no
    /// row to all of them) the bits of `weighted_sum_f16` per output, over
    /// head widths with and without a remainder of 32 or 64, strides wider
    /// than a row, and `f16` values across the whole range (a NaN matches
    /// any NaN).
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn four_query_attention_kernels_are_two_pairs() {
        use proptest::prelude::*;
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        let scores = (
            prop::sample::select(vec![8usize, 32, 40, 64, 96, 128, 160]),
            0usize..40,
        )
            .prop_flat_map(|(hd, n)| {
                let vals = prop::collection::vec(-8.0f32..8.0, n * hd);
                let q = prop::collection::vec(-2.0f32..2.0, 4 * hd);
                (Just(hd), Just(n), vals, q)
            });
        let weighted = (0usize..170, 0usize..12, 0usize..20).prop_flat_map(|(hd, n, extra)| {
            let stride = hd + extra;
            (
                prop::collection::vec(
                    any::<u16>().prop_map(f16::from_bits),
                    n.saturating_sub(1) * stride + hd,
                ),
                prop::collection::vec(-2.0f32..2.0, n),
                prop::array::uniform4(0..=n),
                Just((hd, stride)),
            )
        });
        for kernel in Kernel::ALL {
            let Some(d) = kernel.dispatch() else { continue };
            proptest!(|((hd, n, vals, q) in scores.clone())| {
                let k: Vec<f16> = vals.iter().map(|&v| f16::from_f32(v)).collect();
                let qs: Vec<&[f32]> = q.chunks_exact(hd).collect();
                let mut got = vec![vec![0.0f32; n]; 4];
                let [a, b, c, e] = &mut got[..] else { unreachable!() };
                d.scores_f16_x4([qs[0], qs[1], qs[2], qs[3]], &k, 0.125, [a, b, c, e]);
                let mut want = vec![vec![0.0f32; n]; 4];
                let [a, b, c, e] = &mut want[..] else { unreachable!() };
                d.scores_f16_x2([qs[0], qs[1]], &k, 0.125, [a, b]);
                d.scores_f16_x2([qs[2], qs[3]], &k, 0.125, [c, e]);
                for h in 0..4 {
                    for t in 0..n {
                        prop_assert!(same(got[h][t], want[h][t]), "{:?} hd {} query {} row {}", kernel, hd, h, t);
                    }
                }
            });
            proptest!(|((v, ps, lens, (hd, stride)) in weighted.clone())| {
                // Each output's own weights: the shared ones scaled, over
                // its own number of rows.
                let ws: Vec<Vec<f32>> = (0..4)
                    .map(|h| ps[..lens[h]].iter().map(|p| p * (h as f32 + 1.0)).collect())
                    .collect();
                let mut got = vec![vec![5.0f32; hd]; 4];
                let [a, b, c, e] = &mut got[..] else { unreachable!() };
                d.weighted_sum_f16_x4([a, b, c, e], [&ws[0], &ws[1], &ws[2], &ws[3]], &v, stride);
                for (h, w) in ws.iter().enumerate() {
                    let mut want = vec![-3.0f32; hd];
                    d.weighted_sum_f16(&mut want, w, &v, stride);
                    for (i, (&g, &x)) in got[h].iter().zip(&want).enumerate() {
                        prop_assert!(same(g, x), "{:?} output {} of {} rows, value {}: {} vs {}", kernel, h, lens[h], i, g, x);
                    }
                }
            });
        }
    }

    /// Every kernel's byte reader returns the probes' word checksum
    /// (`scalar::sum_bytes`, and a reference written from its definition),
    /// with and without prefetch, for slices shorter than a run, starting
    /// on and off a 64-byte boundary, and ending inside a run.
    #[test]
    fn sum_bytes_is_the_word_checksum() {
        // A buffer that starts on a 64-byte boundary, so the words are known.
        let mut lines = vec![scalar::Lines4([0; 32]); 20];
        let data: &mut [u8] = bytemuck::cast_slice_mut(&mut lines);
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3];
        }
        let data = &*data;
        // The reference, by its definition: words of the aligned lines,
        // bytes outside them.
        let reference = |start: usize, end: usize| -> u64 {
            let first = start.next_multiple_of(64);
            let lines = (end.saturating_sub(first)) / 256;
            let (lo, hi) = if lines == 0 {
                (end, end)
            } else {
                (first, first + 256 * lines)
            };
            let bytes = data[start..lo.min(end)].iter().chain(&data[hi..end]);
            let words = data[lo..hi]
                .chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().unwrap()));
            bytes
                .map(|&b| u64::from(b))
                .chain(words)
                .fold(0, u64::wrapping_add)
        };
        let cases = [
            (0, 0),
            (0, 1),
            (3, 300),
            (1, 4999),
            (0, 5120),
            (64, 4160),
            (63, 576),
        ];
        for (start, end) in cases {
            assert_eq!(scalar::sum_bytes(&data[start..end]), reference(start, end));
        }
        // Four lines of ones: 32 words of 0x0101..01.
        let mut ones = [scalar::Lines4([0; 32]); 1];
        bytemuck::cast_slice_mut::<_, u8>(&mut ones).fill(1);
        let ones: &[u8] = bytemuck::cast_slice(&ones);
        assert_eq!(scalar::sum_bytes(ones), 32 * 0x0101_0101_0101_0101);
        assert_eq!(scalar::sum_bytes(&ones[1..]), 255);
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else { continue };
            for (start, end) in cases {
                let part = &data[start..end];
                for prefetch in [false, true] {
                    assert_eq!(
                        k.sum_bytes(part, prefetch),
                        reference(start, end),
                        "{kernel:?} {start}..{end}"
                    );
                }
            }
            assert_eq!(k.sum_bytes(ones, true), 32 * 0x0101_0101_0101_0101);
        }
    }

    /// Every available kernel's four-row form gives its `dot_q8`'s bits for
    /// each row, for every block count (pairs and a last odd block), scales
    /// of any sign and magnitude, and weights down to -128.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn dot_q8_x4_equals_dot_q8() {
        use proptest::prelude::*;
        let weights = (0usize..20)
            .prop_flat_map(|nb| prop::collection::vec((any::<[i8; QK8_0]>(), -2.0f32..2.0), nb));
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                eprintln!("dot_q8_x4_equals_dot_q8: {kernel:?} skipped, the CPU lacks it");
                continue;
            };
            proptest!(|(w in weights.clone(), seed in any::<u32>())| {
                let w: Vec<BlockQ8_0> = w
                    .iter()
                    .map(|(qs, d)| BlockQ8_0 { d: f16::from_f32(*d).to_le_bytes(), qs: *qs })
                    .collect();
                let rows: Vec<Vec<ActBlock>> = (0..4u32)
                    .map(|r| {
                        (0..w.len())
                            .map(|b| {
                                let v: [f32; QK8_0] = core::array::from_fn(|i| {
                                    let h = (seed ^ (r * 7919 + b as u32 * 31 + i as u32)).wrapping_mul(2_654_435_761);
                                    (h >> 8) as f32 / (1u32 << 24) as f32 - 0.5
                                });
                                ActBlock::quantize(&v)
                            })
                            .collect()
                    })
                    .collect();
                let got = k.dot_q8_x4(&w, [&rows[0], &rows[1], &rows[2], &rows[3]]);
                for (g, x) in got.iter().zip(&rows) {
                    prop_assert_eq!(g.to_bits(), k.dot_q8(&w, x).to_bits(), "{:?}", kernel);
                }
            });
        }
    }

    /// Every kernel's Q8_K quantizer writes the portable quantizer's bytes,
    /// for values of every magnitude, with ties for the largest magnitude
    /// (of either sign), zeros, subnormals, infinities and NaNs mixed in.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; safe code only"
    )]
    #[test]
    fn quantize_q8_k_is_the_portable_quantizer() {
        use proptest::prelude::*;
        let value = prop_oneof![
            8 => -1000.0f32..1000.0,
            2 => -1.0f32..1.0,
            1 => Just(0.0f32),
            1 => Just(-0.0f32),
            1 => Just(1e-40f32),
            1 => Just(f32::INFINITY),
            1 => Just(f32::NEG_INFINITY),
            1 => Just(f32::NAN),
            1 => Just(500.0f32),
            1 => Just(-500.0f32),
        ];
        let blocks = (0usize..4)
            .prop_flat_map(move |n| prop::collection::vec(value.clone(), n * crate::quant::QK_K));
        // Ramps whose largest magnitude comes with both signs, so that
        // levels of both -127 and 127 occur, at every scale.
        let ramp = |scale: f32, flip: bool| -> Vec<f32> {
            (0..crate::quant::QK_K)
                .map(|i| {
                    let t = i as f32 / (crate::quant::QK_K - 1) as f32 * 2.0 - 1.0;
                    if flip {
                        -t * scale
                    } else {
                        t * scale
                    }
                })
                .collect()
        };
        let ramps: Vec<f32> = [1.0, 3.7, 1e-30, 1e30, 1e-42]
            .into_iter()
            .flat_map(|s| [ramp(s, false), ramp(s, true)])
            .flatten()
            .collect();
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else { continue };
            let (chunks, _) = ramps.as_chunks::<{ crate::quant::QK_K }>();
            let mut got = vec![<BlockQ8K as bytemuck::Zeroable>::zeroed(); chunks.len()];
            k.quantize_q8_k(chunks, &mut got);
            for (g, c) in got.iter().zip(chunks) {
                let want = crate::quant::q8_k::quantize_block_q8_k(c);
                assert!(
                    bytemuck::bytes_of(g) == bytemuck::bytes_of(&want),
                    "{kernel:?}"
                );
                assert!(want.qs.contains(&127) && want.qs.contains(&-127) || c[0].abs() < 1e-38);
            }
            proptest!(|(x in blocks.clone())| {
                let (chunks, _) = x.as_chunks::<{ crate::quant::QK_K }>();
                let mut got = vec![<BlockQ8K as bytemuck::Zeroable>::zeroed(); chunks.len()];
                k.quantize_q8_k(chunks, &mut got);
                for (g, c) in got.iter().zip(chunks) {
                    let want = crate::quant::q8_k::quantize_block_q8_k(c);
                    prop_assert!(
                        bytemuck::bytes_of(g) == bytemuck::bytes_of(&want),
                        "{:?}: {:?} vs {:?}", kernel, g, want
                    );
                }
            });
        }
    }

    /// Operands of the K-quant kernel tests from raw bytes: `nb` blocks of
    /// Q4_K, Q5_K and Q6_K weights (the same bytes, with f16 scales from
    /// `ds`) and four rows of Q8_K activations (their scales from `ds`,
    /// their sums matching their bytes).
    #[allow(clippy::type_complexity)]
    fn k_operands(
        nb: usize,
        wraw: &[u8],
        xraw: &[u8],
        ds: &[(f32, f32)],
    ) -> (
        Vec<BlockQ4K>,
        Vec<BlockQ5K>,
        Vec<BlockQ6K>,
        Vec<Vec<BlockQ8K>>,
    ) {
        fn blocks<B: bytemuck::Pod>(raw: &[u8], nb: usize) -> Vec<B> {
            let n = core::mem::size_of::<B>();
            (0..nb)
                .map(|b| bytemuck::pod_read_unaligned(&raw[b * n..(b + 1) * n]))
                .collect()
        }
        let xs: Vec<Vec<BlockQ8K>> = (0..4)
            .map(|r| {
                let mut x: Vec<BlockQ8K> = blocks(&xraw[r * nb * 292..], nb);
                for (b, xb) in x.iter_mut().enumerate() {
                    xb.d = ds[r * nb + b].0;
                    xb.bsums = BlockQ8K::sums_of(&xb.qs);
                }
                x
            })
            .collect();
        let mut w4: Vec<BlockQ4K> = blocks(wraw, nb);
        let mut w5: Vec<BlockQ5K> = blocks(wraw, nb);
        let mut w6: Vec<BlockQ6K> = blocks(wraw, nb);
        for b in 0..nb {
            let d = f16::from_f32(ds[b].1).to_le_bytes();
            let dmin = f16::from_f32(ds[nb + b].1).to_le_bytes();
            (w4[b].d, w4[b].dmin) = (d, dmin);
            (w5[b].d, w5[b].dmin) = (d, dmin);
            w6[b].d = d;
        }
        (w4, w5, w6, xs)
    }

    /// Every available kernel's four-row K-quant forms give its
    /// single-row dot's bits for each row, for 0 to 4 blocks of any bytes
    /// (scales of any sign and magnitude, every level and scale code,
    /// activations down to -128), and panic on rows of another length.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn dot_k_x4_equals_dot_k() {
        use proptest::prelude::*;
        use std::panic::catch_unwind;
        let case = (0usize..=4).prop_flat_map(|nb| {
            (
                Just(nb),
                prop::collection::vec(any::<u8>(), nb * 210),
                prop::collection::vec(any::<u8>(), 4 * nb * 292),
                prop::collection::vec((-2.0f32..2.0, -2.0f32..2.0), 4 * nb),
            )
        });
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                eprintln!("dot_k_x4_equals_dot_k: {kernel:?} skipped, the CPU lacks it");
                continue;
            };
            proptest!(|((nb, wraw, xraw, ds) in case.clone())| {
                let (w4, w5, w6, xs) = k_operands(nb, &wraw, &xraw, &ds);
                let rows = [&xs[0][..], &xs[1], &xs[2], &xs[3]];
                let (g4, g5, g6) = (k.dot_q4_k_x4(&w4, rows), k.dot_q5_k_x4(&w5, rows), k.dot_q6_k_x4(&w6, rows));
                for (i, x) in rows.iter().enumerate() {
                    prop_assert!(same(g4[i], k.dot_q4_k(&w4, x)), "{:?} q4_k row {}", kernel, i);
                    prop_assert!(same(g5[i], k.dot_q5_k(&w5, x)), "{:?} q5_k row {}", kernel, i);
                    prop_assert!(same(g6[i], k.dot_q6_k(&w6, x)), "{:?} q6_k row {}", kernel, i);
                }
                if nb > 0 {
                    let short = &xs[1][..nb - 1];
                    let bad = [rows[0], short, rows[2], rows[3]];
                    prop_assert!(catch_unwind(|| k.dot_q4_k_x4(&w4, bad)).is_err());
                    prop_assert!(catch_unwind(|| k.dot_q5_k_x4(&w5, bad)).is_err());
                    prop_assert!(catch_unwind(|| k.dot_q6_k_x4(&w6, bad)).is_err());
                }
            });
        }
    }

    /// Every kernel's K-quant dots are within a tight bound of the exact
    /// dot of the dequantized operands, for blocks of any scale, min and
    /// level bytes (the SIMD kernels decode the packed 6-bit scales and
    /// mins in vector registers; a wrong bit there moves the result far
    /// outside the bound).
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn k_dots_match_the_dequantized_dot() {
        use crate::quant::{
            dequantize_row_q4_k, dequantize_row_q5_k, dequantize_row_q6_k, dequantize_row_q8_k,
        };
        use proptest::prelude::*;
        let case = (1usize..=3).prop_flat_map(|nb| {
            (
                Just(nb),
                prop::collection::vec(any::<u8>(), nb * 210),
                prop::collection::vec(any::<u8>(), 4 * nb * 292),
                prop::collection::vec((-2.0f32..2.0, -2.0f32..2.0), 4 * nb),
                prop::collection::vec((0.25f32..2.0, 0.25f32..2.0), nb),
            )
        });
        // |got - exact| within 1e-5 of the sum of the products' magnitudes.
        let close = |got: f32, w: &[f32], x: &[f32]| {
            let exact: f64 = w
                .iter()
                .zip(x)
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum();
            let mag: f64 = w
                .iter()
                .zip(x)
                .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
                .sum();
            (f64::from(got) - exact).abs() <= 1e-5 * mag + 1e-30
        };
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                continue;
            };
            proptest!(ProptestConfig::with_cases(128), |((nb, wraw, xraw, ds, scales) in case.clone())| {
                let (mut w4, mut w5, mut w6, xs) = k_operands(nb, &wraw, &xraw, &ds);
                for (b, &(d, dmin)) in scales.iter().enumerate() {
                    let (d, dmin) = (f16::from_f32(d).to_le_bytes(), f16::from_f32(dmin).to_le_bytes());
                    (w4[b].d, w4[b].dmin, w5[b].d, w5[b].dmin, w6[b].d) = (d, dmin, d, dmin, d);
                }
                let (d4, d5, d6) = (dequantize_row_q4_k(&w4), dequantize_row_q5_k(&w5), dequantize_row_q6_k(&w6));
                for x in &xs {
                    let xd = dequantize_row_q8_k(x);
                    prop_assert!(close(k.dot_q4_k(&w4, x), &d4, &xd), "{:?} q4_k", kernel);
                    prop_assert!(close(k.dot_q5_k(&w5, x), &d5, &xd), "{:?} q5_k", kernel);
                    prop_assert!(close(k.dot_q6_k(&w6, x), &d6, &xd), "{:?} q6_k", kernel);
                }
            });
        }
    }

    /// The eight-row K-quant form of every kernel gives each row's
    /// single-row dot, bit for bit, and refuses a row of the wrong length.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn dot_k_x8_equals_dot_k() {
        use proptest::prelude::*;
        use std::panic::catch_unwind;
        let case = (0usize..=3).prop_flat_map(|nb| {
            (
                Just(nb),
                prop::collection::vec(any::<u8>(), nb * 210),
                prop::collection::vec(any::<u8>(), 4 * nb * 292),
                prop::collection::vec((-2.0f32..2.0, -2.0f32..2.0), 4 * nb),
            )
        });
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                eprintln!("dot_k_x8_equals_dot_k: {kernel:?} skipped, the CPU lacks it");
                continue;
            };
            proptest!(ProptestConfig::with_cases(64), |((nb, wraw, xraw, ds) in case.clone())| {
                let (w4, w5, w6, xs) = k_operands(nb, &wraw, &xraw, &ds);
                // Eight rows: the four operands, then again in reverse.
                let rows: [&[BlockQ8K]; 8] = core::array::from_fn(|i| &xs[if i < 4 { i } else { 7 - i }][..]);
                let got = [
                    k.dot_k_x8(KRow::Q4K(&w4), rows),
                    k.dot_k_x8(KRow::Q5K(&w5), rows),
                    k.dot_k_x8(KRow::Q6K(&w6), rows),
                ];
                for (i, x) in rows.iter().enumerate() {
                    prop_assert!(same(got[0][i], k.dot_q4_k(&w4, x)), "{:?} q4_k row {}", kernel, i);
                    prop_assert!(same(got[1][i], k.dot_q5_k(&w5, x)), "{:?} q5_k row {}", kernel, i);
                    prop_assert!(same(got[2][i], k.dot_q6_k(&w6, x)), "{:?} q6_k row {}", kernel, i);
                }
                if nb > 0 {
                    let mut bad = rows;
                    bad[6] = &xs[2][..nb - 1];
                    prop_assert!(catch_unwind(|| k.dot_k_x8(KRow::Q4K(&w4), bad)).is_err());
                    prop_assert!(catch_unwind(|| k.dot_k_x8(KRow::Q5K(&w5), bad)).is_err());
                    prop_assert!(catch_unwind(|| k.dot_k_x8(KRow::Q6K(&w6), bad)).is_err());
                }
            });
        }
    }

    /// A K-quant kernel test case: block count, weight bytes, activation
    /// bytes, (activation, weight) scales.
    type KCase = (usize, Vec<u8>, Vec<u8>, Vec<(f32, f32)>);

    /// Proptest cases for `rows` K-quant weight rows against four
    /// activation rows: `(nb, weight bytes, activation bytes, scales)` as
    /// [`k_operands`] reads them, 0 to 5 blocks, the weight scales
    /// sometimes infinite, NaN or tiny.
    fn k_rows_case(rows: usize) -> impl proptest::strategy::Strategy<Value = KCase> + Clone {
        use proptest::prelude::*;
        let scale = prop_oneof![
            8 => -2.0f32..2.0,
            1 => Just(f32::INFINITY),
            1 => Just(f32::NAN),
            1 => Just(1e-7f32),
        ];
        (0usize..=5).prop_flat_map(move |nb| {
            (
                Just(nb),
                prop::collection::vec(any::<u8>(), rows * nb * 210),
                prop::collection::vec(any::<u8>(), 4 * nb * 292),
                prop::collection::vec((-2.0f32..2.0, scale.clone()), rows * 4 * nb),
            )
        })
    }

    /// Every kernel's eight-row decode form for Q4_K and Q5_K gives its
    /// single-row dot's bits for each row, for eight weight rows of any
    /// bytes (every level, scale, min and fifth-bit code, scales of any
    /// sign and size, infinite and NaN ones included) against activations
    /// down to -128, 0 to 5 blocks; a row of another length panics.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn k_rows8_equal_dot_k() {
        use proptest::prelude::*;
        use std::panic::catch_unwind;
        let case = k_rows_case(8);
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                eprintln!("k_rows8_equal_dot_k: {kernel:?} skipped, the CPU lacks it");
                continue;
            };
            proptest!(ProptestConfig::with_cases(64), |((nb, wraw, xraw, ds) in case.clone())| {
                let ops: Vec<_> = (0..8)
                    .map(|r| k_operands(nb, &wraw[r * nb * 210..], &xraw, &ds[r * 4 * nb..]))
                    .collect();
                let x = &ops[0].3[1];
                let w4: [&[BlockQ4K]; 8] = core::array::from_fn(|r| &ops[r].0[..]);
                let w5: [&[BlockQ5K]; 8] = core::array::from_fn(|r| &ops[r].1[..]);
                // The same values with stored sums taken from raw bytes,
                // not the values' own: every form reads the sums as stored.
                let mut raw_sums = x.clone();
                for (b, xb) in raw_sums.iter_mut().enumerate() {
                    xb.bsums = bytemuck::pod_read_unaligned(&xraw[b * 292 + 260..b * 292 + 292]);
                }
                for x in [x, &raw_sums] {
                    let got4 = k.dot_q4_k_rows8(w4, x);
                    let got5 = k.dot_q5_k_rows8(w5, x);
                    for r in 0..8 {
                        prop_assert!(same(got4[r], k.dot_q4_k(w4[r], x)), "{:?} q4_k row {}", kernel, r);
                        prop_assert!(same(got5[r], k.dot_q5_k(w5[r], x)), "{:?} q5_k row {}", kernel, r);
                    }
                }
                if nb > 0 {
                    let (mut bad4, mut bad5) = (w4, w5);
                    bad4[5] = &w4[5][..nb - 1];
                    bad5[0] = &w5[0][..nb - 1];
                    prop_assert!(catch_unwind(|| k.dot_q4_k_rows8(bad4, x)).is_err());
                    prop_assert!(catch_unwind(|| k.dot_q5_k_rows8(bad5, x)).is_err());
                }
            });
        }
    }

    /// The eight-row Q4_K and Q5_K decode forms, rows apart and packed, at
    /// the integer bounds
    /// (every level 15 or 31, every scale and min code 63, activations all
    /// -128 or all 127, 16 blocks, so a sub-block's sums and Q4_K's
    /// sixteen-fold high halves reach their largest)
    /// and with raw f16 scales that are NaN, infinite or the smallest
    /// subnormal give each row's single-row bits, and near the exact value.
    #[cfg_attr(miri, ignore = "safe code only under Miri (no token), and slow there")]
    #[test]
    fn k_rows8_at_the_extremes() {
        use half::f16;
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        let one = f16::from_f32(1.0).to_bits();
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else { continue };
            for xv in [-128i8, 127, -1] {
                let qs = [xv; 256];
                let x = vec![
                    BlockQ8K {
                        d: 1.0,
                        qs,
                        bsums: BlockQ8K::sums_of(&qs)
                    };
                    16
                ];
                for (d, dmin) in [(one, one), (0x7c01, one), (one, 0xfc00), (0x0001, 0x8001)] {
                    let mut b5 = [0xffu8; 176];
                    b5[0..2].copy_from_slice(&d.to_le_bytes());
                    b5[2..4].copy_from_slice(&dmin.to_le_bytes());
                    let w5: Vec<BlockQ5K> = vec![bytemuck::cast(b5); 16];
                    let mut b4 = [0xffu8; 144];
                    b4[0..4].copy_from_slice(&b5[0..4]);
                    let w4: Vec<BlockQ4K> = vec![bytemuck::cast(b4); 16];
                    let (g4, g5) = (
                        k.dot_q4_k_rows8([&w4[..]; 8], &x),
                        k.dot_q5_k_rows8([&w5[..]; 8], &x),
                    );
                    // The same rows packed eight at a time.
                    let p4 = crate::quant::pack_q4_k_rows8(&w4.repeat(8), 16);
                    let p5 = crate::quant::pack_q5_k_rows8(&w5.repeat(8), 16);
                    let (pk4, pk5) = (k.dot_q4_k_packed8(&p4, &x), k.dot_q5_k_packed8(&p5, &x));
                    let want4 = crate::quant::q4_k::dot_q4_k_blocks(&w4, &x);
                    for r in 0..8 {
                        assert!(same(g4[r], k.dot_q4_k(&w4, &x)), "{kernel:?} {xv} {d:#x}");
                        assert!(same(g5[r], k.dot_q5_k(&w5, &x)), "{kernel:?} {xv} {d:#x}");
                        assert!(same(pk4[r], g4[r]), "{kernel:?} packed {xv} {d:#x}");
                        assert!(same(pk5[r], g5[r]), "{kernel:?} packed {xv} {d:#x}");
                        if d == one && dmin == one {
                            let err = (g4[r] - want4).abs();
                            assert!(
                                err <= 1e-5 * want4.abs(),
                                "{kernel:?} {xv}: {} {want4}",
                                g4[r]
                            );
                        }
                    }
                }
            }
        }
    }

    /// The K-quant GEMM over interleaved groups (every kernel: the x86
    /// kernels' vector forms, AVX-512 VNNI's at 512 bits and AVX2's,
    /// which AVX-VNNI runs, at 256; the others' plain reference) gives
    /// `kgroup`'s reference bits, and those are every x86 kernel's
    /// single-row dot, for four weight rows of any bytes (every level,
    /// scale and min code, Q6_K scales of any sign, scales of any sign and
    /// size, infinite and NaN ones included) against eight activation rows
    /// down to -128, 0 to 5 blocks; rows of another length panic.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn k_gemm_equals_the_reference_and_dot_k() {
        use crate::quant::kgroup::{gemm_k4_reference, gemm_q6_reference};
        use proptest::prelude::*;
        use std::panic::catch_unwind;
        let case = k_rows_case(4);
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                eprintln!(
                    "k_gemm_equals_the_reference_and_dot_k: {kernel:?} skipped, the CPU lacks it"
                );
                continue;
            };
            proptest!(ProptestConfig::with_cases(64), |((nb, wraw, xraw, ds) in case.clone())| {
                // Four weight rows (each with its own scales) against the
                // same eight activation rows: the first operands' four,
                // then four from the activation bytes reversed (with
                // other scales), so a kernel that mixes up rows differs.
                let ops: Vec<_> = (0..4)
                    .map(|r| k_operands(nb, &wraw[r * nb * 210..], &xraw, &ds[r * 4 * nb..]))
                    .collect();
                let xrev: Vec<u8> = xraw.iter().rev().copied().collect();
                let more = k_operands(nb, &wraw, &xrev, &ds[4 * nb..]).3;
                let rows: [&[BlockQ8K]; 8] =
                    core::array::from_fn(|i| if i < 4 { &ops[0].3[i][..] } else { &more[i - 4][..] });
                let groups: Vec<Q8KGroup> = (0..nb).map(|b| Q8KGroup::new(rows, b)).collect();
                let l4: Vec<Vec<K4Levels>> =
                    ops.iter().map(|o| o.0.iter().map(K4Levels::q4_k).collect()).collect();
                let l5: Vec<Vec<K4Levels>> =
                    ops.iter().map(|o| o.1.iter().map(K4Levels::q5_k).collect()).collect();
                let l6: Vec<Vec<Q6Levels>> =
                    ops.iter().map(|o| o.2.iter().map(Q6Levels::new).collect()).collect();
                fn four(l: &[Vec<K4Levels>]) -> [&[K4Levels]; 4] {
                    [&l[0], &l[1], &l[2], &l[3]]
                }
                let six = [&l6[0][..], &l6[1][..], &l6[2][..], &l6[3][..]];
                let got = [k.gemm_k4_4x8(four(&l4), &groups), k.gemm_k4_4x8(four(&l5), &groups), k.gemm_q6_4x8(six, &groups)];
                let want = [gemm_k4_reference(four(&l4), &groups), gemm_k4_reference(four(&l5), &groups), gemm_q6_reference(six, &groups)];
                for t in 0..3 {
                    for r in 0..4 {
                        for a in 0..8 {
                            prop_assert!(same(got[t][r][a], want[t][r][a]), "{:?} type {} row {} act {}", kernel, t, r, a);
                        }
                    }
                }
                #[cfg(target_arch = "x86_64")]
                if matches!(kernel, Kernel::Avx2 | Kernel::AvxVnni | Kernel::Avx512Vnni) {
                    for (r, o) in ops.iter().enumerate() {
                        for (a, x) in rows.iter().enumerate() {
                            prop_assert!(same(want[0][r][a], k.dot_q4_k(&o.0, x)), "{:?} q4_k {} {}", kernel, r, a);
                            prop_assert!(same(want[1][r][a], k.dot_q5_k(&o.1, x)), "{:?} q5_k {} {}", kernel, r, a);
                            prop_assert!(same(want[2][r][a], k.dot_q6_k(&o.2, x)), "{:?} q6_k {} {}", kernel, r, a);
                        }
                    }
                }
                if nb > 0 {
                    let mut bad = four(&l4);
                    bad[2] = &l4[2][..nb - 1];
                    prop_assert!(catch_unwind(|| k.gemm_k4_4x8(bad, &groups)).is_err());
                    let mut bad6 = six;
                    bad6[1] = &l6[1][..nb - 1];
                    prop_assert!(catch_unwind(|| k.gemm_q6_4x8(bad6, &groups)).is_err());
                }
            });
        }
    }

    /// The kernels with a vector Q8_0/Q4_0 GEMM say so, so that a batch
    /// builds the groups and a prefill runs it: one that fell back to the
    /// four-row kernels or the plain reference would give the same bits,
    /// only slower, and no other test would notice.
    #[test]
    fn b32_gemm_flags_name_the_vector_kernels() {
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                continue;
            };
            let groups = matches!(kernel, Kernel::Avx2 | Kernel::Avx512Vnni);
            assert_eq!(k.matmul_uses_b32_groups(), groups, "{kernel:?}");
            assert_eq!(
                k.matmul_uses_b32_signed(),
                kernel == Kernel::Avx2,
                "{kernel:?}"
            );
        }
    }

    /// The Q8_0 and Q4_0 GEMM over interleaved groups (every kernel, in
    /// both weight forms: AVX-512 VNNI's vector form of the unsigned one,
    /// AVX2's of the signed one, the plain references otherwise) gives
    /// `kgroup`'s reference bits: the unsigned form's are the VNNI
    /// kernels' single-row `dot_q8`/`dot_q4_0`, the signed form's AVX2's;
    /// for
    /// two weight rows of any bytes
    /// (scales of any sign and size, infinite and NaN ones included)
    /// against eight activation rows (values -127 to 127, as quantized),
    /// 0 to 5 blocks (odd counts take the even accumulator's last block);
    /// rows of another length panic.
    /// The sixteen-row Q4_0 GEMM (AVX-512 VNNI; the reference elsewhere)
    /// against its plain-Rust reference and AVX2's `dot_q4_0` of every
    /// (weight row, activation row) pair, bit for bit: 0-19 blocks (every
    /// residue of the four partial sums), one to sixteen weight rows (the
    /// rest zero, as the last tile of a product), one, three and eight
    /// activation rows a call, hostile scales, random nibbles and
    /// activation bytes of -128 (which no quantizer writes).
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn q4_0_rows16_gemm_equals_the_reference_and_the_dots() {
        use crate::quant::kgroup::{gemm_q4_0_rows16_reference, Q4_0Act, Q4_0Rows16, ROWS16};
        use proptest::prelude::*;
        use std::panic::catch_unwind;
        let scale = prop_oneof![
            8 => -4.0f32..4.0,
            1 => Just(f32::INFINITY),
            1 => Just(f32::NAN),
            1 => Just(6e-8f32),
        ];
        let case = (0usize..=19, 1usize..=ROWS16).prop_flat_map(move |(nb, rows)| {
            (
                Just(nb),
                Just(rows),
                prop::collection::vec(any::<u8>(), rows * nb * 16),
                prop::collection::vec(scale.clone(), rows * nb),
                prop::collection::vec(-1.0f32..1.0, 8 * nb * 32),
                any::<bool>(),
            )
        });
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        #[cfg(target_arch = "x86_64")]
        let avx2 = Kernel::Avx2.dispatch();
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                eprintln!("q4_0_rows16_gemm_equals_the_reference_and_the_dots: {kernel:?} skipped, the CPU lacks it");
                continue;
            };
            proptest!(ProptestConfig::with_cases(64), |((nb, rows, q4, ds, xf, extreme) in case.clone())| {
                let w: Vec<Vec<BlockQ4_0>> = (0..rows).map(|r| (0..nb).map(|b| {
                    let o = (r * nb + b) * 16;
                    BlockQ4_0 { d: f16::from_f32(ds[r * nb + b]).to_le_bytes(), qs: q4[o..o + 16].try_into().unwrap() }
                }).collect()).collect();
                let mut tile = vec![<Q4_0Rows16 as bytemuck::Zeroable>::zeroed(); nb];
                for (r, row) in w.iter().enumerate() {
                    for (t, b) in tile.iter_mut().zip(row) {
                        t.set_row(r, b);
                    }
                }
                let xs: Vec<Vec<ActBlock>> = (0..8).map(|a| {
                    let mut v = QuantizedVector::new();
                    v.quantize_from(&xf[a * nb * 32..(a + 1) * nb * 32]).unwrap();
                    let mut blocks = v.act().to_vec();
                    if extreme && a == 7 {
                        // Bytes no quantizer writes, at the integers' limits.
                        for b in &mut blocks {
                            *b = ActBlock::new(f16::from_f32(0.5), [-128; 32]);
                        }
                    }
                    blocks
                }).collect();
                let acts: Vec<Vec<Q4_0Act>> = xs.iter().map(|x| x.iter().map(Q4_0Act::new).collect()).collect();
                let x8: [&[Q4_0Act]; 8] = core::array::from_fn(|a| &acts[a][..]);
                let got8 = k.gemm_q4_0_rows16(&tile, x8);
                let got3 = k.gemm_q4_0_rows16::<3>(&tile, core::array::from_fn(|a| x8[5 + a]));
                let got1 = k.gemm_q4_0_rows16::<1>(&tile, [x8[2]]);
                let want = gemm_q4_0_rows16_reference(&tile, x8);
                for a in 0..8 {
                    for r in 0..ROWS16 {
                        prop_assert!(same(got8[a][r], want[a][r]), "{:?} row {} act {}", kernel, r, a);
                    }
                    #[cfg(target_arch = "x86_64")]
                    if let Some(avx2) = avx2 {
                        for (r, wr) in w.iter().enumerate() {
                            prop_assert!(same(want[a][r], avx2.dot_q4_0(wr, &xs[a])), "reference row {} act {}", r, a);
                            if kernel == Kernel::Avx512Vnni {
                                prop_assert!(same(got8[a][r], k.dot_q4_0(wr, &xs[a])), "decode row {} act {}", r, a);
                            }
                        }
                    }
                }
                for r in 0..ROWS16 {
                    for a in 0..3 {
                        prop_assert!(same(got3[a][r], want[5 + a][r]), "{:?} x3 row {} act {}", kernel, r, a);
                    }
                    prop_assert!(same(got1[0][r], want[2][r]), "{:?} x1 row {}", kernel, r);
                }
                if nb > 0 {
                    prop_assert!(catch_unwind(|| k.gemm_q4_0_rows16(&tile[..nb - 1], x8)).is_err());
                    prop_assert!(catch_unwind(|| k.gemm_q4_0_rows16::<2>(&tile, [x8[0], &x8[1][..nb - 1]])).is_err());
                }
            });
        }
    }

    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn b32_gemm_equals_the_reference_and_the_dots() {
        use crate::quant::kgroup::{
            gemm_b32_reference, gemm_b32s_reference, gemm_q4_0_reference, Q4_0Act, Q4_0Rows16,
            Q4_0_SHIFT, Q8_0_SHIFT, ROWS16,
        };
        use proptest::prelude::*;
        use std::panic::catch_unwind;
        let scale = prop_oneof![
            8 => -4.0f32..4.0,
            1 => Just(f32::INFINITY),
            1 => Just(f32::NAN),
            1 => Just(6e-8f32),
        ];
        // Up to 19 blocks: AVX2's decode row takes eight blocks a step, then
        // four, then a padded last group, and every mix of them is here.
        let case = (0usize..=19).prop_flat_map(move |nb| {
            (
                Just(nb),
                prop::collection::vec(any::<i8>(), 2 * nb * 32),
                prop::collection::vec(any::<u8>(), 2 * nb * 16),
                prop::collection::vec(scale.clone(), 2 * nb),
                prop::collection::vec(-1.0f32..1.0, 8 * nb * 32),
            )
        });
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                eprintln!("b32_gemm_equals_the_reference_and_the_dots: {kernel:?} skipped, the CPU lacks it");
                continue;
            };
            proptest!(ProptestConfig::with_cases(64), |((nb, q8, q4, ds, xf) in case.clone())| {
                let w8: Vec<Vec<BlockQ8_0>> = (0..2).map(|r| (0..nb).map(|b| {
                    let o = (r * nb + b) * 32;
                    BlockQ8_0::new(f16::from_f32(ds[r * nb + b]), q8[o..o + 32].try_into().unwrap())
                }).collect()).collect();
                let w4: Vec<Vec<BlockQ4_0>> = (0..2).map(|r| (0..nb).map(|b| {
                    let o = (r * nb + b) * 16;
                    BlockQ4_0 { d: f16::from_f32(ds[r * nb + b]).to_le_bytes(), qs: q4[o..o + 16].try_into().unwrap() }
                }).collect()).collect();
                // Eight activation rows, quantized as a batch does.
                let xs: Vec<Vec<ActBlock>> = (0..8).map(|a| {
                    let mut v = QuantizedVector::new();
                    v.quantize_from(&xf[a * nb * 32..(a + 1) * nb * 32]).unwrap();
                    v.act().to_vec()
                }).collect();
                let rows: [&[ActBlock]; 8] = core::array::from_fn(|a| &xs[a][..]);
                let groups: Vec<Q8Group> = (0..nb).map(|b| Q8Group::new(rows, b)).collect();
                let l8: Vec<Vec<B32Levels>> = w8.iter().map(|r| r.iter().map(B32Levels::q8_0).collect()).collect();
                let l4: Vec<Vec<B32Levels>> = w4.iter().map(|r| r.iter().map(B32Levels::q4_0).collect()).collect();
                let got = k.gemm_b32_2x8([&l8[0], &l8[1]], &groups);
                let want = [gemm_b32_reference::<Q8_0_SHIFT>([&l8[0], &l8[1]], &groups), gemm_b32_reference::<Q4_0_SHIFT>([&l4[0], &l4[1]], &groups)];
                // The signed form (AVX2), one weight row a call: the scalar
                // `dot_q8` of the row's values, Q4_0's levels less 8.
                let s8: Vec<Vec<B32Signed>> = w8.iter().map(|r| r.iter().map(B32Signed::q8_0).collect()).collect();
                let s4: Vec<Vec<B32Signed>> = w4.iter().map(|r| r.iter().map(B32Signed::q4_0).collect()).collect();
                let signed = [[0, 1].map(|r| k.gemm_b32s_1x8(&s8[r], &groups)), [0, 1].map(|r| k.gemm_b32s_1x8(&s4[r], &groups))];
                // Q4_0's own GEMM, over its levels, adds in 16 bits what the
                // signed form adds in 32: the same sums, the same bits.
                let levels4 = [0, 1].map(|r| k.gemm_q4_0_1x8(&l4[r], &groups));
                // The many-row forms: each row what the one-row form gives
                // it, in its own slot (four rows: the two and the two with
                // their blocks reversed).
                let signed2 = k.gemm_b32s_2x8([&s8[0], &s8[1]], &groups);
                let l4_rev: Vec<Vec<B32Levels>> = l4.iter().map(|r| r.iter().rev().copied().collect()).collect();
                let four = [&l4[0], &l4[1], &l4_rev[0], &l4_rev[1]];
                let levels4x = k.gemm_q4_0_4x8(four.map(|r| &r[..]), &groups);
                for (slot, row) in four.iter().enumerate() {
                    let one = k.gemm_q4_0_1x8(row, &groups);
                    prop_assert!((0..8).all(|a| same(levels4x[slot][a], one[a])), "{:?} q4_0 4x8 slot {}", kernel, slot);
                }
                let levels4_ref = [0, 1].map(|r| gemm_q4_0_reference(&l4[r], &groups));
                let signed_ref = [[0, 1].map(|r| gemm_b32s_reference(&s8[r], &groups)), [0, 1].map(|r| gemm_b32s_reference(&s4[r], &groups))];
                for t in 0..2 {
                    for r in 0..2 {
                        for a in 0..8 {
                            prop_assert!(t == 1 || same(got[r][a], want[t][r][a]), "{:?} type {} row {} act {}", kernel, t, r, a);
                            prop_assert!(same(signed[t][r][a], signed_ref[t][r][a]), "{:?} signed type {} row {} act {}", kernel, t, r, a);
                            prop_assert!(same(levels4[r][a], signed[1][r][a]), "{:?} q4_0 levels row {} act {}", kernel, r, a);
                            prop_assert!(same(signed2[r][a], signed[0][r][a]), "{:?} q8_0 2x8 row {} act {}", kernel, r, a);
                            prop_assert!(same(levels4_ref[r][a], signed_ref[1][r][a]), "q4_0 levels reference row {} act {}", r, a);
                        }
                    }
                }
                #[cfg(target_arch = "x86_64")]
                for r in 0..2 {
                    for (a, x) in rows.iter().enumerate() {
                        // The unsigned form gives the VNNI kernels' dots,
                        // the signed form AVX2's (and AVX-512 VNNI's Q4_0).
                        let [w8_dot, w4_dot] = match kernel {
                            Kernel::AvxVnni => [want[0][r][a], want[1][r][a]],
                            Kernel::Avx512Vnni => [want[0][r][a], signed[1][r][a]],
                            Kernel::Avx2 => [signed[0][r][a], signed[1][r][a]],
                            _ => continue,
                        };
                        prop_assert!(same(w8_dot, k.dot_q8(&w8[r], x)), "{:?} q8_0 {} {}", kernel, r, a);
                        prop_assert!(same(w4_dot, k.dot_q4_0(&w4[r], x)), "{:?} q4_0 {} {}", kernel, r, a);
                    }
                }
                if nb > 0 {
                    let short = &l8[1][..nb - 1];
                    prop_assert!(catch_unwind(|| k.gemm_b32_2x8([&l8[0], short], &groups)).is_err());
                    prop_assert!(catch_unwind(|| k.gemm_b32s_1x8(&s8[1][..nb - 1], &groups)).is_err());
                    prop_assert!(catch_unwind(|| k.gemm_q4_0_1x8(&l4[1][..nb - 1], &groups)).is_err());
                    prop_assert!(catch_unwind(|| k.gemm_b32s_2x8([&s8[0], &s8[1][..nb - 1]], &groups)).is_err());
                    prop_assert!(catch_unwind(|| k.gemm_q4_0_4x8([&l4[0], &l4[1], &l4[0], &l4[1][..nb - 1]], &groups)).is_err());
                    // A row longer than the activation is refused too, not
                    // read in part.
                    let long8: Vec<B32Signed> = s8[0].iter().chain(&s8[0][..1]).copied().collect();
                    let long4: Vec<B32Levels> = l4[0].iter().chain(&l4[0][..1]).copied().collect();
                    prop_assert!(catch_unwind(|| k.gemm_b32s_2x8([&long8, &s8[1]], &groups)).is_err());
                    prop_assert!(catch_unwind(|| k.gemm_q4_0_4x8([&long4, &l4[1], &l4[0], &l4[1]], &groups)).is_err());
                }
            });
        }
        // The Q4_0 GEMMs (AVX2's one-row, AVX-512 VNNI's sixteen-row) are
        // exact for any activation byte, -128 included (which no quantizer
        // writes), and any nibbles: the extremes, every kernel, against the
        // reference's plain integers.
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else { continue };
            for (nibbles, x) in [
                (0x00u8, -128i8),
                (0xff, -128),
                (0x00, 127),
                (0xff, 127),
                (0x0f, -128),
                (0xf0, 127),
            ] {
                for nb in [1usize, 5, 12] {
                    let wq = vec![
                        BlockQ4_0 {
                            d: f16::from_f32(0.5).to_le_bytes(),
                            qs: [nibbles; 16],
                        };
                        nb
                    ];
                    let w: Vec<B32Levels> = wq.iter().map(B32Levels::q4_0).collect();
                    let rows: Vec<Vec<ActBlock>> = (0..8)
                        .map(|a| {
                            (0..nb)
                                .map(|_| ActBlock::new(f16::from_f32(0.25 + a as f32), [x; 32]))
                                .collect()
                        })
                        .collect();
                    let groups: Vec<Q8Group> = (0..nb)
                        .map(|b| Q8Group::new(core::array::from_fn(|a| &rows[a][..]), b))
                        .collect();
                    let got = k.gemm_q4_0_1x8(&w, &groups);
                    // The sixteen-row GEMM, the row in every lane.
                    let mut tile = vec![<Q4_0Rows16 as bytemuck::Zeroable>::zeroed(); nb];
                    for (t, b) in tile.iter_mut().zip(&wq) {
                        for r in 0..ROWS16 {
                            t.set_row(r, b);
                        }
                    }
                    let acts: Vec<Vec<Q4_0Act>> = rows
                        .iter()
                        .map(|x| x.iter().map(Q4_0Act::new).collect())
                        .collect();
                    let sixteen =
                        k.gemm_q4_0_rows16::<8>(&tile, core::array::from_fn(|a| &acts[a][..]));
                    let want = gemm_q4_0_reference(&w, &groups);
                    for a in 0..8 {
                        assert_eq!(
                            got[a].to_bits(),
                            want[a].to_bits(),
                            "{kernel:?} nibbles {nibbles:#x} x {x} nb {nb} row {a}"
                        );
                        for (r, t) in sixteen[a].iter().enumerate() {
                            assert_eq!(
                                t.to_bits(),
                                want[a].to_bits(),
                                "{kernel:?} rows16 row {r} nibbles {nibbles:#x} x {x} nb {nb} act {a}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// Every available kernel's `dot_q6_k_summed` gives its `dot_q6_k`'s
    /// bits on activations whose sums are their values' (as a quantized
    /// vector's are), for 0 to 5 blocks of any bytes: every level and
    /// scale code, activations down to -128, and weight scales of any
    /// bits (NaN and infinities among them) as well as ordinary ones.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn q6_k_summed_equals_dot_q6_k() {
        use proptest::prelude::*;
        let case = (0usize..=5).prop_flat_map(|nb| {
            (
                Just(nb),
                prop::collection::vec(any::<u8>(), nb * 210),
                prop::collection::vec(any::<u8>(), 4 * nb * 292),
                prop::collection::vec((-2.0f32..2.0, -2.0f32..2.0), 4 * nb),
                any::<bool>(),
            )
        });
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else { continue };
            proptest!(|((nb, wraw, xraw, ds, raw_scales) in case.clone())| {
                let (_, _, mut w6, xs) = k_operands(nb, &wraw, &xraw, &ds);
                if raw_scales {
                    for (b, wb) in w6.iter_mut().enumerate() {
                        wb.d = [wraw[b * 210 + 208], wraw[b * 210 + 209]];
                    }
                }
                for x in &xs {
                    let (a, b) = (k.dot_q6_k_summed(&w6, x), k.dot_q6_k(&w6, x));
                    prop_assert!(same(a, b), "{:?}: {} vs {}", kernel, a, b);
                }
            });
        }
    }

    /// `matvec_q6_k` gives each row `dot_q6_k`'s bits on every kernel,
    /// for 0 to 13 blocks per row (whole groups of four and blocks left
    /// over, where the x86 kernels' in-loop prefetch changes its pattern)
    /// and 0 to 9 rows of any bytes, NaN and infinite scales included; a
    /// wrong activation or weight length panics.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn matvec_q6_k_equals_dot_q6_k() {
        use proptest::prelude::*;
        let case = (0usize..=13, 0usize..=9).prop_flat_map(|(nb, rows)| {
            (
                Just(nb),
                Just(rows),
                prop::collection::vec(any::<u8>(), rows * nb * 210),
                prop::collection::vec(any::<u8>(), 4 * nb * 292),
                prop::collection::vec((-2.0f32..2.0, -2.0f32..2.0), 4 * nb),
            )
        });
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else { continue };
            proptest!(|((nb, rows, wraw, xraw, ds) in case.clone())| {
                let (_, _, _, xs) = k_operands(nb, &xraw, &xraw, &ds);
                let x = &xs[0];
                let w: Vec<BlockQ6K> = (0..rows * nb)
                    .map(|b| bytemuck::pod_read_unaligned(&wraw[b * 210..(b + 1) * 210]))
                    .collect();
                let mut out = vec![f32::NAN; rows];
                k.matvec_q6_k(&w, nb, x, &mut out);
                for (r, &o) in out.iter().enumerate() {
                    let want = k.dot_q6_k(&w[r * nb..(r + 1) * nb], x);
                    prop_assert!(same(o, want), "{:?} row {}: {} vs {}", kernel, r, o, want);
                }
                if nb > 0 && rows > 0 {
                    let short = std::panic::catch_unwind(|| {
                        k.matvec_q6_k(&w, nb, &x[1..], &mut vec![0.0; rows])
                    });
                    prop_assert!(short.is_err());
                    let ragged = std::panic::catch_unwind(|| {
                        k.matvec_q6_k(&w[1..], nb, x, &mut vec![0.0; rows])
                    });
                    prop_assert!(ragged.is_err());
                }
            });
        }
    }

    /// The sixteen-row Q4_K/Q5_K GEMM (AVX-512 VNNI; the reference
    /// elsewhere) gives each (weight row, activation row) pair's
    /// single-row dot bits, against its plain-Rust reference too, for
    /// sixteen rows of any bytes (every level, scale, min and fifth-bit
    /// code; scales of any size, NaN and infinite now and then) and
    /// activation bytes down to -128, 0 to 3 blocks, four, three and one
    /// activation rows a call; a tile's levels from two packed groups
    /// (`k4_tile_levels` and `k4_tile_heads`) are the bytes `set_row` of
    /// each row's unpacked block writes; short activation rows panic.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn k4_rows16_gemm_equals_the_reference_and_dot_k() {
        use crate::quant::kgroup::{gemm_k4_rows16_reference, K4Rows16, Q8KAct, ROWS16};
        use crate::quant::{pack_q4_k_rows8, pack_q5_k_rows8};
        use proptest::prelude::*;
        let scale = prop_oneof![
            8 => -2.0f32..2.0,
            1 => Just(f32::INFINITY),
            1 => Just(f32::NAN),
        ];
        let case = (0usize..=3).prop_flat_map(move |nb| {
            (
                Just(nb),
                prop::collection::vec(any::<u8>(), 16 * nb * 176),
                prop::collection::vec(any::<u8>(), 4 * nb * 292),
                prop::collection::vec((-2.0f32..2.0, scale.clone(), scale.clone()), 16 * nb),
            )
        });
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        fn blocks<B: bytemuck::Pod>(raw: &[u8], n: usize) -> Vec<B> {
            let size = core::mem::size_of::<B>();
            (0..n)
                .map(|b| bytemuck::pod_read_unaligned(&raw[b * size..(b + 1) * size]))
                .collect()
        }
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                eprintln!("k4_rows16_gemm_equals_the_reference_and_dot_k: {kernel:?} skipped, the CPU lacks it");
                continue;
            };
            proptest!(ProptestConfig::with_cases(48), |((nb, wraw, xraw, ds) in case.clone())| {
                let xs: Vec<Vec<BlockQ8K>> = (0..4).map(|a| {
                    let mut x: Vec<BlockQ8K> = blocks(&xraw[a * nb * 292..], nb);
                    for (b, xb) in x.iter_mut().enumerate() {
                        xb.d = ds[a * nb + b].0;
                        xb.bsums = BlockQ8K::sums_of(&xb.qs);
                    }
                    x
                }).collect();
                let acts: Vec<Vec<Q8KAct>> = xs.iter().map(|x| x.iter().map(Q8KAct::new).collect()).collect();
                let x4: [&[Q8KAct]; 4] = core::array::from_fn(|a| &acts[a][..]);
                let mut w4: Vec<BlockQ4K> = blocks(&wraw, 16 * nb);
                let mut w5: Vec<BlockQ5K> = blocks(&wraw, 16 * nb);
                for i in 0..16 * nb {
                    let (d, dmin) = (f16::from_f32(ds[i].1).to_le_bytes(), f16::from_f32(ds[i].2).to_le_bytes());
                    (w4[i].d, w4[i].dmin) = (d, dmin);
                    (w5[i].d, w5[i].dmin) = (d, dmin);
                }
                for q5 in [false, true] {
                    let row_levels = |r: usize, b: usize| if q5 {
                        K4Levels::q5_k(&w5[r * nb + b])
                    } else {
                        K4Levels::q4_k(&w4[r * nb + b])
                    };
                    let mut tile = vec![<K4Rows16 as bytemuck::Zeroable>::zeroed(); nb];
                    for r in 0..ROWS16 {
                        for (b, t) in tile.iter_mut().enumerate() {
                            t.set_row(r, &row_levels(r, b));
                        }
                    }
                    // The same tile from two packed groups.
                    let mut from_packed = vec![<K4Rows16 as bytemuck::Zeroable>::zeroed(); nb];
                    if nb > 0 {
                        let (p4, p5) = (pack_q4_k_rows8(&w4, nb), pack_q5_k_rows8(&w5, nb));
                        for (b, t) in from_packed.iter_mut().enumerate() {
                            let (g0, g1) = (b, nb + b);
                            if q5 {
                                k.k4_tile_levels(t, [&p5[g0].qs, &p5[g1].qs], Some([&p5[g0].qh, &p5[g1].qh]));
                                k.k4_tile_heads(t, [&p5[g0].heads, &p5[g1].heads]);
                            } else {
                                k.k4_tile_levels(t, [&p4[g0].qs, &p4[g1].qs], None);
                                k.k4_tile_heads(t, [&p4[g0].heads, &p4[g1].heads]);
                            }
                        }
                    }
                    prop_assert!(
                        bytemuck::cast_slice::<K4Rows16, u8>(&from_packed) == bytemuck::cast_slice::<K4Rows16, u8>(&tile),
                        "{:?} q5 {}: the packed tile differs", kernel, q5
                    );
                    let got = k.gemm_k4_rows16(&tile, x4);
                    let got3 = k.gemm_k4_rows16::<3>(&tile, [x4[1], x4[2], x4[3]]);
                    let got1 = k.gemm_k4_rows16::<1>(&tile, [x4[2]]);
                    let want = gemm_k4_rows16_reference(&tile, x4);
                    for r in 0..ROWS16 {
                        let row4 = &w4[r * nb..(r + 1) * nb];
                        let row5 = &w5[r * nb..(r + 1) * nb];
                        for a in 0..4 {
                            let dot = if q5 { k.dot_q5_k(row5, &xs[a]) } else { k.dot_q4_k(row4, &xs[a]) };
                            prop_assert!(same(got[a][r], want[a][r]), "{:?} q5 {} row {} act {}", kernel, q5, r, a);
                            // The scalar kernel's dots round otherwise; the
                            // x86 kernels share this float step.
                            if !matches!(kernel, Kernel::Scalar | Kernel::Neon | Kernel::NeonDot) {
                                prop_assert!(same(want[a][r], dot), "{:?} q5 {} row {} act {}: {} vs dot {}", kernel, q5, r, a, want[a][r], dot);
                            }
                        }
                        for a in 0..3 {
                            prop_assert!(same(got3[a][r], want[1 + a][r]));
                        }
                        prop_assert!(same(got1[0][r], want[2][r]));
                    }
                    if nb > 0 {
                        prop_assert!(std::panic::catch_unwind(|| k.gemm_k4_rows16::<2>(&tile, [x4[0], &x4[1][..nb - 1]])).is_err());
                    }
                }
            });
        }
    }

    /// Every kernel's `k4_tile_heads` writes `set_head`'s tile byte for
    /// byte, for every f16 bit pattern of `d` and of `dmin` (subnormals,
    /// infinities, quiet, signalling and negative NaNs) and scale bytes of
    /// every value, sixteen heads a call.
    #[cfg_attr(
        miri,
        ignore = "Miri runs no SIMD kernel (the fallback is set_head itself), and slowly"
    )]
    #[test]
    fn k4_tile_heads_equal_set_head() {
        use crate::quant::kgroup::K4Rows16;
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else { continue };
            for call in 0..4096u32 {
                let heads: [[[u8; 16]; 8]; 2] = core::array::from_fn(|g| {
                    core::array::from_fn(|r| {
                        let i = 16 * call + 8 * g as u32 + r as u32;
                        let d = (i as u16).to_le_bytes();
                        let dmin = (0xffff - i as u16).to_le_bytes();
                        let mut h = [0u8; 16];
                        h[..2].copy_from_slice(&d);
                        h[2..4].copy_from_slice(&dmin);
                        for (j, b) in h[4..].iter_mut().enumerate() {
                            *b = (i.wrapping_mul(2_654_435_761) >> (j % 4 * 8)) as u8
                                ^ (j as u8).wrapping_mul(37);
                        }
                        h
                    })
                });
                let mut want = <K4Rows16 as bytemuck::Zeroable>::zeroed();
                for (g, group) in heads.iter().enumerate() {
                    for (r, h) in group.iter().enumerate() {
                        want.set_head(8 * g + r, h);
                    }
                }
                let mut got = <K4Rows16 as bytemuck::Zeroable>::zeroed();
                k.k4_tile_heads(&mut got, [&heads[0], &heads[1]]);
                assert!(
                    bytemuck::bytes_of(&got) == bytemuck::bytes_of(&want),
                    "{kernel:?}: call {call}"
                );
            }
        }
    }

    /// Every kernel's sixteen-row Q6_K GEMM (`gemm_q6_rows16`) gives its
    /// plain-Rust reference's bits and, on x86, the single-row dot's
    /// (`dot_q6_k`, `dot_q6_k_summed`), for sixteen rows of any bytes
    /// (every level and scale; super-scales in -2..2, NaN and infinite now
    /// and then) and activation bytes down to -128, 0 to 3 blocks,
    /// four, three and one activation rows a call, and at the extremes
    /// (levels 0 and 63, scales -128 and 127, activations -128 and 127
    /// over 13 blocks); short activation rows panic.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn q6_rows16_gemm_equals_the_reference_and_dot_q6_k() {
        use crate::quant::kgroup::{gemm_q6_rows16_reference, Q6Rows16, Q8KAct, ROWS16};
        use proptest::prelude::*;
        let scale = prop_oneof![
            8 => -2.0f32..2.0,
            1 => Just(f32::INFINITY),
            1 => Just(f32::NAN),
        ];
        let case = (0usize..=3).prop_flat_map(move |nb| {
            (
                Just(nb),
                prop::collection::vec(any::<u8>(), 16 * nb * 210),
                prop::collection::vec(any::<u8>(), 4 * nb * 292),
                prop::collection::vec((-2.0f32..2.0, scale.clone()), 16 * nb),
            )
        });
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        fn blocks<B: bytemuck::Pod>(raw: &[u8], n: usize) -> Vec<B> {
            let size = core::mem::size_of::<B>();
            (0..n)
                .map(|b| bytemuck::pod_read_unaligned(&raw[b * size..(b + 1) * size]))
                .collect()
        }
        // Checks the GEMM of `w` (sixteen rows of `nb` blocks) against
        // four activation rows.
        let check =
            |k: Dispatch, kernel: Kernel, w: &[BlockQ6K], nb: usize, xs: &[Vec<BlockQ8K>]| {
                let acts: Vec<Vec<Q8KAct>> = xs
                    .iter()
                    .map(|x| x.iter().map(Q8KAct::new).collect())
                    .collect();
                let x4: [&[Q8KAct]; 4] = core::array::from_fn(|a| &acts[a][..]);
                let mut tile = vec![<Q6Rows16 as bytemuck::Zeroable>::zeroed(); nb];
                for r in 0..ROWS16 {
                    for (b, t) in tile.iter_mut().enumerate() {
                        t.set_row(r, &w[r * nb + b]);
                    }
                }
                let mut filled = vec![<Q6Rows16 as bytemuck::Zeroable>::zeroed(); nb];
                let rows = |r: usize| &w[r * nb..(r + 1) * nb];
                k.q6_tile_rows(&mut filled, core::array::from_fn(rows));
                assert!(
                    bytemuck::cast_slice::<Q6Rows16, u8>(&filled)
                        == bytemuck::cast_slice::<Q6Rows16, u8>(&tile),
                    "{kernel:?}: q6_tile_rows differs from set_row"
                );
                let mut longer = vec![<Q6Rows16 as bytemuck::Zeroable>::zeroed(); nb + 1];
                let short = std::panic::catch_unwind(move || {
                    k.q6_tile_rows(&mut longer, core::array::from_fn(rows));
                });
                assert!(short.is_err());
                let got = k.gemm_q6_rows16(&tile, x4);
                let got3 = k.gemm_q6_rows16::<3>(&tile, [x4[1], x4[2], x4[3]]);
                let got1 = k.gemm_q6_rows16::<1>(&tile, [x4[2]]);
                let want = gemm_q6_rows16_reference(&tile, x4);
                for r in 0..ROWS16 {
                    let row = &w[r * nb..(r + 1) * nb];
                    for a in 0..4 {
                        assert!(
                            same(got[a][r], want[a][r]),
                            "{kernel:?} row {r} act {a}: {} vs {}",
                            got[a][r],
                            want[a][r]
                        );
                        // The scalar kernel's dots round otherwise; the x86
                        // kernels share this float step.
                        if !matches!(kernel, Kernel::Scalar | Kernel::Neon | Kernel::NeonDot) {
                            let dot = k.dot_q6_k(row, &xs[a]);
                            assert!(
                                same(want[a][r], dot),
                                "{kernel:?} row {r} act {a}: {} vs dot {dot}",
                                want[a][r]
                            );
                            assert!(same(dot, k.dot_q6_k_summed(row, &xs[a])));
                        }
                    }
                    for a in 0..3 {
                        assert!(same(got3[a][r], want[1 + a][r]));
                    }
                    assert!(same(got1[0][r], want[2][r]));
                }
                if nb > 0 {
                    let short = std::panic::catch_unwind(|| {
                        k.gemm_q6_rows16::<2>(&tile, [x4[0], &x4[1][..nb - 1]])
                    });
                    assert!(short.is_err());
                }
            };
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                eprintln!("q6_rows16_gemm_equals_the_reference_and_dot_q6_k: {kernel:?} skipped, the CPU lacks it");
                continue;
            };
            proptest!(ProptestConfig::with_cases(48), |((nb, wraw, xraw, ds) in case.clone())| {
                let xs: Vec<Vec<BlockQ8K>> = (0..4).map(|a| {
                    let mut x: Vec<BlockQ8K> = blocks(&xraw[a * nb * 292..], nb);
                    for (b, xb) in x.iter_mut().enumerate() {
                        xb.d = ds[a * nb + b].0;
                        xb.bsums = BlockQ8K::sums_of(&xb.qs);
                    }
                    x
                }).collect();
                let mut w: Vec<BlockQ6K> = blocks(&wraw, 16 * nb);
                for (i, wb) in w.iter_mut().enumerate() {
                    wb.d = f16::from_f32(ds[i].1).to_le_bytes();
                }
                check(k, kernel, &w, nb, &xs);
            });
            for (level, scale, xv) in [(0xffu8, -128i8, -128i8), (0, -128, -128), (0xff, 127, 127)]
            {
                let nb = 13;
                let wb = BlockQ6K {
                    ql: [level; 128],
                    qh: [level; 64],
                    scales: [scale; 16],
                    d: f16::from_f32(0.5).to_le_bytes(),
                };
                let xb = BlockQ8K {
                    d: 0.25,
                    qs: [xv; 256],
                    bsums: [16 * i16::from(xv); 16],
                };
                check(k, kernel, &vec![wb; 16 * nb], nb, &vec![vec![xb; nb]; 4]);
            }
        }
    }

    /// Every kernel's product of eight packed Q4_0 rows
    /// (`dot_q4_0_packed8`) gives each row's decode dot bits
    /// (`dot_q4_0_decode`), for eight rows of any nibbles, NaN, infinite
    /// and tiny scales, and 0 to 27 blocks (whole groups of eight and the
    /// blocks after them, each residue of the four partial sums); packed
    /// rows shorter or longer than the activation panic.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn packed_q4_0_equals_dot_q4_0() {
        use crate::quant::pack_q4_0_rows8;
        use proptest::prelude::*;
        let scale = prop_oneof![
            8 => -4.0f32..4.0,
            1 => Just(f32::INFINITY),
            1 => Just(f32::NAN),
            1 => Just(6e-8f32),
        ];
        let case = (0usize..=27).prop_flat_map(move |nb| {
            (
                Just(nb),
                prop::collection::vec(any::<u8>(), 8 * nb * 16),
                prop::collection::vec(scale.clone(), 8 * nb),
                prop::collection::vec(-1.0f32..1.0, nb * 32),
            )
        });
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                eprintln!("packed_q4_0_equals_dot_q4_0: {kernel:?} skipped, the CPU lacks it");
                continue;
            };
            proptest!(ProptestConfig::with_cases(64), |((nb, q4, ds, xf) in case.clone())| {
                let w: Vec<BlockQ4_0> = (0..8 * nb).map(|i| BlockQ4_0 {
                    d: f16::from_f32(ds[i]).to_le_bytes(),
                    qs: q4[16 * i..16 * i + 16].try_into().unwrap(),
                }).collect();
                let mut x = QuantizedVector::new();
                x.quantize_from(&xf).unwrap();
                if nb == 0 {
                    prop_assert!(k.dot_q4_0_packed8(&[], &x).iter().all(|&v| v == 0.0));
                    return Ok(());
                }
                let p = pack_q4_0_rows8(&w, nb);
                let got = k.dot_q4_0_packed8(&p, &x);
                for r in 0..8 {
                    let want = k.dot_q4_0_decode(&w[r * nb..(r + 1) * nb], &x);
                    prop_assert!(same(got[r], want), "{:?} row {}: {} vs {}", kernel, r, got[r], want);
                }
                prop_assert!(std::panic::catch_unwind(|| k.dot_q4_0_packed8(&p[1..], &x)).is_err());
                let mut longer = p.clone();
                longer.push(p[0]);
                prop_assert!(std::panic::catch_unwind(|| k.dot_q4_0_packed8(&longer, &x)).is_err());
            });
        }
    }

    /// Every kernel's product of eight packed Q4_K or Q5_K rows
    /// (`dot_q4_k_packed8`, `dot_q5_k_packed8`) gives each row's single-row
    /// dot bits, for eight rows of any bytes (every level, scale, min and
    /// fifth-bit code, NaN and infinite scales) and 0 to 13 blocks, with
    /// the activation's block sums its values' or any bytes, under each
    /// hint loop; packed rows shorter or longer than the activation panic.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn packed_k_equals_dot_k() {
        use crate::quant::{pack_q4_k_rows8, pack_q5_k_rows8};
        use proptest::prelude::*;
        let case = (0usize..=13).prop_flat_map(|nb| {
            (
                Just(nb),
                prop::collection::vec(any::<u8>(), 8 * nb * 176),
                prop::collection::vec(any::<u8>(), 4 * nb * 292),
                prop::collection::vec((-2.0f32..2.0, -2.0f32..2.0), 4 * nb),
            )
        });
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        fn blocks<B: bytemuck::Pod>(raw: &[u8], n: usize) -> Vec<B> {
            let size = core::mem::size_of::<B>();
            (0..n)
                .map(|b| bytemuck::pod_read_unaligned(&raw[b * size..(b + 1) * size]))
                .collect()
        }
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                eprintln!("packed_k_equals_dot_k: {kernel:?} skipped, the CPU lacks it");
                continue;
            };
            for hints in [0u8, 1, 2] {
                #[cfg(target_arch = "x86_64")]
                x86_64::TO_L2_IN_TESTS.store(hints, std::sync::atomic::Ordering::Relaxed);
                if hints > 0 && !cfg!(target_arch = "x86_64") {
                    continue;
                }
                proptest!(ProptestConfig::with_cases(48), |((nb, wraw, xraw, ds) in case.clone())| {
                    let (_, _, _, xs) = k_operands(nb, &xraw, &xraw, &ds);
                    let x = &xs[0];
                    let w4: Vec<BlockQ4K> = blocks(&wraw, 8 * nb);
                    let w5: Vec<BlockQ5K> = blocks(&wraw, 8 * nb);
                    if nb == 0 {
                        prop_assert!(k.dot_q4_k_packed8(&[], x).iter().all(|&v| v == 0.0));
                        prop_assert!(k.dot_q5_k_packed8(&[], x).iter().all(|&v| v == 0.0));
                        return Ok(());
                    }
                    let (p4, p5) = (pack_q4_k_rows8(&w4, nb), pack_q5_k_rows8(&w5, nb));
                    // The same activation with its stored block sums as the
                    // bytes give them, not its values' sums: the kernels
                    // read the sums as stored, both the same way.
                    let mut raw_sums: Vec<BlockQ8K> = blocks(&xraw, nb);
                    for (b, xb) in raw_sums.iter_mut().enumerate() {
                        xb.d = ds[b].0;
                    }
                    for x in [x, &raw_sums] {
                        let (g4, g5) = (k.dot_q4_k_packed8(&p4, x), k.dot_q5_k_packed8(&p5, x));
                        for r in 0..8 {
                            let want4 = k.dot_q4_k(&w4[r * nb..(r + 1) * nb], x);
                            let want5 = k.dot_q5_k(&w5[r * nb..(r + 1) * nb], x);
                            prop_assert!(same(g4[r], want4), "{:?} q4_k row {}: {} vs {}", kernel, r, g4[r], want4);
                            prop_assert!(same(g5[r], want5), "{:?} q5_k row {}: {} vs {}", kernel, r, g5[r], want5);
                        }
                    }
                    // Rows shorter than the activation, or longer.
                    let mut longer = x.clone();
                    longer.push(x[0]);
                    for (w, x) in [(&p4[1..], &x[..]), (&p4[..], &x[1..]), (&p4[..], &longer[..])] {
                        prop_assert!(std::panic::catch_unwind(|| k.dot_q4_k_packed8(w, x)).is_err());
                    }
                    for (w, x) in [(&p5[1..], &x[..]), (&p5[..], &x[1..]), (&p5[..], &longer[..])] {
                        prop_assert!(std::panic::catch_unwind(|| k.dot_q5_k_packed8(w, x)).is_err());
                    }
                });
            }
        }
        #[cfg(target_arch = "x86_64")]
        x86_64::TO_L2_IN_TESTS.store(0, std::sync::atomic::Ordering::Relaxed);
    }

    /// The packed Q4_K and Q5_K kernels at the ends of their ranges, which
    /// random bytes almost never reach: every level 15 (31 with the fifth
    /// bits), every scale and min 63, against activations all -128 or all
    /// 127 (their block sums the values' or `i16`'s extremes), give each
    /// row's single-row dot bits, so no `i16` sum of the rows-in-lanes
    /// kernels saturates where the row kernels' do not.
    #[test]
    fn packed_k_extremes_equal_dot_k() {
        use crate::quant::{pack_q4_k_rows8, pack_q5_k_rows8};
        let nb = 3;
        let block = |size: usize| {
            let mut b = vec![0xffu8; size];
            // d = 1.0 and dmin = 0.5 (f16), the rest all ones.
            b[..4].copy_from_slice(&[0x00, 0x3c, 0x00, 0x38]);
            b
        };
        let w4: Vec<BlockQ4K> = (0..8 * nb)
            .map(|_| bytemuck::pod_read_unaligned(&block(144)))
            .collect();
        let w5: Vec<BlockQ5K> = (0..8 * nb)
            .map(|_| bytemuck::pod_read_unaligned(&block(176)))
            .collect();
        let (p4, p5) = (pack_q4_k_rows8(&w4, nb), pack_q5_k_rows8(&w5, nb));
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else { continue };
            for v in [-128i8, 127] {
                for sums in [16 * i16::from(v), i16::MIN, i16::MAX] {
                    let xb = BlockQ8K {
                        d: 0.25,
                        qs: [v; crate::quant::QK_K],
                        bsums: [sums; 16],
                    };
                    let x = vec![xb; nb];
                    let (g4, g5) = (k.dot_q4_k_packed8(&p4, &x), k.dot_q5_k_packed8(&p5, &x));
                    for r in 0..8 {
                        let want4 = k.dot_q4_k(&w4[r * nb..(r + 1) * nb], &x);
                        let want5 = k.dot_q5_k(&w5[r * nb..(r + 1) * nb], &x);
                        assert_eq!(
                            g4[r].to_bits(),
                            want4.to_bits(),
                            "{kernel:?} q4_k {v} {sums}"
                        );
                        assert_eq!(
                            g5[r].to_bits(),
                            want5.to_bits(),
                            "{kernel:?} q5_k {v} {sums}"
                        );
                    }
                }
            }
        }
    }

    /// The VNNI K-quant kernels give the AVX2 kernels' bits, single-row
    /// and four-row, for 0 to 4 blocks of any bytes (every level, scale
    /// and min code, scales of any sign, activations down to -128).
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn vnni_k_dots_equal_avx2() {
        use proptest::prelude::*;
        let Some(avx2) = Kernel::Avx2.dispatch() else {
            eprintln!("vnni_k_dots_equal_avx2: skipped, the CPU lacks AVX2");
            return;
        };
        let case = (0usize..=4).prop_flat_map(|nb| {
            (
                Just(nb),
                prop::collection::vec(any::<u8>(), nb * 210),
                prop::collection::vec(any::<u8>(), 4 * nb * 292),
                prop::collection::vec((-2.0f32..2.0, -2.0f32..2.0), 4 * nb),
            )
        });
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for kernel in [Kernel::Avx512Vnni, Kernel::AvxVnni] {
            let Some(k) = kernel.dispatch() else {
                eprintln!("vnni_k_dots_equal_avx2: {kernel:?} skipped, the CPU lacks it");
                continue;
            };
            proptest!(|((nb, wraw, xraw, ds) in case.clone())| {
                let (w4, w5, w6, xs) = k_operands(nb, &wraw, &xraw, &ds);
                let rows = [&xs[0][..], &xs[1], &xs[2], &xs[3]];
                for x in rows {
                    prop_assert!(same(k.dot_q4_k(&w4, x), avx2.dot_q4_k(&w4, x)), "{:?} q4_k", kernel);
                    prop_assert!(same(k.dot_q5_k(&w5, x), avx2.dot_q5_k(&w5, x)), "{:?} q5_k", kernel);
                    prop_assert!(same(k.dot_q6_k(&w6, x), avx2.dot_q6_k(&w6, x)), "{:?} q6_k", kernel);
                }
                let pairs = [
                    (k.dot_q4_k_x4(&w4, rows), avx2.dot_q4_k_x4(&w4, rows)),
                    (k.dot_q5_k_x4(&w5, rows), avx2.dot_q5_k_x4(&w5, rows)),
                    (k.dot_q6_k_x4(&w6, rows), avx2.dot_q6_k_x4(&w6, rows)),
                ];
                for (a, b) in pairs {
                    for (u, v) in a.iter().zip(&b) {
                        prop_assert!(same(*u, *v), "{:?} x4: {} vs {}", kernel, u, v);
                    }
                }
            });
        }
    }

    /// Every available kernel's Q4_0 dot is within the Q8_0 kernels' error
    /// bound of the scalar kernel (with the levels `-8..=7` as weights), its
    /// four-row form gives its single-row bits for each row, AVX-512 VNNI
    /// gives AVX2's bits, and rows of another length panic; for
    /// 0 to 9 blocks (pairs and a last odd block) of any nibbles and scales
    /// of either sign.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn dot_q4_0_kernels_agree() {
        use crate::quant::q4_0::dot_q4_0_act_blocks;
        use proptest::prelude::*;
        use std::panic::catch_unwind;
        let weights = (0usize..20)
            .prop_flat_map(|nb| prop::collection::vec((any::<[u8; 16]>(), -2.0f32..2.0), nb));
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        // AVX-512 VNNI rounds Q4_0 as AVX2 does (each block summed exactly
        // first); AVX-VNNI keeps lane-wise FMAs, so only the bound relates
        // it to them.
        let avx2 = Kernel::Avx2.dispatch();
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                eprintln!("dot_q4_0_kernels_agree: {kernel:?} skipped, the CPU lacks it");
                continue;
            };
            proptest!(|(w in weights.clone(), seed in any::<u32>())| {
                let w: Vec<BlockQ4_0> = w
                    .iter()
                    .map(|(qs, d)| BlockQ4_0 { d: f16::from_f32(*d).to_le_bytes(), qs: *qs })
                    .collect();
                let rows: Vec<Vec<ActBlock>> = (0..4u32)
                    .map(|r| {
                        (0..w.len())
                            .map(|b| {
                                let v: [f32; QK8_0] = core::array::from_fn(|i| {
                                    let h = (seed ^ (r * 7919 + b as u32 * 31 + i as u32)).wrapping_mul(2_654_435_761);
                                    (h >> 8) as f32 / (1u32 << 24) as f32 - 0.5
                                });
                                ActBlock::quantize(&v)
                            })
                            .collect()
                    })
                    .collect();
                let x4 = [&rows[0][..], &rows[1], &rows[2], &rows[3]];
                let got = k.dot_q4_0_x4(&w, x4);
                for (g, x) in got.iter().zip(x4) {
                    let single = k.dot_q4_0(&w, x);
                    prop_assert!(same(*g, single), "{:?}: x4 {} vs {}", kernel, g, single);
                    let scalar = dot_q4_0_act_blocks(&w, x);
                    let s: f64 = w.iter().zip(x).map(|(wb, xb)| {
                        let d = f64::from(wb.scale_f32()) * f64::from(xb.d);
                        let abs: i64 = wb.levels().iter().zip(&xb.qs)
                            .map(|(&a, &b)| i64::from(a).abs() * i64::from(b).abs())
                            .sum();
                        d.abs() * abs as f64
                    }).sum();
                    let bound = 2.0 * gamma(w.len() + 6) * s;
                    let diff = (f64::from(single) - f64::from(scalar)).abs();
                    prop_assert!(diff <= bound, "{:?}: {} vs {}: {} > {}", kernel, single, scalar, diff, bound);
                    if let (Some(a), Kernel::Avx512Vnni) = (avx2, kernel) {
                        prop_assert!(same(single, a.dot_q4_0(&w, x)), "{:?} vs AVX2", kernel);
                    }
                }
                if !w.is_empty() {
                    let short = &rows[2][1..];
                    prop_assert!(catch_unwind(|| k.dot_q4_0_x4(&w, [x4[0], x4[1], short, x4[3]])).is_err());
                    prop_assert!(catch_unwind(|| k.dot_q4_0(&w, short)).is_err());
                }
            });
        }
    }

    /// The NEON K-quant kernels (`Neon`, and `NeonDot`, which runs them)
    /// give the scalar kernels' bits, single-row and four-row, for 0 to 4
    /// blocks of any bytes (every level, scale and min code, scales of any
    /// sign, activations down to -128).
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn neon_k_dots_equal_scalar() {
        use proptest::prelude::*;
        let case = (0usize..=4).prop_flat_map(|nb| {
            (
                Just(nb),
                prop::collection::vec(any::<u8>(), nb * 210),
                prop::collection::vec(any::<u8>(), 4 * nb * 292),
                prop::collection::vec((-2.0f32..2.0, -2.0f32..2.0), 4 * nb),
            )
        });
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        let s = Dispatch::Scalar;
        for kernel in [Kernel::Neon, Kernel::NeonDot] {
            let Some(k) = kernel.dispatch() else {
                eprintln!("neon_k_dots_equal_scalar: {kernel:?} skipped, the CPU lacks it");
                continue;
            };
            proptest!(|((nb, wraw, xraw, ds) in case.clone())| {
                let (w4, w5, w6, xs) = k_operands(nb, &wraw, &xraw, &ds);
                let rows = [&xs[0][..], &xs[1], &xs[2], &xs[3]];
                for x in rows {
                    prop_assert!(same(k.dot_q4_k(&w4, x), s.dot_q4_k(&w4, x)), "{:?} q4_k", kernel);
                    prop_assert!(same(k.dot_q5_k(&w5, x), s.dot_q5_k(&w5, x)), "{:?} q5_k", kernel);
                    prop_assert!(same(k.dot_q6_k(&w6, x), s.dot_q6_k(&w6, x)), "{:?} q6_k", kernel);
                }
            });
        }
    }

    /// Hostile shapes given to every available kernel: each either returns
    /// the scalar kernel's answer or panics, the same way for every kernel
    /// (these are safe functions: an out-of-bounds read must be a panic).
    #[test]
    fn hostile_shapes_panic_or_agree() {
        use std::panic::{catch_unwind, AssertUnwindSafe};
        let v: Vec<f16> = (0..100u16).map(|i| f16::from_f32(f32::from(i))).collect();
        // (out len, ps len, stride, v len)
        let cases = [
            (0, 0, 0, 0),
            (0, 3, 0, 0),
            (0, 3, usize::MAX, 0),
            (1, 2, usize::MAX, 100),
            (1, 3, usize::MAX / 2 + 1, 100),
            (1, 3, 1usize << 63, 100),
            (5, 4, 0, 5),
            (40, 4, 3, 49),
            (40, 4, 3, 48),
            (33, 2, 67, 100),
            (33, 2, 68, 100),
            (100, 1, usize::MAX, 100),
            (101, 1, 0, 100),
        ];
        for (hd, np, stride, vlen) in cases {
            let ps: Vec<f32> = (0..np).map(|i| 0.5 + i as f32).collect();
            let run = |k: Dispatch| {
                catch_unwind(AssertUnwindSafe(|| {
                    let mut out = vec![7.0f32; hd];
                    k.weighted_sum_f16(&mut out, &ps, &v[..vlen], stride);
                    out
                }))
                .ok()
            };
            let want = run(Dispatch::Scalar);
            for kernel in Kernel::ALL {
                let Some(k) = kernel.dispatch() else { continue };
                assert_eq!(
                    run(k),
                    want,
                    "{kernel:?} hd {hd} ps {np} stride {stride} v {vlen}"
                );
            }
        }
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else { continue };
            assert_eq!(k.sum_bytes(&[], true), 0);
            assert_eq!(k.sum_bytes(&[], false), 0);
            let w: Vec<BlockQ8_0> = (0..3)
                .map(|i| BlockQ8_0 {
                    d: f16::from_f32(0.5).to_le_bytes(),
                    qs: [i as i8 - 1; QK8_0],
                })
                .collect();
            let x: Vec<ActBlock> = (0..3).map(|_| ActBlock::quantize(&[0.25; QK8_0])).collect();
            for nb in 0..=3 {
                let (w, x) = (&w[..nb], &x[..nb]);
                assert_eq!(
                    k.dot_q8_x4(w, [x; 4]),
                    [k.dot_q8(w, x); 4],
                    "{kernel:?} nb {nb}"
                );
                // Rows of different lengths, and a weight row longer than
                // the activation: a panic, never a short read.
                if nb > 0 {
                    let short = &x[..nb - 1];
                    for bad in [[short, x, x, x], [x, x, x, short]] {
                        assert!(
                            catch_unwind(|| k.dot_q8_x4(w, bad)).is_err(),
                            "{kernel:?} nb {nb}"
                        );
                    }
                    assert!(catch_unwind(|| k.dot_q8(w, short)).is_err(), "{kernel:?}");
                    let mut out = [0.0f32; 2];
                    assert!(
                        catch_unwind(AssertUnwindSafe(|| k.matvec_q8(w, nb, x, &mut out))).is_err()
                    );
                }
            }
        }
    }

    /// The paired AVX-512 form checks the pairs' length against the weight
    /// row: too few or too many pairs, or rows of the wrong length, panic.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx512_pairs_of_the_wrong_length_panic() {
        use std::panic::catch_unwind;
        // A batch builds its pairs for the selected kernel only.
        let (Kernel::Avx512Vnni, k) = selected() else {
            return;
        };
        for nb in 1..=5usize {
            let vals: Vec<f32> = (0..4 * nb * QK8_0).map(|i| (i % 7) as f32 - 3.0).collect();
            let mut xs = crate::quant::QuantizedBatch::new();
            xs.quantize_from(&vals, nb * QK8_0).unwrap();
            let rows = [0, 1, 2, 3].map(|i| xs.act_row(i));
            let pairs = [0, 1, 2, 3].map(|i| xs.pair_row(i).unwrap());
            let w: Vec<BlockQ8_0> = (0..nb + 2)
                .map(|_| BlockQ8_0 {
                    d: f16::from_f32(1.0).to_le_bytes(),
                    qs: [3; QK8_0],
                })
                .collect();
            let good = k.dot_q8_x4_pairs(&w[..nb], pairs, rows);
            assert_eq!(good, k.dot_q8_x4(&w[..nb], rows));
            // A longer weight row than the rows, a shorter one.
            assert!(catch_unwind(|| k.dot_q8_x4_pairs(&w[..nb + 2], pairs, rows)).is_err());
            assert!(catch_unwind(|| k.dot_q8_x4_pairs(&w[..nb - 1], pairs, rows)).is_err());
            // One row's pairs cut short.
            if let Some(p) = pairs[2].split_last().map(|(_, r)| r) {
                let bad = [pairs[0], pairs[1], p, pairs[3]];
                assert!(catch_unwind(|| k.dot_q8_x4_pairs(&w[..nb], bad, rows)).is_err());
            }
        }
    }

    /// Every available kernel's F16 and BF16 weight dots: the four-row
    /// form gives the single-row bits for each row (any bits, NaNs and
    /// infinities included; a NaN matches any NaN); with finite operands
    /// each kernel is within [`f32_error_bound`] of the scalar kernel; and
    /// rows of another length panic. Lengths 0 to 100 cover every tail of
    /// the 32- (x86), 16- (NEON), 8- and 4-value steps.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn float_dot_x4_equals_dot() {
        use crate::quant::float::{bf16_to_f32, round_bf16, round_f16};
        use proptest::prelude::*;
        use std::panic::catch_unwind;
        let case = (0usize..=100).prop_flat_map(|n| {
            (
                prop::collection::vec(any::<u16>(), n),
                prop::collection::vec(any::<u16>(), 4 * n),
                any::<bool>(),
            )
        });
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                eprintln!("float_dot_x4_equals_dot: {kernel:?} skipped, the CPU lacks it");
                continue;
            };
            proptest!(|((wbits, xbits, finite) in case.clone())| {
                let n = wbits.len();
                // Finite cases keep weights and activations within a few
                // powers of two of 1, so no product overflows.
                let tame = |b: u16| if finite { (b & 0x8fff) | 0x3000 } else { b };
                let wh: Vec<f16> = wbits.iter().map(|&b| f16::from_bits(tame(b))).collect();
                let wb: Vec<bf16> = wbits.iter().map(|&b| bf16::from_bits(tame(b) ^ 0x0400)).collect();
                let x: Vec<f32> = xbits
                    .iter()
                    .map(|&b| f16::from_bits(tame(b)).to_f32())
                    .collect();
                let xh: Vec<f32> = x.iter().map(|&v| round_f16(v)).collect();
                let xb: Vec<f32> = x.iter().map(|&v| round_bf16(v * 3.0)).collect();
                let rows_h: [&[f32]; 4] = core::array::from_fn(|i| &xh[i * n..(i + 1) * n]);
                let rows_b: [&[f32]; 4] = core::array::from_fn(|i| &xb[i * n..(i + 1) * n]);
                let (gh, gb) = (k.dot_f16w_x4(&wh, rows_h), k.dot_bf16w_x4(&wb, rows_b));
                for i in 0..4 {
                    let (sh, sb) = (k.dot_f16w(&wh, rows_h[i]), k.dot_bf16w(&wb, rows_b[i]));
                    prop_assert!(same(gh[i], sh), "{:?} f16 row {}: {} vs {}", kernel, i, gh[i], sh);
                    prop_assert!(same(gb[i], sb), "{:?} bf16 row {}: {} vs {}", kernel, i, gb[i], sb);
                    if finite {
                        let wf: Vec<f32> = wh.iter().map(|v| v.to_f32()).collect();
                        let bound = f32_error_bound(&wf, rows_h[i]);
                        let scalar = Dispatch::Scalar.dot_f16w(&wh, rows_h[i]);
                        let diff = (f64::from(sh) - f64::from(scalar)).abs();
                        prop_assert!(diff <= bound, "{:?} f16: {} vs {}", kernel, sh, scalar);
                        let wf: Vec<f32> = wb.iter().map(|&v| bf16_to_f32(v)).collect();
                        let bound = f32_error_bound(&wf, rows_b[i]);
                        let scalar = Dispatch::Scalar.dot_bf16w(&wb, rows_b[i]);
                        let diff = (f64::from(sb) - f64::from(scalar)).abs();
                        prop_assert!(diff <= bound, "{:?} bf16: {} vs {}", kernel, sb, scalar);
                    }
                }
                if n > 0 {
                    let short = &xh[..n - 1];
                    let bad = [rows_h[0], rows_h[1], short, rows_h[3]];
                    prop_assert!(catch_unwind(|| k.dot_f16w_x4(&wh, bad)).is_err());
                    prop_assert!(catch_unwind(|| k.dot_f16w(&wh, short)).is_err());
                    prop_assert!(catch_unwind(|| k.dot_bf16w(&wb, &xb[..n - 1])).is_err());
                    let bad = [rows_b[0], rows_b[1], rows_b[2], &xb[..n - 1]];
                    prop_assert!(catch_unwind(|| k.dot_bf16w_x4(&wb, bad)).is_err());
                }
            });
        }
    }

    /// The eight-row K-quant forms against hostile operands: weight
    /// blocks of any bytes (`d` and `dmin` NaN, infinite or subnormal
    /// included), activation blocks of any bytes (sums that do not match
    /// the values) with scales NaN, infinite, zero of either sign,
    /// subnormal or huge, 0 to 12 blocks, eight different rows. Each
    /// result is the single-row dot's bits (a NaN matching any NaN), the
    /// four-row form's too, and the x86 SIMD kernels give the AVX2 bits.
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates; these are safe kernels"
    )]
    #[test]
    fn dot_k_x8_equals_dot_k_on_hostile_blocks() {
        use proptest::prelude::*;
        let special = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            f32::MIN_POSITIVE / 3.0,
            f32::MAX,
            -f32::MAX,
            1e-38,
            1.0,
        ];
        let case = (0usize..=12).prop_flat_map(|nb| {
            (
                Just(nb),
                prop::collection::vec(any::<u8>(), nb * 210),
                prop::collection::vec(any::<u8>(), 8 * nb * 292),
                prop::collection::vec(prop::option::of(0..special.len()), 8 * nb),
            )
        });
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        fn blocks<B: bytemuck::Pod>(raw: &[u8], nb: usize) -> Vec<B> {
            let n = core::mem::size_of::<B>();
            (0..nb)
                .map(|b| bytemuck::pod_read_unaligned(&raw[b * n..(b + 1) * n]))
                .collect()
        }
        let avx2 = Kernel::Avx2.dispatch();
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                eprintln!(
                    "dot_k_x8_equals_dot_k_on_hostile_blocks: {kernel:?} skipped, the CPU lacks it"
                );
                continue;
            };
            // Only the x86 SIMD kernels promise the AVX2 kernel's bits.
            let avx2 = avx2.filter(|_| kernel != Kernel::Scalar);
            proptest!(ProptestConfig::with_cases(64), |((nb, wraw, xraw, sp) in case.clone())| {
                let (w4, w5, w6): (Vec<BlockQ4K>, Vec<BlockQ5K>, Vec<BlockQ6K>) =
                    (blocks(&wraw, nb), blocks(&wraw, nb), blocks(&wraw, nb));
                let xs: Vec<Vec<BlockQ8K>> = (0..8)
                    .map(|r| {
                        let mut x: Vec<BlockQ8K> = blocks(&xraw[r * nb * 292..], nb);
                        for (b, xb) in x.iter_mut().enumerate() {
                            if let Some(i) = sp[r * nb + b] {
                                xb.d = special[i];
                            }
                        }
                        x
                    })
                    .collect();
                let rows: [&[BlockQ8K]; 8] = core::array::from_fn(|i| &xs[i][..]);
                let x8 = [
                    k.dot_k_x8(KRow::Q4K(&w4), rows),
                    k.dot_k_x8(KRow::Q5K(&w5), rows),
                    k.dot_k_x8(KRow::Q6K(&w6), rows),
                ];
                let lo = [rows[0], rows[1], rows[2], rows[3]];
                let x4 = [k.dot_q4_k_x4(&w4, lo), k.dot_q5_k_x4(&w5, lo), k.dot_q6_k_x4(&w6, lo)];
                for (i, x) in rows.iter().enumerate() {
                    let one = [k.dot_q4_k(&w4, x), k.dot_q5_k(&w5, x), k.dot_q6_k(&w6, x)];
                    for t in 0..3 {
                        prop_assert!(same(x8[t][i], one[t]), "{:?} type {} row {}: {} vs {}", kernel, t, i, x8[t][i], one[t]);
                        if i < 4 {
                            prop_assert!(same(x4[t][i], one[t]), "{:?} x4 type {} row {}", kernel, t, i);
                        }
                    }
                    if let Some(a) = avx2 {
                        let r = [a.dot_q4_k(&w4, x), a.dot_q5_k(&w5, x), a.dot_q6_k(&w6, x)];
                        for t in 0..3 {
                            prop_assert!(same(one[t], r[t]), "{:?} vs Avx2 type {}: {} vs {}", kernel, t, one[t], r[t]);
                        }
                    }
                }
            });
        }
    }

    /// Every kernel's F16 and BF16 weight dots widen every one of the
    /// 65536 bit patterns exactly (`half`'s conversion: subnormals,
    /// infinities, signed values; NaN stays NaN) in every lane of the
    /// SIMD steps and the scalar tail: a one-hot weight row against ones
    /// returns the weight itself. (The proptests tame or bound these; a
    /// wrong subnormal or sign in NEON's integer f16 widening would hide
    /// in their error bound.)
    #[cfg_attr(
        miri,
        ignore = "65536 patterns a type; Miri runs only the scalar kernel"
    )]
    #[test]
    fn float_weights_widen_every_bit_pattern_exactly() {
        // 37 values: a 32-value step, a 4-value step and one scalar tail
        // value on x86 (four 8-lane steps, 4 tail values), two 16-value
        // steps and one 4-value step and a tail value on NEON.
        const N: usize = 37;
        let ones = [1.0f32; N];
        let check = |kernel: Kernel, got: f32, want: f32, bits: u16, at: usize| {
            // A +-0 weight gives +0 (the zero accumulators are added).
            let ok = if want == 0.0 {
                got.to_bits() == 0
            } else {
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
            };
            assert!(ok, "{kernel:?}: {bits:#06x} at {at}: {got:e} vs {want:e}");
        };
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else {
                eprintln!("float_weights_widen_every_bit_pattern_exactly: {kernel:?} skipped");
                continue;
            };
            let mut wh = [f16::ZERO; N];
            let mut wb = [bf16::ZERO; N];
            for bits in 0..=u16::MAX {
                let at = usize::from(bits) % N;
                (wh[at], wb[at]) = (f16::from_bits(bits), bf16::from_bits(bits));
                check(
                    kernel,
                    k.dot_f16w(&wh, &ones),
                    f16::from_bits(bits).to_f32(),
                    bits,
                    at,
                );
                check(
                    kernel,
                    k.dot_bf16w(&wb, &ones),
                    bf16::from_bits(bits).to_f32(),
                    bits,
                    at,
                );
                (wh[at], wb[at]) = (f16::ZERO, bf16::ZERO);
            }
        }
    }
}

#[cfg(test)]
#[cfg(target_arch = "x86_64")]
mod q4_0_group_edges {
    use super::*;
    use half::f16;
    use std::panic::catch_unwind;

    fn rng(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    const SCALES: [u16; 10] = [
        0x7c00, 0xfc00, 0x7e00, 0x7c01, 0x0001, 0x8001, 0x03ff, 0x7bff, 0x0000, 0x8000,
    ];

    /// AVX2's and AVX-512 VNNI's Q4_0 decode rows over the activation's
    /// groups of eight (`dot_q4_0_groups`, and `Dispatch::dot_q4_0_decode`,
    /// which picks them for a vector quantized with either kernel) give
    /// AVX2's `dot_q4_0` bits, for 0 to 27 blocks (whole groups and every
    /// remainder), any nibbles, activation bytes down to -128 and NaN,
    /// infinite and subnormal scales on both sides; groups or weights of
    /// the wrong length panic.
    #[cfg_attr(
        miri,
        ignore = "thousands of cases: too slow for Miri, which runs the scalar kernels the quant tests cover"
    )]
    #[test]
    fn q4_0_groups_equal_dot_q4_0() {
        use crate::quant::activation::NibbleGroup;
        let Some(k @ Dispatch::Avx2(t)) = Kernel::Avx2.dispatch() else {
            eprintln!("q4_0_groups_equal_dot_q4_0: skipped, the CPU lacks AVX2");
            return;
        };
        let wide = match Kernel::Avx512Vnni.dispatch() {
            Some(Dispatch::Avx512Vnni(t)) => Some(t),
            _ => {
                eprintln!("q4_0_groups_equal_dot_q4_0: AVX-512 VNNI skipped, the CPU lacks it");
                None
            }
        };
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        let mut s = 0x2545_f491_4f6c_dd1du64;
        for iter in 0..3000 {
            let nb = iter % 28;
            let scale = |s: &mut u64| {
                let r = rng(s);
                if r.is_multiple_of(4) {
                    SCALES[(r >> 8) as usize % SCALES.len()]
                } else {
                    (r >> 16) as u16 & 0x7bff
                }
            };
            let w: Vec<BlockQ4_0> = (0..nb)
                .map(|_| BlockQ4_0 {
                    d: scale(&mut s).to_le_bytes(),
                    qs: core::array::from_fn(|_| rng(&mut s) as u8),
                })
                .collect();
            let x: Vec<ActBlock> = (0..nb)
                .map(|_| {
                    let ext = rng(&mut s).is_multiple_of(3);
                    let qs = core::array::from_fn(|_| {
                        if ext {
                            [-128i8, 127, -128, -127][rng(&mut s) as usize % 4]
                        } else {
                            rng(&mut s) as i8
                        }
                    });
                    ActBlock::new(f16::from_bits(scale(&mut s)), qs)
                })
                .collect();
            let g: Vec<NibbleGroup> = x.as_chunks::<8>().0.iter().map(NibbleGroup::new).collect();
            let want = k.dot_q4_0(&w, &x);
            let got = t.dot_q4_0_groups(&w, &g, &x);
            assert!(same(got, want), "nb {nb}: {got} vs {want}");
            if !g.is_empty() {
                assert!(catch_unwind(|| t.dot_q4_0_groups(&w, &g[1..], &x)).is_err());
                assert!(catch_unwind(|| t.dot_q4_0_groups(&w[1..], &g, &x)).is_err());
            }
            if let Some(t) = wide {
                let got = t.dot_q4_0_groups(&w, &g, &x);
                assert!(same(got, want), "AVX-512 nb {nb}: {got} vs {want}");
                if !g.is_empty() {
                    assert!(catch_unwind(|| t.dot_q4_0_groups(&w, &g[1..], &x)).is_err());
                    assert!(catch_unwind(|| t.dot_q4_0_groups(&w[1..], &g, &x)).is_err());
                    assert!(catch_unwind(|| t.dot_q4_0_groups(&w, &g, &x[1..])).is_err());
                }
            }
        }
        // Through a quantized vector: the groups are built on quantizing
        // with AVX2, and the decode dot reads them.
        let values: Vec<f32> = (0..27 * QK8_0)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let kernels = [Some(k), wide.map(Dispatch::Avx512Vnni)];
        for (nb, k) in [0, 7, 8, 9, 16, 27]
            .into_iter()
            .flat_map(|nb| kernels.map(|k| (nb, k)))
        {
            let Some(k) = k else { continue };
            let mut v = QuantizedVector::new();
            v.quantize_with(k, &values[..nb * QK8_0]).unwrap();
            assert_eq!(v.nibble_groups().map(<[_]>::len), Some(nb / 8));
            let w: Vec<BlockQ4_0> = (0..nb)
                .map(|b| BlockQ4_0 {
                    d: f16::from_f32(0.01 * (b as f32 + 1.0)).to_le_bytes(),
                    qs: core::array::from_fn(|i| (i * 7 + b) as u8),
                })
                .collect();
            let (got, want) = (k.dot_q4_0_decode(&w, &v), k.dot_q4_0(&w, v.act()));
            assert!(same(got, want), "vector of {nb} blocks: {got} vs {want}");
        }
    }
}

#[cfg(test)]
mod q4_0_hostile {
    use super::*;
    use half::f16;

    fn rng(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    /// Every kernel's Q4_0 dot on finite hostile operands (subnormal and
    /// extreme f16 scales on both sides, -128 activations, nibbles 0/15)
    /// is within the error bound of the exact sum; x4 rows equal singles;
    /// non-finite scales do not panic.
    #[cfg_attr(
        miri,
        ignore = "thousands of cases: too slow for Miri, which runs the scalar kernels the quant tests cover"
    )]
    #[test]
    fn q4_0_hostile_within_bound() {
        let finite: [u16; 8] = [
            0x0001, 0x8001, 0x03ff, 0x7bff, 0xfbff, 0x0000, 0x3c00, 0x0400,
        ];
        let nonfinite: [u16; 3] = [0x7c00, 0xfc00, 0x7e01];
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else { continue };
            let mut s = 0x1234_5678_9abc_def1u64;
            for iter in 0..3000 {
                let nb = iter % 10;
                let allow_nf = iter % 7 == 0;
                let scale = |s: &mut u64| {
                    let r = rng(s);
                    if allow_nf && r.is_multiple_of(9) {
                        nonfinite[(r >> 8) as usize % 3]
                    } else if r.is_multiple_of(3) {
                        finite[(r >> 8) as usize % finite.len()]
                    } else {
                        ((r >> 16) as u16) & 0x7bff | (((r >> 40) as u16) & 0x8000)
                    }
                };
                let w: Vec<BlockQ4_0> = (0..nb)
                    .map(|_| {
                        let ext = rng(&mut s).is_multiple_of(3);
                        BlockQ4_0 {
                            d: scale(&mut s).to_le_bytes(),
                            qs: core::array::from_fn(|_| {
                                let r = rng(&mut s);
                                if ext {
                                    [0x00u8, 0xff, 0x0f, 0xf0][r as usize % 4]
                                } else {
                                    r as u8
                                }
                            }),
                        }
                    })
                    .collect();
                let rows: Vec<Vec<ActBlock>> = (0..4)
                    .map(|_| {
                        (0..nb)
                            .map(|_| {
                                let ext = rng(&mut s).is_multiple_of(3);
                                let qs = core::array::from_fn(|_| {
                                    let r = rng(&mut s);
                                    if ext {
                                        [-128i8, 127, -128, 0][r as usize % 4]
                                    } else {
                                        r as i8
                                    }
                                });
                                ActBlock::new(f16::from_bits(scale(&mut s)), qs)
                            })
                            .collect()
                    })
                    .collect();
                let x4 = [&rows[0][..], &rows[1], &rows[2], &rows[3]];
                let got = k.dot_q4_0_x4(&w, x4);
                for (i, x) in x4.iter().enumerate() {
                    let single = k.dot_q4_0(&w, x);
                    assert!(
                        got[i].to_bits() == single.to_bits()
                            || (got[i].is_nan() && single.is_nan()),
                        "{kernel:?} x4 row {i}: {} vs {}",
                        got[i],
                        single
                    );
                    let all_finite = w.iter().all(|b| b.scale_f32().is_finite())
                        && x.iter().all(|b| b.d.is_finite());
                    if !all_finite {
                        continue;
                    }
                    let mut exact = 0f64;
                    let mut mag = 0f64;
                    for (wb, xb) in w.iter().zip(x.iter()) {
                        let d = f64::from(wb.scale_f32()) * f64::from(xb.d);
                        let l = wb.levels();
                        let dot: i64 = l
                            .iter()
                            .zip(&xb.qs)
                            .map(|(&a, &b)| i64::from(a) * i64::from(b))
                            .sum();
                        let abs: i64 = l
                            .iter()
                            .zip(&xb.qs)
                            .map(|(&a, &b)| (i64::from(a) * i64::from(b)).abs())
                            .sum();
                        exact += d * dot as f64;
                        mag += d.abs() * abs as f64;
                    }
                    let bound = 2.0 * gamma(nb + 6) * mag;
                    let diff = (f64::from(single) - exact).abs();
                    assert!(
                        diff <= bound,
                        "{kernel:?} nb {nb}: {single} vs {exact}: {diff} > {bound}"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod q4_0_as_q8 {
    use super::*;
    use half::f16;

    /// Every SIMD kernel's Q4_0 dot is a Q8_0 dot of the block's levels,
    /// bit for bit (same lanes, same f32 part): its own, or for AVX-512
    /// VNNI, whose Q4_0 rounds as AVX2's does, AVX2's.
    #[cfg_attr(
        miri,
        ignore = "thousands of cases: too slow for Miri, which runs the scalar kernels the quant tests cover"
    )]
    #[test]
    fn q4_0_is_q8_of_levels_bit_for_bit() {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut rng = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else { continue };
            if matches!(kernel, Kernel::Scalar) {
                continue;
            }
            for iter in 0..2000 {
                let nb = iter % 10;
                let w: Vec<BlockQ4_0> = (0..nb)
                    .map(|_| BlockQ4_0 {
                        d: f16::from_f32(((rng() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0)
                            .to_le_bytes(),
                        qs: core::array::from_fn(|_| rng() as u8),
                    })
                    .collect();
                let w8: Vec<BlockQ8_0> = w
                    .iter()
                    .map(|b| BlockQ8_0 {
                        d: b.d,
                        qs: b.levels(),
                    })
                    .collect();
                let x: Vec<ActBlock> = (0..nb)
                    .map(|_| {
                        let v: [f32; QK8_0] = core::array::from_fn(|_| {
                            (rng() >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                        });
                        ActBlock::quantize(&v)
                    })
                    .collect();
                let a = k.dot_q4_0(&w, &x);
                let q8 = match kernel {
                    Kernel::Avx512Vnni => Kernel::Avx2.dispatch().expect("AVX-512 implies AVX2"),
                    _ => k,
                };
                let b = q8.dot_q8(&w8, &x);
                assert_eq!(a.to_bits(), b.to_bits(), "{kernel:?} nb {nb}: {a} vs {b}");
            }
        }
    }
}
