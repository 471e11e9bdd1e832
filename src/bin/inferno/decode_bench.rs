//! The second part of `inferno bench --kernels`, its decode sweep: the 197
//! Q8_0 matrix-vector products of one decoded Qwen3-0.6B token (7 per
//! layer for 28 layers, plus the lm_head), on synthetic weights of the real
//! shapes and size, per backend and thread count.
//!
//! Each row is named by the backend whose decode products it times:
//! `simd` is `matvec_q8_0` on the calling thread, `pool` is
//! `matvec_q8_0_pool` (the pool backend's matvec) on a persistent spinning
//! pool, and `parallel` is `matvec_q8_0_rayon` inside a rayon pool of the
//! same size (the parallel backend's split).
//!
//! This is the matvec part of decode, the part bound by memory bandwidth
//! (633 MB of weights per token, far past any cache); attention, norms and
//! sampling are not included.

use std::error::Error;
use std::time::{Duration, Instant};

use inferno_cpu::backend::BackendKind;
use inferno_cpu::matvec::{matvec_q8_0, matvec_q8_0_pool, matvec_q8_0_rayon, Q8Matrix};
use inferno_cpu::model::layout::{Role, Shape};
use inferno_cpu::model::Qwen3Config;
use inferno_cpu::quant::{QuantizedVector, QK8_0};
use inferno_cpu::synth::{SplitMix64, SynthConfig};
use inferno_cpu::{BlockQ8_0, ThreadPool};

/// Qwen3-0.6B's shapes, from the crate's layout table.
fn config() -> Qwen3Config {
    SynthConfig::qwen3_0_6b().model
}

/// `(rows, cols)` of a layer's seven matrices ([`Role::PROJECTIONS`]), in
/// the order decode runs them: q, k, v (sharing one input), o, gate, up
/// (sharing one), down.
fn layer_shapes(c: &Qwen3Config) -> [(usize, usize); 7] {
    Role::PROJECTIONS.map(|r| match c.shape_of(r).0 {
        Shape::Matrix { rows, cols } => (rows, cols),
        Shape::Vector(n) => (n, 1),
    })
}

/// One matvec backend: `out = W x`.
type Matvec<'a> =
    dyn Fn(&Q8Matrix<'_>, &QuantizedVector, &mut [f32]) -> Result<(), Box<dyn Error>> + 'a;

/// Synthetic weights of every matrix of the model, deterministic.
struct Weights {
    /// The model's shapes.
    cfg: Qwen3Config,
    /// [`layer_shapes`] of `cfg`.
    shapes: [(usize, usize); 7],
    /// Per layer, the seven matrices of `shapes`.
    layers: Vec<Vec<Vec<BlockQ8_0>>>,
    lm_head: Vec<BlockQ8_0>,
}

impl Weights {
    fn bytes(&self) -> usize {
        let layer_blocks: usize = self.layers.iter().flatten().map(Vec::len).sum();
        (layer_blocks + self.lm_head.len()) * std::mem::size_of::<BlockQ8_0>()
    }
}

fn random_blocks(rng: &mut SplitMix64, rows: usize, cols: usize) -> Vec<BlockQ8_0> {
    let n = rows * cols / QK8_0;
    let mut blocks = Vec::with_capacity(n);
    for _ in 0..n {
        let mut qs = [0i8; QK8_0];
        for chunk in qs.chunks_exact_mut(8) {
            let bits = rng.next_u64().to_le_bytes();
            for (q, b) in chunk.iter_mut().zip(bits) {
                // Weights in -127..=127, as a quantizer produces.
                *q = (b as i8).max(-127);
            }
        }
        // Scales around 1/127: typical magnitudes of trained weights.
        let d = half::f16::from_f32(0.004 + (rng.next_u64() % 1000) as f32 * 1e-6);
        blocks.push(BlockQ8_0::new(d, qs));
    }
    blocks
}

fn synthesize() -> Weights {
    let mut rng = SplitMix64::new(0x1F3A_5EED);
    let cfg = config();
    let shapes = layer_shapes(&cfg);
    let layers = (0..cfg.layers)
        .map(|_| {
            shapes
                .iter()
                .map(|&(r, c)| random_blocks(&mut rng, r, c))
                .collect()
        })
        .collect();
    let lm_head = random_blocks(&mut rng, cfg.vocab, cfg.hidden);
    Weights {
        cfg,
        shapes,
        layers,
        lm_head,
    }
}

/// Buffers reused across tokens: one quantized input per distinct width,
/// one output per matrix shape.
struct Scratch {
    x_hidden: QuantizedVector,
    x_q: QuantizedVector,
    x_ffn: QuantizedVector,
    out: Vec<Vec<f32>>,
    logits: Vec<f32>,
    input: Vec<f32>,
}

impl Scratch {
    fn new(w: &Weights) -> Self {
        let widest = w.cfg.ffn.max(w.cfg.hidden).max(w.cfg.q_dim());
        let input = input(widest);
        Self {
            x_hidden: QuantizedVector::new(),
            x_q: QuantizedVector::new(),
            x_ffn: QuantizedVector::new(),
            out: w.shapes.iter().map(|&(r, _)| vec![0.0; r]).collect(),
            logits: vec![0.0; w.cfg.vocab],
            input,
        }
    }
}

/// Runs the matvecs of one token.
fn token(
    weights: &Weights,
    scratch: &mut Scratch,
    matvec: &Matvec<'_>,
) -> Result<(), Box<dyn Error>> {
    let Scratch {
        x_hidden,
        x_q,
        x_ffn,
        out,
        logits,
        input,
    } = scratch;
    let c = &weights.cfg;
    for layer in &weights.layers {
        for (i, (&(rows, cols), blocks)) in weights.shapes.iter().zip(layer).enumerate() {
            // Quantize each distinct input once: q/k/v share one, gate/up
            // share one, as in a real forward pass.
            let x = match i {
                0 | 4 => {
                    x_hidden.quantize_from(&input[..c.hidden])?;
                    &*x_hidden
                }
                1 | 2 | 5 => &*x_hidden,
                3 => {
                    x_q.quantize_from(&input[..c.q_dim()])?;
                    &*x_q
                }
                _ => {
                    x_ffn.quantize_from(&input[..c.ffn])?;
                    &*x_ffn
                }
            };
            let w = Q8Matrix::new(blocks, rows, cols)?;
            matvec(&w, x, &mut out[i])?;
        }
    }
    x_hidden.quantize_from(&input[..c.hidden])?;
    let w = Q8Matrix::new(&weights.lm_head, c.vocab, c.hidden)?;
    matvec(&w, x_hidden, logits)?;
    Ok(())
}

/// Median seconds per token over `tokens` tokens, after one warm-up token.
fn time_tokens(
    weights: &Weights,
    tokens: usize,
    matvec: &Matvec<'_>,
) -> Result<Duration, Box<dyn Error>> {
    let mut scratch = Scratch::new(weights);
    median_time(tokens, || token(weights, &mut scratch, matvec))
}

/// The median time of `runs` calls of `f` (at least one), after one
/// warm-up call.
pub fn median_time<E>(runs: usize, mut f: impl FnMut() -> Result<(), E>) -> Result<Duration, E> {
    f()?;
    let mut times = Vec::with_capacity(runs.max(1));
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed());
    }
    times.sort_unstable();
    Ok(times[times.len() / 2])
}

