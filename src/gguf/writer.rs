//! [`Writer`]: builds spec-conformant GGUF files.
//!
//! Used by tests, fuzz seeds and synthetic model files. The writer refuses
//! anything the reader would reject (duplicate keys or tensors, bad shapes,
//! data of the wrong length, bad alignment), so what it writes always reads
//! back, key for key and byte for byte.

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::Write;

use half::f16;

use super::error::WriteError;
use super::parse::{alignment_ok, key_problem};
use super::reader::Gguf;
use super::types::GgmlType;
use super::value::{Array, Value};
use super::{
    ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_DEPTH, MAX_DIMS, MAX_TENSOR_NAME_LEN,
};
use crate::quant::BlockQ8_0;

struct PendingTensor<'a> {
    name: String,
    dims: Vec<u64>,
    ggml_type: GgmlType,
    /// Bytes of data the shape and type need.
    len: u64,
    /// `None` for a tensor declared with
    /// [`declare_tensor`](Writer::declare_tensor), whose bytes are streamed
    /// through a [`TensorStream`].
    data: Option<Cow<'a, [u8]>>,
}

/// A GGUF file under construction: metadata in insertion order, then tensors
/// in insertion order, each placed at the next aligned offset.
///
/// Tensor data is borrowed where possible (`'a`), so writing a large model
/// does not copy its weights first. A model too large to hold in memory at
/// all declares its tensors with [`declare_tensor`](Self::declare_tensor)
/// and streams their bytes with [`stream_to`](Self::stream_to), one piece at
/// a time.
///
/// ```
/// use inferno_cpu::gguf::{Gguf, Writer};
/// use inferno_cpu::BlockQ8_0;
///
/// let blocks = vec![BlockQ8_0::default(); 4];
/// let mut w = Writer::new();
/// w.add_str("general.architecture", "demo")?
///     .add_tensor_q8_0("w", &[64, 2], &blocks)?;
/// let bytes = w.to_bytes()?;
/// let gguf = Gguf::parse(&bytes)?;
/// assert_eq!(gguf.tensor_q8_0("w")?, &blocks[..]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Writer<'a> {
    version: u32,
    alignment: u64,
    metadata: Vec<(String, Value)>,
    keys: HashSet<String>,
    tensors: Vec<PendingTensor<'a>>,
    names: HashSet<String>,
}

impl Default for Writer<'_> {
    fn default() -> Self {
        Self::new()
    }
}

macro_rules! adders {
    ($( $fn:ident($ty:ty) => $variant:ident; )*) => {
        $(
            #[doc = concat!("Adds a `", stringify!($ty), "` key.")]
            ///
            /// # Errors
            ///
            /// [`WriteError::DuplicateKey`].
            pub fn $fn(&mut self, key: &str, value: $ty) -> Result<&mut Self, WriteError> {
                self.add(key, Value::$variant(value))
            }
        )*
    };
}

impl<'a> Writer<'a> {
    /// An empty version-3 file with the default alignment of 32.
    pub fn new() -> Self {
        Self {
            version: 3,
            alignment: DEFAULT_ALIGNMENT,
            metadata: Vec::new(),
            keys: HashSet::new(),
            tensors: Vec::new(),
            names: HashSet::new(),
        }
    }

    /// A writer holding every key and tensor of `gguf`, in file order, with
    /// its version and alignment; tensor data is borrowed, not copied
    /// (except a tensor packed in memory, whose rows are unpacked back to
    /// the file's order: [`Gguf::data_in_file_order`]). Useful to copy a
    /// file with a few keys changed, and as a round-trip check: writing it
    /// out and parsing the result gives back `gguf`'s keys, values and
    /// tensor bytes as the file holds them.
    ///
    /// # Errors
    ///
    /// None for a `gguf` that came from the parser, which accepts only what
    /// the writer can write; the `Result` covers the writer's own checks.
    pub fn from_gguf(gguf: &Gguf<'a>) -> Result<Self, WriteError> {
        let mut w = Self::new();
        w.version(gguf.version());
        for (key, value) in gguf.metadata().iter() {
            w.add(key, value.clone())?;
        }
        for t in gguf.tensors() {
            w.add_tensor(&t.name, t.ggml_type, &t.dims, gguf.data_in_file_order(t))?;
        }
        Ok(w)
    }

