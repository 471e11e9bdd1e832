//! Borrowed, shape-checked views of weight matrices, and their errors.

use thiserror::Error;

use crate::quant::{
    BlockQ4Kx8, BlockQ4_0x8, BlockQ5Kx8, BlockQ8_0, PackedBlock, WeightBlock, PACK_ROWS,
};

/// Why a matrix view or a product was rejected.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ShapeError {
    /// Quantized rows hold whole blocks (32 weights for Q8_0 and Q4_0,
    /// 256 for the K-quants).
    #[error("{cols} columns is not a multiple of the {name} block size {block}")]
    ColsNotBlockMultiple {
        /// The rejected column count.
        cols: usize,
        /// Weights per block of the type.
        block: usize,
        /// The type's name.
        name: &'static str,
    },
    /// The storage does not hold exactly `rows x cols` weights.
    #[error("a {rows}x{cols} matrix needs {expected} elements, {got} given")]
    Storage {
        /// Declared rows.
        rows: usize,
        /// Declared columns.
        cols: usize,
        /// Elements (blocks for Q8_0, values for f32) the shape needs.
        expected: usize,
        /// Elements given.
        got: usize,
    },
    /// `rows x cols` does not fit in `usize`.
    #[error("a {rows}x{cols} matrix is too large to address")]
    TooLarge {
        /// Declared rows.
        rows: usize,
        /// Declared columns.
        cols: usize,
    },
    /// A byte slice is not a whole number of blocks.
    #[error("{len} bytes is not a whole number of {size}-byte {name} blocks")]
    Bytes {
        /// The rejected length.
        len: usize,
        /// Bytes per block of the type.
        size: usize,
        /// The type's name.
        name: &'static str,
    },
    /// A matrix of rows packed in groups (eight Q4_K rows per
    /// [`BlockQ4Kx8`]) has a whole number of
    /// groups.
    #[error("{rows} rows is not a multiple of the {group}-row packing")]
    RowsNotGroupMultiple {
        /// The rejected row count.
        rows: usize,
        /// Rows per group.
        group: usize,
    },
    /// The input vector (or each batch row) does not have `cols` values.
    #[error("input has {got} values per row, the matrix has {expected} columns")]
    InputLength {
        /// The matrix's column count.
        expected: usize,
        /// The input's length.
        got: usize,
    },
    /// The output slice does not have one value per row (per batch row).
    #[error("output holds {got} values, {expected} needed")]
    OutputLength {
        /// Values the product writes.
        expected: usize,
        /// The output's length.
        got: usize,
    },
}

/// A row-major Q8_0 matrix of `rows x cols` weights borrowed from
/// `rows * cols / 32` blocks (e.g. straight from a memory-mapped GGUF
/// tensor), validated once at construction.
///
/// ```
/// use inferno_cpu::matvec::Q8Matrix;
/// use inferno_cpu::BlockQ8_0;
/// let blocks = vec![BlockQ8_0::default(); 3 * 2];
/// let w = Q8Matrix::new(&blocks, 3, 64)?;
/// assert_eq!((w.rows(), w.cols(), w.row(2).len()), (3, 64, 2));
/// assert!(Q8Matrix::new(&blocks, 3, 48).is_err());
/// # Ok::<(), inferno_cpu::matvec::ShapeError>(())
/// ```
pub type Q8Matrix<'a> = BlockMatrix<'a, BlockQ8_0>;

/// A row-major F16 matrix (an unquantized GGUF tensor), borrowed: a
/// [`BlockMatrix`] whose "blocks" are single `half::f16` values.
pub type F16Matrix<'a> = BlockMatrix<'a, half::f16>;

/// A row-major BF16 matrix, borrowed: a [`BlockMatrix`] of single
/// `half::bf16` values.
pub type Bf16Matrix<'a> = BlockMatrix<'a, half::bf16>;

