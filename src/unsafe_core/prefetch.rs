//! Software prefetch: a hint that the CPU should start loading a cache line
//! the caller will read soon.
//!
//! A decode matvec streams every weight once, so its speed is the memory
//! system's, and the hardware prefetchers of some CPUs (measured on an
//! Intel Xeon VM) do not run far enough ahead of a loop that also computes
//! on what it loads. Asking for the line a few KiB ahead keeps more reads in
//! flight. The hint has no architectural effect: it never faults, reads
//! nothing the program can see, and may be dropped by the CPU, which is why
//! it can be offered as a safe function taking any offset, in bounds or
//! not (`[PREFETCH-HINT]` in `SAFETY.md`).

/// Hints that the cache line holding the byte `byte_offset` bytes past the
/// start of `data` will be read soon. The offset may lie past the end of
/// `data` (the address is only computed, never dereferenced). A no-op
/// under Miri and off x86_64 (only the x86 kernels prefetch: the aarch64
/// ones have not been measured with it).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline(always)]
pub(crate) fn prefetch_read<T>(data: &[T], byte_offset: usize) {
    let addr = data.as_ptr().cast::<u8>().wrapping_add(byte_offset);
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: [PREFETCH-HINT] `prefetcht0` (SSE, part of the x86_64
        // baseline) only hints the cache: it does not fault on any address,
        // mapped or not, and has no effect the program can observe, so any
        // address is allowed. `wrapping_add` computes the address without
        // the in-bounds requirement of `add`. Checked by:
        // src/unsafe_core/prefetch.rs::tests::prefetch_any_offset
        unsafe { _mm_prefetch::<_MM_HINT_T0>(addr.cast::<i8>()) }
    }
    #[cfg(any(miri, not(target_arch = "x86_64")))]
    let _ = addr;
}

#[cfg(test)]
mod tests {
    use super::prefetch_read;

    /// Offsets inside, at the end of, and far past a slice (and past the
    /// end of the address space) are all harmless hints.
    #[test]
    fn prefetch_any_offset() {
        let data = vec![1u32; 1024];
        for off in [0, 4, 4095, 4096, 1 << 20, usize::MAX / 2, usize::MAX] {
            prefetch_read(&data, off);
        }
        let empty: [u64; 0] = [];
        prefetch_read(&empty, 64);
        assert_eq!(data.iter().sum::<u32>(), 1024);
    }
}
