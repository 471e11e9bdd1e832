//! The validating parser: bytes in, [`Header`] out.
//!
//! Every read goes through [`Cursor`], which never indexes past the end of
//! its slice, and every count read from the file is checked against the
//! bytes left (times the smallest encoding of one item) before anything is
//! allocated for it. Work and memory are therefore linear in the file's
//! length whatever numbers the file contains.

use core::fmt;
use std::collections::HashMap;

use super::error::GgufError;
use super::reader::{Header, TensorInfo};
use super::types::GgmlType;
use super::value::{Array, Metadata, Value, ValueType};
use super::{
    ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_DEPTH, MAX_DIMS, MAX_KEY_LEN,
    MAX_TENSOR_NAME_LEN, MIN_ALIGNMENT,
};

/// Smallest encoded tensor info: an empty name (8), the dimension count (4),
/// one dimension (8), the type (4) and the offset (8).
const MIN_TENSOR_INFO: u64 = 8 + 4 + 8 + 4 + 8;
/// Smallest encoded key-value pair: an empty key (8), the type (4) and a
/// one-byte value.
const MIN_KV: u64 = 8 + 4 + 1;

/// What is being read, for error messages; formatted only on error.
#[derive(Clone, Copy)]
enum What<'k> {
    Header(&'static str),
    KeyName(u64),
    Value(&'k str),
    TensorName(u64),
    Tensor(&'k str, &'static str),
}

impl fmt::Display for What<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            What::Header(field) => f.write_str(field),
            What::KeyName(i) => write!(f, "name of metadata key #{i}"),
            What::Value(key) => write!(f, "value of key `{key}`"),
            What::TensorName(i) => write!(f, "name of tensor #{i}"),
            What::Tensor(name, field) => write!(f, "{field} of tensor `{name}`"),
        }
    }
}