/// The input every benchmarked product reads: `n` fixed values in
/// `-2..=2`, the same on every run.
pub fn input(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
        .collect()
}

/// Checks that every backend produced the single-core logits bit for bit.
fn check_identical(weights: &Weights, pool: &ThreadPool) -> Result<bool, Box<dyn Error>> {
    let mut a = Scratch::new(weights);
    let mut b = Scratch::new(weights);
    token(weights, &mut a, &|w, x, o| Ok(matvec_q8_0(w, x, o)?))?;
    token(weights, &mut b, &|w, x, o| {
        Ok(matvec_q8_0_pool(pool, w, x, o)?)
    })?;
    let same = a
        .logits
        .iter()
        .zip(&b.logits)
        .all(|(x, y)| x.to_bits() == y.to_bits());
    Ok(same)
}

/// The table's header (after a blank line).
pub fn print_header() {
    println!();
    println!("| backend  | threads | ms/token | tokens/s | weight GB/s | vs simd |");
    println!("|----------|--------:|---------:|---------:|------------:|--------:|");
}

/// One row of the table: `t` per token of `gb` GB of weights, against
/// `single`, the `simd` row's time.
pub fn print_row(backend: BackendKind, threads: usize, t: Duration, single: Duration, gb: f64) {
    let s = t.as_secs_f64();
    println!(
        "| {:<8} | {:>7} | {:>8.2} | {:>8.1} | {:>11.1} | {:>6.2}x |",
        backend.name(),
        threads,
        s * 1e3,
        1.0 / s,
        gb / s,
        single.as_secs_f64() / s
    );
}

/// Runs the sweep and prints its table.
pub fn run(thread_counts: &[usize], tokens: usize) -> Result<(), Box<dyn Error>> {
    eprintln!("synthesizing Qwen3-0.6B-shaped Q8_0 weights ...");
    let weights = synthesize();
    let gb = weights.bytes() as f64 / 1e9;
    println!(
        "decode matvecs: {} Q8_0 matrix-vector products per token ({:.0} MB of weights), \
         median of {tokens} tokens",
        weights.cfg.layers * weights.shapes.len() + 1,
        gb * 1e3
    );
    print_header();
    let single = time_tokens(&weights, tokens, &|w, x, o| Ok(matvec_q8_0(w, x, o)?))?;
    let row = |backend: BackendKind, threads: usize, t: Duration| {
        print_row(backend, threads, t, single, gb);
    };
    row(BackendKind::Simd, 1, single);
    for &threads in thread_counts {
        eprintln!("  measuring with {threads} thread(s) ...");
        let pool = ThreadPool::new(threads)?;
        let t = time_tokens(&weights, tokens, &|w, x, o| {
            Ok(matvec_q8_0_pool(&pool, w, x, o)?)
        })?;
        row(BackendKind::Pool, threads, t);
        if !check_identical(&weights, &pool)? {
            return Err(format!("pool at {threads} threads differs from single-core").into());
        }
        let rayon = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        let t = time_tokens(&weights, tokens, &|w, x, o| {
            rayon.install(|| matvec_q8_0_rayon(w, x, o))?;
            Ok(())
        })?;
        row(BackendKind::Parallel, threads, t);
    }
    println!();
    println!("pooled logits are bit-identical to single-core at every thread count above");
    Ok(())
}
