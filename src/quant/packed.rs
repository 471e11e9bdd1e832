//! Q4_K, Q5_K and Q4_0 rows packed eight at a time: the layout the
//! AVX-512 eight-row decode kernels read without rearranging anything
//! (and AVX2's Q4_K and Q5_K ones, which put four rows' words in a
//! register).
//!
//! That kernel computes eight rows at once, one per 64-bit slot of a
//! register, so it needs each block's nibbles (and Q5_K's fifth bits) of
//! eight rows transposed (word `u` of row `r` in slot `r`) and the rows'
//! heads side by side. From GGML's row-major layout that costs 48
//! shuffles per block of eight rows (72 for Q5_K), and reading eight rows
//! a block at a time is a pattern the hardware prefetchers do not follow.
//! Packed, block `b` of a group of eight rows is one run of bytes in
//! exactly the order the kernel loads them, and a group's blocks follow
//! each other, so a product reads its matrix front to back.
//! [`PackedBlock::row`] gives a row's block back, byte for byte.
//!
//! Q4_0 ([`BlockQ4_0x8`]) packs for another reason: its AVX-512 and AVX2
//! decode kernels put eight rows in a register's eight `i32` lanes, so that a
//! block's exact integer sums come out one per lane, with no reduction
//! across lanes (which a row at a time needs for each block); packed,
//! four bytes of each of the eight rows lie side by side, one load each.

use bytemuck::{Pod, Zeroable};

use super::block::WeightBlock;
use super::q4_0::BlockQ4_0;
use super::q4_k::BlockQ4K;
use super::q5_k::BlockQ5K;

/// Rows packed together.
pub const PACK_ROWS: usize = 8;

/// A block of [`PACK_ROWS`] rows packed together, and the row-major block
/// type it packs.
pub trait PackedBlock: WeightBlock {
    /// The block of one row (GGML's layout).
    type Row: WeightBlock;

    /// Packs block `b` of eight rows (`rows[r]` is row `r`'s block).
    fn pack(rows: [&Self::Row; PACK_ROWS]) -> Self;

    /// Row `r`'s block (`r < 8`), as it was before packing.
    ///
    /// # Panics
    ///
    /// If `r >= 8`.
    fn row(&self, r: usize) -> Self::Row;
}

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

/// Block `b` of eight consecutive Q5_K rows, packed: [`BlockQ4Kx8`]'s
/// heads and nibbles, then `qh[u][r]`, row `r`'s fifth-bit bytes `8u .. 8u
/// + 8` (`u` in `0..4`). 1,408 bytes, the eight blocks' own 176 each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ5Kx8 {
    /// Each row's `d`, `dmin` and packed scales.
    pub heads: [[u8; 16]; PACK_ROWS],
    /// The rows' nibbles, a word of each row per 64 bytes.
    pub qs: [[[u8; 8]; PACK_ROWS]; 16],
    /// The rows' fifth bits, a word of each row per 64 bytes.
    pub qh: [[[u8; 8]; PACK_ROWS]; 4],
}

const _: () = assert!(core::mem::size_of::<BlockQ5Kx8>() == PACK_ROWS * 176);
const _: () = assert!(core::mem::align_of::<BlockQ5Kx8>() == 1);

/// Block `b` of eight consecutive Q4_0 rows, packed: `qs[p][r]` is row
/// `r`'s nibble bytes `4p..4p + 4` (their low nibbles weights `4p..4p + 4`,
/// their high ones `16 + 4p..`), `d[r]` its f16 scale. 144 bytes, the
/// eight blocks' own 18 each, with alignment 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ4_0x8 {
    /// The rows' nibble bytes, four of each row per 32 bytes.
    pub qs: [[[u8; 4]; PACK_ROWS]; 4],
    /// Each row's scale, as raw little-endian f16 bytes.
    pub d: [[u8; 2]; PACK_ROWS],
}

const _: () = assert!(core::mem::size_of::<BlockQ4_0x8>() == PACK_ROWS * 18);
const _: () = assert!(core::mem::align_of::<BlockQ4_0x8>() == 1);

impl PackedBlock for BlockQ4_0x8 {
    type Row = BlockQ4_0;