/// A bounds-checked little-endian reader over a byte slice.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn offset(&self) -> u64 {
        self.pos as u64
    }

    fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    /// The next `n` bytes, or [`GgufError::Truncated`].
    fn take(&mut self, n: usize, what: What<'_>) -> Result<&'a [u8], GgufError> {
        let rest = &self.buf[self.pos..];
        match rest.get(..n) {
            Some(bytes) => {
                self.pos += n;
                Ok(bytes)
            }
            None => Err(GgufError::Truncated {
                offset: self.offset(),
                context: what.to_string(),
                needed: n as u64,
                available: rest.len() as u64,
            }),
        }
    }

    fn array<const N: usize>(&mut self, what: What<'_>) -> Result<[u8; N], GgufError> {
        let bytes = self.take(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn u32(&mut self, what: What<'_>) -> Result<u32, GgufError> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: What<'_>) -> Result<u64, GgufError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// Checks that `count` items of at least `min_size` bytes each can fit
    /// in what is left; `offset` is where the count field started and
    /// `context` names the count (built only on error). Returns the count as
    /// `usize`, safe to allocate for.
    fn check_count(
        &self,
        count: u64,
        min_size: u64,
        offset: u64,
        context: impl FnOnce() -> String,
    ) -> Result<usize, GgufError> {
        let remaining = self.remaining();
        let max = remaining / min_size;
        if count > max {
            return Err(GgufError::CountTooLarge {
                offset,
                context: context(),
                count,
                remaining,
                min_size,
                max,
            });
        }
        // `count <= remaining <= usize::MAX`.
        Ok(count as usize)
    }

    /// A length-prefixed UTF-8 string.
    fn string(&mut self, what: What<'_>) -> Result<&'a str, GgufError> {
        let len_offset = self.offset();
        let len = self.u64(what)?;
        let len = self.check_count(len, 1, len_offset, || format!("length of {what}"))?;
        let start = self.offset();
        let bytes = self.take(len, what)?;
        core::str::from_utf8(bytes).map_err(|_| GgufError::InvalidUtf8 {
            offset: start,
            context: what.to_string(),
        })
    }
}

/// Parses and validates everything but the tensor data itself: header,
/// metadata, tensor infos, alignment, and the placement of every tensor's
/// data within `bytes`.
pub(crate) fn parse(bytes: &[u8]) -> Result<Header, GgufError> {
    let mut cur = Cursor { buf: bytes, pos: 0 };

    let magic: [u8; 4] = cur.array(What::Header("magic"))?;
    if magic == *b"FUGG" {
        // The magic as a big-endian writer that byte-swaps it stores it.
        let version = cur.u32(What::Header("version"))?;
        return Err(GgufError::BigEndian {
            version: version.swap_bytes(),
        });
    }
    if magic != MAGIC {
        return Err(GgufError::BadMagic { found: magic });
    }
    let version = cur.u32(What::Header("version"))?;
    match version {
        2 | 3 => {}
        v if matches!(v.swap_bytes(), 1..=3) => {
            return Err(GgufError::BigEndian {
                version: v.swap_bytes(),
            })
        }
        v => return Err(GgufError::UnsupportedVersion { version: v }),
    }

    let n_tensors_offset = cur.offset();
    let n_tensors = cur.u64(What::Header("tensor count"))?;
    let n_kv_offset = cur.offset();
    let n_kv = cur.u64(What::Header("metadata key count"))?;
    // Each check is against the bytes left after the count fields, so a
    // count that cannot fit fails here, before any allocation.
    let tensor_count = || "tensor count".to_owned();
    cur.check_count(n_tensors, MIN_TENSOR_INFO, n_tensors_offset, tensor_count)?;
    let n_kv = cur.check_count(n_kv, MIN_KV, n_kv_offset, || {
        "metadata key count".to_owned()
    })?;

    let metadata = parse_metadata(&mut cur, n_kv)?;
    let alignment = alignment(&metadata)?;

    // Check again: the metadata used up some of the bytes.
    let n_tensors = cur.check_count(n_tensors, MIN_TENSOR_INFO, n_tensors_offset, tensor_count)?;
    let mut tensors = Vec::with_capacity(n_tensors);
    let mut tensor_index = HashMap::with_capacity(n_tensors);
    for i in 0..n_tensors as u64 {
        let info_offset = cur.offset();
        let info = parse_tensor_info(&mut cur, i, alignment)?;
        if tensor_index.contains_key(info.name.as_str()) {
            return Err(GgufError::DuplicateTensor {
                offset: info_offset,
                tensor: info.name,
            });
        }
        tensor_index.insert(info.name.clone(), tensors.len());
        tensors.push(info);
    }

    let file_len = bytes.len() as u64;
    // `cur.offset() <= file_len` and `alignment <= 2^31`: no overflow.
    let data_offset = cur.offset().next_multiple_of(alignment);
    // The padding up to the data section (as far as the file goes) is
    // zeros: at most `alignment - 1` bytes, all inside the file. A file
    // without tensors has no data section, and what follows its header is
    // trailing bytes, as after the last tensor of any other file.
    let padding_end = if tensors.is_empty() {
        cur.pos
    } else {
        data_offset.min(file_len) as usize
    };
    if let Some(i) = bytes[cur.pos..padding_end].iter().position(|&b| b != 0) {
        let at = cur.pos + i;
        return Err(GgufError::NonZeroPadding {
            offset: at as u64,
            value: bytes[at],
        });
    }
    check_placement(&tensors, data_offset, file_len)?;

    Ok(Header::new(
        version,
        alignment,
        metadata,
        tensors,
        tensor_index,
        data_offset,
        file_len,
    ))
}

fn parse_metadata(cur: &mut Cursor<'_>, n_kv: usize) -> Result<Metadata, GgufError> {
    let mut metadata = Metadata::new();
    for i in 0..n_kv as u64 {
        let key_offset = cur.offset();
        let key = cur.string(What::KeyName(i))?;
        if let Some(reason) = key_problem(key) {
            return Err(GgufError::InvalidKey {
                offset: key_offset,
                key: cut(key).to_owned(),
                reason,
            });
        }
        let type_offset = cur.offset();
        let type_id = cur.u32(What::Value(key))?;
        let value = parse_value(cur, type_id, type_offset, key, 0)?;
        if metadata.insert(key.to_owned(), value).is_err() {
            return Err(GgufError::DuplicateKey {
                offset: key_offset,
                key: key.to_owned(),
            });
        }
    }
    Ok(metadata)
}

/// Why `key` breaks the specification's key rules, if it does: at most
/// [`MAX_KEY_LEN`] bytes of ASCII, one or more nonempty segments separated
/// by `.`, each of lower-case letters, digits and `_`, and (beyond the
/// specification, for llama.cpp's own architecture names such as `gpt-oss`
/// and `command-r`, which prefix their keys) `-`.
pub(crate) fn key_problem(key: &str) -> Option<&'static str> {
    if key.len() > MAX_KEY_LEN {
        return Some("longer than 65535 bytes");
    }
    if key.is_empty() {
        return Some("empty");
    }
    if !key.is_ascii() {
        return Some("not ASCII");
    }
    if key.split('.').any(str::is_empty) {
        return Some("empty segment (keys are segments separated by single dots)");
    }
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-';
    if !key.bytes().all(|b| b == b'.' || allowed(b)) {
        return Some("segments may only hold a-z, 0-9, `_` and `-`");
    }
    None
}

/// The first 256 bytes of `s` (at a character boundary), for error values.
fn cut(s: &str) -> &str {
    let mut end = s.len().min(256);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Whether `value` is a valid `general.alignment`: a power of two and a
/// multiple of [`MIN_ALIGNMENT`].
pub(crate) fn alignment_ok(value: u32) -> bool {
    value.is_power_of_two() && value.is_multiple_of(MIN_ALIGNMENT)
}

fn value_type(type_id: u32, offset: u64, key: &str) -> Result<ValueType, GgufError> {
    ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
        offset,
        key: key.to_owned(),
        type_id,
    })
}

fn bool_byte(cur: &mut Cursor<'_>, key: &str) -> Result<bool, GgufError> {
    let offset = cur.offset();
    match cur.array::<1>(What::Value(key))?[0] {
        0 => Ok(false),
        1 => Ok(true),
        value => Err(GgufError::InvalidBool {
            offset,
            key: key.to_owned(),
            value,
        }),
    }
}

/// One value of type `type_id` (read at `type_offset`); `depth` is the number
/// of arrays it sits inside.
fn parse_value(
    cur: &mut Cursor<'_>,
    type_id: u32,
    type_offset: u64,
    key: &str,
    depth: usize,
) -> Result<Value, GgufError> {
    let what = What::Value(key);
    Ok(match value_type(type_id, type_offset, key)? {
        ValueType::U8 => Value::U8(u8::from_le_bytes(cur.array(what)?)),
        ValueType::I8 => Value::I8(i8::from_le_bytes(cur.array(what)?)),
        ValueType::U16 => Value::U16(u16::from_le_bytes(cur.array(what)?)),
        ValueType::I16 => Value::I16(i16::from_le_bytes(cur.array(what)?)),
        ValueType::U32 => Value::U32(u32::from_le_bytes(cur.array(what)?)),
        ValueType::I32 => Value::I32(i32::from_le_bytes(cur.array(what)?)),
        ValueType::F32 => Value::F32(f32::from_le_bytes(cur.array(what)?)),
        ValueType::U64 => Value::U64(u64::from_le_bytes(cur.array(what)?)),
        ValueType::I64 => Value::I64(i64::from_le_bytes(cur.array(what)?)),
        ValueType::F64 => Value::F64(f64::from_le_bytes(cur.array(what)?)),
        ValueType::Bool => Value::Bool(bool_byte(cur, key)?),
        ValueType::String => Value::String(cur.string(what)?.to_owned()),
        ValueType::Array => Value::Array(parse_array(cur, type_offset, key, depth + 1)?),
    })
}

/// Reads `count` fixed-size little-endian numbers in one bounds check.
fn numbers<T, const N: usize>(
    cur: &mut Cursor<'_>,
    count: usize,
    what: What<'_>,
    from_le: fn([u8; N]) -> T,
) -> Result<Vec<T>, GgufError> {
    // `count * N <= remaining` was checked by the caller.
    let bytes = cur.take(count * N, what)?;
    Ok(bytes
        .chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            from_le(a)
        })
        .collect())
}

