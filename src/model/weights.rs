//! Weight views of a Qwen3 GGUF file.
//!
//! The 2-D projections are zero-copy [`Weight`] views of the file's bytes
//! (a memory map, normally), each in its stored type: Q8_0, Q4_0, Q4_K,
//! Q5_K or Q6_K, mixed freely (a Q4_K_M file holds Q4_K and Q6_K
//! matrices side by side). Norm weights are small and are copied to `f32`
//! at load time, whatever their stored type, so the forward pass has one
//! code path. The token embedding is read one row per token in its stored
//! type; the output projection must be a matrix product, so a float one
//! (an F16 embedding reused as the tied output, say) is quantized to Q8_0
//! once at load time.

use half::{bf16, f16};

use crate::gguf::{GgmlType, Gguf, TensorInfo};
use crate::matvec::{BlockMatrix, Q8Matrix, Weight};
use crate::quant::{
    dequantize_row_q4_0_into, dequantize_row_q4_k_into, dequantize_row_q5_k_into,
    dequantize_row_q6_k_into, dequantize_row_q8_0_into, quantize_row_q8_0, BlockQ8_0, WeightBlock,
};

use super::layout::{Role, Shape, TensorSpec};
use super::{ModelError, Qwen3Config};

/// Types accepted for norm weights and the token embedding.
const FLOAT_TYPES: &str = "F32, F16, BF16";
/// Types accepted for the projections.
const PROJ_TYPES: &str = "Q8_0, Q4_0, Q4_K, Q5_K, Q6_K";
/// Types accepted for the token embedding and the output projection.
const EMBD_TYPES: &str = "Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, F32, F16, BF16";

/// The token embedding table, in its stored type.
#[derive(Clone, Copy, Debug)]
pub enum Embedding<'a> {
    /// Quantized rows (Q8_0 in llama.cpp's Q8_0 files, Q6_K in its
    /// Q4_K_M ones), dequantized one row per token.
    Quantized(Weight<'a>),
    /// `f32` rows.
    F32(&'a [f32]),
    /// IEEE half rows.
    F16(&'a [f16]),
    /// bfloat16 rows.
    Bf16(&'a [bf16]),
}

impl Embedding<'_> {
    /// Writes the embedding of token `id` (a row of `out.len()` values)
    /// into `out`. The caller checks `id` against the vocabulary and
    /// `out.len()` against the width.
    pub(crate) fn row_into(&self, id: usize, out: &mut [f32]) -> Result<(), ModelError> {
        let n = out.len();
        let range = id * n..(id + 1) * n;
        match self {
            Embedding::Quantized(Weight::Q8_0(m)) => dequantize_row_q8_0_into(m.row(id), out)?,
            Embedding::Quantized(Weight::Q4_0(m)) => dequantize_row_q4_0_into(m.row(id), out)?,
            Embedding::Quantized(Weight::Q4K(m)) => dequantize_row_q4_k_into(m.row(id), out)?,
            Embedding::Quantized(Weight::Q5K(m)) => dequantize_row_q5_k_into(m.row(id), out)?,
            Embedding::Quantized(Weight::Q6K(m)) => dequantize_row_q6_k_into(m.row(id), out)?,
            Embedding::F32(v) => out.copy_from_slice(&v[range]),
            Embedding::F16(v) => {
                for (o, x) in out.iter_mut().zip(&v[range]) {
                    *o = x.to_f32();
                }
            }
            Embedding::Bf16(v) => {
                for (o, x) in out.iter_mut().zip(&v[range]) {
                    *o = x.to_f32();
                }
            }
        }
        Ok(())
    }
}

/// One transformer block's weights.
#[derive(Debug)]
pub struct LayerWeights<'a> {
    /// RMSNorm weight before attention (`attn_norm`), `hidden` values.
    pub attn_norm: Vec<f32>,
    /// Query projection, `q_dim x hidden`.
    pub q: Weight<'a>,
    /// Key projection, `kv_dim x hidden`.
    pub k: Weight<'a>,
    /// Value projection, `kv_dim x hidden`.
    pub v: Weight<'a>,
    /// Attention output projection, `hidden x q_dim`.
    pub o: Weight<'a>,
    /// Per-head RMSNorm weight of the queries (`attn_q_norm`), `head_dim`.
    pub q_norm: Vec<f32>,
    /// Per-head RMSNorm weight of the keys (`attn_k_norm`), `head_dim`.
    pub k_norm: Vec<f32>,
    /// RMSNorm weight before the MLP (`ffn_norm`), `hidden` values.
    pub ffn_norm: Vec<f32>,
    /// MLP gate projection, `ffn x hidden`.
    pub gate: Weight<'a>,
    /// MLP up projection, `ffn x hidden`.
    pub up: Weight<'a>,
    /// MLP down projection, `hidden x ffn`.
    pub down: Weight<'a>,
}

/// The output projection: a view of the file, or a copy quantized at load.
#[derive(Debug)]
enum LmHead<'a> {
    Mapped(Weight<'a>),
    Owned {
        blocks: Vec<BlockQ8_0>,
        rows: usize,
        cols: usize,
    },
}

/// All weights of a Qwen3 model, borrowed from a GGUF file.
#[derive(Debug)]
pub struct Qwen3Weights<'a> {
    /// The token embedding table, `vocab x hidden`.
    pub embedding: Embedding<'a>,
    /// The transformer blocks, in order.
    pub layers: Vec<LayerWeights<'a>>,
    /// Final RMSNorm weight (`output_norm`), `hidden` values.
    pub output_norm: Vec<f32>,
    lm_head: LmHead<'a>,
    /// Whether the output projection is the token embedding (no
    /// `output.weight` in the file).
    pub tied: bool,
}

