//! Weight views of a Qwen3 GGUF file.
//!
//! The 2-D projections are zero-copy [`Weight`] views of the file's bytes
//! (a memory map, normally), each in its stored type: Q8_0, Q4_0, Q4_K,
//! Q5_K, Q6_K, F16 or BF16, mixed freely (a Q4_K_M file holds Q4_K and
//! Q6_K matrices side by side; an unquantized upload is all F16 or BF16).
//! Norm weights are small and are copied to `f32` at load time, whatever
//! their stored type, so the forward pass has one code path. The token
//! embedding is read one row per token in its stored type. The output
//! projection (or the embedding reused as the tied output) is a view too,
//! in any of the projection types; an F32 one, which no product runs on,
//! is quantized to Q8_0 once at load time.

use half::{bf16, f16};

use crate::gguf::{GgmlType, Gguf, TensorInfo, TensorLayout};
use crate::matvec::{
    BlockMatrix, PackedQ4KMatrix, PackedQ4_0Matrix, PackedQ5KMatrix, Q8Matrix, Weight,
};
use crate::quant::{
    dequantize_row_q4_0_into, dequantize_row_q4_k_into, dequantize_row_q5_k_into,
    dequantize_row_q6_k_into, dequantize_row_q8_0_into, quantize_row_q8_0, BlockQ8_0, WeightBlock,
};

use super::layout::{Role, Shape, TensorSpec};
use super::{ModelError, Qwen3Config};

/// Types accepted for norm weights and the token embedding.
const FLOAT_TYPES: &str = "F32, F16, BF16";
/// Types accepted for the projections.
const PROJ_TYPES: &str = "Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, F16, BF16";
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
            Embedding::Quantized(Weight::Q4_0Packed(m)) => {
                packed_row_into(m, id, out, dequantize_row_q4_0_into)?
            }
            Embedding::Quantized(Weight::Q4K(m)) => dequantize_row_q4_k_into(m.row(id), out)?,
            Embedding::Quantized(Weight::Q4KPacked(m)) => {
                packed_row_into(m, id, out, dequantize_row_q4_k_into)?
            }
            Embedding::Quantized(Weight::Q5K(m)) => dequantize_row_q5_k_into(m.row(id), out)?,
            Embedding::Quantized(Weight::Q5KPacked(m)) => {
                packed_row_into(m, id, out, dequantize_row_q5_k_into)?
            }
            Embedding::Quantized(Weight::Q6K(m)) => dequantize_row_q6_k_into(m.row(id), out)?,
            Embedding::Quantized(Weight::F16(m)) => widen_into(m.row(id), out, f16::to_f32)?,
            Embedding::Quantized(Weight::Bf16(m)) => widen_into(m.row(id), out, bf16::to_f32)?,
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

    /// Bytes of one row of `hidden` values in the stored type (what a
    /// decode step reads of the table).
    fn row_bytes(&self, hidden: usize) -> usize {
        match self {
            Embedding::Quantized(w) => w.bytes() / w.rows().max(1),
            Embedding::F32(_) => 4 * hidden,
            Embedding::F16(_) | Embedding::Bf16(_) => 2 * hidden,
        }
    }
}

/// Row `id` of a packed matrix, dequantized block by block (its blocks
/// lie eight rows together) with `dequantize`, the row type's own.
fn packed_row_into<P: crate::quant::PackedBlock>(
    m: &crate::matvec::PackedMatrix<'_, P>,
    id: usize,
    out: &mut [f32],
    dequantize: impl Fn(&[P::Row], &mut [f32]) -> Result<(), crate::quant::QuantError>,
) -> Result<(), ModelError> {
    if out.len() != m.cols() {
        return Err(crate::matvec::ShapeError::OutputLength {
            expected: m.cols(),
            got: out.len(),
        }
        .into());
    }
    let per_block = <P::Row as crate::quant::WeightBlock>::WEIGHTS;
    for (b, o) in out.chunks_exact_mut(per_block).enumerate() {
        dequantize(&[m.row_block(id, b)], o)?;
    }
    Ok(())
}

