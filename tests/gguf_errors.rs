//! One test per `GgufError` variant: a valid file from the writer, then
//! byte surgery that breaks exactly one rule.

use inferno_cpu::gguf::{
    Array, GgmlType, Gguf, GgufError, GgufFile, Value, ValueType, Writer, MAX_ARRAY_DEPTH,
};
use inferno_cpu::BlockQ8_0;

/// Position of the only occurrence of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> usize {
    let hits: Vec<usize> = hay
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "{:?} occurs {} times",
        String::from_utf8_lossy(needle),
        hits.len()
    );
    hits[0]
}

/// Offset of the first byte after the length-prefixed string `s`.
fn after_str(bytes: &[u8], s: &str) -> usize {
    let mut needle = (s.len() as u64).to_le_bytes().to_vec();
    needle.extend_from_slice(s.as_bytes());
    find(bytes, &needle) + needle.len()
}

fn put_u32(bytes: &mut [u8], at: usize, v: u32) {
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Field offsets of a tensor info, found from its name.
struct Fields {
    n_dims: usize,
    dims: usize,
    ty: usize,
    offset: usize,
}

fn tensor_fields(bytes: &[u8], name: &str) -> Fields {
    let n_dims = after_str(bytes, name);
    let n = u32::from_le_bytes(bytes[n_dims..n_dims + 4].try_into().unwrap()) as usize;
    let dims = n_dims + 4;
    let ty = dims + 8 * n;
    Fields {
        n_dims,
        dims,
        ty,
        offset: ty + 4,
    }
}

/// A small valid file: metadata of several types and three tensors.
fn base() -> Vec<u8> {
    let blocks = vec![BlockQ8_0::default(); 4];
    let norm = [1.0f32; 8];
    let mut w = Writer::new();
    w.add_str("general.name", "abc")
        .unwrap()
        .add_u32("general.alignment", 32)
        .unwrap()
        .add_bool("flag.on", true)
        .unwrap()
        .add_u32("dup.a1", 1)
        .unwrap()
        .add_u32("dup.a2", 2)
        .unwrap()
        .add_array("list.strs", Array::String(vec!["x".into(), "yz".into()]))
        .unwrap()
        .add_tensor_q8_0("tensor.qa", &[64, 2], &blocks)
        .unwrap()
        .add_tensor_f32("tensor.na", &[8], &norm)
        .unwrap()
        .add_tensor_f32("tensor.nb", &[2, 4], &norm)
        .unwrap();
    w.to_bytes().unwrap()
}

fn parse_err(bytes: &[u8]) -> GgufError {
    match Gguf::parse(bytes) {
        Ok(_) => panic!("parse succeeded"),
        Err(e) => e,
    }
}

#[test]
fn base_file_is_valid() {
    let bytes = base();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(g.tensors().len(), 3);
    assert_eq!(g.metadata().len(), 6);
}

#[test]
fn bad_magic() {
    let mut bytes = base();
    bytes[..4].copy_from_slice(b"GGML");
    assert!(matches!(parse_err(&bytes), GgufError::BadMagic { found } if &found == b"GGML"));
}

#[test]
fn unsupported_versions() {
    for version in [0, 1, 4, 1000] {
        let mut bytes = base();
        put_u32(&mut bytes, 4, version);
        assert!(
            matches!(parse_err(&bytes), GgufError::UnsupportedVersion { version: v } if v == version),
            "version {version}"
        );
    }
}

#[test]
fn version_2_is_read() {
    let mut w = Writer::new();
    w.version(2).add_u8("k", 1).unwrap();
    let bytes = w.to_bytes().unwrap();
    assert_eq!(u32::from_le_bytes(bytes[4..8].try_into().unwrap()), 2);
    assert_eq!(Gguf::parse(&bytes).unwrap().version(), 2);
}

#[test]
fn big_endian() {
    let mut bytes = base();
    bytes[4..8].copy_from_slice(&3u32.to_be_bytes());
    let err = parse_err(&bytes);
    assert!(matches!(err, GgufError::BigEndian { version: 3 }), "{err}");
    assert!(err.to_string().contains("big-endian"));
}

#[test]
fn truncated_inside_fixed_field() {
    let bytes = base();
    let err = parse_err(&bytes[..6]);
    assert!(
        matches!(
            err,
            GgufError::Truncated {
                offset: 4,
                needed: 4,
                available: 2,
                ..
            }
        ),
        "{err}"
    );
    // Inside a key's value (counts all fit what is left).
    let mut w = Writer::new();
    w.add_u64("k.big", 7).unwrap();
    let bytes = w.to_bytes().unwrap();
    let at = after_str(&bytes, "k.big") + 4;
    let err = parse_err(&bytes[..at + 3]);
    assert!(
        matches!(&err, GgufError::Truncated { offset, context, needed: 8, available: 3 }
            if *offset == at as u64 && context.contains("k.big")),
        "{err}"
    );
}

#[test]
fn truncation_at_every_byte_is_an_error() {
    let bytes = base();
    for len in 0..bytes.len() {
        assert!(
            Gguf::parse(&bytes[..len]).is_err(),
            "prefix of {len} bytes parsed"
        );
    }
}

#[test]
fn tensor_count_too_large() {
    let mut bytes = base();
    put_u64(&mut bytes, 8, 1 << 60);
    let err = parse_err(&bytes);
    assert!(
        matches!(&err, GgufError::CountTooLarge { offset: 8, count, .. } if *count == 1 << 60),
        "{err}"
    );
}

#[test]
fn key_count_too_large() {
    let mut bytes = base();
    put_u64(&mut bytes, 16, u64::MAX);
    let err = parse_err(&bytes);
    assert!(
        matches!(
            &err,
            GgufError::CountTooLarge {
                offset: 16,
                count: u64::MAX,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn tensor_count_checked_again_after_metadata() {
    // Fits the whole file, but not what is left after the metadata.
    let mut bytes = base();
    let claimed = (bytes.len() as u64 - 24) / 32;
    put_u64(&mut bytes, 8, claimed);
    assert!(matches!(
        parse_err(&bytes),
        GgufError::CountTooLarge { offset: 8, .. }
    ));
}

#[test]
fn string_length_too_large() {
    let mut bytes = base();
    let at = find(&bytes, b"general.name") - 8;
    put_u64(&mut bytes, at, 1 << 50);
    let err = parse_err(&bytes);
    assert!(
        matches!(&err, GgufError::CountTooLarge { offset, context, .. }
            if *offset == at as u64 && context.contains("key #0")),
        "{err}"
    );
}

#[test]
fn array_length_too_large() {
    let mut bytes = base();
    // Array header after the key: element type (u32) then count (u64).
    let at = after_str(&bytes, "list.strs") + 4 + 4;
    put_u64(&mut bytes, at, 1 << 40);
    let err = parse_err(&bytes);
    assert!(
        matches!(&err, GgufError::CountTooLarge { offset, context, min_size: 8, .. }
            if *offset == at as u64 && context.contains("list.strs")),
        "{err}"
    );
}

#[test]
fn invalid_utf8() {
    let mut bytes = base();
    let at = after_str(&bytes, "general.name") + 4 + 8;
    bytes[at] = 0xff;
    let err = parse_err(&bytes);
    assert!(
        matches!(&err, GgufError::InvalidUtf8 { offset, context }
            if *offset == at as u64 && context.contains("general.name")),
        "{err}"
    );
}

#[test]
fn invalid_bool() {
    let mut bytes = base();
    let at = after_str(&bytes, "flag.on") + 4;
    bytes[at] = 2;
    let err = parse_err(&bytes);
    assert!(
        matches!(&err, GgufError::InvalidBool { offset, key, value: 2 }
            if *offset == at as u64 && key == "flag.on"),
        "{err}"
    );
}

#[test]
fn unknown_value_type() {
    let mut bytes = base();
    let at = after_str(&bytes, "dup.a1");
    put_u32(&mut bytes, at, 13);
    let err = parse_err(&bytes);
    assert!(
        matches!(&err, GgufError::UnknownValueType { offset, key, type_id: 13 }
            if *offset == at as u64 && key == "dup.a1"),
        "{err}"
    );
}

/// A file with one key whose value is `depth` nested arrays, the innermost
/// empty: the writer makes the file, the key is spliced in by hand.
fn nested(depth: usize) -> Vec<u8> {
    let mut bytes = Writer::new().to_bytes().unwrap();
    put_u64(&mut bytes, 16, 1);
    bytes.extend_from_slice(&4u64.to_le_bytes());
    bytes.extend_from_slice(b"deep");
    bytes.extend_from_slice(&ValueType::Array.id().to_le_bytes());
    for level in 1..=depth {
        let inner = if level == depth {
            ValueType::U8
        } else {
            ValueType::Array
        };
        bytes.extend_from_slice(&inner.id().to_le_bytes());
        let count: u64 = if level == depth { 0 } else { 1 };
        bytes.extend_from_slice(&count.to_le_bytes());
    }
    bytes
}

#[test]
fn nesting_too_deep() {
    let ok = nested(MAX_ARRAY_DEPTH);
    let g = Gguf::parse(&ok).unwrap();
    assert_eq!(g.get_array("deep").unwrap().depth(), MAX_ARRAY_DEPTH);
    let err = parse_err(&nested(MAX_ARRAY_DEPTH + 1));
    assert!(
        matches!(&err, GgufError::NestingTooDeep { key, limit, .. }
            if key == "deep" && *limit == MAX_ARRAY_DEPTH),
        "{err}"
    );
}

#[test]
fn duplicate_key() {
    let mut bytes = base();
    let at = find(&bytes, b"dup.a2");
    bytes[at + 5] = b'1';
    let err = parse_err(&bytes);
    assert!(
        matches!(&err, GgufError::DuplicateKey { offset, key }
            if *offset == (at - 8) as u64 && key == "dup.a1"),
        "{err}"
    );
}

#[test]
fn bad_alignment() {
    // Not a power of two, or (the specification) not a multiple of 8.
    for value in [0, 1, 2, 4, 24, 33] {
        let mut bytes = base();
        let at = after_str(&bytes, "general.alignment") + 4;
        put_u32(&mut bytes, at, value);
        let err = parse_err(&bytes);
        assert!(
            matches!(err, GgufError::BadAlignment { value: v } if v == value),
            "{err}"
        );
    }
}

#[test]
fn alignment_of_wrong_type() {
    let mut bytes = base();
    let at = after_str(&bytes, "general.alignment");
    put_u32(&mut bytes, at, ValueType::I32.id());
    assert!(matches!(
        parse_err(&bytes),
        GgufError::TypeMismatch {
            expected: ValueType::U32,
            found: ValueType::I32,
            ..
        }
    ));
}

#[test]
fn duplicate_tensor() {
    let mut bytes = base();
    let at = find(&bytes, b"tensor.nb");
    bytes[at + 8] = b'a';
    let err = parse_err(&bytes);
    assert!(
        matches!(&err, GgufError::DuplicateTensor { offset, tensor }
            if *offset == (at - 8) as u64 && tensor == "tensor.na"),
        "{err}"
    );
}

#[test]
fn bad_dim_count() {
    for n in [0, 5, u32::MAX] {
        let mut bytes = base();
        let f = tensor_fields(&bytes, "tensor.qa");
        put_u32(&mut bytes, f.n_dims, n);
        let err = parse_err(&bytes);
        assert!(
            matches!(&err, GgufError::BadDimCount { offset, tensor, n_dims }
                if *offset == f.n_dims as u64 && tensor == "tensor.qa" && *n_dims == n),
            "{err}"
        );
    }
}

#[test]
fn zero_dim() {
    let mut bytes = base();
    let f = tensor_fields(&bytes, "tensor.nb");
    put_u64(&mut bytes, f.dims + 8, 0);
    let err = parse_err(&bytes);
    assert!(
        matches!(&err, GgufError::ZeroDim { offset, tensor, index: 1 }
            if *offset == (f.dims + 8) as u64 && tensor == "tensor.nb"),
        "{err}"
    );
}

#[test]
fn unknown_ggml_type() {
    for id in [4, 31, 1000] {
        let mut bytes = base();
        let f = tensor_fields(&bytes, "tensor.na");
        put_u32(&mut bytes, f.ty, id);
        let err = parse_err(&bytes);
        assert!(
            matches!(&err, GgufError::UnknownGgmlType { offset, type_id, .. }
                if *offset == f.ty as u64 && *type_id == id),
            "{err}"
        );
    }
}

#[test]
fn element_count_overflow() {
    let mut bytes = base();
    let f = tensor_fields(&bytes, "tensor.nb");
    put_u64(&mut bytes, f.dims, 1 << 33);
    put_u64(&mut bytes, f.dims + 8, 1 << 33);
    let err = parse_err(&bytes);
    assert!(
        matches!(&err, GgufError::SizeOverflow { tensor, .. } if tensor == "tensor.nb"),
        "{err}"
    );
}

#[test]
fn byte_size_overflow() {
    // 2^62 f32 elements fit a u64 count but not a u64 byte size.
    let mut bytes = base();
    let f = tensor_fields(&bytes, "tensor.na");
    put_u64(&mut bytes, f.dims, 1 << 62);
    assert!(matches!(parse_err(&bytes), GgufError::SizeOverflow { .. }));
}

#[test]
fn not_block_multiple() {
    let mut bytes = base();
    let f = tensor_fields(&bytes, "tensor.qa");
    put_u64(&mut bytes, f.dims, 48);
    let err = parse_err(&bytes);
    assert!(
        matches!(&err, GgufError::NotBlockMultiple {
            tensor, ggml_type: GgmlType::Q8_0, first_dim: 48, block_size: 32, ..
        } if tensor == "tensor.qa"),
        "{err}"
    );
}

#[test]
fn misaligned_offset() {
    let mut bytes = base();
    let f = tensor_fields(&bytes, "tensor.nb");
    put_u64(&mut bytes, f.offset, 4);
    let err = parse_err(&bytes);
    assert!(
        matches!(&err, GgufError::MisalignedOffset { offset, data_offset: 4, alignment: 32, .. }
            if *offset == f.offset as u64),
        "{err}"
    );
}

#[test]
fn tensor_past_end() {
    let mut bytes = base();
    let f = tensor_fields(&bytes, "tensor.nb");
    put_u64(&mut bytes, f.offset, 1 << 40);
    let err = parse_err(&bytes);
    assert!(
        matches!(&err, GgufError::TensorOutOfBounds { tensor, file_len, .. }
            if tensor == "tensor.nb" && *file_len == bytes.len() as u64),
        "{err}"
    );
    // An offset so large that start + size overflows u64.
    put_u64(&mut bytes, f.offset, u64::MAX - 31);
    assert!(matches!(
        parse_err(&bytes),
        GgufError::TensorOutOfBounds { .. }
    ));
    // Data cut short.
    let bytes = base();
    let err = parse_err(&bytes[..bytes.len() - 32]);
    assert!(matches!(err, GgufError::TensorOutOfBounds { .. }), "{err}");
}

#[test]
fn overlapping_tensors() {
    let mut bytes = base();
    let f = tensor_fields(&bytes, "tensor.nb");
    put_u64(&mut bytes, f.offset, 0);
    let err = parse_err(&bytes);
    assert!(
        matches!(&err, GgufError::TensorOverlap { first, second, .. }
            if first == "tensor.qa" && second == "tensor.nb"),
        "{err}"
    );
}

/// Ranges are half-open: a tensor may start at the byte right after the
/// previous one ends, but not one byte earlier. Two `i8` tensors (their
/// sizes need not be multiples of the alignment) with `general.alignment`
/// 8: `t.a` holds bytes 0..9 of the data section, `t.b` is moved from 16
/// to 8, and then shares byte 8 with it.
#[test]
fn tensors_overlapping_by_one_byte() {
    let file = |a_len: usize| {
        let (a, b) = (vec![1u8; a_len], vec![2u8; 8]);
        let mut w = Writer::new();
        w.alignment(8)
            .unwrap()
            .add_tensor("t.a", GgmlType::I8, &[a_len as u64], a)
            .unwrap()
            .add_tensor("t.b", GgmlType::I8, &[8], b)
            .unwrap();
        w.to_bytes().unwrap()
    };
    // Touching: `t.b` right after an 8-byte `t.a`.
    let touching = file(8);
    let g = Gguf::parse(&touching).unwrap();
    assert_eq!(g.tensor("t.b").unwrap().offset, 8);
    assert_eq!(g.tensor_bytes("t.a").unwrap(), [1u8; 8]);
    assert_eq!(g.tensor_bytes("t.b").unwrap(), [2u8; 8]);

    let mut bytes = file(9);
    let f = tensor_fields(&bytes, "t.b");
    assert_eq!(bytes[f.offset..f.offset + 8], 16u64.to_le_bytes());
    Gguf::parse(&bytes).unwrap();
    put_u64(&mut bytes, f.offset, 8);
    let err = parse_err(&bytes);
    assert!(
        matches!(&err, GgufError::TensorOverlap { first, first_offset: 0, second, second_offset: 8 }
            if first == "t.a" && second == "t.b"),
        "{err}"
    );
}

#[test]
fn lookup_errors() {
    let bytes = base();
    let g = Gguf::parse(&bytes).unwrap();
    assert!(
        matches!(g.get_u32("no.such"), Err(GgufError::KeyNotFound { key }) if key == "no.such")
    );
    let err = g.get_u64("dup.a1").unwrap_err();
    assert!(matches!(
        &err,
        GgufError::TypeMismatch { key, expected: ValueType::U64, found: ValueType::U32 }
            if key == "dup.a1"
    ));
    assert!(matches!(
        g.get_u32_array("list.strs"),
        Err(GgufError::ArrayTypeMismatch {
            expected: ValueType::U32,
            found: ValueType::String,
            ..
        })
    ));
    assert!(matches!(
        g.tensor_bytes("tensor.zz"),
        Err(GgufError::TensorNotFound { tensor }) if tensor == "tensor.zz"
    ));
    assert!(matches!(
        g.tensor_f32("tensor.qa"),
        Err(GgufError::TensorTypeMismatch {
            expected: GgmlType::F32,
            found: GgmlType::Q8_0,
            ..
        })
    ));
    assert!(matches!(
        g.tensor_q8_0("tensor.na"),
        Err(GgufError::TensorTypeMismatch {
            expected: GgmlType::Q8_0,
            found: GgmlType::F32,
            ..
        })
    ));
}

#[test]
fn misaligned_data_view() {
    // Every offset is a multiple of 8 in the file, so only bytes that sit
    // at an odd address in memory can give a misaligned view.
    let mut w = Writer::new();
    w.add_tensor_f32("odd", &[2], &[1.0, 2.0]).unwrap();
    let bytes = w.to_bytes().unwrap();
    let mut words = vec![0u64; bytes.len().div_ceil(8) + 1];
    let buf: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
    buf[1..=bytes.len()].copy_from_slice(&bytes);
    let g = Gguf::parse(&buf[1..=bytes.len()]).unwrap();
    let err = g.tensor_f32("odd").unwrap_err();
    assert!(
        matches!(&err, GgufError::MisalignedData { tensor, required: 4 } if tensor == "odd"),
        "{err}"
    );
    // The raw bytes are still there.
    assert_eq!(
        g.tensor_bytes("odd").unwrap(),
        bytemuck::cast_slice::<f32, u8>(&[1.0, 2.0])
    );
}

#[test]
#[cfg_attr(miri, ignore = "Miri isolates the file system")]
fn io_error_names_the_path() {
    let path = std::path::Path::new("/nonexistent/dir/model.gguf");
    for result in [GgufFile::open(path), GgufFile::read(path)] {
        let err = result.unwrap_err();
        assert!(
            matches!(&err, GgufError::Io { path: p, .. } if p == path),
            "{err}"
        );
        assert!(err.to_string().contains("model.gguf"));
    }
}

#[test]
fn value_enum_round_trips_each_type() {
    let bytes = base();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(g.get("general.name"), Some(&Value::String("abc".into())));
    assert_eq!(g.get("flag.on"), Some(&Value::Bool(true)));
}