impl<'a> Qwen3Weights<'a> {
    /// Looks up and checks every tensor `cfg` implies.
    pub(crate) fn load(gguf: &Gguf<'a>, cfg: &Qwen3Config) -> Result<Self, ModelError> {
        let mut layers = Vec::with_capacity(cfg.layers.min(4096));
        for i in 0..cfg.layers {
            let t = |role| cfg.tensor(role, i);
            layers.push(LayerWeights {
                attn_norm: norm(gguf, &t(Role::AttnNorm))?,
                q: proj(gguf, &t(Role::Q))?,
                k: proj(gguf, &t(Role::K))?,
                v: proj(gguf, &t(Role::V))?,
                o: proj(gguf, &t(Role::Output))?,
                q_norm: norm(gguf, &t(Role::QNorm))?,
                k_norm: norm(gguf, &t(Role::KNorm))?,
                ffn_norm: norm(gguf, &t(Role::FfnNorm))?,
                gate: proj(gguf, &t(Role::Gate))?,
                up: proj(gguf, &t(Role::Up))?,
                down: proj(gguf, &t(Role::Down))?,
            });
        }
        let output_norm = norm(gguf, &cfg.tensor(Role::OutputNorm, 0))?;
        let embd = gguf.tensor(&Role::Embedding.name(0))?;
        let embedding = embedding(gguf, embd, cfg)?;
        let (lm_info, tied) = match gguf.tensor(&Role::LmHead.name(0)) {
            Ok(info) => (info, false),
            Err(_) => (embd, true),
        };
        let lm_head = lm_head(gguf, lm_info, cfg)?;
        Ok(Self {
            embedding,
            layers,
            output_norm,
            lm_head,
            tied,
        })
    }

    /// The output projection, `vocab x hidden`.
    pub fn lm_head(&self) -> Weight<'_> {
        match &self.lm_head {
            LmHead::Mapped(m) => *m,
            // Checked when it was built.
            LmHead::Owned { blocks, rows, cols } => {
                Weight::Q8_0(Q8Matrix::from_checked(blocks, *rows, *cols))
            }
        }
    }

    /// Bytes of weights one decode step reads: every projection of every
    /// layer, the output projection and one embedding row.
    pub fn bytes_per_token(&self) -> usize {
        let layers: usize = self
            .layers
            .iter()
            .map(|l| {
                [l.q, l.k, l.v, l.o, l.gate, l.up, l.down]
                    .iter()
                    .map(Weight::bytes)
                    .sum::<usize>()
            })
            .sum();
        let lm = self.lm_head().bytes();
        let row = lm / self.lm_head().rows().max(1);
        layers + lm + row
    }
}

fn shape_error(info: &TensorInfo, expected: Vec<u64>, why: &str) -> ModelError {
    ModelError::TensorShape {
        tensor: info.name.clone(),
        expected,
        found: info.dims.clone(),
        why: why.to_string(),
    }
}

/// The quantized projection `spec` names, of `spec`'s shape, in its
/// stored type.
fn proj<'a>(gguf: &Gguf<'a>, spec: &TensorSpec) -> Result<Weight<'a>, ModelError> {
    let info = gguf.tensor(&spec.name)?;
    let expected = spec.shape.gguf_dims();
    if info.dims != expected {
        return Err(shape_error(info, expected, spec.why));
    }
    let Shape::Matrix { rows, cols } = spec.shape else {
        return Err(shape_error(info, expected, spec.why));
    };
    quantized(gguf, info, rows, cols)?.ok_or_else(|| ModelError::TensorType {
        tensor: info.name.clone(),
        found: info.ggml_type,
        supported: PROJ_TYPES,
    })
}

/// A `rows x cols` view of a quantized tensor, or `None` for a type no
/// product runs on.
fn quantized<'a>(
    gguf: &Gguf<'a>,
    info: &TensorInfo,
    rows: usize,
    cols: usize,
) -> Result<Option<Weight<'a>>, ModelError> {
    fn view<'a, B: WeightBlock>(
        gguf: &Gguf<'a>,
        info: &TensorInfo,
        rows: usize,
        cols: usize,
    ) -> Result<BlockMatrix<'a, B>, ModelError> {
        Ok(BlockMatrix::from_bytes(gguf.data_of(info), rows, cols)?)
    }
    Ok(Some(match info.ggml_type {
        GgmlType::Q8_0 => Weight::Q8_0(view(gguf, info, rows, cols)?),
        GgmlType::Q4_0 => Weight::Q4_0(view(gguf, info, rows, cols)?),
        GgmlType::Q4_K => Weight::Q4K(view(gguf, info, rows, cols)?),
        GgmlType::Q5_K => Weight::Q5K(view(gguf, info, rows, cols)?),
        GgmlType::Q6_K => Weight::Q6K(view(gguf, info, rows, cols)?),
        _ => return Ok(None),
    }))
}

