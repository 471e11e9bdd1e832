//! Decode products streaming their weights from memory, against a plain
//! read of the same bytes: the share of the machine's read bandwidth each
//! weight type's single-thread matvec reaches.
//!
//! `cargo bench --bench stream`. Each weight type gets a matrix of about
//! 256 MB, 1024 columns wide (Qwen3-0.6B's hidden size), far larger than
//! any cache; one pass is a `simd`-backend matvec over all of it, and the
//! reference is [`inferno_cpu::matvec::read_bytes`] over the same bytes
//! (the prefetched one of the three bandwidth probes `inferno bench` takes
//! the fastest of; `STREAM_PROBE=plain` reads with
//! [`inferno_cpu::matvec::read_bytes_plain`], without the prefetch). The two
//! alternate, and each is the median of `ROUNDS` passes, so the machine's
//! drift hits both alike; printed as GB/s and the ratio.
//!
//! Knobs, for finding where a kernel stands: `STREAM_TYPES=q4_k,q6_k`
//! runs only those types (`q4_0p`, `q4_kp`, `q5_kp`: rows packed eight
//! at a time, as a model holds them where its kernel reads packed rows),
//! `STREAM_COLS=4096` changes the width, and
//! `STREAM_MB=1` makes the matrices small enough to stay in cache (each
//! timing then repeats its pass; `STREAM_KB=256` for a size that stays in
//! a 1 MB L2 beside the activation), which times the kernel's own work: a
//! type whose in-cache speed is near its from-memory speed is limited by
//! its arithmetic, not by memory.

mod common;

use std::hint::black_box;
use std::time::Instant;

use common::values;
use inferno_cpu::backend::{AnyBackend, Backend};
use inferno_cpu::matvec::{BlockMatrix, PackedMatrix, Q8Matrix, Weight};
use inferno_cpu::quant::{
    pack_rows8, quantize_row_q4_0, quantize_row_q4_k, quantize_row_q5_k, quantize_row_q6_k,
    quantize_row_q8_0, BlockQ4Kx8, BlockQ4_0x8, BlockQ5Kx8, PackedBlock, QuantizedVector,
    PACK_ROWS, QK4_0, QK_K,
};

/// Columns of every matrix, unless `STREAM_COLS` says otherwise.
const COLS: usize = 1024;
/// Bytes of weights per matrix, unless `STREAM_KB` or `STREAM_MB` says otherwise.
const BYTES: usize = 256 << 20;
/// Distinct quantized rows, repeated to fill the matrix.
const DISTINCT: usize = 64;
/// Timed passes of each side.
const ROUNDS: usize = 9;

/// `DISTINCT` quantized rows repeated to about [`BYTES`], in anonymous
/// memory advised to use huge pages, as `GgufFile::read` loads a model.
fn matrix<B: bytemuck::Pod>(quantize: impl Fn(&[f32]) -> Vec<B>) -> (memmap2::MmapMut, usize) {
    let distinct: Vec<Vec<B>> = (0..DISTINCT)
        .map(|r| quantize(&values(r as u64, cols())))
        .collect();
    let row_bytes = std::mem::size_of_val(&distinct[0][..]);
    let rows = bytes() / row_bytes;
    let mut map = memmap2::MmapOptions::new()
        .len(rows * row_bytes)
        .map_anon()
        .unwrap();
    #[cfg(target_os = "linux")]
    map.advise(memmap2::Advice::HugePage).unwrap();
    for (r, dst) in map.chunks_exact_mut(row_bytes).enumerate() {
        dst.copy_from_slice(bytemuck::cast_slice(&distinct[r % DISTINCT]));
    }
    (map, rows)
}

/// The number in the environment variable `name`, if it holds one.
fn knob(name: &str) -> Option<usize> {
    std::env::var(name).ok()?.parse().ok()
}

fn cols() -> usize {
    knob("STREAM_COLS").unwrap_or(COLS)
}

