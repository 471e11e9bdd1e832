//! The model file: metadata, the tensor plan, and each tensor's bytes
//! generated row by row while the file is written.

use std::io::Write;

use rayon::prelude::*;

use super::rng::Rng;
use super::vocab::{vocab, Vocab};
use super::{SynthConfig, SynthError};
use crate::gguf::{Array, GgmlType, TensorStream, Writer};
use crate::model::layout::{keys, Shape};
use crate::quant::{
    quantize_row_q4_0_into, quantize_row_q4_k_into, quantize_row_q5_k_into, quantize_row_q6_k_into,
    quantize_row_q8_0_into, QuantError,
};

/// Standard deviation of the weight matrices: small enough that the
/// residual stream stays near unit scale through the layers.
pub(crate) const WEIGHT_STD: f64 = 0.02;

/// Spread of the norm weights around 1 (`1 + NORM_JITTER * N(0, 1)`):
/// close to the identity so activations stay finite, yet not all equal so a
/// kernel that ignores the norm weights shows it.
pub(crate) const NORM_JITTER: f64 = 0.05;

/// Weights generated and written at a time: about 1 MiB of Q8_0 blocks,
/// so memory stays small whatever the model's size, while each piece is
/// large enough to split across threads.
const CHUNK_WEIGHTS: usize = 1 << 20;

/// The writer for `cfg`: metadata like llama.cpp's Qwen3 files, and every
/// tensor declared, to be streamed.
fn writer(cfg: &SynthConfig, seed: u64, vocab: Vocab) -> Result<Writer<'static>, SynthError> {
    let label = cfg.label();
    let mut w = Writer::new();
    w.add_str(keys::ARCHITECTURE, "qwen3")?
        .add_str("general.type", "model")?
        .add_str(
            "general.name",
            &format!("Qwen3 synthetic {label} seed {seed}"),
        )?
        .add_str("general.size_label", &label)?
        .add_str(
            "general.description",
            &format!(
                "synthetic random weights: seed={seed} std={WEIGHT_STD} \
                 norm_jitter={NORM_JITTER} (inferno synth, format v{})",
                super::FORMAT_VERSION
            ),
        )?;
    cfg.model.write_metadata(&mut w)?;
    w.add_u32("general.file_type", cfg.file_type.code())?
        .add_u32("general.quantization_version", 2)?
        .add_str("tokenizer.ggml.model", "gpt2")?
        .add_str("tokenizer.ggml.pre", "qwen2")?
        .add_array("tokenizer.ggml.tokens", Array::String(vocab.tokens))?
        .add_array("tokenizer.ggml.token_type", Array::I32(vocab.types))?
        .add_array("tokenizer.ggml.merges", Array::String(vocab.merges))?
        .add_u32("tokenizer.ggml.bos_token_id", vocab.bos)?
        .add_u32("tokenizer.ggml.eos_token_id", vocab.eos)?
        .add_u32("tokenizer.ggml.padding_token_id", vocab.pad)?
        .add_bool("tokenizer.ggml.add_bos_token", false)?;
    for t in cfg.model.tensors(cfg.tied) {
        let ty = cfg.file_type.tensor_type(&t, cfg.model.layers);
        w.declare_tensor(&t.name, ty, &t.shape.gguf_dims())?;
    }
    Ok(w)
}

/// The length of the file [`write_model`] writes for `cfg`, without
/// generating any weights.
pub(crate) fn model_len(cfg: &SynthConfig, seed: u64) -> Result<u64, SynthError> {
    cfg.validate()?;
    Ok(writer(cfg, seed, vocab(cfg.model.vocab, seed))?.file_len())
}

/// Writes the synthetic Qwen3 model for `cfg` and `seed` to `out` as a GGUF
/// file, returning its length in bytes; `progress(bytes_written, total)` is
/// called after the header and after each piece of tensor data.
///
/// The weights are generated and quantized about 1 MiB at a time (rows in
/// parallel on rayon's pool) and written as they come, so memory use stays
/// near the size of the vocabulary, not of the model. `out` is written in
/// pieces of that size; a [`std::io::BufWriter`] only helps for the header.
///
/// Every row of every tensor draws from its own seeded stream, so the file
/// is the same, byte for byte, for the same `cfg` and `seed`, on any
/// machine and at any thread count.
///
/// # Errors
///
/// [`SynthError::Config`] for a configuration
/// [`validate`](SynthConfig::validate) refuses (nothing is written then);
/// [`SynthError::Write`] when `out` fails.
pub fn write_model(
    cfg: &SynthConfig,
    seed: u64,
    out: impl Write,
    mut progress: impl FnMut(u64, u64),
) -> Result<u64, SynthError> {
    cfg.validate()?;
    let w = writer(cfg, seed, vocab(cfg.model.vocab, seed))?;
    let mut stream = w.stream_to(out)?;
    let total = stream.total_len();
    progress(stream.bytes_written(), total);
    for (index, t) in cfg.model.tensors(cfg.tied).iter().enumerate() {
        let key = index as u64;
        match t.shape {
            Shape::Matrix { rows, cols } => {
                let ty = cfg.file_type.tensor_type(t, cfg.model.layers);
                write_matrix(&mut stream, seed, key, ty, rows, cols, &mut progress)?
            }
            Shape::Vector(len) => {
                let mut values = vec![0.0f32; len];
                Rng::new(seed, key, 0).fill_normal(&mut values, 1.0, NORM_JITTER);
                let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
                stream.write_data(&bytes)?;
                progress(stream.bytes_written(), total);
            }
        }
    }
    Ok(stream.finish()?)
}

