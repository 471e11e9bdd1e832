//! GGML tensor type ids with the block size and byte size of each.
//!
//! A GGUF reader has to know the size of every type a file may name, not just
//! the ones this crate computes with: tensor sizes, offsets and overlaps are
//! checked for all tensors, and a wrong size for one type would let its
//! tensor overlap another or run past the end of the file unnoticed. The
//! table mirrors GGML's `ggml_type` enum and its `type_traits` table
//! (`ggml/include/ggml.h`, `ggml/src/ggml.c`). Ids that GGML retired (4, 5,
//! 31..=33, 36..=38) are unknown here and rejected like any other unknown id.

use core::fmt;

/// Elements per super-block of the K-quants and most I-quants.
const QK_K: u64 = 256;

macro_rules! ggml_types {
    ($( $(#[$doc:meta])* $name:ident = $id:literal, $text:literal, $block:expr, $size:expr; )*) => {
        /// A GGML tensor element type, as stored in a GGUF tensor info.
        ///
        /// Every type is stored in blocks of [`block_size`](Self::block_size)
        /// elements taking [`type_size`](Self::type_size) bytes each; plain
        /// types like `F32` have blocks of one element.
        ///
        /// Variants keep GGML's spelling (`Q8_0`, `IQ2_XXS`) so they match
        /// the names in GGML, llama.cpp and model file names.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        #[allow(non_camel_case_types)]
        pub enum GgmlType {
            $( $(#[$doc])* $name, )*
        }

        impl GgmlType {
            /// Every known type, in id order.
            pub const ALL: &'static [GgmlType] = &[$(GgmlType::$name),*];

            /// The type with GGML id `id`, or `None` if the id is unknown or
            /// retired.
            pub fn from_id(id: u32) -> Option<Self> {
                match id {
                    $( $id => Some(GgmlType::$name), )*
                    _ => None,
                }
            }

            /// The GGML id stored in files.
            pub fn id(self) -> u32 {
                match self { $( GgmlType::$name => $id, )* }
            }

            /// GGML's name for the type (`"q8_0"`, `"f32"`, ...).
            pub fn name(self) -> &'static str {
                match self { $( GgmlType::$name => $text, )* }
            }

            /// Number of elements in one block.
            pub fn block_size(self) -> u64 {
                match self { $( GgmlType::$name => $block, )* }
            }

            /// Number of bytes one block takes.
            pub fn type_size(self) -> u64 {
                match self { $( GgmlType::$name => $size, )* }
            }
        }
    };
}

ggml_types! {
    /// 32-bit IEEE float.
    F32 = 0, "f32", 1, 4;
    /// 16-bit IEEE float.
    F16 = 1, "f16", 1, 2;
    /// 4-bit, f16 scale, blocks of 32.
    Q4_0 = 2, "q4_0", 32, 2 + 16;
    /// 4-bit, f16 scale and min, blocks of 32.
    Q4_1 = 3, "q4_1", 32, 2 + 2 + 16;
    /// 5-bit, f16 scale, blocks of 32.
    Q5_0 = 6, "q5_0", 32, 2 + 4 + 16;
    /// 5-bit, f16 scale and min, blocks of 32.
    Q5_1 = 7, "q5_1", 32, 2 + 2 + 4 + 16;
    /// 8-bit, f16 scale, blocks of 32 (see [`crate::quant::BlockQ8_0`]).
    Q8_0 = 8, "q8_0", 32, 2 + 32;
    /// 8-bit, f32 scale and sum, blocks of 32.
    Q8_1 = 9, "q8_1", 32, 4 + 4 + 32;
    /// 2-bit K-quant.
    Q2_K = 10, "q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4;
    /// 3-bit K-quant.
    Q3_K = 11, "q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12;
    /// 4-bit K-quant.
    Q4_K = 12, "q4_K", QK_K, 2 + 2 + QK_K / 2 + 12;
    /// 5-bit K-quant.
    Q5_K = 13, "q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12;
    /// 6-bit K-quant.
    Q6_K = 14, "q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16;
    /// 8-bit K-quant (intermediate activations).
    Q8_K = 15, "q8_K", QK_K, 4 + QK_K + QK_K / 8;
    /// 2.06-bit I-quant.
    IQ2_XXS = 16, "iq2_xxs", QK_K, 2 + QK_K / 4;
    /// 2.31-bit I-quant.
    IQ2_XS = 17, "iq2_xs", QK_K, 2 + QK_K / 4 + QK_K / 32;
    /// 3.06-bit I-quant.
    IQ3_XXS = 18, "iq3_xxs", QK_K, 2 + QK_K / 4 + QK_K / 8;
    /// 1.56-bit I-quant.
    IQ1_S = 19, "iq1_s", QK_K, 2 + QK_K / 8 + QK_K / 16;
    /// 4-bit non-linear quant, blocks of 32.
    IQ4_NL = 20, "iq4_nl", 32, 2 + 16;
    /// 3.44-bit I-quant.
    IQ3_S = 21, "iq3_s", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4;
    /// 2.5-bit I-quant.
    IQ2_S = 22, "iq2_s", QK_K, 2 + QK_K / 4 + QK_K / 16;
    /// 4.25-bit I-quant.
    IQ4_XS = 23, "iq4_xs", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64;
    /// 8-bit integer.
    I8 = 24, "i8", 1, 1;
    /// 16-bit integer.
    I16 = 25, "i16", 1, 2;
    /// 32-bit integer.
    I32 = 26, "i32", 1, 4;
    /// 64-bit integer.
    I64 = 27, "i64", 1, 8;
    /// 64-bit IEEE float.
    F64 = 28, "f64", 1, 8;
    /// 1.75-bit I-quant.
    IQ1_M = 29, "iq1_m", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32;
    /// bfloat16.
    BF16 = 30, "bf16", 1, 2;
    /// Ternary quant, 1.69 bits.
    TQ1_0 = 34, "tq1_0", QK_K, 2 + 4 * 13;
    /// Ternary quant, 2.06 bits.
    TQ2_0 = 35, "tq2_0", QK_K, 2 + 64;
    /// Microscaling FP4, blocks of 32 with an E8M0 scale.
    MXFP4 = 39, "mxfp4", 32, 1 + 16;
    /// NVIDIA FP4, blocks of 64 with FP8 scales.
    NVFP4 = 40, "nvfp4", 64, 4 + 32;
    /// 1-bit quant, blocks of 128.
    Q1_0 = 41, "q1_0", 128, 2 + 16;
}

impl GgmlType {
    /// Bytes taken by `n_elements` elements of this type, or `None` when
    /// `n_elements` is not a whole number of blocks or the size overflows.
    pub fn bytes_for(self, n_elements: u64) -> Option<u64> {
        if !n_elements.is_multiple_of(self.block_size()) {
            return None;
        }
        (n_elements / self.block_size()).checked_mul(self.type_size())
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_are_unique() {
        for &t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
        }
        let mut ids: Vec<u32> = GgmlType::ALL.iter().map(|t| t.id()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), GgmlType::ALL.len());
    }

    #[test]
    fn retired_and_out_of_range_ids_are_unknown() {
        for id in [4, 5, 31, 32, 33, 36, 37, 38, 42, u32::MAX] {
            assert_eq!(GgmlType::from_id(id), None, "id {id}");
        }
    }

    #[test]
    fn sizes_match_ggml_block_structs() {
        // Byte sizes of GGML's block structs, counted field by field.
        let expected = [
            (GgmlType::Q4_0, 32, 18),
            (GgmlType::Q8_0, 32, 34),
            (GgmlType::Q2_K, 256, 84),
            (GgmlType::Q3_K, 256, 110),
            (GgmlType::Q4_K, 256, 144),
            (GgmlType::Q5_K, 256, 176),
            (GgmlType::Q6_K, 256, 210),
            (GgmlType::Q8_K, 256, 292),
            (GgmlType::IQ2_XXS, 256, 66),
            (GgmlType::IQ2_XS, 256, 74),
            (GgmlType::IQ3_XXS, 256, 98),
            (GgmlType::IQ1_S, 256, 50),
            (GgmlType::IQ3_S, 256, 110),
            (GgmlType::IQ2_S, 256, 82),
            (GgmlType::IQ4_XS, 256, 136),
            (GgmlType::IQ1_M, 256, 56),
            (GgmlType::TQ1_0, 256, 54),
            (GgmlType::TQ2_0, 256, 66),
            (GgmlType::MXFP4, 32, 17),
        ];
        for (t, block, size) in expected {
            assert_eq!((t.block_size(), t.type_size()), (block, size), "{t}");
        }
        assert_eq!(
            GgmlType::Q8_0.type_size() as usize,
            core::mem::size_of::<crate::quant::BlockQ8_0>()
        );
    }

    #[test]
    fn bytes_for_rejects_partial_blocks_and_overflow() {
        assert_eq!(GgmlType::Q8_0.bytes_for(64), Some(68));
        assert_eq!(GgmlType::Q8_0.bytes_for(33), None);
        assert_eq!(GgmlType::F32.bytes_for(u64::MAX / 2), None);
        assert_eq!(GgmlType::F32.bytes_for(3), Some(12));
    }
}
