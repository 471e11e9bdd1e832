//! Q4_K rows packed eight at a time: the layout the AVX-512 eight-row
//! decode kernel reads without rearranging anything.
//!
//! That kernel computes eight rows at once, one per 64-bit slot of a
//! register, so it needs each block's nibbles of eight rows transposed
//! (word `u` of row `r` in slot `r`) and the rows' heads side by side.
//! From GGML's row-major layout that costs 48 shuffles per block of eight
//! rows, and reading eight rows a block at a time is a pattern the
//! hardware prefetchers do not follow. Packed, block `b` of a group of
//! eight rows is one run of 1,152 bytes in exactly the order the kernel
//! loads them, and a group's blocks follow each other, so a product reads
//! its matrix front to back. [`BlockQ4Kx8::row`] gives a row's block back,
//! byte for byte.

use bytemuck::{Pod, Zeroable};

use super::q4_k::BlockQ4K;

/// Rows packed together.
pub const PACK_ROWS: usize = 8;

/// Block `b` of eight consecutive Q4_K rows, packed.
///
/// `heads[r]` is row `r`'s first 16 bytes (`d`, `dmin` and `scales`), and
/// `qs[8h + u][r]` its nibble bytes `64h + 8u .. 64h + 8u + 8` (`h` in
/// `0..2`, `u` in `0..8`): each 64-byte `qs[k]` holds one 8-byte word of
/// all eight rows. 1,152 bytes, the eight blocks' own 144 each, with
/// alignment 1 (a GGUF tensor's bytes cast to it at any address).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ4Kx8 {
    /// Each row's `d`, `dmin` and packed scales.
    pub heads: [[u8; 16]; PACK_ROWS],
    /// The rows' nibbles, a word of each row per 64 bytes.
    pub qs: [[[u8; 8]; PACK_ROWS]; 16],
}

const _: () = assert!(core::mem::size_of::<BlockQ4Kx8>() == PACK_ROWS * 144);
const _: () = assert!(core::mem::align_of::<BlockQ4Kx8>() == 1);

impl BlockQ4Kx8 {
    /// Packs block `b` of eight rows (`rows[r]` is row `r`'s block).
    pub fn pack(rows: [&BlockQ4K; PACK_ROWS]) -> Self {
        let mut p = Self::zeroed();
        for (r, blk) in rows.into_iter().enumerate() {
            let bytes: &[u8; 144] = bytemuck::cast_ref(blk);
            p.heads[r].copy_from_slice(&bytes[..16]);
            for (k, word) in blk.qs.as_chunks::<8>().0.iter().enumerate() {
                p.qs[k][r] = *word;
            }
        }
        p
    }

    /// Row `r`'s block (`r < 8`), as it was before packing.
    ///
    /// # Panics
    ///
    /// If `r >= 8`.
    pub fn row(&self, r: usize) -> BlockQ4K {
        let mut bytes = [0u8; 144];
        bytes[..16].copy_from_slice(&self.heads[r]);
        for (k, word) in bytes[16..].chunks_exact_mut(8).enumerate() {
            word.copy_from_slice(&self.qs[k][r]);
        }
        bytemuck::cast(bytes)
    }
}

/// Packs a row-major Q4_K matrix of `nb` blocks per row (`w.len() / nb`
/// rows, a multiple of eight): element `g * nb + b` of the result is block
/// `b` of rows `8g..8g + 8`.
///
/// # Panics
///
/// If `w` is not a whole number of groups of eight rows of `nb` blocks.
pub fn pack_q4_k_rows8(w: &[BlockQ4K], nb: usize) -> Vec<BlockQ4Kx8> {
    let group = PACK_ROWS * nb;
    assert!(
        nb > 0 && w.len().is_multiple_of(group),
        "pack_q4_k_rows8: {} blocks are not whole groups of eight rows of {nb}",
        w.len()
    );
    let mut out = Vec::with_capacity(w.len() / PACK_ROWS);
    for rows in w.chunks_exact(group) {
        out.extend((0..nb).map(|b| BlockQ4Kx8::pack(core::array::from_fn(|r| &rows[r * nb + b]))));
    }
    out
}

/// [`pack_q4_k_rows8`] in place: `bytes` holds a row-major Q4_K matrix of
/// `nb` blocks per row, whole groups of eight rows, and ends up holding
/// the packed one (the same length). Returns `false`, leaving `bytes` as
/// they were, if they are not such a matrix.
pub(crate) fn pack_in_place(bytes: &mut [u8], nb: usize) -> bool {
    let group = PACK_ROWS * nb * 144;
    if nb == 0 || !bytes.len().is_multiple_of(group) {
        return false;
    }
    let mut rows = vec![BlockQ4K::zeroed(); PACK_ROWS * nb];
    for span in bytes.chunks_exact_mut(group) {
        bytemuck::cast_slice_mut::<BlockQ4K, u8>(&mut rows).copy_from_slice(span);
        let packed: &mut [BlockQ4Kx8] = bytemuck::cast_slice_mut(span);
        for (b, p) in packed.iter_mut().enumerate() {
            *p = BlockQ4Kx8::pack(core::array::from_fn(|r| &rows[r * nb + b]));
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(n: usize, seed: u32) -> Vec<BlockQ4K> {
        let bytes: Vec<u8> = (0..n * 144)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
            .map(|b| b ^ (b >> 3))
            .collect();
        bytemuck::cast_slice(&bytes).to_vec()
    }

    /// Every row's block comes back byte for byte, and the packed bytes
    /// put row `r`'s word `k` at `16 * 8 + 64k + 8r`.
    #[test]
    fn packing_keeps_every_byte_of_every_row() {
        for nb in [1, 3, 4] {
            let w = blocks(3 * PACK_ROWS * nb, nb as u32);
            let packed = pack_q4_k_rows8(&w, nb);
            assert_eq!(packed.len(), 3 * nb);
            for (i, p) in packed.iter().enumerate() {
                let (g, b) = (i / nb, i % nb);
                for r in 0..PACK_ROWS {
                    let want = w[(PACK_ROWS * g + r) * nb + b];
                    assert_eq!(p.row(r), want, "group {g} block {b} row {r}");
                    let pb: &[u8; 1152] = bytemuck::cast_ref(p);
                    assert_eq!(&pb[16 * r..16 * r + 16], &bytemuck::bytes_of(&want)[..16]);
                    for k in 0..16 {
                        let at = 128 + 64 * k + 8 * r;
                        assert_eq!(&pb[at..at + 8], &want.qs[8 * k..8 * k + 8]);
                    }
                }
            }
            let mut bytes = bytemuck::cast_slice::<BlockQ4K, u8>(&w).to_vec();
            assert!(pack_in_place(&mut bytes, nb));
            assert_eq!(bytes, bytemuck::cast_slice::<BlockQ4Kx8, u8>(&packed));
        }
    }

    /// Shapes that are not whole groups are refused, the bytes untouched.
    #[test]
    fn partial_groups_are_refused() {
        let w = blocks(7 * 2, 1);
        let mut bytes = bytemuck::cast_slice::<BlockQ4K, u8>(&w).to_vec();
        let before = bytes.clone();
        assert!(!pack_in_place(&mut bytes, 2));
        assert!(!pack_in_place(&mut bytes, 0));
        assert_eq!(bytes, before);
        assert!(std::panic::catch_unwind(|| pack_q4_k_rows8(&w, 2)).is_err());
    }
}