    /// Writes GGUF version 2 instead of 3 (the layouts are the same; only
    /// the version field differs). Any other version is ignored.
    pub fn version(&mut self, version: u32) -> &mut Self {
        if matches!(version, 2 | 3) {
            self.version = version;
        }
        self
    }

    /// Sets the data alignment, adding the `general.alignment` key.
    ///
    /// # Errors
    ///
    /// [`WriteError::BadAlignment`] unless `alignment` is a power of two and
    /// a multiple of 8; [`WriteError::DuplicateKey`] if the alignment was
    /// already set.
    pub fn alignment(&mut self, alignment: u32) -> Result<&mut Self, WriteError> {
        self.add(ALIGNMENT_KEY, Value::U32(alignment))
    }

    /// Adds a metadata key. `general.alignment` must be a `u32` power of two
    /// and a multiple of 8, and sets the data alignment.
    ///
    /// # Errors
    ///
    /// [`WriteError::InvalidKey`] for a key the reader would refuse (see
    /// [`GgufError::InvalidKey`](super::GgufError::InvalidKey)),
    /// [`WriteError::DuplicateKey`], [`WriteError::BadAlignment`], or
    /// [`WriteError::NestingTooDeep`] for an array the reader would refuse.
    pub fn add(&mut self, key: &str, value: Value) -> Result<&mut Self, WriteError> {
        if self.keys.contains(key) {
            return Err(WriteError::DuplicateKey {
                key: key.to_owned(),
            });
        }
        if let Some(reason) = key_problem(key) {
            return Err(WriteError::InvalidKey {
                key: key.to_owned(),
                reason,
            });
        }
        if key == ALIGNMENT_KEY {
            match value {
                Value::U32(v) if alignment_ok(v) => self.alignment = u64::from(v),
                Value::U32(v) => return Err(WriteError::BadAlignment { value: v }),
                _ => return Err(WriteError::BadAlignment { value: 0 }),
            }
        }
        if let Value::Array(a) = &value {
            if a.depth() > MAX_ARRAY_DEPTH {
                return Err(WriteError::NestingTooDeep {
                    key: key.to_owned(),
                });
            }
        }
        self.keys.insert(key.to_owned());
        self.metadata.push((key.to_owned(), value));
        Ok(self)
    }

    adders! {
        add_u8(u8) => U8;
        add_i8(i8) => I8;
        add_u16(u16) => U16;
        add_i16(i16) => I16;
        add_u32(u32) => U32;
        add_i32(i32) => I32;
        add_f32(f32) => F32;
        add_bool(bool) => Bool;
        add_u64(u64) => U64;
        add_i64(i64) => I64;
        add_f64(f64) => F64;
        add_array(Array) => Array;
    }

    /// Adds a string key.
    ///
    /// # Errors
    ///
    /// [`WriteError::DuplicateKey`].
    pub fn add_str(&mut self, key: &str, value: &str) -> Result<&mut Self, WriteError> {
        self.add(key, Value::String(value.to_owned()))
    }