/// A row-major matrix of `rows x cols` weights stored as blocks of type
/// `B` (Q8_0, Q4_0, a K-quant, or single f16 or bf16 values), borrowed (e.g. straight from a
/// memory-mapped GGUF tensor) and validated once at construction.
/// [`Q8Matrix`] is the Q8_0 one.
#[derive(Debug)]
pub struct BlockMatrix<'a, B> {
    blocks: &'a [B],
    rows: usize,
    cols: usize,
}

// Manual impls: a derive would require `B: Clone`/`Copy`, but the view
// only copies a reference.
impl<B> Clone for BlockMatrix<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B> Copy for BlockMatrix<'_, B> {}

impl<'a, B: WeightBlock> BlockMatrix<'a, B> {
    /// Views `blocks` as a `rows x cols` matrix.
    ///
    /// # Errors
    ///
    /// [`ShapeError::ColsNotBlockMultiple`] if `cols` is not a whole
    /// number of blocks; [`ShapeError::TooLarge`] if the block count
    /// overflows; [`ShapeError::Storage`] if `blocks` does not hold
    /// exactly `rows` rows of blocks.
    pub fn new(blocks: &'a [B], rows: usize, cols: usize) -> Result<Self, ShapeError> {
        if !cols.is_multiple_of(B::WEIGHTS) {
            return Err(ShapeError::ColsNotBlockMultiple {
                cols,
                block: B::WEIGHTS,
                name: B::NAME,
            });
        }
        let expected = rows
            .checked_mul(cols / B::WEIGHTS)
            .ok_or(ShapeError::TooLarge { rows, cols })?;
        if blocks.len() != expected {
            return Err(ShapeError::Storage {
                rows,
                cols,
                expected,
                got: blocks.len(),
            });
        }
        Ok(Self { blocks, rows, cols })
    }

    /// A view of blocks already checked to hold `rows x cols` weights
    /// (by an earlier [`new`](Self::new) on the same slice and shape).
    pub(crate) fn from_checked(blocks: &'a [B], rows: usize, cols: usize) -> Self {
        debug_assert!(Self::new(blocks, rows, cols).is_ok());
        Self { blocks, rows, cols }
    }

    /// Views raw GGUF tensor bytes (any alignment) as a `rows x cols`
    /// matrix, without copying.
    ///
    /// # Errors
    ///
    /// [`ShapeError::Bytes`] if `bytes` is not a whole number of blocks
    /// (or, for a block type aligned above 1, not aligned for it), then as
    /// [`new`](Self::new).
    pub fn from_bytes(bytes: &'a [u8], rows: usize, cols: usize) -> Result<Self, ShapeError> {
        let blocks: &[B] = bytemuck::try_cast_slice(bytes).map_err(|_| ShapeError::Bytes {
            len: bytes.len(),
            size: std::mem::size_of::<B>(),
            name: B::NAME,
        })?;
        Self::new(blocks, rows, cols)
    }

    /// Number of rows (outputs of a matvec).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns (inputs of a matvec), a whole number of blocks.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Blocks per row.
    pub fn blocks_per_row(&self) -> usize {
        self.cols / B::WEIGHTS
    }

    /// All blocks, row after row.
    pub fn blocks(&self) -> &'a [B] {
        self.blocks
    }

    /// The blocks of row `r`.
    ///
    /// # Panics
    ///
    /// If `r >= self.rows()`.
    pub fn row(&self, r: usize) -> &'a [B] {
        assert!(r < self.rows, "row {r} out of range for {} rows", self.rows);
        let nb = self.blocks_per_row();
        &self.blocks[r * nb..(r + 1) * nb]
    }

    /// The blocks of rows `range` (for kernels that run a row range).
    pub(crate) fn rows_blocks(&self, range: std::ops::Range<usize>) -> &'a [B] {
        let nb = self.blocks_per_row();
        &self.blocks[range.start * nb..range.end * nb]
    }

    /// Size of the weights in bytes (what a matvec streams from memory).
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(self.blocks)
    }
}