/// An array whose header starts at the current position; `depth` counts
/// this array (1 for a top-level array).
fn parse_array(
    cur: &mut Cursor<'_>,
    offset: u64,
    key: &str,
    depth: usize,
) -> Result<Array, GgufError> {
    if depth > MAX_ARRAY_DEPTH {
        return Err(GgufError::NestingTooDeep {
            offset,
            key: key.to_owned(),
            limit: MAX_ARRAY_DEPTH,
        });
    }
    let what = What::Value(key);
    let elem_offset = cur.offset();
    let elem_type = value_type(cur.u32(what)?, elem_offset, key)?;
    let count_offset = cur.offset();
    let count = cur.u64(what)?;
    let count = cur.check_count(count, elem_type.min_encoded_size(), count_offset, || {
        format!("array length of key `{key}`")
    })?;
    Ok(match elem_type {
        ValueType::U8 => Array::U8(numbers(cur, count, what, u8::from_le_bytes)?),
        ValueType::I8 => Array::I8(numbers(cur, count, what, i8::from_le_bytes)?),
        ValueType::U16 => Array::U16(numbers(cur, count, what, u16::from_le_bytes)?),
        ValueType::I16 => Array::I16(numbers(cur, count, what, i16::from_le_bytes)?),
        ValueType::U32 => Array::U32(numbers(cur, count, what, u32::from_le_bytes)?),
        ValueType::I32 => Array::I32(numbers(cur, count, what, i32::from_le_bytes)?),
        ValueType::F32 => Array::F32(numbers(cur, count, what, f32::from_le_bytes)?),
        ValueType::U64 => Array::U64(numbers(cur, count, what, u64::from_le_bytes)?),
        ValueType::I64 => Array::I64(numbers(cur, count, what, i64::from_le_bytes)?),
        ValueType::F64 => Array::F64(numbers(cur, count, what, f64::from_le_bytes)?),
        ValueType::Bool => {
            let mut v = Vec::with_capacity(count);
            for _ in 0..count {
                v.push(bool_byte(cur, key)?);
            }
            Array::Bool(v)
        }
        ValueType::String => {
            let mut v = Vec::with_capacity(count);
            for _ in 0..count {
                v.push(cur.string(what)?.to_owned());
            }
            Array::String(v)
        }
        ValueType::Array => {
            let mut v = Vec::with_capacity(count);
            for _ in 0..count {
                let inner_offset = cur.offset();
                v.push(parse_array(cur, inner_offset, key, depth + 1)?);
            }
            Array::Array(v)
        }
    })
}