fn bytes() -> usize {
    knob("STREAM_KB")
        .map(|k| k << 10)
        .or_else(|| knob("STREAM_MB").map(|m| m << 20))
        .unwrap_or(BYTES)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Times `ROUNDS` alternated passes of the matvec and of the read over
/// `w`'s bytes; prints both medians in GB/s.
fn run(name: &str, backend: &AnyBackend, w: Weight<'_>, bytes: &[u8]) {
    let mut x = QuantizedVector::new();
    x.quantize_forms(&values(7, cols()), w.forms()).unwrap();
    let mut out = vec![0.0f32; w.rows()];
    // Small matrices (`STREAM_KB`, `STREAM_MB`, to time the kernels in cache) repeat
    // their pass to about [`BYTES`] per timing.
    let reps = (BYTES / bytes.len()).max(1);
    let gb = (reps * bytes.len()) as f64 / 1e9;
    let (mut mv, mut rd) = (Vec::new(), Vec::new());
    // One warm-up pass of each.
    backend.matvec(&[w], &x, &mut out).unwrap();
    let plain = std::env::var("STREAM_PROBE").is_ok_and(|p| p == "plain");
    let read = |b: &[u8]| {
        if plain {
            inferno_cpu::matvec::read_bytes_plain(b)
        } else {
            inferno_cpu::matvec::read_bytes(b)
        }
    };
    black_box(read(bytes));
    for _ in 0..ROUNDS {
        let t0 = Instant::now();
        for _ in 0..reps {
            backend.matvec(&[w], &x, &mut out).unwrap();
            black_box(&out);
        }
        mv.push(gb / t0.elapsed().as_secs_f64());
        let t0 = Instant::now();
        for _ in 0..reps {
            black_box(read(black_box(bytes)));
        }
        rd.push(gb / t0.elapsed().as_secs_f64());
    }
    let (mv, rd) = (median(mv), median(rd));
    println!(
        "{name:<5} matvec {mv:6.2} GB/s  read {rd:6.2} GB/s  matvec/read {:.2}",
        mv / rd
    );
}

fn main() {
    let backend = AnyBackend::new("simd", 1).unwrap();
    println!(
        "one thread, kernel {:?}, {} KiB per matrix, {} columns",
        backend.kernel(),
        bytes() >> 10,
        cols()
    );
    let only = std::env::var("STREAM_TYPES").unwrap_or_default();
    let want = |t: &str| only.is_empty() || only.split(',').any(|o| o.eq_ignore_ascii_case(t));
    if want("q8_0") {
        let (b, rows) = matrix(|r| quantize_row_q8_0(r).unwrap());
        let w = Weight::Q8_0(Q8Matrix::new(bytemuck::cast_slice(&b), rows, cols()).unwrap());
        run("Q8_0", &backend, w, &b);
    }
    if want("q4_k") {
        let (b, rows) = matrix(|r| quantize_row_q4_k(r).unwrap());
        let w = Weight::Q4K(BlockMatrix::new(bytemuck::cast_slice(&b), rows, cols()).unwrap());
        run("Q4_K", &backend, w, &b);
    }
    if want("q5_k") {
        let (b, rows) = matrix(|r| quantize_row_q5_k(r).unwrap());
        let w = Weight::Q5K(BlockMatrix::new(bytemuck::cast_slice(&b), rows, cols()).unwrap());
        run("Q5_K", &backend, w, &b);
    }
    if want("q6_k") {
        let (b, rows) = matrix(|r| quantize_row_q6_k(r).unwrap());
        let w = Weight::Q6K(BlockMatrix::new(bytemuck::cast_slice(&b), rows, cols()).unwrap());
        run("Q6_K", &backend, w, &b);
    }
    if want("q4_0") {
        let (b, rows) = matrix(|r| quantize_row_q4_0(r).unwrap());
        let w = Weight::Q4_0(BlockMatrix::new(bytemuck::cast_slice(&b), rows, cols()).unwrap());
        run("Q4_0", &backend, w, &b);
    }
    // Rows packed eight at a time, as a model holds its projections of a
    // type its kernel reads packed (AVX-512 VNNI and AVX2: Q4_0, Q4_K and
    // Q5_K); elsewhere the packed kernel unpacks each row first.
    if want("q4_0p") {
        let (mut b, rows) = matrix(|r| quantize_row_q4_0(r).unwrap());
        let (rows, n) = pack_bytes::<BlockQ4_0x8>(&mut b, rows, cols() / QK4_0);
        let w = Weight::Q4_0Packed(
            PackedMatrix::new(bytemuck::cast_slice(&b[..n]), rows, cols()).unwrap(),
        );
        run("Q4_0p", &backend, w, &b[..n]);
    }
    if want("q4_kp") {
        let (mut b, rows) = matrix(|r| quantize_row_q4_k(r).unwrap());
        let (rows, n) = pack_bytes::<BlockQ4Kx8>(&mut b, rows, cols() / QK_K);
        let w = Weight::Q4KPacked(
            PackedMatrix::new(bytemuck::cast_slice(&b[..n]), rows, cols()).unwrap(),
        );
        run("Q4_Kp", &backend, w, &b[..n]);
    }
    if want("q5_kp") {
        let (mut b, rows) = matrix(|r| quantize_row_q5_k(r).unwrap());
        let (rows, n) = pack_bytes::<BlockQ5Kx8>(&mut b, rows, cols() / QK_K);
        let w = Weight::Q5KPacked(
            PackedMatrix::new(bytemuck::cast_slice(&b[..n]), rows, cols()).unwrap(),
        );
        run("Q5_Kp", &backend, w, &b[..n]);
    }
}

/// Packs the whole groups of eight rows (of `nb` blocks) at the start of
/// the row-major matrix in `b`, in place; returns their rows and bytes.
fn pack_bytes<P: PackedBlock>(b: &mut [u8], rows: usize, nb: usize) -> (usize, usize) {
    let rows = rows / PACK_ROWS * PACK_ROWS;
    let n = rows * nb * std::mem::size_of::<P::Row>();
    let packed: Vec<P> = pack_rows8(bytemuck::cast_slice(&b[..n]), nb);
    b[..n].copy_from_slice(bytemuck::cast_slice(&packed));
    (rows, n)
}
