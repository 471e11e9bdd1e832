//! [`GgufFile`]: a GGUF file that owns its bytes, memory-mapped or read into
//! an aligned buffer.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapMut};

use super::error::GgufError;
use super::parse;
use super::reader::{Gguf, Header, TensorInfo, TensorLayout};
use super::types::GgmlType;
use crate::quant::QK_K;
use crate::unsafe_core::mmap::map_read_only;

/// A chunk of the in-memory buffer: 32-byte aligned so that the data
/// section (aligned to `general.alignment` within the file) is as aligned in
/// memory as it is in a memory map, for alignments up to 32.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(32))]
struct Chunk([u8; 32]);

enum Storage {
    Mapped(Mmap),
    /// A copy in anonymous memory, advised to use huge pages (writable, so
    /// that [`GgufFile::pack_rows8`] can rearrange it; only `&mut
    /// GgufFile` can).
    Anonymous(MmapMut),
    Memory {
        chunks: Vec<Chunk>,
        len: usize,
    },
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(map) => map,
            Storage::Anonymous(map) => map,
            Storage::Memory { chunks, len } => &bytemuck::cast_slice(chunks)[..*len],
        }
    }
}

/// Files from this size up are read into huge-page-advised memory (and
/// KV caches from this size up may take it, `model::kv_cache`).
#[cfg(all(target_os = "linux", not(miri)))]
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// `len` bytes of zeroed anonymous memory advised to use transparent huge
/// pages (`MADV_HUGEPAGE`), or `None` if the map fails. The advice is only
/// advice: without huge pages the memory still works.
#[cfg(all(target_os = "linux", not(miri)))]
pub(crate) fn huge_page_map(len: usize) -> Option<memmap2::MmapMut> {
    let map = memmap2::MmapOptions::new().len(len).map_anon().ok()?;
    let _ = map.advise(memmap2::Advice::HugePage);
    Some(map)
}

/// A validated GGUF file that owns its bytes.
///
/// [`open`](Self::open) maps the file (only the header is read up front;
/// tensor data is paged in by the OS when first touched, the right choice
/// for multi-gigabyte models),
/// [`read`](Self::read) copies it into memory. Both validate the whole file
/// before returning; [`gguf`](Self::gguf) then gives the borrowed view with
/// the metadata getters and zero-copy tensor views.
///
/// ```no_run
/// use inferno_cpu::gguf::GgufFile;
///
/// let file = GgufFile::open("model.gguf")?;
/// let gguf = file.gguf();
/// let layers = gguf.get_u32("qwen3.block_count")?;
/// let embd = gguf.tensor_q8_0("token_embd.weight")?;
/// # Ok::<(), inferno_cpu::gguf::GgufError>(())
/// ```
pub struct GgufFile {
    storage: Storage,
    header: Header,
    path: PathBuf,
}

impl GgufFile {
    /// Memory-maps and validates the file at `path`.
    ///
    /// This is a safe function with a condition it cannot check: **nothing
    /// may truncate or write the file while the returned value lives.** The
    /// map shows the file's current contents through shared references
    /// (`&[u8]`, `&[f32]`, the Q8_0 blocks):
    ///
    /// * truncating the file makes touching the lost pages kill the process
    ///   with `SIGBUS`;
    /// * another process (or this one, through another handle) writing the
    ///   file changes the bytes behind live shared references, which is
    ///   undefined behaviour in Rust's memory model, not merely a different
    ///   reading of the bytes: the compiler may assume they never change.
    ///
    /// Model files are written once and then only read, which is what this
    /// assumes; write a new model to a temporary name and rename it into
    /// place rather than rewriting a file that may be mapped. This crate
    /// never writes a file. [`read`](Self::read) copies the file into
    /// memory instead and has no such condition: use it for any file that
    /// may change while open.
    ///
    /// # Errors
    ///
    /// [`GgufError::Io`] if the file cannot be opened or mapped, or any
    /// validation error.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, GgufError> {
        let path = path.as_ref();
        let io = |source| GgufError::Io {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len == 0 {
            // Nothing to map (and mapping zero bytes fails on some systems):
            // report what is wrong with an empty file.
            return Self::from_memory(Vec::new(), 0, path);
        }
        let map = map_read_only(&file).map_err(io)?;
        Self::validated(Storage::Mapped(map), path)
    }

