//! `inferno bench --kernels --model F`: the decode sweep of
//! [`decode_bench`](crate::decode_bench) on the weights of a real file
//! instead of synthetic Q8_0 ones, so every weight type the crate runs
//! (and a file's mix of them, as in Q4_K_M) can be timed apart from the
//! rest of a forward pass.
//!
//! A token is the file's decode products in the order a forward pass runs
//! them, with the fusing it uses: per layer q/k/v in one dispatch, o,
//! gate/up in one, down; then the output projection. Each product's input
//! is quantized once, before timing, into the forms its matrices read.
//! Rows: `simd` on the calling thread, then `pool` and `parallel` per
//! thread count (the backends' own `matvec`), every output checked against
//! `simd`'s, bit for bit.

use std::collections::BTreeMap;
use std::time::Duration;

use inferno_cpu::backend::{AnyBackend, Backend, BackendKind};
use inferno_cpu::matvec::Weight;
use inferno_cpu::model::Qwen3;
use inferno_cpu::quant::QuantizedVector;

use crate::args::ModelArgs;
use crate::decode_bench::{input, median_time, print_header, print_row};
use crate::CliError;

/// One decode dispatch: the matrices sharing an input, the input
/// quantized for them, and where their outputs go.
struct Product<'a> {
    ws: Vec<Weight<'a>>,
    x: QuantizedVector,
    out: Vec<f32>,
}

/// The products of one token of `model`, in forward-pass order.
fn products<'a>(model: &'a Qwen3<'_>) -> Result<Vec<Product<'a>>, CliError> {
    let w = &model.weights;
    let mut groups: Vec<Vec<Weight<'a>>> = Vec::new();
    for l in &w.layers {
        groups.push(vec![l.q, l.k, l.v]);
        groups.push(vec![l.o]);
        groups.push(vec![l.gate, l.up]);
        groups.push(vec![l.down]);
    }
    groups.push(vec![w.lm_head()]);
    groups
        .into_iter()
        .map(|ws| {
            let cols = ws[0].cols();
            let rows = ws.iter().map(Weight::rows).sum();
            let input = input(cols);
            let mut x = QuantizedVector::with_capacity(cols);
            x.quantize_forms(&input, Weight::forms_of(&ws))
                .map_err(|e| CliError::msg(e.to_string()))?;
            Ok(Product {
                ws,
                x,
                out: vec![0.0; rows],
            })
        })
        .collect()
}

/// Runs every product of one token on `backend`.
fn token(backend: &AnyBackend, ps: &mut [Product<'_>]) -> Result<(), CliError> {
    for p in ps.iter_mut() {
        backend
            .matvec(&p.ws, &p.x, &mut p.out)
            .map_err(|e| CliError::msg(e.to_string()))?;
    }
    Ok(())
}

/// Median time per token over `tokens` tokens, after one warm-up token.
fn time_tokens(
    backend: &AnyBackend,
    ps: &mut [Product<'_>],
    tokens: usize,
) -> Result<Duration, CliError> {
    median_time(tokens, || token(backend, ps))
}

/// Every output of `ps`, as bits.
fn output_bits(ps: &[Product<'_>]) -> Vec<u32> {
    ps.iter()
        .flat_map(|p| p.out.iter().map(|v| v.to_bits()))
        .collect()
}

/// Bytes of weights per type over all of `ps`, as `"Q4_K 62%, Q6_K 38%"`.
fn type_mix(ps: &[Product<'_>]) -> String {
    let mut by_type: BTreeMap<&str, usize> = BTreeMap::new();
    for w in ps.iter().flat_map(|p| &p.ws) {
        *by_type.entry(w.type_name()).or_default() += w.bytes();
    }
    let total: usize = by_type.values().sum();
    let mut mix: Vec<(&str, usize)> = by_type.into_iter().collect();
    mix.sort_by_key(|&(_, b)| std::cmp::Reverse(b));
    mix.iter()
        .map(|(t, b)| format!("{t} {:.0}%", 100.0 * *b as f64 / total.max(1) as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs the sweep over the file of `model` and prints its table.
pub fn run(model: &ModelArgs, thread_counts: &[usize], tokens: usize) -> Result<(), CliError> {
    let (path, mut file) = model.open()?;
    inferno_cpu::model::pack_for_decode(&mut file);
    let gguf = file.gguf();
    let qwen = Qwen3::load(&gguf).map_err(|e| CliError::at(&path, e))?;
    let mut ps = products(&qwen)?;
    let bytes: usize = ps.iter().flat_map(|p| &p.ws).map(Weight::bytes).sum();
    let gb = bytes as f64 / 1e9;
    println!(
        "decode matvecs of {}: {} products per token, {} dispatches ({:.0} MB of weights: {}), \
         median of {tokens} tokens",
        path.display(),
        ps.iter().map(|p| p.ws.len()).sum::<usize>(),
        ps.len(),
        gb * 1e3,
        type_mix(&ps)
    );
    print_header();
    let simd = AnyBackend::with_kind(BackendKind::Simd, 1)?;
    let single = time_tokens(&simd, &mut ps, tokens)?;
    let want = output_bits(&ps);
    let row = |kind: BackendKind, threads: usize, t: Duration| {
        print_row(kind, threads, t, single, gb);
    };
    row(BackendKind::Simd, 1, single);
    for &threads in thread_counts {
        eprintln!("  measuring with {threads} thread(s) ...");
        for kind in [BackendKind::Pool, BackendKind::Parallel] {
            let backend = AnyBackend::with_kind(kind, threads)?;
            ps.iter_mut().for_each(|p| p.out.fill(f32::NAN));
            let t = time_tokens(&backend, &mut ps, tokens)?;
            row(kind, threads, t);
            if output_bits(&ps) != want {
                return Err(CliError::msg(format!(
                    "{kind} at {threads} threads differs from simd"
                )));
            }
        }
    }
    println!();
    println!("every output is bit-identical to simd's at every thread count above");
    Ok(())
}