/// `out[i] = widen(row[i])`, after checking the lengths.
fn widen_into<T: Copy>(row: &[T], out: &mut [f32], widen: fn(T) -> f32) -> Result<(), ModelError> {
    if row.len() != out.len() {
        return Err(crate::quant::QuantError::OutputLength {
            expected: row.len(),
            got: out.len(),
        }
        .into());
    }
    for (o, &v) in out.iter_mut().zip(row) {
        *o = widen(v);
    }
    Ok(())
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
    /// layer, the output projection and one embedding row, each in its
    /// stored type (two bytes a weight for F16 and BF16).
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
        let lm = self.lm_head();
        layers + lm.bytes() + self.embedding.row_bytes(lm.cols())
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
    matrix(gguf, info, rows, cols)?.ok_or_else(|| ModelError::TensorType {
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
        GgmlType::Q4_0 if info.layout == TensorLayout::Q4_0Rows8 => Weight::Q4_0Packed(
            PackedQ4_0Matrix::from_bytes(gguf.data_of(info), rows, cols)?,
        ),
        GgmlType::Q4_0 => Weight::Q4_0(view(gguf, info, rows, cols)?),
        GgmlType::Q4_K if info.layout == TensorLayout::Q4KRows8 => {
            Weight::Q4KPacked(PackedQ4KMatrix::from_bytes(gguf.data_of(info), rows, cols)?)
        }
        GgmlType::Q4_K => Weight::Q4K(view(gguf, info, rows, cols)?),
        GgmlType::Q5_K if info.layout == TensorLayout::Q5KRows8 => {
            Weight::Q5KPacked(PackedQ5KMatrix::from_bytes(gguf.data_of(info), rows, cols)?)
        }
        GgmlType::Q5_K => Weight::Q5K(view(gguf, info, rows, cols)?),
        GgmlType::Q6_K => Weight::Q6K(view(gguf, info, rows, cols)?),
        _ => return Ok(None),
    }))
}

/// A `rows x cols` view of a quantized, F16 or BF16 tensor, or `None` for
/// a type no product runs on.
fn matrix<'a>(
    gguf: &Gguf<'a>,
    info: &TensorInfo,
    rows: usize,
    cols: usize,
) -> Result<Option<Weight<'a>>, ModelError> {
    Ok(Some(match info.ggml_type {
        GgmlType::F16 => Weight::F16(BlockMatrix::new(f16_view(gguf, info)?, rows, cols)?),
        GgmlType::BF16 => Weight::Bf16(BlockMatrix::new(bf16_view(gguf, info)?, rows, cols)?),
        _ => return quantized(gguf, info, rows, cols),
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

fn f16_view<'a>(gguf: &Gguf<'a>, info: &TensorInfo) -> Result<&'a [f16], ModelError> {
    bytemuck::try_cast_slice(gguf.data_of(info)).map_err(|_| {
        ModelError::invalid(
            &info.name,
            "F16 data is not 2-byte aligned in memory (load the file with GgufFile)",
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
    if let Some(w) = matrix(gguf, info, rows, cols)? {
        return Ok(LmHead::Mapped(w));
    }
    // An F32 output projection (no product runs on F32): quantize it row
    // by row to Q8_0 once.
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

    /// F16 and BF16 matrices are zero-copy views of the tensor, in any
    /// projection; at an odd address (bytes parsed from an unaligned
    /// buffer) they are a typed error naming the tensor, never a panic or
    /// a copy.
    #[test]
    fn float_matrices_view_the_file_and_need_two_byte_alignment() {
        use crate::gguf::Writer;
        let vals: Vec<f32> = (0..2 * 32).map(|i| i as f32 * 0.25 - 3.0).collect();
        let h: Vec<u8> = vals
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_le_bytes())
            .collect();
        let b: Vec<u8> = vals
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
            .collect();
        let mut w = Writer::new();
        w.add_tensor("half.weight", GgmlType::F16, &[32, 2], h)
            .unwrap();
        w.add_tensor("bfloat.weight", GgmlType::BF16, &[32, 2], b)
            .unwrap();
        let bytes = w.to_bytes().unwrap();
        let mut words = vec![0u64; bytes.len().div_ceil(8) + 1];
        let buf: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
        buf[..bytes.len()].copy_from_slice(&bytes);
        let g = Gguf::parse(&buf[..bytes.len()]).unwrap();
        for (name, ty) in [("half.weight", "F16"), ("bfloat.weight", "BF16")] {
            let info = g.tensor(name).unwrap();
            let m = matrix(&g, info, 2, 32).unwrap().unwrap();
            assert_eq!(
                (m.type_name(), m.rows(), m.cols(), m.bytes()),
                (ty, 2, 32, 128)
            );
            let mut row = [0.0f32; 32];
            Embedding::Quantized(m).row_into(1, &mut row).unwrap();
            assert_eq!(row[..], vals[32..], "{name}");
            // A wrong shape is a typed error too.
            assert!(matrix(&g, info, 3, 32).is_err());
        }
        buf.copy_within(..bytes.len(), 1);
        let g = Gguf::parse(&buf[1..=bytes.len()]).unwrap();
        for name in ["half.weight", "bfloat.weight"] {
            let info = g.tensor(name).unwrap();
            match matrix(&g, info, 2, 32) {
                Err(e @ ModelError::InvalidValue { .. }) => {
                    let msg = e.to_string();
                    assert!(msg.contains("aligned") && msg.contains(name), "{msg}");
                }
                other => panic!("{name}: {other:?}"),
            }
        }
    }
}
