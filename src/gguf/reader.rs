//! [`Gguf`]: a validated GGUF file over borrowed bytes, with zero-copy
//! tensor views.

use std::borrow::Cow;
use std::collections::HashMap;

use half::f16;

use super::error::GgufError;
use super::parse;
use super::types::GgmlType;
use super::value::{Array, Metadata, Value};
use crate::quant::BlockQ8_0;

/// Where one tensor's data is and what it holds.
///
/// Every `TensorInfo` a [`Gguf`] hands out has been validated: 1 to 4
/// nonzero dimensions, a first dimension that is a whole number of blocks,
/// sizes that fit in `usize`, an aligned offset, and data that lies inside
/// the file without overlapping another tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TensorInfo {
    /// The tensor's name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Dimensions, fastest-varying first (GGML order: `dims[0]` is the
    /// length of a row).
    pub dims: Vec<u64>,
    /// Element type.
    pub ggml_type: GgmlType,
    /// Data offset relative to the start of the data section.
    pub offset: u64,
    /// Product of the dimensions.
    pub n_elements: u64,
    /// Bytes of data.
    pub n_bytes: u64,
    /// How the data's blocks are ordered: as written
    /// ([`TensorLayout::File`]), unless the [`GgufFile`](super::GgufFile)
    /// holding it rearranged them in memory for a kernel
    /// ([`Model`](crate::model::Model) does, for the eight-row decode
    /// kernels of AVX-512 VNNI and AVX2).
    pub layout: TensorLayout,
}

/// The order of a tensor's blocks in memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TensorLayout {
    /// As in the file: row-major blocks.
    #[default]
    File,
    /// A Q4_K matrix's rows packed eight at a time
    /// ([`BlockQ4Kx8`](crate::quant::BlockQ4Kx8); the tensor's
    /// [`data_of`](Gguf::data_of) bytes are
    /// [`PackedQ4KMatrix`](crate::matvec::PackedQ4KMatrix) ones).
    Q4KRows8,
    /// A Q5_K matrix's rows packed eight at a time
    /// ([`BlockQ5Kx8`](crate::quant::BlockQ5Kx8)).
    Q5KRows8,
    /// A Q4_0 matrix's rows packed eight at a time
    /// ([`BlockQ4_0x8`](crate::quant::BlockQ4_0x8)).
    Q4_0Rows8,
}

/// Everything parsed from a file except the tensor data: version,
/// alignment, metadata and tensor infos. Owned, so an owning file type can
/// keep it beside the bytes it describes.
#[derive(Clone, Debug)]
pub struct Header {
    version: u32,
    alignment: u64,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    data_offset: u64,
    file_len: u64,
}

impl Header {
    pub(crate) fn new(
        version: u32,
        alignment: u64,
        metadata: Metadata,
        tensors: Vec<TensorInfo>,
        tensor_index: HashMap<String, usize>,
        data_offset: u64,
        file_len: u64,
    ) -> Self {
        Self {
            version,
            alignment,
            metadata,
            tensors,
            tensor_index,
            data_offset,
            file_len,
        }
    }

    /// The tensor infos, for the owning file to record a changed layout.
    pub(crate) fn tensors_mut(&mut self) -> &mut [TensorInfo] {
        &mut self.tensors
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data alignment: `general.alignment`, or 32 when absent.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// File offset where the data section starts (a multiple of the
    /// alignment).
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Length of the file the header was parsed from.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// The metadata table.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Every tensor info, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The info of tensor `name`.
    ///
    /// # Errors
    ///
    /// [`GgufError::TensorNotFound`] if there is no such tensor.
    pub fn tensor(&self, name: &str) -> Result<&TensorInfo, GgufError> {
        self.tensor_index
            .get(name)
            .map(|&i| &self.tensors[i])
            .ok_or_else(|| GgufError::TensorNotFound {
                tensor: name.to_owned(),
            })
    }
}

/// A parsed, validated GGUF file borrowing its bytes.
///
/// Parsing checks everything up front (see [`GgufError`] for the list), so
/// the views afterwards only look up a name and slice. Tensor views borrow
/// the file's bytes for `'a` and copy nothing.
///
/// ```
/// use inferno_cpu::gguf::{Gguf, Writer};
///
/// let mut w = Writer::new();
/// w.add_u32("demo.block_count", 2)?;
/// w.add_tensor_f32("norm", &[4], &[1.0, 2.0, 3.0, 4.0])?;
/// let bytes = w.to_bytes()?;
///
/// let gguf = Gguf::parse(&bytes)?;
/// assert_eq!(gguf.get_u32("demo.block_count")?, 2);
/// assert_eq!(gguf.tensor_bytes("norm")?.len(), 16);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Gguf<'a> {
    bytes: &'a [u8],
    header: Cow<'a, Header>,
}