    /// Reads the file at `path` into memory and validates it.
    ///
    /// The buffer is 32-byte aligned, so `f32` and `f16` views work as they
    /// do on a map. Memory use is the file's length, taken from the file
    /// system, never from a number inside the file. On Linux a file of
    /// 2 MiB or more is read into anonymous memory advised to use
    /// transparent huge pages (`MADV_HUGEPAGE`): a decode step streams
    /// every weight once, and 2 MiB pages take most TLB misses out of that
    /// stream.
    ///
    /// # Errors
    ///
    /// [`GgufError::Io`] if the file cannot be read, or any validation
    /// error.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, GgufError> {
        let path = path.as_ref();
        let io = |source| GgufError::Io {
            path: path.to_owned(),
            source,
        };
        let mut file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let len = usize::try_from(len).map_err(|_| {
            io(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                "file larger than the address space",
            ))
        })?;
        #[cfg(all(target_os = "linux", not(miri)))]
        if len >= HUGE_PAGE {
            if let Some(mut map) = huge_page_map(len) {
                file.read_exact(&mut map).map_err(io)?;
                return Self::validated(Storage::Anonymous(map), path);
            }
        }
        let mut chunks = vec![Chunk([0; 32]); len.div_ceil(32)];
        let buf: &mut [u8] = bytemuck::cast_slice_mut(&mut chunks);
        file.read_exact(&mut buf[..len]).map_err(io)?;
        Self::from_memory(chunks, len, path)
    }

    /// Copies `bytes` (a whole GGUF file already in memory, such as one
    /// written by [`synth::model_bytes`](crate::synth::model_bytes)) into an
    /// aligned buffer and validates it. [`path`](Self::path) is empty.
    ///
    /// ```
    /// use inferno_cpu::gguf::GgufFile;
    /// use inferno_cpu::synth::{model_bytes, SynthConfig};
    ///
    /// let file = GgufFile::from_bytes(&model_bytes(&SynthConfig::tiny(), 7)?)?;
    /// assert_eq!(file.gguf().get_str("general.architecture")?, "qwen3");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// Any validation error.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, GgufError> {
        let mut chunks = vec![Chunk([0; 32]); bytes.len().div_ceil(32)];
        bytemuck::cast_slice_mut::<Chunk, u8>(&mut chunks)[..bytes.len()].copy_from_slice(bytes);
        Self::from_memory(chunks, bytes.len(), Path::new(""))
    }

    fn from_memory(chunks: Vec<Chunk>, len: usize, path: &Path) -> Result<Self, GgufError> {
        Self::validated(Storage::Memory { chunks, len }, path)
    }

    /// Parses and validates the bytes `storage` holds.
    fn validated(storage: Storage, path: &Path) -> Result<Self, GgufError> {
        let header = parse::parse(storage.bytes())?;
        Ok(Self {
            storage,
            header,
            path: path.to_owned(),
        })
    }

    /// The borrowed view: metadata getters and zero-copy tensor views.
    pub fn gguf(&self) -> Gguf<'_> {
        Gguf::from_parts(self.storage.bytes(), &self.header)
    }

    /// The parsed header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the bytes are memory-mapped (from [`open`](Self::open)).
    pub fn is_mapped(&self) -> bool {
        matches!(self.storage, Storage::Mapped(_))
    }

    /// Packs the rows of every 2-D Q4_K, Q5_K and Q4_0 tensor that `pick`
    /// accepts, and whose rows come in whole groups of eight, eight at a
    /// time in memory ([`pack_rows8`](crate::quant::pack_rows8), in place),
    /// and marks them [`TensorLayout::Q4KRows8`], [`TensorLayout::Q5KRows8`]
    /// or [`TensorLayout::Q4_0Rows8`]; returns how many it packed. The bytes of
    /// a mapped file ([`open`](Self::open)) are the page cache's and stay
    /// as they are (none packed). What a packed tensor's views show is the
    /// packed order; its type, shape and size are the same.
    pub(crate) fn pack_rows8(&mut self, pick: impl Fn(&TensorInfo) -> bool) -> usize {
        use crate::quant::packed::pack_in_place;
        use crate::quant::{BlockQ4Kx8, BlockQ4_0x8, BlockQ5Kx8, QK4_0};
        let data_offset = self.header.data_offset();
        let bytes: &mut [u8] = match &mut self.storage {
            Storage::Mapped(_) => return 0,
            Storage::Anonymous(map) => map,
            Storage::Memory { chunks, len } => &mut bytemuck::cast_slice_mut(chunks)[..*len],
        };
        let mut packed = 0;
        for info in self.header.tensors_mut() {
            let [cols, _rows] = info.dims[..] else {
                continue;
            };
            let (layout, block) = match info.ggml_type {
                GgmlType::Q4_K => (TensorLayout::Q4KRows8, QK_K),
                GgmlType::Q5_K => (TensorLayout::Q5KRows8, QK_K),
                GgmlType::Q4_0 => (TensorLayout::Q4_0Rows8, QK4_0),
                _ => continue,
            };
            if info.layout != TensorLayout::File || !pick(info) {
                continue;
            }
            // Validated at parse time: the data lies inside the file.
            let range = data_offset
                .checked_add(info.offset)
                .and_then(|start| Some((start, start.checked_add(info.n_bytes)?)))
                .and_then(|(a, b)| Some(usize::try_from(a).ok()?..usize::try_from(b).ok()?));
            let (Some(data), Ok(nb)) = (
                range.and_then(|r| bytes.get_mut(r)),
                usize::try_from(cols / block as u64),
            ) else {
                continue;
            };
            let done = match layout {
                TensorLayout::Q4KRows8 => pack_in_place::<BlockQ4Kx8>(data, nb),
                TensorLayout::Q5KRows8 => pack_in_place::<BlockQ5Kx8>(data, nb),
                _ => pack_in_place::<BlockQ4_0x8>(data, nb),
            };
            if done {
                info.layout = layout;
                packed += 1;
            }
        }
        packed
    }
}