/// `general.alignment`, or the default of 32.
fn alignment(metadata: &Metadata) -> Result<u64, GgufError> {
    if !metadata.contains_key(ALIGNMENT_KEY) {
        return Ok(DEFAULT_ALIGNMENT);
    }
    let value = metadata.get_u32(ALIGNMENT_KEY)?;
    if !alignment_ok(value) {
        return Err(GgufError::BadAlignment { value });
    }
    Ok(u64::from(value))
}

fn parse_tensor_info(
    cur: &mut Cursor<'_>,
    index: u64,
    alignment: u64,
) -> Result<TensorInfo, GgufError> {
    let info_offset = cur.offset();
    let name = cur.string(What::TensorName(index))?;
    if name.len() > MAX_TENSOR_NAME_LEN {
        return Err(GgufError::TensorNameTooLong {
            offset: info_offset,
            tensor: cut(name).to_owned(),
            len: name.len() as u64,
        });
    }

    let n_dims_offset = cur.offset();
    let n_dims = cur.u32(What::Tensor(name, "dimension count"))?;
    if n_dims == 0 || n_dims as usize > MAX_DIMS {
        return Err(GgufError::BadDimCount {
            offset: n_dims_offset,
            tensor: name.to_owned(),
            n_dims,
        });
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for index in 0..n_dims as usize {
        let dim_offset = cur.offset();
        let dim = cur.u64(What::Tensor(name, "dimension"))?;
        if dim == 0 {
            return Err(GgufError::ZeroDim {
                offset: dim_offset,
                tensor: name.to_owned(),
                index,
            });
        }
        dims.push(dim);
    }

    let type_offset = cur.offset();
    let type_id = cur.u32(What::Tensor(name, "type"))?;
    let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownGgmlType {
        offset: type_offset,
        tensor: name.to_owned(),
        type_id,
    })?;

    let data_offset_offset = cur.offset();
    let offset = cur.u64(What::Tensor(name, "data offset"))?;

    let overflow = || GgufError::SizeOverflow {
        offset: info_offset,
        tensor: name.to_owned(),
    };
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(overflow)?;
    let block_size = ggml_type.block_size();
    if !dims[0].is_multiple_of(block_size) {
        return Err(GgufError::NotBlockMultiple {
            offset: info_offset,
            tensor: name.to_owned(),
            ggml_type,
            first_dim: dims[0],
            block_size,
        });
    }
    // The first dimension is a whole number of blocks, so the element count
    // is too.
    let n_bytes = ggml_type.bytes_for(n_elements).ok_or_else(overflow)?;
    if usize::try_from(n_bytes).is_err() || usize::try_from(n_elements).is_err() {
        return Err(overflow());
    }
    if !offset.is_multiple_of(alignment) {
        return Err(GgufError::MisalignedOffset {
            offset: data_offset_offset,
            tensor: name.to_owned(),
            data_offset: offset,
            alignment,
        });
    }

    Ok(TensorInfo {
        name: name.to_owned(),
        dims,
        ggml_type,
        offset,
        n_elements,
        n_bytes,
        layout: super::reader::TensorLayout::File,
    })
}

