//! Which storage type each tensor of a synthetic file gets: the mixes of
//! llama.cpp's common file types.

use std::fmt;
use std::str::FromStr;

use crate::gguf::GgmlType;
use crate::model::layout::{Role, Shape, TensorSpec};

/// The weight types of a synthetic model file, named as llama.cpp names
/// its file types. Norms are always F32.
///
/// The K-quant mixes follow the rule llama.cpp's quantizer applies without
/// an importance matrix: `Q4_K_M` and `Q5_K_M` store most matrices in
/// Q4_K / Q5_K and give `attn_v` and `ffn_down` Q6_K in the layers where
/// extra bits pay most (the first and last eighth of the layers, and every
/// third one between); the output projection (here the tied embedding) is
/// Q6_K in every quantized type but Q8_0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FileType {
    /// Every matrix Q8_0 (the default).
    #[default]
    Q8_0,
    /// Every matrix F32.
    F32,
    /// Every matrix F16.
    F16,
    /// Every matrix BF16.
    BF16,
    /// Q4_0 matrices, a Q6_K output projection.
    Q4_0,
    /// Q4_K with Q6_K where it pays (the most downloaded type).
    Q4KM,
    /// Q5_K with Q6_K where it pays.
    Q5KM,
    /// Every matrix Q6_K.
    Q6K,
}

impl FileType {
    /// Every type, in the order `--type` lists them.
    pub const ALL: [FileType; 8] = [
        FileType::Q8_0,
        FileType::F32,
        FileType::F16,
        FileType::BF16,
        FileType::Q4_0,
        FileType::Q4KM,
        FileType::Q5KM,
        FileType::Q6K,
    ];

    /// The lower-case name (`"q4_k_m"`), as llama.cpp's tools write it.
    pub fn name(self) -> &'static str {
        match self {
            FileType::Q8_0 => "q8_0",
            FileType::F32 => "f32",
            FileType::F16 => "f16",
            FileType::BF16 => "bf16",
            FileType::Q4_0 => "q4_0",
            FileType::Q4KM => "q4_k_m",
            FileType::Q5KM => "q5_k_m",
            FileType::Q6K => "q6_k",
        }
    }

    /// llama.cpp's `general.file_type` code (`LLAMA_FTYPE_*`).
    pub fn code(self) -> u32 {
        match self {
            FileType::F32 => 0,
            FileType::F16 => 1,
            FileType::Q4_0 => 2,
            FileType::Q8_0 => 7,
            FileType::Q4KM => 15,
            FileType::Q5KM => 17,
            FileType::Q6K => 18,
            FileType::BF16 => 32,
        }
    }

    /// Whether some matrix is a K-quant, whose rows hold blocks of 256.
    pub fn has_k_quants(self) -> bool {
        matches!(self, FileType::Q4KM | FileType::Q5KM | FileType::Q6K)
    }

    /// The storage type of tensor `t` in a model of `layers` layers.
    pub fn tensor_type(self, t: &TensorSpec, layers: usize) -> GgmlType {
        if let Shape::Vector(_) = t.shape {
            return GgmlType::F32;
        }
        let output = matches!(t.role, Role::Embedding | Role::LmHead);
        let more_bits = || {
            let i = t.layer.unwrap_or(0);
            let (first, last) = (layers / 8, 7 * layers / 8);
            i < first || i >= last || (i - first) % 3 == 2
        };
        match self {
            FileType::Q8_0 => GgmlType::Q8_0,
            FileType::F32 => GgmlType::F32,
            FileType::F16 => GgmlType::F16,
            FileType::BF16 => GgmlType::BF16,
            _ if output => GgmlType::Q6_K,
            FileType::Q4_0 => GgmlType::Q4_0,
            FileType::Q6K => GgmlType::Q6_K,
            FileType::Q4KM | FileType::Q5KM
                if matches!(t.role, Role::V | Role::Down) && more_bits() =>
            {
                GgmlType::Q6_K
            }
            FileType::Q4KM => GgmlType::Q4_K,
            FileType::Q5KM => GgmlType::Q5_K,
        }
    }
}

impl fmt::Display for FileType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a [`FileType`]; its message lists them.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown file type {0:?} (supported: q8_0, f32, f16, bf16, q4_0, q4_k_m, q5_k_m, q6_k)")]
pub struct UnknownFileType(pub String);

impl FromStr for FileType {
    type Err = UnknownFileType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        FileType::ALL
            .into_iter()
            .find(|t| t.name() == lower)
            .ok_or_else(|| UnknownFileType(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::SynthConfig;

    #[test]
    fn q4_k_m_gives_more_bits_where_llama_cpp_does() {
        let c = SynthConfig::qwen3_0_6b().model;
        let six: Vec<usize> = (0..c.layers)
            .filter(|&l| {
                FileType::Q4KM.tensor_type(&c.tensor(Role::V, l), c.layers) == GgmlType::Q6_K
            })
            .collect();
        // 28 layers: the first 3 and last 4, and every third from layer 5.
        assert_eq!(six, [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27]);
        assert_eq!(
            FileType::Q4KM.tensor_type(&c.tensor(Role::Q, 0), c.layers),
            GgmlType::Q4_K
        );
        assert_eq!(
            FileType::Q4KM.tensor_type(&c.tensor(Role::Embedding, 0), c.layers),
            GgmlType::Q6_K
        );
        for t in FileType::ALL {
            assert_eq!(t.name().parse::<FileType>(), Ok(t));
            assert_eq!(
                t.tensor_type(&c.tensor(Role::AttnNorm, 3), c.layers),
                GgmlType::F32
            );
        }
        assert!("q3_k".parse::<FileType>().is_err());
    }
}