impl core::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("mapped", &self.is_mapped())
            .field("len", &self.header.file_len())
            .field("tensors", &self.header.tensors().len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn owning_and_borrowed_types_cross_threads() {
        // Model weights are read from pool workers: both must be shareable.
        assert_send_sync::<GgufFile>();
        assert_send_sync::<Gguf<'static>>();
    }

    #[test]
    fn memory_buffer_is_32_byte_aligned() {
        let storage = Storage::Memory {
            chunks: vec![Chunk([7; 32]); 3],
            len: 70,
        };
        let bytes = storage.bytes();
        assert_eq!(bytes.len(), 70);
        assert_eq!(bytes.as_ptr() as usize % 32, 0);
    }

    /// A file past the huge-page threshold takes the anonymous-memory path
    /// (on Linux); a small one the `Vec` path. Both give the file's bytes,
    /// aligned, the same as a map of it.
    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot call mmap")]
    fn read_matches_open_above_and_below_the_huge_page_size() {
        use crate::gguf::{GgmlType, Writer};
        let dir = std::env::temp_dir();
        for n in [1000usize, 3 << 20] {
            let data: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
            let mut w = Writer::new();
            w.add_tensor("t", GgmlType::I8, &[n as u64], &data[..])
                .unwrap();
            let path = dir.join(format!("inferno-read-{}-{n}.gguf", std::process::id()));
            std::fs::write(&path, w.to_bytes().unwrap()).unwrap();
            let read = GgufFile::read(&path).unwrap();
            let mapped = GgufFile::open(&path).unwrap();
            assert!(!read.is_mapped() && mapped.is_mapped());
            assert_eq!(read.gguf().bytes(), mapped.gguf().bytes());
            assert_eq!(read.gguf().bytes().as_ptr() as usize % 32, 0);
            assert_eq!(read.gguf().tensor_bytes("t").unwrap(), &data[..]);
            #[cfg(all(target_os = "linux", not(miri)))]
            assert_eq!(
                matches!(read.storage, Storage::Anonymous(_)),
                n >= HUGE_PAGE
            );
            drop((read, mapped));
            std::fs::remove_file(&path).unwrap();
        }
    }
}
