//! Shared checks for the GGUF fuzz targets.

// The checks on every parsed file, shared with tests/gguf_regressions.rs.
#[path = "../../tests/support/gguf_harness.rs"]
mod harness;

pub use harness::{check, touch, with_aligned};

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
