//! The checks the GGUF fuzz targets run on every input, shared by
//! `fuzz/src/lib.rs` (the `gguf_parse`, `gguf_mutate` and `model_load`
//! targets) and `tests/gguf_regressions.rs`, so every file in
//! `tests/gguf_regressions/` replays in a plain `cargo test` under the
//! same checks as in the fuzzer.

use inferno_cpu::gguf::{GgmlType, Gguf, Writer};

/// Runs `f` on a copy of `bytes` at an 8-aligned address, as a memory
/// map or `GgufFile::read` would hold them, so the `f32`/`f16` views are
/// exercised rather than refused as misaligned.
pub fn with_aligned<R>(bytes: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
    let mut words = vec![0u64; bytes.len().div_ceil(8)];
    let buf: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
    buf[..bytes.len()].copy_from_slice(bytes);
    f(&buf[..bytes.len()])
}

/// Parses `bytes`; on success touches every key and every tensor view, and
/// checks that writing the parsed file back out and parsing that gives the
/// same keys, values and tensor bytes. Returns whether `bytes` parsed.
pub fn check(bytes: &[u8]) -> bool {
    let Ok(gguf) = Gguf::parse(bytes) else {
        return false;
    };
    touch(&gguf);
    let rewritten = Writer::from_gguf(&gguf)
        .expect("a parsed file can be rewritten")
        .to_bytes()
        .expect("writing to a Vec cannot fail");
    let again = Gguf::parse(&rewritten).expect("a rewritten file parses");
    assert_eq!(again.version(), gguf.version());
    assert_eq!(again.metadata().len(), gguf.metadata().len());
    for ((k1, v1), (k2, v2)) in gguf.metadata().iter().zip(again.metadata().iter()) {
        assert_eq!(k1, k2);
        assert_eq!(format!("{v1:?}"), format!("{v2:?}"));
    }
    assert_eq!(again.tensors().len(), gguf.tensors().len());
    for t in gguf.tensors() {
        let u = again.tensor(&t.name).expect("rewritten tensor present");
        assert_eq!(
            (&u.dims, u.ggml_type, u.n_bytes),
            (&t.dims, t.ggml_type, t.n_bytes)
        );
        assert_eq!(again.data_of(u), gguf.data_of(t));
    }
    true
}

/// Reads every metadata value and every tensor's data through each view.
pub fn touch(gguf: &Gguf<'_>) {
    let mut acc = 0u64;
    for (key, value) in gguf.metadata().iter() {
        acc = acc.wrapping_add(key.len() as u64);
        acc = acc.wrapping_add(format!("{value:?}").len() as u64);
        let _ = gguf.get_u32(key);
        let _ = gguf.get_str(key);
        let _ = gguf.get_str_array(key);
    }
    for t in gguf.tensors() {
        let data = gguf.tensor_bytes(&t.name).expect("listed tensor has bytes");
        assert_eq!(data.len() as u64, t.n_bytes);
        acc = acc.wrapping_add(data.iter().fold(0u64, |a, &b| a.wrapping_add(u64::from(b))));
        match t.ggml_type {
            GgmlType::F32 => {
                if let Ok(v) = gguf.tensor_f32(&t.name) {
                    assert_eq!(v.len() as u64, t.n_elements);
                    acc = acc.wrapping_add(
                        v.iter()
                            .fold(0u64, |a, x| a.wrapping_add(u64::from(x.to_bits()))),
                    );
                }
            }
            GgmlType::F16 => {
                if let Ok(v) = gguf.tensor_f16(&t.name) {
                    assert_eq!(v.len() as u64, t.n_elements);
                    acc = acc.wrapping_add(
                        v.iter()
                            .fold(0u64, |a, x| a.wrapping_add(u64::from(x.to_bits()))),
                    );
                }
            }
            GgmlType::Q8_0 => {
                let v = gguf
                    .tensor_q8_0(&t.name)
                    .expect("q8_0 views work at any address");
                assert_eq!(v.len() as u64 * 32, t.n_elements);
                acc = acc.wrapping_add(
                    v.iter()
                        .fold(0u64, |a, b| a.wrapping_add(b.qs[31] as u8 as u64)),
                );
            }
            _ => {
                assert!(gguf.tensor_f32(&t.name).is_err());
            }
        }
    }
    std::hint::black_box(acc);
}