    /// Adds a tensor of any type from its raw little-endian bytes.
    ///
    /// `dims` is in GGML order (row length first).
    ///
    /// # Errors
    ///
    /// [`WriteError::TensorNameTooLong`] (over 64 bytes),
    /// [`WriteError::DuplicateTensor`], [`WriteError::BadShape`] (not 1 to 4
    /// nonzero dimensions), [`WriteError::BadSize`] (first dimension not a
    /// whole number of blocks, or overflow), [`WriteError::DataLength`].
    pub fn add_tensor(
        &mut self,
        name: &str,
        ggml_type: GgmlType,
        dims: &[u64],
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<&mut Self, WriteError> {
        let expected = self.check_tensor(name, ggml_type, dims)?;
        let data = data.into();
        if data.len() as u64 != expected {
            return Err(WriteError::DataLength {
                tensor: name.to_owned(),
                expected,
                found: data.len() as u64,
            });
        }
        self.push_tensor(name, ggml_type, dims, expected, Some(data));
        Ok(self)
    }

    /// Declares a tensor whose bytes are not given now but streamed, in
    /// tensor order, through the [`TensorStream`] that
    /// [`stream_to`](Self::stream_to) returns. This lets a writer produce a
    /// model larger than the memory it may use: the header only needs each
    /// tensor's name, type and shape.
    ///
    /// `dims` is in GGML order (row length first).
    ///
    /// # Errors
    ///
    /// As [`add_tensor`](Self::add_tensor), except that there is no data to
    /// have the wrong length.
    pub fn declare_tensor(
        &mut self,
        name: &str,
        ggml_type: GgmlType,
        dims: &[u64],
    ) -> Result<&mut Self, WriteError> {
        let expected = self.check_tensor(name, ggml_type, dims)?;
        self.push_tensor(name, ggml_type, dims, expected, None);
        Ok(self)
    }

    /// The checks every tensor passes; returns its data length in bytes.
    fn check_tensor(
        &self,
        name: &str,
        ggml_type: GgmlType,
        dims: &[u64],
    ) -> Result<u64, WriteError> {
        if name.len() > MAX_TENSOR_NAME_LEN {
            return Err(WriteError::TensorNameTooLong {
                tensor: name.to_owned(),
            });
        }
        if self.names.contains(name) {
            return Err(WriteError::DuplicateTensor {
                tensor: name.to_owned(),
            });
        }
        if dims.is_empty() || dims.len() > MAX_DIMS || dims.contains(&0) {
            return Err(WriteError::BadShape {
                tensor: name.to_owned(),
                dims: dims.to_vec(),
            });
        }
        dims.iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .filter(|_| dims[0].is_multiple_of(ggml_type.block_size()))
            .and_then(|n| ggml_type.bytes_for(n))
            .ok_or_else(|| WriteError::BadSize {
                tensor: name.to_owned(),
                ggml_type,
                dims: dims.to_vec(),
            })
    }

    fn push_tensor(
        &mut self,
        name: &str,
        ggml_type: GgmlType,
        dims: &[u64],
        len: u64,
        data: Option<Cow<'a, [u8]>>,
    ) {
        self.names.insert(name.to_owned());
        self.tensors.push(PendingTensor {
            name: name.to_owned(),
            dims: dims.to_vec(),
            ggml_type,
            len,
            data,
        });
    }

    /// Adds an `F32` tensor.
    ///
    /// # Errors
    ///
    /// As [`add_tensor`](Self::add_tensor).
    pub fn add_tensor_f32(
        &mut self,
        name: &str,
        dims: &[u64],
        data: &'a [f32],
    ) -> Result<&mut Self, WriteError> {
        let bytes = le_bytes(data, |x| x.to_le_bytes());
        self.add_tensor(name, GgmlType::F32, dims, bytes)
    }

    /// Adds an `F16` tensor.
    ///
    /// # Errors
    ///
    /// As [`add_tensor`](Self::add_tensor).
    pub fn add_tensor_f16(
        &mut self,
        name: &str,
        dims: &[u64],
        data: &'a [f16],
    ) -> Result<&mut Self, WriteError> {
        let bytes = le_bytes(data, |x| x.to_le_bytes());
        self.add_tensor(name, GgmlType::F16, dims, bytes)
    }

    /// Adds a `Q8_0` tensor from its blocks (`dims[0]` is the row length in
    /// weights, a multiple of 32).
    ///
    /// # Errors
    ///
    /// As [`add_tensor`](Self::add_tensor).
    pub fn add_tensor_q8_0(
        &mut self,
        name: &str,
        dims: &[u64],
        blocks: &'a [BlockQ8_0],
    ) -> Result<&mut Self, WriteError> {
        let bytes: &'a [u8] = bytemuck::cast_slice(blocks);
        self.add_tensor(name, GgmlType::Q8_0, dims, bytes)
    }

    /// Writes the file to `out`, returning the number of bytes written.
    ///
    /// # Errors
    ///
    /// [`WriteError::Io`]; [`WriteError::DataNotGiven`] (before anything is
    /// written) if a tensor was declared with
    /// [`declare_tensor`](Self::declare_tensor): such a file is written with
    /// [`stream_to`](Self::stream_to).
    pub fn write_to(&self, out: impl Write) -> Result<u64, WriteError> {
        if let Some(t) = self.tensors.iter().find(|t| t.data.is_none()) {
            return Err(WriteError::DataNotGiven {
                tensor: t.name.clone(),
            });
        }
        self.stream_to(out)?.finish()
    }

    /// The length of the file this writer writes, in bytes, without writing
    /// it (the header is serialized to measure it; tensor data is not
    /// touched). Lets a caller size a progress report or recognise a file it
    /// wrote before.
    pub fn file_len(&self) -> u64 {
        self.data_start(self.header().len() as u64) + self.data_len()
    }

    /// Where the data section starts after a header of `head_len` bytes: a
    /// file without tensors has no data section and no padding.
    fn data_start(&self, head_len: u64) -> u64 {
        if self.tensors.is_empty() {
            head_len
        } else {
            head_len.next_multiple_of(self.alignment)
        }
    }

    /// The data section's length: each tensor padded to the alignment.
    fn data_len(&self) -> u64 {
        self.tensors
            .iter()
            .map(|t| t.len.next_multiple_of(self.alignment))
            .sum()
    }

    /// Header bytes: magic, version, counts, metadata, tensor infos.
    fn header(&self) -> Vec<u8> {
        let mut head = Vec::new();
        head.extend_from_slice(&MAGIC);
        head.extend_from_slice(&self.version.to_le_bytes());
        head.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        head.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            put_str(&mut head, key);
            head.extend_from_slice(&value.value_type().id().to_le_bytes());
            put_value(&mut head, value);
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            put_str(&mut head, &t.name);
            head.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                head.extend_from_slice(&d.to_le_bytes());
            }
            head.extend_from_slice(&t.ggml_type.id().to_le_bytes());
            head.extend_from_slice(&offset.to_le_bytes());
            offset = (offset + t.len).next_multiple_of(self.alignment);
        }
        head
    }

    /// Writes the header, then the data of every tensor up to the first
    /// declared one, and returns a [`TensorStream`] that takes the declared
    /// tensors' bytes in order (tensors added with their data are written
    /// by the stream itself when their turn comes).
    ///
    /// ```
    /// use inferno_cpu::gguf::{GgmlType, Gguf, Writer};
    ///
    /// let mut w = Writer::new();
    /// w.declare_tensor("big", GgmlType::F32, &[4, 2])?;
    /// let mut file = Vec::new();
    /// let mut stream = w.stream_to(&mut file)?;
    /// for row in 0..2u8 {
    ///     // Each row produced and written on its own.
    ///     let values = [f32::from(row); 4];
    ///     let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
    ///     stream.write_data(&bytes)?;
    /// }
    /// assert_eq!(stream.finish()?, w.file_len());
    /// assert_eq!(Gguf::parse(&file)?.tensor_f32("big")?[4..], [1.0; 4]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`WriteError::Io`].
    pub fn stream_to<W: Write>(&self, mut out: W) -> Result<TensorStream<'_, 'a, W>, WriteError> {
        let head = self.header();
        out.write_all(&head)?;
        let mut stream = TensorStream {
            total: self.data_start(head.len() as u64) + self.data_len(),
            writer: self,
            out,
            next: 0,
            filled: 0,
            written: head.len() as u64,
        };
        if !self.tensors.is_empty() {
            stream.pad()?;
        }
        stream.write_given()?;
        Ok(stream)
    }

    /// The file as bytes.
    ///
    /// # Errors
    ///
    /// Never in practice (writing to a `Vec` cannot fail); the `Result`
    /// matches [`write_to`](Self::write_to).
    pub fn to_bytes(&self) -> Result<Vec<u8>, WriteError> {
        let mut out = Vec::new();
        self.write_to(&mut out)?;
        Ok(out)
    }
}

