//! Write then read gives back every key, value and tensor byte.

use half::f16;
use inferno_cpu::gguf::{Array, GgmlType, Gguf, GgufFile, Value, WriteError, Writer};
use inferno_cpu::BlockQ8_0;
use proptest::prelude::*;

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u8>().prop_map(Value::U8),
        any::<i8>().prop_map(Value::I8),
        any::<u16>().prop_map(Value::U16),
        any::<i16>().prop_map(Value::I16),
        any::<u32>().prop_map(Value::U32),
        any::<i32>().prop_map(Value::I32),
        any::<f32>()
            .prop_filter("NaN != NaN", |x| !x.is_nan())
            .prop_map(Value::F32),
        any::<bool>().prop_map(Value::Bool),
        ".{0,12}".prop_map(Value::String),
        any::<u64>().prop_map(Value::U64),
        any::<i64>().prop_map(Value::I64),
        any::<f64>()
            .prop_filter("NaN != NaN", |x| !x.is_nan())
            .prop_map(Value::F64),
    ]
}

fn array() -> impl Strategy<Value = Array> {
    let leaf = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..6).prop_map(Array::U8),
        prop::collection::vec(any::<i16>(), 0..6).prop_map(Array::I16),
        prop::collection::vec(any::<bool>(), 0..6).prop_map(Array::Bool),
        prop::collection::vec(".{0,5}", 0..6).prop_map(Array::String),
        prop::collection::vec(any::<u64>(), 0..6).prop_map(Array::U64),
        prop::collection::vec(-1.0e6f32..1.0e6, 0..6).prop_map(Array::F32),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(Array::Array)
    })
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![3 => scalar(), 1 => array().prop_map(Value::Array)]
}

