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
    hint::<false, T>(data, byte_offset);
}

/// [`prefetch_read`] with the hint that asks for the line in the L2 cache
/// rather than L1 (`prefetcht2`): for a kernel whose own loads follow a
/// pattern the hardware prefetchers do not track, a far prefetch into L1
/// can hold the core's few L1 miss buffers while it waits on memory,
/// where one into L2 lets more lines be in flight. The same contract as
/// [`prefetch_read`]: any offset, never dereferenced, a no-op under Miri
/// and off x86_64.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline(always)]
pub(crate) fn prefetch_read_l2<T>(data: &[T], byte_offset: usize) {
    hint::<true, T>(data, byte_offset);
}

/// `prefetcht0` (into L1) or, if `TO_L2`, `prefetcht2` (into L2) of the
/// line `byte_offset` bytes past the start of `data`.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline(always)]
fn hint<const TO_L2: bool, T>(data: &[T], byte_offset: usize) {
    let addr = data.as_ptr().cast::<u8>().wrapping_add(byte_offset);
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0, _MM_HINT_T2};
        // SAFETY: [PREFETCH-HINT] `prefetcht0` and `prefetcht2` (SSE, part
        // of the x86_64 baseline) only hint the cache: they do not fault on
        // any address, mapped or not, and have no effect the program can
        // observe, so any address is allowed. `wrapping_add` computes the
        // address without the in-bounds requirement of `add`. Checked by:
        // src/unsafe_core/prefetch.rs::tests::prefetch_any_offset and
        // src/unsafe_core/prefetch.rs::tests::prefetch_l2_any_offset
        unsafe {
            if TO_L2 {
                _mm_prefetch::<_MM_HINT_T2>(addr.cast::<i8>());
            } else {
                _mm_prefetch::<_MM_HINT_T0>(addr.cast::<i8>());
            }
        }
    }
    #[cfg(any(miri, not(target_arch = "x86_64")))]
    let _ = addr;
}

/// The x86 CPU's vendor and family as `cpuid` reports them (the family
/// with its extended part added, as the vendors' manuals define it:
/// `0x19` for AMD Zen 3 and Zen 4, `0x1a` for Zen 5, `6` for Intel's
/// current cores); `None` off x86_64 and under Miri (which cannot run
/// `cpuid`; the kernels that ask are not run there either). The prefetch
/// distances and hints are measured per machine kind, and this is how a
/// kernel tells the kinds apart where the instruction sets alone do not
/// (Zen 4 and Zen 5 both have AVX-512 VNNI).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn cpu_vendor_family() -> Option<(CpuVendor, u32)> {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use core::arch::x86_64::__cpuid;
        // SAFETY: [CPUID] `cpuid` exists on every x86_64 CPU, reads no
        // memory and changes only the registers it returns in; leaves 0
        // and 1 exist on every such CPU. (Safe to call since Rust 1.94;
        // the block keeps older toolchains building.) Checked by:
        // src/unsafe_core/prefetch.rs::tests::cpu_family_matches_proc_cpuinfo
        #[allow(unused_unsafe)]
        let (l0, l1) = unsafe { (__cpuid(0), __cpuid(1)) };
        let mut name = [0u8; 12];
        name[..4].copy_from_slice(&l0.ebx.to_le_bytes());
        name[4..8].copy_from_slice(&l0.edx.to_le_bytes());
        name[8..].copy_from_slice(&l0.ecx.to_le_bytes());
        let vendor = match &name {
            b"AuthenticAMD" => CpuVendor::Amd,
            b"GenuineIntel" => CpuVendor::Intel,
            _ => CpuVendor::Other,
        };
        let base = (l1.eax >> 8) & 0xf;
        let family = if base == 0xf {
            base + ((l1.eax >> 20) & 0xff)
        } else {
            base
        };
        Some((vendor, family))
    }
    #[cfg(any(miri, not(target_arch = "x86_64")))]
    None
}

/// Who made the CPU, as far as the kernels' tuning cares.
#[cfg_attr(any(miri, not(target_arch = "x86_64")), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CpuVendor {
    Amd,
    Intel,
    Other,
}

#[cfg(test)]
mod tests {
    use super::prefetch_read;

    /// `cpu_vendor_family` agrees with what Linux read from the same
    /// `cpuid` leaves (`vendor_id` and `cpu family` in /proc/cpuinfo).
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    #[cfg_attr(miri, ignore = "Miri cannot run cpuid")]
    #[test]
    fn cpu_family_matches_proc_cpuinfo() {
        let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
            return;
        };
        let field = |key: &str| {
            info.lines()
                .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
                .and_then(|l| l.split(':').nth(1))
                .map(|v| v.trim().to_string())
        };
        let (vendor, family) = super::cpu_vendor_family().unwrap();
        if let Some(f) = field("cpu family") {
            assert_eq!(family, f.parse::<u32>().unwrap());
        }
        if let Some(v) = field("vendor_id") {
            let want = match v.as_str() {
                "AuthenticAMD" => super::CpuVendor::Amd,
                "GenuineIntel" => super::CpuVendor::Intel,
                _ => super::CpuVendor::Other,
            };
            assert_eq!(vendor, want);
        }
    }

    /// The L2 hint takes any offset too.
    #[test]
    fn prefetch_l2_any_offset() {
        let data = vec![3u8; 4096];
        for off in [0, 63, 4096, 1 << 30, usize::MAX] {
            super::prefetch_read_l2(&data, off);
        }
        assert_eq!(data[4095], 3);
    }

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
