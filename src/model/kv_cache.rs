//! The key/value cache: every layer's keys and values of the positions
//! seen so far.

use std::fmt;
use std::str::FromStr;

use half::f16;

use super::attention::KvRows;
use super::ModelError;

/// The element type of the KV cache.
///
/// `F16` is llama.cpp's default and halves the bytes a long context reads
/// per token. With it, the query and the softmax weights are rounded to
/// `f16` before they meet the cache, as GGML rounds them, which keeps the
/// logits as close to llama.cpp's as the rest of the forward pass allows.
/// `F32` keeps every value in full precision, so it leaves GGML's
/// rounding (both errors, measured: the README's "Logits against
/// llama.cpp").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KvDtype {
    /// IEEE half precision (the default).
    #[default]
    F16,
    /// Single precision.
    F32,
}

impl KvDtype {
    /// Bytes per cached value.
    pub fn size(self) -> usize {
        match self {
            KvDtype::F16 => 2,
            KvDtype::F32 => 4,
        }
    }
}

impl fmt::Display for KvDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KvDtype::F16 => "f16",
            KvDtype::F32 => "f32",
        })
    }
}

impl FromStr for KvDtype {
    type Err = ModelError;

    fn from_str(s: &str) -> Result<Self, ModelError> {
        match s {
            "f16" => Ok(KvDtype::F16),
            "f32" => Ok(KvDtype::F32),
            other => Err(ModelError::Options(format!(
                "unknown KV cache type {other:?} (supported: f16, f32)"
            ))),
        }
    }
}

/// `len` copies of `value`, or [`ModelError::Options`] naming `what` if
/// the allocator refuses the memory: a size that passes the arithmetic
/// checks can still be more than the machine can map, and `vec!` would
/// abort the process there.
pub(crate) fn try_filled<T: Clone>(
    len: usize,
    value: T,
    what: impl Fn() -> String,
) -> Result<Vec<T>, ModelError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| ModelError::Options(format!("{} does not fit in memory", what())))?;
    v.resize(len, value);
    Ok(v)
}

/// `len` zeros of `T`: if `huge`, and on Linux for 2 MiB or more, in
/// anonymous memory advised to use transparent huge pages
/// (`MADV_HUGEPAGE`), else a `Vec`.
///
/// After a long prompt a decode step's attention reads tens of MB of
/// cached rows (58.6 MB after 511 tokens of Qwen3-0.6B), one 4 KiB page
/// after another, with a page walk for nearly every page: the TLB covers a
/// few MB of 4 KiB pages, and in a virtual machine each walk is a nested
/// one. With 2 MiB pages those walks are gone (the weights take the same
/// advice, `GgufFile::read`). The price is that a 2 MiB page is resident
/// from its first write, and every head's rows start one, so such a cache
/// is resident in full from the first token, not as positions fill
/// ([`SessionOptions::huge_pages`](super::SessionOptions::huge_pages)),
/// and its pages are touched when it is made.
enum ZeroedBuf<T> {
    Huge(memmap2::MmapMut, core::marker::PhantomData<T>),
    Vec(Vec<T>),
}

impl<T: bytemuck::Pod> ZeroedBuf<T> {
    /// # Errors
    ///
    /// [`ModelError::Options`] naming `what` if the memory cannot be had.
    fn new(len: usize, huge: bool, what: impl Fn() -> String) -> Result<Self, ModelError> {
        let bytes = len.saturating_mul(core::mem::size_of::<T>());
        #[cfg(all(target_os = "linux", not(miri)))]
        if huge && bytes >= crate::gguf::file::HUGE_PAGE {
            if let Some(mut map) = crate::gguf::file::huge_page_map(bytes) {
                // Resident from the first token anyway: take the page
                // faults (and the kernel's zeroing of each huge page) now,
                // not inside the first prefill's QK-norm, where storing
                // the first keys took 3-37 ms of a 128-token prefill on an
                // AMD EPYC (Zen 4) VM (`--trace`: `qk_norm_rope` 15-49 ms,
                // 11.6-11.8 with the cache touched here).
                for b in map.iter_mut().step_by(4096) {
                    *b = 0;
                }
                return Ok(ZeroedBuf::Huge(map, core::marker::PhantomData));
            }
        }
        let _ = (bytes, huge);
        try_filled(len, T::zeroed(), what).map(ZeroedBuf::Vec)
    }
}

impl<T: bytemuck::Pod> core::ops::Deref for ZeroedBuf<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match self {
            // A page-aligned map of `len * size_of::<T>()` bytes.
            ZeroedBuf::Huge(map, _) => bytemuck::cast_slice(map),
            ZeroedBuf::Vec(v) => v,
        }
    }
}

impl<T: bytemuck::Pod> core::ops::DerefMut for ZeroedBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            ZeroedBuf::Huge(map, _) => bytemuck::cast_slice_mut(map),
            ZeroedBuf::Vec(v) => v,
        }
    }
}

