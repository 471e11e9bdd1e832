//! Shared checks for the GGUF fuzz targets.

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
/// same keys, values and tensor bytes.
pub fn check(bytes: &[u8]) {
    let Ok(gguf) = Gguf::parse(bytes) else { return };
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

/// A header field of a valid file: where it starts and how wide it is.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// Byte offset of the field.
    pub at: usize,
    /// Width in bytes (1, 4 or 8).
    pub width: usize,
}

/// Every fixed-size header field of `bytes`, a file the writer produced:
/// version and counts, each key's string length and type, every value
/// (array element types and counts included), and each tensor info's name
/// length, dimension count, dimensions, type and offset. Returns what it
/// found so far if the walk leaves the bytes (it never does on writer
/// output).
pub fn fields(bytes: &[u8]) -> Vec<Field> {
    let mut out = Vec::new();
    let _ = walk(bytes, &mut out);
    out
}

fn walk(bytes: &[u8], out: &mut Vec<Field>) -> Option<()> {
    let rd = |at: usize, width: usize| -> Option<u64> {
        let b = bytes.get(at..at + width)?;
        let mut a = [0u8; 8];
        a[..width].copy_from_slice(b);
        Some(u64::from_le_bytes(a))
    };
    let mut pos = 4;
    let mut field = |out: &mut Vec<Field>, pos: &mut usize, width: usize| -> Option<u64> {
        let v = rd(*pos, width)?;
        out.push(Field { at: *pos, width });
        *pos += width;
        Some(v)
    };
    field(out, &mut pos, 4)?;
    let n_tensors = field(out, &mut pos, 8)?;
    let n_kv = field(out, &mut pos, 8)?;
    fn value(
        bytes: &[u8],
        out: &mut Vec<Field>,
        pos: &mut usize,
        ty: u64,
        field: &mut dyn FnMut(&mut Vec<Field>, &mut usize, usize) -> Option<u64>,
    ) -> Option<()> {
        match ty {
            0 | 1 | 7 => drop(field(out, pos, 1)?),
            2 | 3 => drop(field(out, pos, 2)?),
            4..=6 => drop(field(out, pos, 4)?),
            10..=12 => drop(field(out, pos, 8)?),
            8 => {
                let len = field(out, pos, 8)? as usize;
                *pos = pos.checked_add(len).filter(|&p| p <= bytes.len())?;
            }
            9 => {
                let elem = field(out, pos, 4)?;
                let count = field(out, pos, 8)?;
                for _ in 0..count {
                    value(bytes, out, pos, elem, field)?;
                }
            }
            _ => return None,
        }
        Some(())
    }
    for _ in 0..n_kv {
        let len = field(out, &mut pos, 8)? as usize;
        pos = pos.checked_add(len).filter(|&p| p <= bytes.len())?;
        let ty = field(out, &mut pos, 4)?;
        value(bytes, out, &mut pos, ty, &mut field)?;
    }
    for _ in 0..n_tensors {
        let len = field(out, &mut pos, 8)? as usize;
        pos = pos.checked_add(len).filter(|&p| p <= bytes.len())?;
        let n_dims = field(out, &mut pos, 4)?;
        for _ in 0..n_dims {
            field(out, &mut pos, 8)?;
        }
        field(out, &mut pos, 4)?;
        field(out, &mut pos, 8)?;
    }
    Some(())
}