/// Every tensor's data lies inside the file, and no two overlap.
fn check_placement(
    tensors: &[TensorInfo],
    data_offset: u64,
    file_len: u64,
) -> Result<(), GgufError> {
    for t in tensors {
        let start = data_offset.checked_add(t.offset);
        let end = start.and_then(|s| s.checked_add(t.n_bytes));
        match end {
            Some(end) if end <= file_len => {}
            _ => {
                return Err(GgufError::TensorOutOfBounds {
                    tensor: t.name.clone(),
                    start: data_offset.saturating_add(t.offset),
                    end: data_offset
                        .saturating_add(t.offset)
                        .saturating_add(t.n_bytes),
                    file_len,
                })
            }
        }
    }
    let mut order: Vec<&TensorInfo> = tensors.iter().collect();
    order.sort_by_key(|t| t.offset);
    for pair in order.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        // Both ranges lie inside the file, so `a.offset + a.n_bytes` cannot
        // overflow. Sorted by start, any overlap shows between neighbours.
        if b.offset < a.offset + a.n_bytes {
            return Err(GgufError::TensorOverlap {
                first: a.name.clone(),
                first_offset: a.offset,
                second: b.name.clone(),
                second_offset: b.offset,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_count_allows_exactly_what_fits() {
        let buf = [0u8; 10];
        let cur = Cursor { buf: &buf, pos: 0 };
        assert_eq!(cur.check_count(2, 5, 0, String::new).unwrap(), 2);
        let err = cur.check_count(3, 5, 0, || "things".into()).unwrap_err();
        assert!(matches!(
            err,
            GgufError::CountTooLarge {
                count: 3,
                remaining: 10,
                max: 2,
                min_size: 5,
                ..
            }
        ));
        assert!(cur.check_count(u64::MAX, 1, 0, String::new).is_err());
    }

    #[test]
    fn take_stops_at_the_end() {
        let buf = [1u8, 2, 3];
        let mut cur = Cursor { buf: &buf, pos: 0 };
        assert_eq!(cur.take(2, What::Header("x")).unwrap(), &[1, 2]);
        let err = cur.take(2, What::Header("x")).unwrap_err();
        assert!(matches!(
            err,
            GgufError::Truncated {
                offset: 2,
                needed: 2,
                available: 1,
                ..
            }
        ));
        // A failed read does not move the cursor.
        assert_eq!(cur.take(1, What::Header("x")).unwrap(), &[3]);
        assert_eq!(cur.remaining(), 0);
    }

    #[test]
    fn strings_are_length_checked_and_utf8() {
        let mut buf = 3u64.to_le_bytes().to_vec();
        buf.extend_from_slice(b"abc");
        let mut cur = Cursor { buf: &buf, pos: 0 };
        assert_eq!(cur.string(What::KeyName(0)).unwrap(), "abc");

        buf[8] = 0xff;
        let mut cur = Cursor { buf: &buf, pos: 0 };
        let err = cur.string(What::KeyName(0)).unwrap_err();
        assert!(matches!(err, GgufError::InvalidUtf8 { offset: 8, .. }));

        let mut cur = Cursor {
            buf: &buf[..10],
            pos: 0,
        };
        let err = cur.string(What::KeyName(4)).unwrap_err();
        assert!(
            matches!(&err, GgufError::CountTooLarge { context, .. } if context.contains("key #4")),
            "{err}"
        );
    }
}