/// A row-major f32 matrix of `rows x cols` values borrowed from a slice,
/// validated once at construction.
///
/// ```
/// use inferno_cpu::matvec::F32Matrix;
/// let data = vec![1.0f32; 3 * 5];
/// let w = F32Matrix::new(&data, 3, 5)?;
/// assert_eq!(w.row(1), &[1.0; 5]);
/// # Ok::<(), inferno_cpu::matvec::ShapeError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct F32Matrix<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
}

impl<'a> F32Matrix<'a> {
    /// Views `data` as a `rows x cols` matrix.
    ///
    /// # Errors
    ///
    /// [`ShapeError::TooLarge`] if `rows * cols` overflows;
    /// [`ShapeError::Storage`] if `data.len() != rows * cols`.
    pub fn new(data: &'a [f32], rows: usize, cols: usize) -> Result<Self, ShapeError> {
        let expected = rows
            .checked_mul(cols)
            .ok_or(ShapeError::TooLarge { rows, cols })?;
        if data.len() != expected {
            return Err(ShapeError::Storage {
                rows,
                cols,
                expected,
                got: data.len(),
            });
        }
        Ok(Self { data, rows, cols })
    }

    /// Number of rows (outputs of a matvec).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns (inputs of a matvec).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// All values, row after row.
    pub fn data(&self) -> &'a [f32] {
        self.data
    }

    /// Row `r`.
    ///
    /// # Panics
    ///
    /// If `r >= self.rows()`.
    pub fn row(&self, r: usize) -> &'a [f32] {
        assert!(r < self.rows, "row {r} out of range for {} rows", self.rows);
        &self.data[r * self.cols..(r + 1) * self.cols]
    }

    /// The values of rows `range`.
    pub(crate) fn rows_data(&self, range: std::ops::Range<usize>) -> &'a [f32] {
        &self.data[range.start * self.cols..range.end * self.cols]
    }

    /// Size of the weights in bytes.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(self.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_shapes() {
        let blocks = vec![BlockQ8_0::default(); 4];
        assert_eq!(
            Q8Matrix::new(&blocks, 2, 48).unwrap_err(),
            ShapeError::ColsNotBlockMultiple {
                cols: 48,
                block: 32,
                name: "Q8_0"
            }
        );
        assert_eq!(
            Q8Matrix::new(&blocks, 3, 64).unwrap_err(),
            ShapeError::Storage {
                rows: 3,
                cols: 64,
                expected: 6,
                got: 4
            }
        );
        assert_eq!(
            Q8Matrix::new(&blocks, usize::MAX, 64).unwrap_err(),
            ShapeError::TooLarge {
                rows: usize::MAX,
                cols: 64
            }
        );
        assert_eq!(
            Q8Matrix::from_bytes(&[0u8; 35], 1, 32).unwrap_err(),
            ShapeError::Bytes {
                len: 35,
                size: 34,
                name: "Q8_0"
            }
        );
        let m = Q8Matrix::from_bytes(&[0u8; 3 * 34 + 1][1..], 1, 96).unwrap();
        assert_eq!((m.rows(), m.bytes()), (1, 102));
        assert_eq!(
            F32Matrix::new(&[0.0; 5], 2, 3).unwrap_err(),
            ShapeError::Storage {
                rows: 2,
                cols: 3,
                expected: 6,
                got: 5
            }
        );
        assert!(F32Matrix::new(&[], 0, usize::MAX).is_ok());
    }
}

/// A Q4_K or Q5_K matrix of `rows x cols` weights whose rows are packed
/// eight at a time ([`PackedBlock`]: block `b` of rows `8g..8g + 8` is
/// element `g * cols / 256 + b`), borrowed and validated once at
/// construction.
///
/// The same weights as the row-major matrix it was packed from
/// ([`pack_rows8`](crate::quant::pack_rows8)), and every product over it
/// gives that matrix's bits; only the order of the bytes differs, the one
/// the eight-row decode kernels read (AVX-512 VNNI's for Q4_K, Q5_K and
/// Q4_0, and AVX2's for the same three).
///
/// ```
/// use inferno_cpu::matvec::PackedQ4KMatrix;
/// use inferno_cpu::quant::{pack_q4_k_rows8, quantize_row_q4_k};
/// let w: Vec<_> = (0..16 * 256).map(|i| (i % 7) as f32 - 3.0).collect();
/// let rows = quantize_row_q4_k(&w)?; // 16 rows of 256
/// let packed = pack_q4_k_rows8(&rows, 1);
/// let m = PackedQ4KMatrix::new(&packed, 16, 256)?;
/// assert_eq!((m.rows(), m.cols(), m.group(1).len()), (16, 256, 1));
/// assert_eq!(m.row_block(9, 0), rows[9]);
/// assert!(PackedQ4KMatrix::new(&packed, 12, 256).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct PackedMatrix<'a, P> {
    groups: BlockMatrix<'a, P>,
}

