//! Replays every file in `tests/gguf_regressions/`: inputs that once
//! crashed a fuzz target or that model a known attack on GGUF loaders.
//!
//! A file named `*.ok.gguf` must parse, `*.err.gguf` must be refused; in
//! both cases nothing may panic, and a file that parses must pass the GGUF
//! fuzz targets' own check (`tests/support/gguf_harness.rs`): every key and
//! tensor view readable, and the file written back parsing to the same
//! keys, values and tensors. To add a finding, copy the fuzzer's artifact
//! here under a descriptive name with the expected outcome.

use std::path::PathBuf;

use inferno_cpu::gguf::{GgmlType, Writer};

// The fuzz targets' checks (fuzz/src/lib.rs includes the same file).
#[path = "support/gguf_harness.rs"]
mod harness;

use harness::{check, with_aligned};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/gguf_regressions")
}

#[test]
fn every_regression_file_gives_its_expected_outcome() {
    let mut count = 0;
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let expect_ok = if name.ends_with(".ok.gguf") {
            true
        } else if name.ends_with(".err.gguf") {
            false
        } else {
            continue;
        };
        let bytes = std::fs::read(&path).unwrap();
        // At an 8-aligned address, as a memory map holds a file: every key
        // and tensor view readable, and a rewrite gives the same file.
        let parsed = with_aligned(&bytes, check);
        assert_eq!(parsed, expect_ok, "{name}: parsed = {parsed}");
        // Unaligned too: byte and Q8_0 views must not care.
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&bytes);
        assert_eq!(check(&shifted[1..]), expect_ok, "{name} (shifted)");
        count += 1;
    }
    assert!(count >= 3, "only {count} regression files found");
}

/// Writes the hand-made attack files of the directory (run with
/// `--ignored` after changing them); the replay test above checks them.
#[test]
#[ignore = "regenerates tests/gguf_regressions/attack-*.gguf"]
fn write_attack_files() {
    let empty = Writer::new().to_bytes().unwrap();
    let mut huge_tensors = empty.clone();
    huge_tensors[8..16].copy_from_slice(&(1u64 << 60).to_le_bytes());
    huge_tensors.resize(4096, 0);
    let mut huge_kv = empty.clone();
    huge_kv[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    huge_kv.resize(4096, 0xff);

    // A tensor whose offset makes start + size wrap around u64.
    let mut w = Writer::new();
    w.add_tensor_f32("wrap", &[8], &[0.0; 8]).unwrap();
    let mut wrap = w.to_bytes().unwrap();
    let at = wrap.windows(4).position(|x| x == b"wrap").unwrap() + 4 + 4 + 8 + 4;
    wrap[at..at + 8].copy_from_slice(&(u64::MAX - 31).to_le_bytes());

    // dims whose product wraps to a small number (2^32 * 2^32 = 2^64 = 0).
    let mut w = Writer::new();
    w.add_tensor("mul", GgmlType::I8, &[1, 1], &[0u8][..])
        .unwrap();
    let mut mul = w.to_bytes().unwrap();
    let at = mul.windows(3).position(|x| x == b"mul").unwrap() + 3 + 4;
    mul[at..at + 8].copy_from_slice(&(1u64 << 32).to_le_bytes());
    mul[at + 8..at + 16].copy_from_slice(&(1u64 << 32).to_le_bytes());

    let files = [
        ("attack-2p60-tensors.err.gguf", huge_tensors),
        ("attack-max-keys.err.gguf", huge_kv),
        ("attack-offset-wraps.err.gguf", wrap),
        ("attack-dims-product-wraps.err.gguf", mul),
    ];
    for (name, bytes) in files {
        std::fs::write(dir().join(name), bytes).unwrap();
    }
}