/// A tensor: type, dims, and bytes of the right length.
fn tensor() -> impl Strategy<Value = (GgmlType, Vec<u64>, Vec<u8>)> {
    (
        prop::sample::select(GgmlType::ALL.to_vec()),
        prop::collection::vec(1u64..4, 1..=4),
        any::<u8>(),
    )
        .prop_map(|(t, mut dims, salt)| {
            dims[0] *= t.block_size();
            let n: u64 = dims.iter().product();
            let len = t.bytes_for(n).unwrap();
            let bytes = (0..len)
                .map(|i| (i as u8).wrapping_mul(13) ^ salt)
                .collect();
            (t, dims, bytes)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn write_then_read_is_identity(
        kvs in prop::collection::vec(value(), 0..8),
        tensors in prop::collection::vec(tensor(), 0..5),
        shift in prop::option::of(3u32..12),
        v2 in any::<bool>(),
    ) {
        let mut w = Writer::new();
        if v2 { w.version(2); }
        if let Some(s) = shift { w.alignment(1 << s).unwrap(); }
        for (i, v) in kvs.iter().enumerate() {
            w.add(&format!("key.{i}"), v.clone()).unwrap();
        }
        for (i, (t, dims, bytes)) in tensors.iter().enumerate() {
            w.add_tensor(&format!("t.{i}"), *t, dims, bytes.as_slice()).unwrap();
        }
        let file = w.to_bytes().unwrap();
        let g = Gguf::parse(&file).unwrap();
        prop_assert_eq!(g.version(), if v2 { 2 } else { 3 });
        prop_assert_eq!(g.alignment(), shift.map_or(32, |s| 1u64 << s));
        prop_assert_eq!(g.header().data_offset() % g.alignment(), 0);
        let expected_keys = kvs.len() + usize::from(shift.is_some());
        prop_assert_eq!(g.metadata().len(), expected_keys);
        for (i, v) in kvs.iter().enumerate() {
            prop_assert_eq!(g.get(&format!("key.{i}")), Some(v));
        }
        prop_assert_eq!(g.tensors().len(), tensors.len());
        for (i, (t, dims, bytes)) in tensors.iter().enumerate() {
            let name = format!("t.{i}");
            let info = g.tensor(&name).unwrap();
            prop_assert_eq!(info.ggml_type, *t);
            prop_assert_eq!(&info.dims, dims);
            prop_assert_eq!(info.offset % g.alignment(), 0);
            prop_assert_eq!(g.tensor_bytes(&name).unwrap(), bytes.as_slice());
        }
        // Rewriting the parsed file reproduces it byte for byte.
        let again = Writer::from_gguf(&g).unwrap().to_bytes().unwrap();
        prop_assert_eq!(again, file);
    }
}

#[test]
fn typed_views_round_trip_through_a_file() {
    let blocks: Vec<BlockQ8_0> = (0..6)
        .map(|i| BlockQ8_0::new(f16::from_f32(i as f32 * 0.5), [i as i8 - 3; 32]))
        .collect();
    let floats: Vec<f32> = (0..10).map(|i| i as f32 * 1.5).collect();
    let halves: Vec<f16> = (0..6).map(|i| f16::from_f32(i as f32)).collect();
    let mut w = Writer::new();
    w.add_str("general.architecture", "test")
        .unwrap()
        .add_tensor_q8_0("q", &[96, 2], &blocks)
        .unwrap()
        .add_tensor_f32("f", &[5, 2], &floats)
        .unwrap()
        .add_tensor_f16("h", &[6], &halves)
        .unwrap();
    let path = std::env::temp_dir().join(format!("inferno-rt-{}.gguf", std::process::id()));
    let mut file = std::fs::File::create(&path).unwrap();
    let written = w.write_to(&mut file).unwrap();
    drop(file);
    assert_eq!(written, std::fs::metadata(&path).unwrap().len());
    for f in [
        GgufFile::open(&path).unwrap(),
        GgufFile::read(&path).unwrap(),
    ] {
        let g = f.gguf();
        assert_eq!(g.get_str("general.architecture").unwrap(), "test");
        assert_eq!(g.tensor_q8_0("q").unwrap(), &blocks[..]);
        assert_eq!(g.tensor_f32("f").unwrap(), &floats[..]);
        assert_eq!(g.tensor_f16("h").unwrap(), &halves[..]);
    }
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn writer_refuses_what_the_reader_would() {
    let data = [0u8; 8];
    let mut w = Writer::new();
    w.add_u32("a", 1).unwrap();
    assert!(matches!(
        w.add_u8("a", 1),
        Err(WriteError::DuplicateKey { .. })
    ));
    assert!(matches!(
        w.alignment(24),
        Err(WriteError::BadAlignment { value: 24 })
    ));
    assert!(matches!(
        w.add("general.alignment", Value::U64(32)),
        Err(WriteError::BadAlignment { .. })
    ));
    assert!(matches!(
        w.add_tensor("t", GgmlType::I8, &[], &data[..]),
        Err(WriteError::BadShape { .. })
    ));
    assert!(matches!(
        w.add_tensor("t", GgmlType::I8, &[1, 1, 1, 1, 8], &data[..]),
        Err(WriteError::BadShape { .. })
    ));
    assert!(matches!(
        w.add_tensor("t", GgmlType::I8, &[8, 0], &data[..]),
        Err(WriteError::BadShape { .. })
    ));
    assert!(matches!(
        w.add_tensor("t", GgmlType::Q8_0, &[8], &data[..]),
        Err(WriteError::BadSize { .. })
    ));
    assert!(matches!(
        w.add_tensor("t", GgmlType::I8, &[7], &data[..]),
        Err(WriteError::DataLength {
            expected: 7,
            found: 8,
            ..
        })
    ));
    w.add_tensor("t", GgmlType::I8, &[8], &data[..]).unwrap();
    assert!(matches!(
        w.add_tensor("t", GgmlType::I8, &[8], &data[..]),
        Err(WriteError::DuplicateTensor { .. })
    ));
    let mut deep = Array::U8(vec![]);
    for _ in 0..inferno_cpu::gguf::MAX_ARRAY_DEPTH {
        deep = Array::Array(vec![deep]);
    }
    assert!(matches!(
        w.add_array("deep", deep),
        Err(WriteError::NestingTooDeep { .. })
    ));
    // Refused additions left no trace.
    let g_bytes = w.to_bytes().unwrap();
    let g = Gguf::parse(&g_bytes).unwrap();
    assert_eq!(g.metadata().len(), 1);
    assert_eq!(g.tensors().len(), 1);
}