    fn pack(rows: [&BlockQ4_0; PACK_ROWS]) -> Self {
        let mut p = Self::zeroed();
        for (r, row) in rows.iter().enumerate() {
            let (words, _) = row.qs.as_chunks::<4>();
            for (q, w) in p.qs.iter_mut().zip(words) {
                q[r] = *w;
            }
            p.d[r] = row.d;
        }
        p
    }

    fn row(&self, r: usize) -> BlockQ4_0 {
        BlockQ4_0 {
            d: self.d[r],
            qs: bytemuck::cast(self.qs.map(|q| q[r])),
        }
    }
}

/// The first 16 bytes of a K-quant block (`d`, `dmin`, `scales`).
fn head<B: Pod>(b: &B) -> [u8; 16] {
    let mut h = [0; 16];
    h.copy_from_slice(&bytemuck::bytes_of(b)[..16]);
    h
}

/// `words[k][r] = rows[r]`'s bytes `8k .. 8k + 8`, for the words of
/// `bytes(r)`.
fn transpose<const K: usize>(
    words: &mut [[[u8; 8]; PACK_ROWS]; K],
    bytes: impl Fn(usize) -> [[u8; 8]; K],
) {
    for r in 0..PACK_ROWS {
        for (word, w) in words.iter_mut().zip(bytes(r)) {
            word[r] = w;
        }
    }
}

impl PackedBlock for BlockQ4Kx8 {
    type Row = BlockQ4K;

    fn pack(rows: [&BlockQ4K; PACK_ROWS]) -> Self {
        let mut p = Self::zeroed();
        p.heads = rows.map(head);
        transpose(&mut p.qs, |r| bytemuck::cast(rows[r].qs));
        p
    }

    fn row(&self, r: usize) -> BlockQ4K {
        let mut b = BlockQ4K::zeroed();
        let h = &self.heads[r];
        (b.d, b.dmin) = ([h[0], h[1]], [h[2], h[3]]);
        b.scales.copy_from_slice(&h[4..]);
        b.qs = bytemuck::cast(self.qs.map(|w| w[r]));
        b
    }
}

impl PackedBlock for BlockQ5Kx8 {
    type Row = BlockQ5K;

    fn pack(rows: [&BlockQ5K; PACK_ROWS]) -> Self {
        let mut p = Self::zeroed();
        p.heads = rows.map(head);
        transpose(&mut p.qs, |r| bytemuck::cast(rows[r].qs));
        transpose(&mut p.qh, |r| bytemuck::cast(rows[r].qh));
        p
    }

    fn row(&self, r: usize) -> BlockQ5K {
        let mut b = BlockQ5K::zeroed();
        let h = &self.heads[r];
        (b.d, b.dmin) = ([h[0], h[1]], [h[2], h[3]]);
        b.scales.copy_from_slice(&h[4..]);
        b.qs = bytemuck::cast(self.qs.map(|w| w[r]));
        b.qh = bytemuck::cast(self.qh.map(|w| w[r]));
        b
    }
}

/// Packs a row-major matrix of `nb` blocks per row (`w.len() / nb` rows, a
/// multiple of eight): element `g * nb + b` of the result is block `b` of
/// rows `8g..8g + 8`.
///
/// # Panics
///
/// If `w` is not a whole number of groups of eight rows of `nb` blocks.
pub fn pack_rows8<P: PackedBlock>(w: &[P::Row], nb: usize) -> Vec<P> {
    let group = PACK_ROWS.checked_mul(nb).filter(|&g| g > 0);
    assert!(
        group.is_some_and(|g| w.len().is_multiple_of(g)),
        "pack_rows8: {} blocks are not whole groups of eight rows of {nb}",
        w.len()
    );
    let mut out = Vec::with_capacity(w.len() / PACK_ROWS);
    for rows in w.chunks_exact(PACK_ROWS * nb) {
        out.extend((0..nb).map(|b| P::pack(core::array::from_fn(|r| &rows[r * nb + b]))));
    }
    out
}

/// [`pack_rows8`] of a Q4_K matrix.
///
/// # Panics
///
/// As [`pack_rows8`].
pub fn pack_q4_k_rows8(w: &[BlockQ4K], nb: usize) -> Vec<BlockQ4Kx8> {
    pack_rows8(w, nb)
}

