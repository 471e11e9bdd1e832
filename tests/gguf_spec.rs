//! The GGUF specification (ggml's `docs/gguf.md`), rule by rule, on files
//! assembled byte by byte here rather than by this crate's writer, so the
//! writer and the reader cannot share a misreading. Each test is named in
//! the rule table of `src/gguf/SPEC.md`; rules whose test lives in
//! `tests/gguf_errors.rs` (one test per error variant) are named there.

use inferno_cpu::gguf::{
    Array, GgmlType, Gguf, GgufError, Value, Writer, DEFAULT_ALIGNMENT, MAX_KEY_LEN,
    MAX_TENSOR_NAME_LEN,
};

/// A file assembled field by field.
#[derive(Default)]
struct Raw {
    kvs: Vec<u8>,
    n_kv: u64,
    infos: Vec<u8>,
    n_tensors: u64,
}

fn string(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s);
}

impl Raw {
    /// A key-value pair: key, type id, then the value's bytes as given.
    fn kv(mut self, key: &[u8], type_id: u32, value: &[u8]) -> Self {
        string(&mut self.kvs, key);
        self.kvs.extend_from_slice(&type_id.to_le_bytes());
        self.kvs.extend_from_slice(value);
        self.n_kv += 1;
        self
    }

    fn tensor(mut self, name: &[u8], dims: &[u64], type_id: u32, offset: u64) -> Self {
        string(&mut self.infos, name);
        self.infos
            .extend_from_slice(&(dims.len() as u32).to_le_bytes());
        for d in dims {
            self.infos.extend_from_slice(&d.to_le_bytes());
        }
        self.infos.extend_from_slice(&type_id.to_le_bytes());
        self.infos.extend_from_slice(&offset.to_le_bytes());
        self.n_tensors += 1;
        self
    }

    /// Header, metadata and tensor infos, without padding.
    fn head(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&self.n_tensors.to_le_bytes());
        out.extend_from_slice(&self.n_kv.to_le_bytes());
        out.extend_from_slice(&self.kvs);
        out.extend_from_slice(&self.infos);
        out
    }

    /// The whole file: head, zeros up to a multiple of `alignment`, `data`.
    fn with_data(&self, alignment: usize, data: &[u8]) -> Vec<u8> {
        let mut out = self.head();
        out.resize(out.len().next_multiple_of(alignment), 0);
        out.extend_from_slice(data);
        out
    }
}

fn u32_bytes(v: u32) -> [u8; 4] {
    v.to_le_bytes()
}

fn parse(bytes: &[u8]) -> Result<Gguf<'_>, GgufError> {
    Gguf::parse(bytes)
}

#[test]
fn spec_fields_are_little_endian() {
    let bytes = Raw::default()
        .kv(b"a.b", 4, &[0x04, 0x03, 0x02, 0x01])
        .head();
    assert_eq!(&bytes[..8], b"GGUF\x03\x00\x00\x00");
    let g = parse(&bytes).unwrap();
    assert_eq!(g.get_u32("a.b").unwrap(), 0x0102_0304);
}

#[test]
fn big_endian_magic() {
    // A big-endian file whose writer swapped the magic too.
    let mut bytes = b"FUGG".to_vec();
    bytes.extend_from_slice(&3u32.to_be_bytes());
    bytes.extend_from_slice(&[0; 16]);
    let err = parse(&bytes).map(|_| ()).unwrap_err();
    assert!(matches!(err, GgufError::BigEndian { version: 3 }), "{err}");
}

#[test]
fn spec_every_value_type_has_its_id_and_size() {
    // (type id, encoded value, what it reads as)
    let cases: [(u32, &[u8], Value); 12] = [
        (0, &[0xff], Value::U8(255)),
        (1, &[0xff], Value::I8(-1)),
        (2, &[0x01, 0x02], Value::U16(0x0201)),
        (3, &[0xfe, 0xff], Value::I16(-2)),
        (4, &[1, 0, 0, 0x80], Value::U32(0x8000_0001)),
        (5, &[0xfd, 0xff, 0xff, 0xff], Value::I32(-3)),
        (6, &1.5f32.to_le_bytes(), Value::F32(1.5)),
        (7, &[1], Value::Bool(true)),
        (8, b"\x02\0\0\0\0\0\0\0hi", Value::String("hi".into())),
        (10, &u64::MAX.to_le_bytes(), Value::U64(u64::MAX)),
        (11, &(-4i64).to_le_bytes(), Value::I64(-4)),
        (12, &0.25f64.to_le_bytes(), Value::F64(0.25)),
    ];
    for (id, encoded, want) in cases {
        // The value is followed by a second key, so a reader that takes the
        // wrong number of bytes misreads that key.
        let bytes = Raw::default()
            .kv(b"v.x", id, encoded)
            .kv(b"v.next", 0, &[7])
            .head();
        let g = parse(&bytes).unwrap_or_else(|e| panic!("type {id}: {e}"));
        assert_eq!(g.get("v.x"), Some(&want), "type {id}");
        assert_eq!(g.get("v.next"), Some(&Value::U8(7)), "type {id}");
    }
}