/// A GGUF file being written by [`Writer::stream_to`]: the header is out,
/// and the declared tensors' bytes go through
/// [`write_data`](Self::write_data), in tensor order, in pieces of any size.
///
/// Each piece is checked against the tensor it belongs to, so the file can
/// only come out as the header describes it; [`finish`](Self::finish)
/// refuses a file whose data stopped short.
pub struct TensorStream<'w, 'a, W: Write> {
    writer: &'w Writer<'a>,
    out: W,
    /// Index of the tensor whose data comes next.
    next: usize,
    /// Bytes of that tensor written so far.
    filled: u64,
    written: u64,
    total: u64,
}

impl<W: Write> TensorStream<'_, '_, W> {
    /// The name of the declared tensor whose bytes come next, or `None`
    /// once every tensor was written.
    pub fn next_tensor(&self) -> Option<&str> {
        self.writer.tensors.get(self.next).map(|t| t.name.as_str())
    }

    /// Bytes written to the sink so far, header and padding included.
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// The length the whole file will have.
    pub fn total_len(&self) -> u64 {
        self.total
    }

    /// Appends `bytes` to the data of the current declared tensor; when it
    /// is complete, pads it and writes the tensors after it that were added
    /// with their data, up to the next declared one.
    ///
    /// # Errors
    ///
    /// [`WriteError::DataLength`] if `bytes` runs past the current tensor's
    /// end (nothing is written then); [`WriteError::NoTensorPending`] when
    /// every tensor is already complete; [`WriteError::Io`].
    pub fn write_data(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        let Some(t) = self.writer.tensors.get(self.next) else {
            return Err(WriteError::NoTensorPending {
                len: bytes.len() as u64,
            });
        };
        let filled = self.filled + bytes.len() as u64;
        if filled > t.len {
            return Err(WriteError::DataLength {
                tensor: t.name.clone(),
                expected: t.len,
                found: filled,
            });
        }
        self.out.write_all(bytes)?;
        self.written += bytes.len() as u64;
        self.filled = filled;
        if filled == t.len {
            self.pad()?;
            self.next += 1;
            self.filled = 0;
            self.write_given()?;
        }
        Ok(())
    }

