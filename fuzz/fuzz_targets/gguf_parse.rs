//! Arbitrary bytes into the GGUF parser: it must return an error or a file
//! whose every key and tensor view can be read, never panic, hang or
//! allocate beyond the input's size.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // As given (any address: byte and Q8_0 views), then 8-aligned (f32/f16).
    inferno_cpu_fuzz::check(data);
    inferno_cpu_fuzz::with_aligned(data, inferno_cpu_fuzz::check);
});