/// Generates, quantizes (to `ty`) and writes one matrix, a chunk of rows
/// at a time; row `r` draws from stream `(seed, key, r)`, so a matrix's
/// values are the same whatever type stores them.
fn write_matrix<W: Write>(
    stream: &mut TensorStream<'_, '_, W>,
    seed: u64,
    key: u64,
    ty: GgmlType,
    rows: usize,
    cols: usize,
    progress: &mut impl FnMut(u64, u64),
) -> Result<(), SynthError> {
    let row_bytes = ty
        .bytes_for(cols as u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(QuantError::RowNotWholeBlocks {
            len: cols,
            block: ty.block_size() as usize,
        })?;
    let chunk_rows = (CHUNK_WEIGHTS / cols).max(1);
    let mut bytes = vec![0u8; chunk_rows.min(rows) * row_bytes];
    let mut first = 0;
    while first < rows {
        let n = chunk_rows.min(rows - first);
        let chunk = &mut bytes[..n * row_bytes];
        chunk
            .par_chunks_mut(row_bytes)
            .enumerate()
            .try_for_each_init(
                || vec![0.0f32; cols],
                |row, (i, out)| {
                    Rng::new(seed, key, (first + i) as u64).fill_normal(row, 0.0, WEIGHT_STD);
                    encode_row(ty, row, out)
                },
            )?;
        stream.write_data(chunk)?;
        progress(stream.bytes_written(), stream.total_len());
        first += n;
    }
    Ok(())
}

/// Stores `row` as `ty` into `out` (exactly one row's bytes), with the
/// crate's reference quantizers (GGML's bytes, no importance matrix).
fn encode_row(ty: GgmlType, row: &[f32], out: &mut [u8]) -> Result<(), QuantError> {
    fn blocks<B: bytemuck::Pod>(out: &mut [u8]) -> &mut [B] {
        // Every block type here has alignment 1, and `out` is one row of
        // whole blocks, so the cast cannot fail.
        bytemuck::cast_slice_mut(out)
    }
    match ty {
        GgmlType::Q8_0 => quantize_row_q8_0_into(row, blocks(out)),
        GgmlType::Q4_0 => quantize_row_q4_0_into(row, blocks(out)),
        GgmlType::Q4_K => quantize_row_q4_k_into(row, blocks(out)),
        GgmlType::Q5_K => quantize_row_q5_k_into(row, blocks(out)),
        GgmlType::Q6_K => quantize_row_q6_k_into(row, blocks(out)),
        GgmlType::F16 => {
            for (o, x) in out.chunks_exact_mut(2).zip(row) {
                o.copy_from_slice(&half::f16::from_f32(*x).to_le_bytes());
            }
            Ok(())
        }
        GgmlType::BF16 => {
            for (o, x) in out.chunks_exact_mut(2).zip(row) {
                o.copy_from_slice(&half::bf16::from_f32(*x).to_le_bytes());
            }
            Ok(())
        }
        // F32, the one other type a `FileType` names.
        _ => {
            for (o, x) in out.chunks_exact_mut(4).zip(row) {
                o.copy_from_slice(&x.to_le_bytes());
            }
            Ok(())
        }
    }
}

/// The whole model file in memory, for tests and small configurations
/// (the 0.6B one is some 640 MB; write it with [`write_model`] or
/// [`write_model_file`](super::write_model_file) instead).
///
/// # Errors
///
/// As [`write_model`].
pub fn model_bytes(cfg: &SynthConfig, seed: u64) -> Result<Vec<u8>, SynthError> {
    let mut out = Vec::new();
    write_model(cfg, seed, &mut out, |_, _| {})?;
    Ok(out)
}