#[test]
fn spec_strings_are_not_nul_terminated() {
    // The length counts every byte; a NUL inside is part of the string and
    // none is expected at the end.
    let mut value = 3u64.to_le_bytes().to_vec();
    value.extend_from_slice(b"a\0b");
    let bytes = Raw::default()
        .kv(b"s.x", 8, &value)
        .kv(b"s.y", 0, &[1])
        .head();
    let g = parse(&bytes).unwrap();
    assert_eq!(g.get_str("s.x").unwrap(), "a\0b");
    assert_eq!(g.get("s.y"), Some(&Value::U8(1)));
}

#[test]
fn spec_array_length_counts_elements_not_bytes() {
    let mut value = 2u32.to_le_bytes().to_vec(); // u16 elements
    value.extend_from_slice(&3u64.to_le_bytes());
    value.extend_from_slice(&[1, 0, 2, 0, 3, 0]);
    let bytes = Raw::default()
        .kv(b"a.x", 9, &value)
        .kv(b"a.y", 0, &[9])
        .head();
    let g = parse(&bytes).unwrap();
    assert_eq!(g.get("a.x"), Some(&Value::Array(Array::U16(vec![1, 2, 3]))));
    assert_eq!(g.get("a.y"), Some(&Value::U8(9)));
}

#[test]
fn spec_arrays_nest() {
    // An array of two arrays, of u8 and of strings: "any value type is
    // valid, including arrays".
    let mut value = 9u32.to_le_bytes().to_vec();
    value.extend_from_slice(&2u64.to_le_bytes());
    value.extend_from_slice(&0u32.to_le_bytes());
    value.extend_from_slice(&1u64.to_le_bytes());
    value.push(5);
    value.extend_from_slice(&8u32.to_le_bytes());
    value.extend_from_slice(&1u64.to_le_bytes());
    string(&mut value, b"z");
    let bytes = Raw::default().kv(b"n.x", 9, &value).head();
    let g = parse(&bytes).unwrap();
    assert_eq!(
        g.get("n.x"),
        Some(&Value::Array(Array::Array(vec![
            Array::U8(vec![5]),
            Array::String(vec!["z".into()])
        ])))
    );
}

fn key_err(key: &[u8]) -> GgufError {
    let bytes = Raw::default().kv(key, 0, &[1]).head();
    parse(&bytes).map(|_| ()).unwrap_err()
}

#[test]
fn spec_key_must_be_ascii() {
    let err = key_err("général.name".as_bytes());
    assert!(
        matches!(&err, GgufError::InvalidKey { offset: 24, reason, .. } if reason.contains("ASCII")),
        "{err}"
    );
}

#[test]
fn spec_key_segments_are_lower_snake_case() {
    for key in [
        &b"General.name"[..],
        b"general name",
        b"general..name",
        b".general",
        b"general.",
        b"",
        b"a/b",
        b"a.b\0",
    ] {
        let err = key_err(key);
        assert!(
            matches!(err, GgufError::InvalidKey { offset: 24, .. }),
            "{:?}: {err}",
            String::from_utf8_lossy(key)
        );
    }
    // Lower-case letters, digits and `_`, one segment or several.
    for key in [
        "general.architecture",
        "general.base_model.0.name",
        "tokenizer.ggml.bos_token_id",
        "x",
    ] {
        let bytes = Raw::default().kv(key.as_bytes(), 0, &[1]).head();
        assert!(parse(&bytes).is_ok(), "{key}");
    }
}

