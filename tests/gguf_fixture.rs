//! The reader against a file written by the reference Python `gguf` package
//! (`tests/fixtures/qwen3-tiny-s7.gguf`, committed with the crate). A missing
//! fixture is a failure, not a skip: these tests are the only check of the
//! reader against bytes this crate did not write.

use std::path::PathBuf;

use inferno_cpu::gguf::{GgmlType, Gguf, GgufFile};

fn fixture() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen3-tiny-s7.gguf");
    assert!(
        path.is_file(),
        "fixture {} is missing (it is part of the repository)",
        path.display()
    );
    path
}

fn check_known_facts(gguf: &Gguf<'_>) {
    assert_eq!(gguf.version(), 3);
    assert_eq!(gguf.alignment(), 32);
    assert_eq!(gguf.metadata().len(), 26);
    assert_eq!(gguf.get_str("general.architecture").unwrap(), "qwen3");
    assert_eq!(gguf.get_u32("qwen3.block_count").unwrap(), 2);
    assert_eq!(gguf.get_u32("qwen3.embedding_length").unwrap(), 128);
    assert_eq!(gguf.get_u32("qwen3.feed_forward_length").unwrap(), 384);
    assert_eq!(gguf.get_u32("qwen3.attention.head_count").unwrap(), 4);
    assert_eq!(gguf.get_u32("qwen3.attention.head_count_kv").unwrap(), 2);
    assert_eq!(gguf.get_f32("qwen3.rope.freq_base").unwrap(), 1.0e6);
    assert_eq!(
        gguf.get_f32("qwen3.attention.layer_norm_rms_epsilon")
            .unwrap(),
        1.0e-6
    );
    assert!(!gguf.get_bool("tokenizer.ggml.add_bos_token").unwrap());
    let tokens = gguf.get_str_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!(tokens.len(), 512);
    assert_eq!(&tokens[..3], ["!", "\"", "#"]);
    assert_eq!(
        gguf.get_i32_array("tokenizer.ggml.token_type")
            .unwrap()
            .len(),
        512
    );
    assert_eq!(
        gguf.get_str_array("tokenizer.ggml.merges").unwrap().len(),
        224
    );

    assert_eq!(gguf.tensors().len(), 24);
    let q8 = gguf
        .tensors()
        .iter()
        .filter(|t| t.ggml_type == GgmlType::Q8_0)
        .count();
    let f32s = gguf
        .tensors()
        .iter()
        .filter(|t| t.ggml_type == GgmlType::F32)
        .count();
    assert_eq!((q8, f32s), (15, 9));

    let embd = gguf.tensor("token_embd.weight").unwrap();
    assert_eq!(embd.dims, [128, 512]);
    assert_eq!(embd.offset, 0);
    assert_eq!(
        gguf.tensor_q8_0("token_embd.weight").unwrap().len(),
        128 * 512 / 32
    );
    let down = gguf.tensor("blk.1.ffn_down.weight").unwrap();
    assert_eq!(down.dims, [384, 128]);
    assert_eq!(down.n_bytes, 384 * 128 / 32 * 34);

    // Norm weights are F32 near 1.
    let norm = gguf.tensor_f32("output_norm.weight").unwrap();
    assert_eq!(norm.len(), 128);
    assert!(norm.iter().all(|&x| (0.7..1.3).contains(&x)), "{norm:?}");
    // Last tensor ends exactly at the end of the file.
    let last = gguf.tensor("output_norm.weight").unwrap();
    assert_eq!(
        gguf.header().data_offset() + last.offset + last.n_bytes,
        gguf.bytes().len() as u64
    );
}

#[test]
fn fixture_parses_from_slice_map_and_read() {
    let path = fixture();
    let bytes = std::fs::read(&path).unwrap();
    // A `Vec<u8>` may not be 4-byte aligned; check the facts that do not
    // need an f32 view on it through the owning types below.
    let from_slice = Gguf::parse(&bytes).unwrap();
    assert_eq!(from_slice.tensors().len(), 24);

    let mapped = GgufFile::open(&path).unwrap();
    assert!(mapped.is_mapped());
    check_known_facts(&mapped.gguf());

    let read = GgufFile::read(&path).unwrap();
    assert!(!read.is_mapped());
    check_known_facts(&read.gguf());
    assert_eq!(read.gguf().bytes(), &bytes[..]);
}

#[test]
fn writer_reproduces_the_reference_file_byte_for_byte() {
    // The reference writer and ours agree on every byte of layout: header,
    // metadata encoding, tensor offsets, and padding.
    let path = fixture();
    let file = GgufFile::read(&path).unwrap();
    let rewritten = inferno_cpu::gguf::Writer::from_gguf(&file.gguf())
        .unwrap()
        .to_bytes()
        .unwrap();
    assert_eq!(rewritten.len(), file.gguf().bytes().len());
    assert!(rewritten == file.gguf().bytes(), "bytes differ");
}