/// The 1-D norm weight `spec` names, converted to `f32`.
fn norm(gguf: &Gguf<'_>, spec: &TensorSpec) -> Result<Vec<f32>, ModelError> {
    let info = gguf.tensor(&spec.name)?;
    let expected = spec.shape.gguf_dims();
    if info.dims != expected {
        return Err(shape_error(info, expected, spec.why));
    }
    let name = &spec.name;
    match info.ggml_type {
        GgmlType::F32 => Ok(gguf.tensor_f32(name)?.to_vec()),
        GgmlType::F16 => Ok(gguf.tensor_f16(name)?.iter().map(|x| x.to_f32()).collect()),
        GgmlType::BF16 => Ok(bf16_view(gguf, info)?.iter().map(|x| x.to_f32()).collect()),
        found => Err(ModelError::TensorType {
            tensor: info.name.clone(),
            found,
            supported: FLOAT_TYPES,
        }),
    }
}

fn bf16_view<'a>(gguf: &Gguf<'a>, info: &TensorInfo) -> Result<&'a [bf16], ModelError> {
    bytemuck::try_cast_slice(gguf.data_of(info)).map_err(|_| {
        ModelError::invalid(
            &info.name,
            "BF16 data is not 2-byte aligned in memory (load the file with GgufFile)",
        )
    })
}

fn check_embd_shape(info: &TensorInfo, cfg: &Qwen3Config) -> Result<(), ModelError> {
    let expected = vec![cfg.hidden as u64, cfg.vocab as u64];
    if info.dims != expected {
        return Err(shape_error(info, expected, "embedding_length x vocabulary"));
    }
    Ok(())
}

fn embedding<'a>(
    gguf: &Gguf<'a>,
    info: &TensorInfo,
    cfg: &Qwen3Config,
) -> Result<Embedding<'a>, ModelError> {
    check_embd_shape(info, cfg)?;
    if let Some(w) = quantized(gguf, info, cfg.vocab, cfg.hidden)? {
        return Ok(Embedding::Quantized(w));
    }
    Ok(match info.ggml_type {
        GgmlType::F32 => Embedding::F32(gguf.tensor_f32(&info.name)?),
        GgmlType::F16 => Embedding::F16(gguf.tensor_f16(&info.name)?),
        GgmlType::BF16 => Embedding::Bf16(bf16_view(gguf, info)?),
        found => {
            return Err(ModelError::TensorType {
                tensor: info.name.clone(),
                found,
                supported: EMBD_TYPES,
            })
        }
    })
}

fn lm_head<'a>(
    gguf: &Gguf<'a>,
    info: &TensorInfo,
    cfg: &Qwen3Config,
) -> Result<LmHead<'a>, ModelError> {
    check_embd_shape(info, cfg)?;
    let (rows, cols) = (cfg.vocab, cfg.hidden);
    if let Some(w) = quantized(gguf, info, rows, cols)? {
        return Ok(LmHead::Mapped(w));
    }
    // A float output projection: quantize it row by row, as GGML does with
    // the activation side of a Q8_0 product, so decode has one product kind.
    let table = embedding(gguf, info, cfg)?;
    let mut row = vec![0.0f32; cols];
    let mut blocks = Vec::with_capacity(rows * cols / 32);
    for r in 0..rows {
        table.row_into(r, &mut row)?;
        blocks.extend(quantize_row_q8_0(&row)?);
    }
    Q8Matrix::new(&blocks, rows, cols)?;
    Ok(LmHead::Owned { blocks, rows, cols })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedding_rows_in_every_float_type() {
        let vals: Vec<f32> = (0..64).map(|i| i as f32 * 0.5).collect();
        let h: Vec<f16> = vals.iter().map(|&x| f16::from_f32(x)).collect();
        let b: Vec<bf16> = vals.iter().map(|&x| bf16::from_f32(x)).collect();
        let blocks = quantize_row_q8_0(&vals).unwrap();
        let q = Q8Matrix::new(&blocks, 2, 32).unwrap();
        for e in [
            Embedding::F32(&vals),
            Embedding::F16(&h),
            Embedding::Bf16(&b),
            Embedding::Quantized(Weight::Q8_0(q)),
        ] {
            let mut out = [0.0f32; 32];
            e.row_into(1, &mut out).unwrap();
            for (i, o) in out.iter().enumerate() {
                assert!((o - vals[32 + i]).abs() < 0.2, "{e:?} {i} {o}");
            }
        }
    }
}