/// [`pack_rows8`] of a Q5_K matrix.
///
/// # Panics
///
/// As [`pack_rows8`].
pub fn pack_q5_k_rows8(w: &[BlockQ5K], nb: usize) -> Vec<BlockQ5Kx8> {
    pack_rows8(w, nb)
}

/// [`pack_rows8`] of a Q4_0 matrix.
///
/// # Panics
///
/// As [`pack_rows8`].
pub fn pack_q4_0_rows8(w: &[BlockQ4_0], nb: usize) -> Vec<BlockQ4_0x8> {
    pack_rows8(w, nb)
}

/// [`pack_rows8`] in place: `bytes` holds a row-major matrix of `nb` blocks
/// of `P::Row` per row, whole groups of eight rows, and ends up holding
/// the packed one (the same length). Returns `false`, leaving `bytes` as
/// they were, if they are not such a matrix.
pub(crate) fn pack_in_place<P: PackedBlock>(bytes: &mut [u8], nb: usize) -> bool {
    let row_block = core::mem::size_of::<P::Row>();
    let Some(group) = (PACK_ROWS * row_block).checked_mul(nb).filter(|&g| g > 0) else {
        return false;
    };
    if !bytes.len().is_multiple_of(group) {
        return false;
    }
    let mut rows = vec![P::Row::zeroed(); PACK_ROWS * nb];
    for span in bytes.chunks_exact_mut(group) {
        bytemuck::cast_slice_mut::<P::Row, u8>(&mut rows).copy_from_slice(span);
        for (b, out) in span.chunks_exact_mut(core::mem::size_of::<P>()).enumerate() {
            let p = P::pack(core::array::from_fn(|r| &rows[r * nb + b]));
            out.copy_from_slice(bytemuck::bytes_of(&p));
        }
    }
    true
}