    /// Flushes the sink and returns the file's length.
    ///
    /// # Errors
    ///
    /// [`WriteError::DataLength`] for the first tensor whose data did not
    /// all arrive; [`WriteError::Io`].
    pub fn finish(mut self) -> Result<u64, WriteError> {
        if let Some(t) = self.writer.tensors.get(self.next) {
            return Err(WriteError::DataLength {
                tensor: t.name.clone(),
                expected: t.len,
                found: self.filled,
            });
        }
        self.out.flush()?;
        Ok(self.written)
    }

    /// Writes the tensors that came with their data, from the current one
    /// up to the next declared one.
    fn write_given(&mut self) -> Result<(), WriteError> {
        while let Some(data) = self
            .writer
            .tensors
            .get(self.next)
            .and_then(|t| t.data.as_deref())
        {
            self.out.write_all(data)?;
            self.written += data.len() as u64;
            self.pad()?;
            self.next += 1;
        }
        Ok(())
    }

    /// Zero bytes up to the next multiple of the alignment, written from one
    /// fixed 64 KiB block of zeros: the alignment can be as large as 2^31,
    /// and no buffer may be sized from it.
    fn pad(&mut self) -> Result<(), WriteError> {
        static ZEROS: [u8; 1 << 16] = [0; 1 << 16];
        let mut n = self.written.next_multiple_of(self.writer.alignment) - self.written;
        while n > 0 {
            let k = n.min(ZEROS.len() as u64);
            self.out.write_all(&ZEROS[..k as usize])?;
            n -= k;
        }
        self.written = self.written.next_multiple_of(self.writer.alignment);
        Ok(())
    }
}