#[test]
fn key_may_hold_hyphens_as_llama_cpp_architecture_names_do() {
    // Beyond the specification: llama.cpp names architectures `gpt-oss`,
    // `command-r`, ... and prefixes their keys with the name.
    let bytes = Raw::default()
        .kv(b"gpt-oss.block_count", 4, &u32_bytes(24))
        .head();
    assert_eq!(
        parse(&bytes)
            .unwrap()
            .get_u32("gpt-oss.block_count")
            .unwrap(),
        24
    );
}

#[test]
fn spec_key_at_most_65535_bytes() {
    let longest = vec![b'k'; MAX_KEY_LEN];
    assert_eq!(MAX_KEY_LEN, 65_535);
    let bytes = Raw::default().kv(&longest, 0, &[1]).head();
    assert!(parse(&bytes).is_ok());
    let err = key_err(&vec![b'k'; MAX_KEY_LEN + 1]);
    assert!(
        matches!(&err, GgufError::InvalidKey { reason, .. } if reason.contains("65535")),
        "{err}"
    );
    // The writer refuses what the reader would.
    assert!(Writer::new()
        .add_u8(
            std::str::from_utf8(&vec![b'k'; MAX_KEY_LEN + 1]).unwrap(),
            1
        )
        .is_err());
    assert!(Writer::new().add_u8("Upper.case", 1).is_err());
}

#[test]
fn spec_default_alignment_is_32() {
    assert_eq!(DEFAULT_ALIGNMENT, 32);
    let raw = Raw::default().tensor(b"t", &[1], 24, 0); // one I8
    let bytes = raw.with_data(32, &[7]);
    let g = parse(&bytes).unwrap();
    assert_eq!(g.alignment(), 32);
    assert_eq!(
        g.header().data_offset(),
        raw.head().len().next_multiple_of(32) as u64
    );
    assert_eq!(g.tensor_bytes("t").unwrap(), &[7]);
}

#[test]
fn spec_alignment_is_a_multiple_of_8() {
    for (alignment, ok) in [
        (8u32, true),
        (64, true),
        (4, false),
        (1, false),
        (12, false),
    ] {
        let raw = Raw::default()
            .kv(b"general.alignment", 4, &u32_bytes(alignment))
            .tensor(b"t", &[1], 24, 0);
        let bytes = raw.with_data(alignment.max(1) as usize, &[7]);
        let got = parse(&bytes).map(|g| g.alignment());
        if ok {
            assert_eq!(got.unwrap(), u64::from(alignment));
        } else {
            assert!(
                matches!(got, Err(GgufError::BadAlignment { value }) if value == alignment),
                "{alignment}"
            );
            assert!(Writer::new().alignment(alignment).is_err(), "{alignment}");
        }
    }
}

#[test]
fn spec_tensor_name_at_most_64_bytes() {
    assert_eq!(MAX_TENSOR_NAME_LEN, 64);
    let name = vec![b'n'; 64];
    let raw = Raw::default().tensor(&name, &[1], 24, 0);
    let bytes = raw.with_data(32, &[1]);
    assert!(parse(&bytes).is_ok());
    let name = vec![b'n'; 65];
    let raw = Raw::default().tensor(&name, &[1], 24, 0);
    let bytes = raw.with_data(32, &[1]);
    let err = parse(&bytes).map(|_| ()).unwrap_err();
    assert!(
        matches!(
            &err,
            GgufError::TensorNameTooLong {
                offset: 24,
                len: 65,
                ..
            }
        ),
        "{err}"
    );
    let name = String::from_utf8(name).unwrap();
    assert!(Writer::new()
        .add_tensor(&name, GgmlType::I8, &[1], &[1u8][..])
        .is_err());
}

#[test]
fn spec_offsets_are_relative_to_the_data_section() {
    // Two I8 tensors: `b` first in the data section, `a` one alignment
    // step later.
    let raw = Raw::default()
        .tensor(b"a", &[2], 24, 32)
        .tensor(b"b", &[2], 24, 0);
    let mut data = vec![0u8; 34];
    data[..2].copy_from_slice(&[1, 2]);
    data[32..].copy_from_slice(&[3, 4]);
    let bytes = raw.with_data(32, &data);
    let g = parse(&bytes).unwrap();
    let start = raw.head().len().next_multiple_of(32);
    assert_eq!(g.header().data_offset(), start as u64);
    assert_eq!(g.tensor_bytes("b").unwrap(), &[1, 2]);
    assert_eq!(g.tensor_bytes("a").unwrap(), &[3, 4]);
}