/// The row-major bytes of a packed matrix of `nb` blocks per row (the
/// inverse of [`pack_in_place`]), or `None` if `bytes` is not a whole
/// number of groups of such rows.
pub(crate) fn unpack_bytes<P: PackedBlock>(bytes: &[u8], nb: usize) -> Option<Vec<u8>> {
    let size = core::mem::size_of::<P>();
    let group = size.checked_mul(nb).filter(|&g| g > 0)?;
    if !bytes.len().is_multiple_of(group) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len());
    for group in bytes.chunks_exact(group) {
        let blocks: Vec<P> = group
            .chunks_exact(size)
            .map(bytemuck::pod_read_unaligned)
            .collect();
        for r in 0..PACK_ROWS {
            for b in &blocks {
                out.extend_from_slice(bytemuck::bytes_of(&b.row(r)));
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks<B: Pod>(n: usize, seed: u32) -> Vec<B> {
        let size = core::mem::size_of::<B>();
        let bytes: Vec<u8> = (0..n * size)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
            .map(|b| b ^ (b >> 3))
            .collect();
        (0..n)
            .map(|i| bytemuck::pod_read_unaligned(&bytes[i * size..(i + 1) * size]))
            .collect()
    }

    /// Every row's block comes back byte for byte, the packed bytes put
    /// row `r`'s head at `16r` and its word `k` of nibbles at `128 + 64k +
    /// 8r` (then Q5_K's word `k` of fifth bits at `1152 + 64k + 8r`), and
    /// packing in place writes the same bytes.
    #[test]
    fn packing_keeps_every_byte_of_every_row() {
        fn check<P: PackedBlock + PartialEq>(nb: usize, words: &[(usize, usize)]) {
            let w: Vec<P::Row> = blocks(3 * PACK_ROWS * nb, nb as u32);
            let packed: Vec<P> = pack_rows8(&w, nb);
            assert_eq!(packed.len(), 3 * nb);
            for (i, p) in packed.iter().enumerate() {
                let (g, b) = (i / nb, i % nb);
                let pb = bytemuck::bytes_of(p);
                for r in 0..PACK_ROWS {
                    let want = w[(PACK_ROWS * g + r) * nb + b];
                    assert!(
                        bytemuck::bytes_of(&p.row(r)) == bytemuck::bytes_of(&want),
                        "group {g} block {b} row {r}"
                    );
                    let wb = bytemuck::bytes_of(&want);
                    assert_eq!(&pb[16 * r..16 * r + 16], &wb[..16]);
                    // (offset of the words in the packed block, in the row's block)
                    for &(at, from) in words {
                        for k in 0..(if at == 128 { 16 } else { 4 }) {
                            let a = at + 64 * k + 8 * r;
                            assert_eq!(&pb[a..a + 8], &wb[from + 8 * k..from + 8 * k + 8]);
                        }
                    }
                }
            }
            let mut bytes = bytemuck::cast_slice::<P::Row, u8>(&w).to_vec();
            let file = bytes.clone();
            assert!(pack_in_place::<P>(&mut bytes, nb));
            assert_eq!(bytes, bytemuck::cast_slice::<P, u8>(&packed));
            assert_eq!(unpack_bytes::<P>(&bytes, nb), Some(file));
        }
        for nb in [1, 3, 4] {
            check::<BlockQ4Kx8>(nb, &[(128, 16)]);
            check::<BlockQ5Kx8>(nb, &[(128, 48), (1152, 16)]);
        }
    }

    /// Q4_0: every row's block comes back byte for byte, the packed bytes
    /// put row `r`'s nibble bytes `4p..4p + 4` at `32p + 4r` and its scale
    /// at `128 + 2r`, and packing in place writes the same bytes.
    #[test]
    fn q4_0_packing_keeps_every_byte_of_every_row() {
        for nb in [1, 3, 4] {
            let w: Vec<BlockQ4_0> = blocks(2 * PACK_ROWS * nb, nb as u32);
            let packed = pack_q4_0_rows8(&w, nb);
            assert_eq!(packed.len(), 2 * nb);
            for (i, p) in packed.iter().enumerate() {
                let (g, b) = (i / nb, i % nb);
                let pb = bytemuck::bytes_of(p);
                for r in 0..PACK_ROWS {
                    let want = w[(PACK_ROWS * g + r) * nb + b];
                    assert_eq!(p.row(r), want, "group {g} block {b} row {r}");
                    for q in 0..4 {
                        assert_eq!(
                            &pb[32 * q + 4 * r..32 * q + 4 * r + 4],
                            &want.qs[4 * q..4 * q + 4]
                        );
                    }
                    assert_eq!(&pb[128 + 2 * r..130 + 2 * r], &want.d);
                }
            }
            let mut bytes = bytemuck::cast_slice::<BlockQ4_0, u8>(&w).to_vec();
            let file = bytes.clone();
            assert!(pack_in_place::<BlockQ4_0x8>(&mut bytes, nb));
            assert_eq!(bytes, bytemuck::cast_slice::<BlockQ4_0x8, u8>(&packed));
            assert_eq!(unpack_bytes::<BlockQ4_0x8>(&bytes, nb), Some(file));
        }
    }

    /// Shapes that are not whole groups are refused, the bytes untouched.
    #[test]
    fn partial_groups_are_refused() {
        let w: Vec<BlockQ4K> = blocks(7 * 2, 1);
        let mut bytes = bytemuck::cast_slice::<BlockQ4K, u8>(&w).to_vec();
        let before = bytes.clone();
        assert!(!pack_in_place::<BlockQ4Kx8>(&mut bytes, 2));
        assert!(!pack_in_place::<BlockQ4Kx8>(&mut bytes, 0));
        assert_eq!(bytes, before);
        assert!(std::panic::catch_unwind(|| pack_q4_k_rows8(&w, 2)).is_err());
        let w5: Vec<BlockQ5K> = blocks(8 * 2, 1);
        assert!(std::panic::catch_unwind(|| pack_q5_k_rows8(&w5, 3)).is_err());
        // Block counts whose group size overflows are refused, not wrapped.
        assert!(!pack_in_place::<BlockQ4Kx8>(&mut bytes, usize::MAX));
        assert!(unpack_bytes::<BlockQ5Kx8>(&bytes, usize::MAX / 2).is_none());
        assert!(std::panic::catch_unwind(|| pack_q4_k_rows8(&[], usize::MAX)).is_err());
    }
}