impl<P> Clone for PackedMatrix<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for PackedMatrix<'_, P> {}

/// Q4_K rows packed eight at a time.
pub type PackedQ4KMatrix<'a> = PackedMatrix<'a, BlockQ4Kx8>;

/// Q5_K rows packed eight at a time.
pub type PackedQ5KMatrix<'a> = PackedMatrix<'a, BlockQ5Kx8>;

/// Q4_0 rows packed eight at a time.
pub type PackedQ4_0Matrix<'a> = PackedMatrix<'a, BlockQ4_0x8>;

impl<'a, P: PackedBlock> PackedMatrix<'a, P> {
    /// Views `blocks` as a packed `rows x cols` matrix.
    ///
    /// # Errors
    ///
    /// [`ShapeError::RowsNotGroupMultiple`] unless `rows` is a multiple of
    /// eight; otherwise as [`BlockMatrix::new`].
    pub fn new(blocks: &'a [P], rows: usize, cols: usize) -> Result<Self, ShapeError> {
        if !rows.is_multiple_of(PACK_ROWS) {
            return Err(ShapeError::RowsNotGroupMultiple {
                rows,
                group: PACK_ROWS,
            });
        }
        Ok(Self {
            groups: BlockMatrix::new(blocks, rows / PACK_ROWS, cols)?,
        })
    }

    /// Views packed bytes (a GGUF tensor packed in place) as a `rows x
    /// cols` matrix.
    ///
    /// # Errors
    ///
    /// [`ShapeError::Bytes`] if `bytes` is not a whole number of packed
    /// blocks; otherwise as [`new`](Self::new).
    pub fn from_bytes(bytes: &'a [u8], rows: usize, cols: usize) -> Result<Self, ShapeError> {
        let blocks = bytemuck::try_cast_slice(bytes).map_err(|_| ShapeError::Bytes {
            len: bytes.len(),
            size: core::mem::size_of::<P>(),
            name: P::NAME,
        })?;
        Self::new(blocks, rows, cols)
    }

    /// Output rows.
    pub fn rows(&self) -> usize {
        self.groups.rows() * PACK_ROWS
    }

    /// Input columns.
    pub fn cols(&self) -> usize {
        self.groups.cols()
    }

    /// Blocks per row (and per group).
    pub fn blocks_per_row(&self) -> usize {
        self.groups.blocks_per_row()
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.groups.bytes()
    }

    /// The packed blocks of rows `8g..8g + 8`.
    ///
    /// # Panics
    ///
    /// If `g >= rows / 8`.
    pub fn group(&self, g: usize) -> &'a [P] {
        self.groups.row(g)
    }

    /// Block `b` of row `r`, unpacked.
    ///
    /// # Panics
    ///
    /// If `r` or `b` is out of range.
    pub fn row_block(&self, r: usize, b: usize) -> P::Row {
        self.group(r / PACK_ROWS)[b].row(r % PACK_ROWS)
    }

    /// Rows `range`, unpacked into row-major blocks.
    ///
    /// # Panics
    ///
    /// If `range` is out of range.
    pub fn unpack_rows(&self, range: std::ops::Range<usize>) -> Vec<P::Row> {
        let nb = self.blocks_per_row();
        let mut out = Vec::with_capacity(range.len() * nb);
        for r in range {
            out.extend((0..nb).map(|b| self.row_block(r, b)));
        }
        out
    }
}