macro_rules! forward_getters {
    ($( $fn:ident -> $ret:ty; )*) => {
        $(
            #[doc = concat!("Shorthand for [`Metadata::", stringify!($fn), "`] on this file's metadata.")]
            ///
            /// # Errors
            ///
            /// As the [`Metadata`] method.
            pub fn $fn(&self, key: &str) -> Result<$ret, GgufError> {
                self.header.metadata().$fn(key)
            }
        )*
    };
}

impl<'a> Gguf<'a> {
    /// Parses and validates a GGUF file held in memory.
    ///
    /// For `f32` and `f16` views the bytes should sit at an address aligned
    /// to at least 4 (memory maps and [`GgufFile`](super::GgufFile) buffers
    /// are); `&[BlockQ8_0]` and byte views work at any address.
    ///
    /// # Errors
    ///
    /// Any parse or validation [`GgufError`]; it never panics, whatever the
    /// bytes.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, GgufError> {
        let header = parse::parse(bytes)?;
        Ok(Self {
            bytes,
            header: Cow::Owned(header),
        })
    }

    /// A view over `bytes` with an already parsed `header`, which must have
    /// been parsed from exactly these bytes.
    pub(crate) fn from_parts(bytes: &'a [u8], header: &'a Header) -> Self {
        debug_assert_eq!(bytes.len() as u64, header.file_len());
        Self {
            bytes,
            header: Cow::Borrowed(header),
        }
    }

    /// The whole file, as it lies in memory: tensors its
    /// [`GgufFile`](super::GgufFile) packed ([`TensorInfo::layout`]) are in
    /// their packed order, which the tensor table does not record (parsing
    /// these bytes again would read them as written; write the file out
    /// with [`Writer::from_gguf`](super::Writer::from_gguf), which restores
    /// the file's order).
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The parsed header: version, alignment, metadata, tensor infos.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.header.version()
    }

    /// The data alignment.
    pub fn alignment(&self) -> u64 {
        self.header.alignment()
    }

    /// The metadata table.
    pub fn metadata(&self) -> &Metadata {
        self.header.metadata()
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.header.metadata().get(key)
    }

    forward_getters! {
        get_u8 -> u8;
        get_i8 -> i8;
        get_u16 -> u16;
        get_i16 -> i16;
        get_u32 -> u32;
        get_i32 -> i32;
        get_f32 -> f32;
        get_bool -> bool;
        get_u64 -> u64;
        get_i64 -> i64;
        get_f64 -> f64;
        get_str -> &str;
        get_array -> &Array;
        get_str_array -> &[String];
        get_u32_array -> &[u32];
        get_i32_array -> &[i32];
        get_f32_array -> &[f32];
        get_u64_array -> &[u64];
        get_i64_array -> &[i64];
    }

    /// Every tensor info, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        self.header.tensors()
    }

    /// The info of tensor `name`.
    ///
    /// # Errors
    ///
    /// [`GgufError::TensorNotFound`].
    pub fn tensor(&self, name: &str) -> Result<&TensorInfo, GgufError> {
        self.header.tensor(name)
    }

    /// The raw data bytes of `info`, which must come from this file, as
    /// they lie in memory: for a tensor its [`GgufFile`](super::GgufFile)
    /// packed ([`TensorInfo::layout`] not [`TensorLayout::File`]), the
    /// packed order; [`data_in_file_order`](Self::data_in_file_order)
    /// gives the file's.
    pub fn data_of(&self, info: &TensorInfo) -> &'a [u8] {
        // For infos of this file the range was validated at parse time:
        // `data_offset + offset + n_bytes <= len`. Checked arithmetic and
        // `get` keep an info from another file from panicking; it then
        // yields an empty slice.
        let range = self
            .header
            .data_offset()
            .checked_add(info.offset)
            .and_then(|start| Some((start, start.checked_add(info.n_bytes)?)))
            .and_then(|(start, end)| {
                Some(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
            });
        range.and_then(|r| self.bytes.get(r)).unwrap_or_default()
    }

    /// The data bytes of `info` (which must come from this file) in the
    /// order the file stores them: [`data_of`](Self::data_of) itself,
    /// except for a tensor its [`GgufFile`](super::GgufFile) packed in
    /// memory ([`TensorInfo::layout`]), whose rows come back unpacked (a
    /// copy). What [`Writer::from_gguf`](super::Writer::from_gguf) writes.
    pub fn data_in_file_order(&self, info: &TensorInfo) -> Cow<'a, [u8]> {
        use crate::quant::packed::unpack_bytes;
        use crate::quant::{BlockQ4Kx8, BlockQ4_0x8, BlockQ5Kx8, QK4_0, QK_K};
        let data = self.data_of(info);
        let nb = |block: usize| {
            info.dims
                .first()
                .and_then(|&c| usize::try_from(c / block as u64).ok())
                .unwrap_or(0)
        };
        let unpacked = match info.layout {
            TensorLayout::File => return Cow::Borrowed(data),
            TensorLayout::Q4KRows8 => unpack_bytes::<BlockQ4Kx8>(data, nb(QK_K)),
            TensorLayout::Q5KRows8 => unpack_bytes::<BlockQ5Kx8>(data, nb(QK_K)),
            TensorLayout::Q4_0Rows8 => unpack_bytes::<BlockQ4_0x8>(data, nb(QK4_0)),
        };
        // Only whole packed matrices are ever marked packed.
        unpacked.map_or(Cow::Borrowed(data), Cow::Owned)
    }

    /// The raw data bytes of tensor `name`, any type: for a packed tensor
    /// ([`TensorLayout`] other than `File`), the packed bytes, as
    /// [`data_of`](Self::data_of) shows them.
    ///
    /// # Errors
    ///
    /// [`GgufError::TensorNotFound`].
    pub fn tensor_bytes(&self, name: &str) -> Result<&'a [u8], GgufError> {
        let info = self.tensor(name)?;
        Ok(self.data_of(info))
    }

    fn typed_bytes(&self, name: &str, expected: GgmlType) -> Result<&'a [u8], GgufError> {
        let info = self.tensor(name)?;
        if info.ggml_type != expected {
            return Err(GgufError::TensorTypeMismatch {
                tensor: name.to_owned(),
                expected,
                found: info.ggml_type,
            });
        }
        Ok(self.data_of(info))
    }

    fn cast<T: bytemuck::Pod>(name: &str, bytes: &'a [u8]) -> Result<&'a [T], GgufError> {
        bytemuck::try_cast_slice(bytes).map_err(|_| GgufError::MisalignedData {
            tensor: name.to_owned(),
            required: core::mem::align_of::<T>(),
        })
    }

    /// The data of an `F32` tensor, without copying.
    ///
    /// # Errors
    ///
    /// [`GgufError::TensorNotFound`], [`GgufError::TensorTypeMismatch`], or
    /// [`GgufError::MisalignedData`] if the data is not 4-byte aligned in
    /// memory.
    pub fn tensor_f32(&self, name: &str) -> Result<&'a [f32], GgufError> {
        Self::cast(name, self.typed_bytes(name, GgmlType::F32)?)
    }

    /// The data of an `F16` tensor, without copying.
    ///
    /// # Errors
    ///
    /// As [`tensor_f32`](Self::tensor_f32), with 2-byte alignment.
    pub fn tensor_f16(&self, name: &str) -> Result<&'a [f16], GgufError> {
        Self::cast(name, self.typed_bytes(name, GgmlType::F16)?)
    }

    /// The blocks of a `Q8_0` tensor, without copying (blocks have
    /// alignment 1, so this works at any address).
    ///
    /// # Errors
    ///
    /// [`GgufError::TensorNotFound`], [`GgufError::TensorTypeMismatch`].
    pub fn tensor_q8_0(&self, name: &str) -> Result<&'a [BlockQ8_0], GgufError> {
        Self::cast(name, self.typed_bytes(name, GgmlType::Q8_0)?)
    }
}