impl<T> fmt::Debug for ZeroedBuf<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ZeroedBuf::Huge(..) => "ZeroedBuf::Huge",
            ZeroedBuf::Vec(_) => "ZeroedBuf::Vec",
        })
    }
}

#[derive(Debug)]
enum Store {
    F16 {
        k: ZeroedBuf<f16>,
        v: ZeroedBuf<f16>,
    },
    F32 {
        k: ZeroedBuf<f32>,
        v: ZeroedBuf<f32>,
    },
}

/// Keys and values of up to `capacity` positions for every layer, laid out
/// `[layer][kv_head][position][head_dim]`, allocated once.
///
/// Each key/value head's rows are contiguous, so the attention of one head
/// streams its positions in order: with the rows of all heads interleaved
/// (`[layer][position][kv_heads * head_dim]`), a head read 256 bytes every
/// 2 KiB, which the hardware prefetchers do not follow, and decode attention
/// at 144 positions waited on memory for most of its time.
#[derive(Debug)]
pub(crate) struct KvCache {
    store: Store,
    layers: usize,
    capacity: usize,
    kv_heads: usize,
    head_dim: usize,
}

impl KvCache {
    pub(crate) fn new(
        dtype: KvDtype,
        layers: usize,
        capacity: usize,
        kv_heads: usize,
        head_dim: usize,
        huge: bool,
    ) -> Result<Self, ModelError> {
        let kv_dim = kv_heads.saturating_mul(head_dim);
        let len = layers
            .checked_mul(capacity)
            .and_then(|n| n.checked_mul(kv_dim))
            .filter(|n| n.checked_mul(2 * dtype.size()).is_some_and(|b| b <= isize::MAX as usize))
            .ok_or_else(|| {
                ModelError::Options(format!(
                    "a KV cache of {capacity} positions x {layers} layers x {kv_dim} values does not fit in memory"
                ))
            })?;
        let what =
            || format!("a KV cache of {capacity} positions x {layers} layers x {kv_dim} values");
        let store = match dtype {
            KvDtype::F16 => Store::F16 {
                k: ZeroedBuf::new(len, huge, what)?,
                v: ZeroedBuf::new(len, huge, what)?,
            },
            KvDtype::F32 => Store::F32 {
                k: ZeroedBuf::new(len, huge, what)?,
                v: ZeroedBuf::new(len, huge, what)?,
            },
        };
        Ok(Self {
            store,
            layers,
            capacity,
            kv_heads,
            head_dim,
        })
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn dtype(&self) -> KvDtype {
        match self.store {
            Store::F16 { .. } => KvDtype::F16,
            Store::F32 { .. } => KvDtype::F32,
        }
    }

    /// Bytes held by the cache.
    pub(crate) fn bytes(&self) -> usize {
        2 * self.layers * self.capacity * self.kv_heads * self.head_dim * self.dtype().size()
    }

    /// Values between the first rows of two consecutive key/value heads
    /// in a layer's slice ([`KvCache::layer`]).
    pub(crate) fn head_stride(&self) -> usize {
        self.capacity * self.head_dim
    }

    /// Stores `k` and `v` (`kv_heads * head_dim` values each, head after
    /// head) for `layer` at `pos`, an `f16` cache's values rounded by
    /// `dot`'s conversion (the same values from every kernel).
    pub(crate) fn store(
        &mut self,
        dot: crate::quant::dot::Dispatch,
        layer: usize,
        pos: usize,
        k: &[f32],
        v: &[f32],
    ) {
        let hd = self.head_dim;
        for (h, (kh, vh)) in k.chunks_exact(hd).zip(v.chunks_exact(hd)).enumerate() {
            let at = ((layer * self.kv_heads + h) * self.capacity + pos) * hd;
            let range = at..at + hd;
            match &mut self.store {
                Store::F16 { k: ks, v: vs } => {
                    dot.to_f16(kh, &mut ks[range.clone()]);
                    dot.to_f16(vh, &mut vs[range]);
                }
                Store::F32 { k: ks, v: vs } => {
                    ks[range.clone()].copy_from_slice(kh);
                    vs[range].copy_from_slice(vh);
                }
            }
        }
    }

    /// The keys and values of `layer`: head `h`'s row at position `t`
    /// starts at `h * head_stride() + t * head_dim`, and positions
    /// `0..n_pos` of every head lie in the slices.
    pub(crate) fn layer(&self, layer: usize, n_pos: usize) -> (KvRows<'_>, KvRows<'_>) {
        let stride = self.head_stride();
        let at = layer * self.kv_heads * stride;
        let range = at..at + (self.kv_heads - 1) * stride + n_pos * self.head_dim;
        match &self.store {
            Store::F16 { k, v } => (KvRows::F16(&k[range.clone()]), KvRows::F16(&v[range])),
            Store::F32 { k, v } => (KvRows::F32(&k[range.clone()]), KvRows::F32(&v[range])),
        }
    }
}