/// `data` as little-endian bytes: borrowed on little-endian targets,
/// converted on big-endian ones.
fn le_bytes<T: bytemuck::Pod, const N: usize>(
    data: &[T],
    to_le: fn(&T) -> [u8; N],
) -> Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        Cow::Borrowed(bytemuck::cast_slice(data))
    } else {
        Cow::Owned(data.iter().flat_map(to_le).collect())
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U8(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::Bool(v) => out.push(u8::from(*v)),
        Value::String(s) => put_str(out, s),
        Value::Array(a) => put_array(out, a),
        Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
    }
}

fn put_array(out: &mut Vec<u8>, array: &Array) {
    out.extend_from_slice(&array.element_type().id().to_le_bytes());
    out.extend_from_slice(&(array.len() as u64).to_le_bytes());
    fn each<T>(out: &mut Vec<u8>, items: &[T], f: impl Fn(&mut Vec<u8>, &T)) {
        for item in items {
            f(out, item);
        }
    }
    match array {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
        Array::U16(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
        Array::I16(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
        Array::U32(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
        Array::I32(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
        Array::F32(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
        Array::Bool(v) => each(out, v, |o, x| o.push(u8::from(*x))),
        Array::String(v) => each(out, v, |o, s| put_str(o, s)),
        Array::Array(v) => each(out, v, put_array),
        Array::U64(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
        Array::I64(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
        Array::F64(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensors_are_padded_to_the_alignment() {
        let mut w = Writer::new();
        w.add_tensor("a", GgmlType::I8, &[3], &[1u8, 2, 3][..])
            .unwrap()
            .add_tensor("b", GgmlType::I8, &[1], &[9u8][..])
            .unwrap();
        let bytes = w.to_bytes().unwrap();
        // Header: magic, version, counts; two infos of 8+1+4+8+4+8 bytes.
        let header_len: usize = 4 + 4 + 8 + 8 + 2 * (8 + 1 + 4 + 8 + 4 + 8);
        let data = header_len.next_multiple_of(32);
        assert_eq!(bytes.len(), data + 64);
        assert_eq!(&bytes[data..data + 3], &[1, 2, 3]);
        assert!(bytes[data + 3..data + 32].iter().all(|&b| b == 0));
        assert_eq!(bytes[data + 32], 9);
        // b's info ends with its offset, 32.
        assert_eq!(&bytes[header_len - 8..header_len], &32u64.to_le_bytes());
    }

    #[test]
    fn metadata_only_file_has_no_padding() {
        let mut w = Writer::new();
        w.add_bool("k", true).unwrap();
        let bytes = w.to_bytes().unwrap();
        assert_eq!(bytes.len(), 24 + 8 + 1 + 4 + 1);
        assert_eq!(bytes[bytes.len() - 1], 1);
    }

    #[test]
    fn huge_alignment_pads_without_a_buffer_of_that_size() {
        // 2^31 is a legal alignment; the padding before the data section
        // is streamed, so writing this file costs its own size only.
        let mut w = Writer::new();
        w.alignment(1 << 31).unwrap();
        let bytes = w.to_bytes().unwrap();
        assert!(bytes.len() < 100);
        let mut w = Writer::new();
        w.alignment(1 << 20)
            .unwrap()
            .add_tensor("t", GgmlType::I8, &[1], &[5u8][..])
            .unwrap();
        let mut sink = std::io::sink();
        assert_eq!(w.write_to(&mut sink).unwrap(), 2 << 20);
    }

    /// Three tensors: `a` and `c` given, `b` declared, so the stream writes
    /// `a` on its own, takes `b` in pieces, then writes `c` by itself.
    fn mixed() -> (Writer<'static>, Writer<'static>) {
        let mut given = Writer::new();
        given.add_u32("k", 7).unwrap();
        let mut streamed = Writer::new();
        streamed.add_u32("k", 7).unwrap();
        for w in [&mut given, &mut streamed] {
            w.add_tensor("a", GgmlType::I8, &[3], &[1u8, 2, 3][..])
                .unwrap();
        }
        given
            .add_tensor("b", GgmlType::I8, &[5, 2], (10u8..20).collect::<Vec<_>>())
            .unwrap();
        streamed.declare_tensor("b", GgmlType::I8, &[5, 2]).unwrap();
        for w in [&mut given, &mut streamed] {
            w.add_tensor("c", GgmlType::I8, &[1], &[9u8][..]).unwrap();
        }
        (given, streamed)
    }

    #[test]
    fn streamed_file_equals_the_written_one() {
        let (given, streamed) = mixed();
        let expected = given.to_bytes().unwrap();
        assert_eq!(given.file_len(), expected.len() as u64);
        assert_eq!(streamed.file_len(), expected.len() as u64);
        let mut out = Vec::new();
        let mut s = streamed.stream_to(&mut out).unwrap();
        assert_eq!(s.next_tensor(), Some("b"));
        assert_eq!(s.total_len(), expected.len() as u64);
        s.write_data(&[10, 11, 12]).unwrap();
        s.write_data(&[]).unwrap();
        s.write_data(&(13u8..20).collect::<Vec<_>>()).unwrap();
        assert_eq!(s.next_tensor(), None);
        assert_eq!(s.bytes_written(), expected.len() as u64);
        assert_eq!(s.finish().unwrap(), expected.len() as u64);
        assert_eq!(out, expected);
    }

    #[test]
    fn stream_refuses_wrong_amounts_of_data() {
        let (_, streamed) = mixed();
        assert!(matches!(
            streamed.to_bytes(),
            Err(WriteError::DataNotGiven { tensor }) if tensor == "b"
        ));
        let mut out = Vec::new();
        let mut s = streamed.stream_to(&mut out).unwrap();
        s.write_data(&[0; 4]).unwrap();
        let before = s.bytes_written();
        assert!(matches!(
            s.write_data(&[0; 7]),
            Err(WriteError::DataLength {
                expected: 10,
                found: 11,
                ..
            })
        ));
        assert_eq!(s.bytes_written(), before, "a refused piece writes nothing");
        assert!(matches!(
            s.finish(),
            Err(WriteError::DataLength {
                expected: 10,
                found: 4,
                ..
            })
        ));
        let mut s = streamed.stream_to(std::io::sink()).unwrap();
        s.write_data(&[0; 10]).unwrap();
        assert!(matches!(
            s.write_data(&[1]),
            Err(WriteError::NoTensorPending { len: 1 })
        ));
        assert!(s.finish().is_ok());
    }

    #[test]
    fn declared_tensors_are_checked_like_given_ones() {
        let mut w = Writer::new();
        w.declare_tensor("q", GgmlType::Q8_0, &[64, 2]).unwrap();
        assert!(matches!(
            w.declare_tensor("q", GgmlType::F32, &[1]),
            Err(WriteError::DuplicateTensor { .. })
        ));
        assert!(matches!(
            w.declare_tensor("r", GgmlType::Q8_0, &[33]),
            Err(WriteError::BadSize { .. })
        ));
        assert!(matches!(
            w.declare_tensor("s", GgmlType::F32, &[]),
            Err(WriteError::BadShape { .. })
        ));
        let empty = Writer::new();
        assert_eq!(empty.file_len(), empty.to_bytes().unwrap().len() as u64);
    }
}
