//! The Q4_0 and K-quant formats against the fixtures in
//! `tests/fixtures/kquants/` (see `make_kquant_cases.py` there):
//!
//! * dequantization against the `gguf` package's `dequantize` (itself
//!   checked against GGML's `dequantize_row_*` when the fixtures were
//!   made), bit for bit, NaN matching NaN by position, on random and
//!   hostile blocks (NaN, infinite and subnormal scales and mins, extreme
//!   mins, all-0xFF and all-zero bytes);
//! * the reference quantizers against the bytes GGML's
//!   `ggml_quantize_chunk` (no importance matrix) and
//!   `quantize_row_q8_K_ref` wrote for the same rows.

use std::path::PathBuf;

use bytemuck::Pod;
use inferno_cpu::quant::{
    dequantize_row_q4_0_into, dequantize_row_q4_k_into, dequantize_row_q5_k_into,
    dequantize_row_q6_k_into, quantize_row_q4_0, quantize_row_q4_k, quantize_row_q5_k,
    quantize_row_q6_k, quantize_row_q8_k, BlockQ4K, BlockQ4_0, BlockQ5K, BlockQ6K, BlockQ8K,
    QuantError, QK_K,
};

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kquants")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Dequantizes the fixture's blocks (cast from the bytes without copying,
/// at an odd address too) and compares with the expected values bit for
/// bit, NaN matching NaN.
fn check_dequant<B: Pod>(
    name: &str,
    per_block: usize,
    dequant: fn(&[B], &mut [f32]) -> Result<(), QuantError>,
) {
    let raw = fixture(&format!("dequant_{name}.blocks"));
    let want = f32s(&fixture(&format!("dequant_{name}.f32")));
    let size = size_of::<B>();
    assert_eq!(raw.len() % size, 0);
    let nb = raw.len() / size;
    assert_eq!(want.len(), nb * per_block);
    // One byte of offset: the blocks sit at an odd address, as in a file.
    let mut shifted = vec![0u8; raw.len() + 1];
    shifted[1..].copy_from_slice(&raw);
    let blocks: &[B] = bytemuck::try_cast_slice(&shifted[1..]).expect("alignment 1");
    let mut got = vec![0.0f32; nb * per_block];
    dequant(blocks, &mut got).unwrap();
    let mut bad = 0;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let same = if w.is_nan() {
            g.is_nan()
        } else {
            g.to_bits() == w.to_bits()
        };
        if !same {
            if bad < 5 {
                eprintln!(
                    "{name} value {i} (block {}): got {g:e}, want {w:e}",
                    i / per_block
                );
            }
            bad += 1;
        }
    }
    assert_eq!(bad, 0, "{name}: {bad} of {} values differ", want.len());
    // Non-finite values really are exercised.
    assert!(want.iter().any(|v| v.is_nan()), "{name}: no NaN case");
    assert!(want.iter().any(|v| v.is_infinite()), "{name}: no inf case");
}

#[test]
fn dequantize_q4_0_matches_gguf() {
    check_dequant::<BlockQ4_0>("q4_0", 32, dequantize_row_q4_0_into);
}

#[test]
fn dequantize_q4_k_matches_gguf() {
    check_dequant::<BlockQ4K>("q4_k", QK_K, dequantize_row_q4_k_into);
}

#[test]
fn dequantize_q5_k_matches_gguf() {
    check_dequant::<BlockQ5K>("q5_k", QK_K, dequantize_row_q5_k_into);
}

#[test]
fn dequantize_q6_k_matches_gguf() {
    check_dequant::<BlockQ6K>("q6_k", QK_K, dequantize_row_q6_k_into);
}

/// The fixture rows: bfloat16 values widened exactly to f32.
fn quant_rows() -> Vec<f32> {
    fixture("quant_rows.bf16")
        .chunks_exact(2)
        .map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16))
        .collect()
}

/// Quantizes every fixture row and compares each block's bytes with
/// GGML's; reports the differing blocks.
fn check_quant<B: Pod>(name: &str, quant: fn(&[f32]) -> Result<Vec<B>, QuantError>) {
    let rows = quant_rows();
    assert_eq!(rows.len() % QK_K, 0);
    let n_rows = rows.len() / QK_K;
    assert!(n_rows >= 20, "{name}: only {n_rows} rows");
    let want = fixture(&format!("quant_{name}.blocks"));
    let size = size_of::<B>();
    let blocks_per_row = want.len() / size / n_rows;
    assert_eq!(want.len(), n_rows * blocks_per_row * size);
    let mut bad = Vec::new();
    for (r, row) in rows.chunks_exact(QK_K).enumerate() {
        let got = quant(row).unwrap();
        assert_eq!(got.len(), blocks_per_row);
        let got: &[u8] = bytemuck::cast_slice(&got);
        let want = &want[r * blocks_per_row * size..][..blocks_per_row * size];
        for (b, (g, w)) in got.chunks(size).zip(want.chunks(size)).enumerate() {
            if g != w {
                bad.push((r, b));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{name}: {} of {} blocks differ from GGML's (row, block): {bad:?}",
        bad.len(),
        n_rows * blocks_per_row
    );
}

#[test]
fn quantize_q4_0_matches_ggml() {
    check_quant::<BlockQ4_0>("q4_0", quantize_row_q4_0);
}

#[test]
fn quantize_q4_k_matches_ggml() {
    check_quant::<BlockQ4K>("q4_k", quantize_row_q4_k);
}

#[test]
fn quantize_q5_k_matches_ggml() {
    check_quant::<BlockQ5K>("q5_k", quantize_row_q5_k);
}

#[test]
fn quantize_q6_k_matches_ggml() {
    check_quant::<BlockQ6K>("q6_k", quantize_row_q6_k);
}

#[test]
fn quantize_q8_k_matches_ggml() {
    check_quant::<BlockQ8K>("q8_k", quantize_row_q8_k);
}