#[test]
fn tensors_may_leave_gaps_and_come_in_any_order() {
    // The specification asks for aligned offsets and data inside the data
    // section; llama.cpp also wants each offset to be exactly the padded end
    // of the previous tensor. This reader follows the specification.
    let raw = Raw::default()
        .tensor(b"late", &[1], 24, 96)
        .tensor(b"early", &[1], 24, 0);
    let mut data = vec![0u8; 97];
    data[0] = 1;
    data[96] = 2;
    let bytes = raw.with_data(32, &data);
    let g = parse(&bytes).unwrap();
    assert_eq!(g.tensor_bytes("early").unwrap(), &[1]);
    assert_eq!(g.tensor_bytes("late").unwrap(), &[2]);
}

#[test]
fn spec_padding_before_the_data_section_is_zeros() {
    let raw = Raw::default().tensor(b"t", &[1], 24, 0);
    let head = raw.head().len();
    assert_ne!(head % 32, 0, "the test needs some padding");
    let mut bytes = raw.with_data(32, &[5]);
    assert!(parse(&bytes).is_ok());
    bytes[head] = 0xaa;
    let err = parse(&bytes).map(|_| ()).unwrap_err();
    assert!(
        matches!(err, GgufError::NonZeroPadding { offset, value: 0xaa } if offset == head as u64),
        "{err}"
    );
}

#[test]
fn padding_between_tensors_is_not_read() {
    // Only tensor bytes are ever handed out; the bytes between tensors are
    // not checked (that would read the whole data section at open).
    let raw = Raw::default()
        .tensor(b"a", &[1], 24, 0)
        .tensor(b"b", &[1], 24, 32);
    let mut data = vec![0xee_u8; 33];
    data[0] = 1;
    data[32] = 2;
    let bytes = raw.with_data(32, &data);
    let g = parse(&bytes).unwrap();
    assert_eq!(g.tensor_bytes("a").unwrap(), &[1]);
    assert_eq!(g.tensor_bytes("b").unwrap(), &[2]);
}

#[test]
fn spec_file_without_tensors_needs_no_data_section() {
    let bytes = Raw::default().kv(b"k.v", 7, &[0]).head();
    assert_ne!(bytes.len() % 32, 0);
    let g = parse(&bytes).unwrap();
    assert!(g.tensors().is_empty());
    assert!(!g.get_bool("k.v").unwrap());
}

#[test]
fn bytes_after_the_last_tensor_are_accepted() {
    // The specification says nothing of what follows the data; writers pad
    // the last tensor too, and some files carry more.
    let raw = Raw::default().tensor(b"t", &[1], 24, 0);
    let mut data = vec![9u8];
    data.extend_from_slice(&[0xcc; 100]);
    let bytes = raw.with_data(32, &data);
    assert_eq!(parse(&bytes).unwrap().tensor_bytes("t").unwrap(), &[9]);
}

#[test]
fn spec_type_ids_match_the_ggml_type_enum() {
    // The specification's enum, with the retired ids left out.
    let spec = [
        (0, "f32"),
        (1, "f16"),
        (2, "q4_0"),
        (3, "q4_1"),
        (6, "q5_0"),
        (7, "q5_1"),
        (8, "q8_0"),
        (9, "q8_1"),
        (10, "q2_K"),
        (11, "q3_K"),
        (12, "q4_K"),
        (13, "q5_K"),
        (14, "q6_K"),
        (15, "q8_K"),
        (16, "iq2_xxs"),
        (17, "iq2_xs"),
        (18, "iq3_xxs"),
        (19, "iq1_s"),
        (20, "iq4_nl"),
        (21, "iq3_s"),
        (22, "iq2_s"),
        (23, "iq4_xs"),
        (24, "i8"),
        (25, "i16"),
        (26, "i32"),
        (27, "i64"),
        (28, "f64"),
        (29, "iq1_m"),
        (30, "bf16"),
        (34, "tq1_0"),
        (35, "tq2_0"),
        (39, "mxfp4"),
    ];
    for (id, name) in spec {
        let t = GgmlType::from_id(id).unwrap_or_else(|| panic!("id {id}"));
        assert_eq!(t.name(), name);
    }
    for id in [4, 5, 31, 32, 33, 36, 37, 38] {
        assert_eq!(GgmlType::from_id(id), None, "retired id {id}");
    }
}
