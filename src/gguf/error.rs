//! The reader's and the writer's errors, one variant per failure mode.
//!
//! Parse errors carry the byte offset where the offending field starts and,
//! where one is known, the metadata key or tensor name, so a message alone
//! is enough to find the bad bytes in a hex dump.

use std::path::PathBuf;

use super::types::GgmlType;
use super::value::ValueType;

/// An error reading a GGUF file or looking something up in it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GgufError {
    /// The file does not start with `GGUF`.
    #[error("not a GGUF file: magic at offset 0 is {found:02x?}, expected \"GGUF\"")]
    BadMagic {
        /// The first four bytes.
        found: [u8; 4],
    },
    /// Version 1 (32-bit counts, long obsolete) or a version from the future.
    #[error("unsupported GGUF version {version} at offset 4 (supported: 2 and 3)")]
    UnsupportedVersion {
        /// The version field, read little-endian.
        version: u32,
    },
    /// A big-endian file (its version field is byte-swapped).
    #[error(
        "big-endian GGUF files are not supported (version field at offset 4 \
         is {version} when read big-endian)"
    )]
    BigEndian {
        /// The version field, read big-endian.
        version: u32,
    },
    /// The file ends inside a fixed-size field.
    #[error("file truncated at offset {offset}: {context} needs {needed} bytes, {available} left")]
    Truncated {
        /// Offset of the field.
        offset: u64,
        /// What was being read, with the key or tensor name when known.
        context: String,
        /// Bytes the field needs.
        needed: u64,
        /// Bytes left in the file.
        available: u64,
    },
    /// A count or length that the rest of the file cannot possibly hold.
    #[error(
        "{context} at offset {offset} is {count}, but the {remaining} bytes left \
         hold at most {max} (each item takes at least {min_size} bytes)"
    )]
    CountTooLarge {
        /// Offset of the count field.
        offset: u64,
        /// Which count (`"tensor count"`, `"length of key ..."`, ...).
        context: String,
        /// The count read.
        count: u64,
        /// Bytes left after the count field.
        remaining: u64,
        /// Smallest encoded size of one item.
        min_size: u64,
        /// Largest count that could fit.
        max: u64,
    },
    /// A string that is not UTF-8.
    #[error("invalid UTF-8 in {context} at offset {offset}")]
    InvalidUtf8 {
        /// Offset of the string's bytes.
        offset: u64,
        /// Which string.
        context: String,
    },
    /// A bool byte other than 0 or 1.
    #[error("bool in key `{key}` at offset {offset} is {value}, expected 0 or 1")]
    InvalidBool {
        /// Offset of the byte.
        offset: u64,
        /// Key holding the bool.
        key: String,
        /// The byte found.
        value: u8,
    },
    /// A metadata value type id outside 0..=12.
    #[error("unknown value type id {type_id} in key `{key}` at offset {offset}")]
    UnknownValueType {
        /// Offset of the type field.
        offset: u64,
        /// Key holding the value.
        key: String,
        /// The id found.
        type_id: u32,
    },
    /// Arrays nested deeper than [`MAX_ARRAY_DEPTH`](super::MAX_ARRAY_DEPTH).
    #[error("arrays in key `{key}` nest deeper than {limit} levels at offset {offset}")]
    NestingTooDeep {
        /// Offset of the array that is one level too deep.
        offset: u64,
        /// Key holding the array.
        key: String,
        /// The limit.
        limit: usize,
    },
    /// A key that breaks the specification's key rules: ASCII, at most
    /// [`MAX_KEY_LEN`](super::MAX_KEY_LEN) bytes, nonempty segments of
    /// `[a-z0-9_-]` separated by `.`.
    #[error("invalid metadata key {key:?} at offset {offset}: {reason}")]
    InvalidKey {
        /// Offset of the key's length field.
        offset: u64,
        /// The key (cut to its first 256 bytes).
        key: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// The same key twice.
    #[error("duplicate metadata key `{key}` at offset {offset}")]
    DuplicateKey {
        /// Offset of the second occurrence.
        offset: u64,
        /// The key.
        key: String,
    },
    /// `general.alignment` that is not a power of two and a multiple of 8.
    #[error("general.alignment is {value}, which is not a power of two and a multiple of 8")]
    BadAlignment {
        /// The value found.
        value: u32,
    },
    /// A tensor name longer than
    /// [`MAX_TENSOR_NAME_LEN`](super::MAX_TENSOR_NAME_LEN) bytes.
    #[error("tensor name {tensor:?} at offset {offset} is {len} bytes long (at most 64 allowed)")]
    TensorNameTooLong {
        /// Offset of the name's length field.
        offset: u64,
        /// The name (cut to its first 256 bytes).
        tensor: String,
        /// Its length in bytes.
        len: u64,
    },
    /// A nonzero byte in the padding between the tensor infos and the data
    /// section, which the specification fills with `0x00`.
    #[error("padding byte at offset {offset} is {value:#04x}, expected 0")]
    NonZeroPadding {
        /// Offset of the byte.
        offset: u64,
        /// The byte found.
        value: u8,
    },
    /// The same tensor name twice.
    #[error("duplicate tensor name `{tensor}` at offset {offset}")]
    DuplicateTensor {
        /// Offset of the second tensor info.
        offset: u64,
        /// The name.
        tensor: String,
    },
    /// A tensor with 0 or more than 4 dimensions.
    #[error("tensor `{tensor}` at offset {offset} has {n_dims} dimensions (allowed: 1 to 4)")]
    BadDimCount {
        /// Offset of the dimension count.
        offset: u64,
        /// Tensor name.
        tensor: String,
        /// The count found.
        n_dims: u32,
    },
    /// A tensor dimension of zero.
    #[error("tensor `{tensor}` dimension {index} at offset {offset} is 0")]
    ZeroDim {
        /// Offset of the dimension.
        offset: u64,
        /// Tensor name.
        tensor: String,
        /// Which dimension.
        index: usize,
    },
    /// A GGML type id this crate does not know (or that GGML retired).
    #[error("tensor `{tensor}` has unknown GGML type id {type_id} at offset {offset}")]
    UnknownGgmlType {
        /// Offset of the type field.
        offset: u64,
        /// Tensor name.
        tensor: String,
        /// The id found.
        type_id: u32,
    },
    /// Element count or byte size that overflows `u64` or `usize`.
    #[error("tensor `{tensor}` (info at offset {offset}): element count or byte size overflows")]
    SizeOverflow {
        /// Offset of the tensor info.
        offset: u64,
        /// Tensor name.
        tensor: String,
    },
    /// A first dimension that is not a whole number of blocks.
    #[error(
        "tensor `{tensor}` (info at offset {offset}): first dimension {first_dim} is not \
         a multiple of {ggml_type}'s block size {block_size}"
    )]
    NotBlockMultiple {
        /// Offset of the tensor info.
        offset: u64,
        /// Tensor name.
        tensor: String,
        /// The tensor's type.
        ggml_type: GgmlType,
        /// The first dimension.
        first_dim: u64,
        /// The type's block size.
        block_size: u64,
    },
    /// A tensor data offset that is not a multiple of the alignment.
    #[error(
        "tensor `{tensor}` data offset {data_offset} (field at offset {offset}) is not \
         a multiple of the alignment {alignment}"
    )]
    MisalignedOffset {
        /// Offset of the offset field.
        offset: u64,
        /// Tensor name.
        tensor: String,
        /// The data offset, relative to the data section.
        data_offset: u64,
        /// The file's alignment.
        alignment: u64,
    },
    /// Tensor data that runs past the end of the file.
    #[error(
        "tensor `{tensor}` data spans file bytes {start}..{end}, past the end of the \
         {file_len}-byte file"
    )]
    TensorOutOfBounds {
        /// Tensor name.
        tensor: String,
        /// Absolute start (may itself be past the end).
        start: u64,
        /// Absolute end.
        end: u64,
        /// File length.
        file_len: u64,
    },
    /// Two tensors whose data ranges overlap.
    #[error(
        "tensors `{first}` (data offset {first_offset}) and `{second}` (data offset \
         {second_offset}) overlap"
    )]
    TensorOverlap {
        /// The tensor starting first.
        first: String,
        /// Its data offset.
        first_offset: u64,
        /// The tensor starting inside it.
        second: String,
        /// Its data offset.
        second_offset: u64,
    },
    /// A key that is not in the file.
    #[error("metadata key `{key}` not found")]
    KeyNotFound {
        /// The key.
        key: String,
    },
    /// A key holding another type than asked for.
    #[error("metadata key `{key}` has type {found}, expected {expected}")]
    TypeMismatch {
        /// The key.
        key: String,
        /// The type asked for.
        expected: ValueType,
        /// The type found.
        found: ValueType,
    },
    /// A key asked for as an integer (any of the eight integer types) that
    /// holds a float, bool, string or array.
    #[error("metadata key `{key}` has type {found}, expected an integer")]
    NotAnInteger {
        /// The key.
        key: String,
        /// The type found.
        found: ValueType,
    },
    /// An array key whose elements have another type than asked for.
    #[error("metadata key `{key}` is an array of {found}, expected an array of {expected}")]
    ArrayTypeMismatch {
        /// The key.
        key: String,
        /// The element type asked for.
        expected: ValueType,
        /// The element type found.
        found: ValueType,
    },
    /// A tensor that is not in the file.
    #[error("tensor `{tensor}` not found")]
    TensorNotFound {
        /// The name.
        tensor: String,
    },
    /// A typed view of a tensor of another GGML type.
    #[error("tensor `{tensor}` has type {found}, expected {expected}")]
    TensorTypeMismatch {
        /// The name.
        tensor: String,
        /// The type asked for.
        expected: GgmlType,
        /// The tensor's type.
        found: GgmlType,
    },
    /// A typed view whose bytes are not aligned for the element type (only
    /// possible with a `general.alignment` below the element's alignment).
    #[error("tensor `{tensor}` data is not aligned to {required} bytes in memory")]
    MisalignedData {
        /// The name.
        tensor: String,
        /// Alignment the element type needs.
        required: usize,
    },
    /// Opening, mapping or reading the file failed.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// An error building a GGUF file with [`Writer`](super::Writer).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// A key added twice.
    #[error("duplicate metadata key `{key}`")]
    DuplicateKey {
        /// The key.
        key: String,
    },
    /// A key the reader would refuse (see [`GgufError::InvalidKey`]).
    #[error("invalid metadata key {key:?}: {reason}")]
    InvalidKey {
        /// The key.
        key: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// A tensor name longer than
    /// [`MAX_TENSOR_NAME_LEN`](super::MAX_TENSOR_NAME_LEN) bytes.
    #[error("tensor name {tensor:?} is longer than 64 bytes")]
    TensorNameTooLong {
        /// The name.
        tensor: String,
    },
    /// A tensor name added twice.
    #[error("duplicate tensor name `{tensor}`")]
    DuplicateTensor {
        /// The name.
        tensor: String,
    },
    /// A shape with 0 or more than 4 dimensions, or a zero dimension.
    #[error("tensor `{tensor}` has shape {dims:?} (need 1 to 4 nonzero dimensions)")]
    BadShape {
        /// The name.
        tensor: String,
        /// The shape given.
        dims: Vec<u64>,
    },
    /// A first dimension that is not a whole number of blocks, or a size
    /// that overflows.
    #[error("tensor `{tensor}` of type {ggml_type} cannot have shape {dims:?}")]
    BadSize {
        /// The name.
        tensor: String,
        /// The type.
        ggml_type: GgmlType,
        /// The shape given.
        dims: Vec<u64>,
    },
    /// Data whose length does not match the shape and type.
    #[error("tensor `{tensor}` needs {expected} bytes of data, got {found}")]
    DataLength {
        /// The name.
        tensor: String,
        /// Bytes the shape and type need.
        expected: u64,
        /// Bytes given.
        found: u64,
    },
    /// An alignment that is not a power of two and a multiple of 8.
    #[error("alignment {value} is not a power of two and a multiple of 8")]
    BadAlignment {
        /// The value given.
        value: u32,
    },
    /// An array nested deeper than [`MAX_ARRAY_DEPTH`](super::MAX_ARRAY_DEPTH).
    #[error("array in key `{key}` nests deeper than the readable limit")]
    NestingTooDeep {
        /// The key.
        key: String,
    },
    /// [`Writer::write_to`](super::Writer::write_to) on a writer holding a
    /// tensor declared for streaming, whose bytes it does not have.
    #[error("tensor `{tensor}` was declared without data; write the file with `stream_to`")]
    DataNotGiven {
        /// The name.
        tensor: String,
    },
    /// [`TensorStream::write_data`](super::TensorStream::write_data) after
    /// every tensor's data was written.
    #[error("{len} bytes of tensor data after the last tensor")]
    NoTensorPending {
        /// Bytes offered.
        len: u64,
    },
    /// Writing to the sink failed.
    #[error("write failed: {0}")]
    Io(#[from] std::io::Error),
}
