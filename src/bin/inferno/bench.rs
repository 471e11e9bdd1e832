//! `inferno bench`, the decode-speed experiment: decode speed of a Qwen3
//! model per backend and thread count, beside the machine's measured read
//! bandwidth.
//!
//! For each row: a fresh session prefills a prompt of `--prompt-tokens`
//! ids (time to first token), then decodes `--tokens` tokens greedily, each
//! step timed. Decode reads every weight once per token, so its speed is
//! bound by memory bandwidth; the roofline of a row is the bandwidth
//! measured at its thread count divided by the bytes of weights one token
//! reads, and `roofline` is the row's share of it.

use std::ops::ControlFlow;
use std::path::PathBuf;

use inferno_cpu::backend::{AnyBackend, BackendKind};
use inferno_cpu::model::{KvDtype, Qwen3, Session, SessionOptions, Stats, Trace};
use inferno_cpu::sample::Sampler;
use inferno_cpu::synth::FileType;
use serde_json::json;

use crate::machine::{self, CpuTimes};
use crate::trace;
use crate::CliError;

/// Other processes' share of the CPUs above which a row is marked busy.
const BUSY_SHARE: f64 = 0.05;

/// What one `bench` run measures.
pub struct Plan {
    pub model: crate::args::ModelArgs,
    pub backends: Vec<BackendKind>,
    pub threads: Vec<usize>,
    pub tokens: usize,
    pub prompt_tokens: usize,
    pub kv: KvDtype,
    pub json: bool,
    /// Trace each row's prefill and decode per operation.
    pub trace: bool,
}

/// One row of the table.
struct Row {
    backend: BackendKind,
    threads: usize,
    /// The generation's timings (and traces, with `--trace`).
    stats: Stats,
    others: Option<f64>,
    bandwidth: f64,
    /// The read loop that measured `bandwidth`.
    probe: machine::Probe,
    bytes_per_token: usize,
}

impl Row {
    fn decode_tps(&self) -> f64 {
        self.stats.decode_tokens_per_second().unwrap_or(f64::NAN)
    }
    fn min_mean_max(&self) -> (f64, f64, f64) {
        self.stats
            .step_ms()
            .unwrap_or((f64::NAN, f64::NAN, f64::NAN))
    }
    fn prefill_tps(&self) -> f64 {
        self.stats.prefill_tokens_per_second()
    }
    fn traces(&self) -> Option<(&Trace, &Trace)> {
        self.stats
            .prefill_trace
            .as_ref()
            .zip(self.stats.decode_trace.as_ref())
    }
    fn roofline_tps(&self) -> f64 {
        self.bandwidth / self.bytes_per_token as f64
    }
    fn busy(&self) -> bool {
        self.others.is_some_and(|o| o > BUSY_SHARE)
    }
}

/// Deterministic prompt ids spread over the vocabulary's ordinary tokens.
fn prompt(n: usize, vocab: usize) -> Vec<u32> {
    let span = vocab.clamp(1, 151_643) as u64;
    (0..n as u64)
        .map(|i| ((i * 7_919 + 13) % span) as u32)
        .collect()
}

/// Runs one row: a fresh session prefills the prompt and decodes
/// `plan.tokens` greedy steps (whatever tokens come: no end-of-generation
/// stop). Returns the timings and other processes' CPU share meanwhile.
fn measure(
    model: &Qwen3<'_>,
    backend: &AnyBackend,
    plan: &Plan,
) -> Result<(Stats, Option<f64>), CliError> {
    let opts = SessionOptions {
        max_positions: plan.prompt_tokens + plan.tokens + 1,
        kv: plan.kv,
        // Sized to the tokens it will hold: see `SessionOptions::huge_pages`.
        huge_pages: true,
    };
    let mut session = Session::new(model, backend, opts)?;
    session.set_tracing(plan.trace);
    let ids = prompt(plan.prompt_tokens, model.config.vocab);
    let cpu = CpuTimes::now();
    let stats = session.generate(&ids, plan.tokens + 1, &mut Sampler::greedy(), |_| {
        ControlFlow::Continue(())
    })?;
    let others = cpu.and_then(|c| c.others_since());
    Ok((stats, others))
}

/// Runs the plan: progress on stderr, the table (or JSON lines) on stdout.
pub fn run(plan: &Plan) -> Result<(), CliError> {
    let (path, mut file) = plan.model.open()?;
    let started = std::time::Instant::now();
    let packed = inferno_cpu::model::pack_for_decode(&mut file);
    if packed > 0 {
        eprintln!(
            "packed {packed} matrices eight rows at a time for the {} kernel ({:.0} ms)",
            inferno_cpu::quant::Kernel::selected().name(),
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    let gguf = file.gguf();
    let model = Qwen3::load(&gguf).map_err(|e| CliError::at(&path, e))?;
    let c = &model.config;
    let bytes_per_token = model.weights.bytes_per_token();
    eprintln!(
        "model: {} ({} layers, hidden {}, vocab {}, {:.0} MB of weights per token)",
        path.display(),
        c.layers,
        c.hidden,
        c.vocab,
        bytes_per_token as f64 / 1e6
    );
    let cpu = machine::cpu_name();
    let kernel = inferno_cpu::quant::Kernel::selected();
    eprintln!("cpu: {cpu}; kernel: {kernel:?}; bandwidth probe: the fastest of matvec::read_bytes (the {kernel:?} kernel's widest loads and the decode prefetch), read_bytes_plain (no prefetch) and read_bytes_narrow (the portable loop's loads), one contiguous share per thread");

    // Bandwidth per thread count, read over the loaded model itself (far
    // larger than any cache, in the same pages the weights are read from,
    // and already resident: no extra memory).
    let mut counts: Vec<usize> = plan.threads.clone();
    counts.push(1);
    counts.sort_unstable();
    counts.dedup();
    let mut bandwidth = Vec::new();
    for &t in &counts {
        eprint!("measuring read bandwidth on {t} thread(s)... ");
        let (bw, probe) = machine::read_bandwidth(gguf.bytes(), t, 5)?;
        eprintln!("{:.1} GB/s ({} probe)", bw / 1e9, probe.name());
        bandwidth.push((t, bw, probe));
    }
    let bw_at = |t: usize| {
        bandwidth
            .iter()
            .find(|(n, ..)| *n == t)
            .map_or((0.0, machine::Probe::Prefetch), |&(_, b, p)| (b, p))
    };

    let mut rows = Vec::new();
    for &kind in &plan.backends {
        let counts: Vec<usize> = if kind.is_single_threaded() {
            vec![1]
        } else {
            plan.threads.clone()
        };
        for threads in counts {
            eprint!(
                "{kind} x{threads}: prefill {} + decode {}... ",
                plan.prompt_tokens, plan.tokens
            );
            let backend = AnyBackend::with_kind(kind, threads)?;
            let (stats, others) = measure(&model, &backend, plan)?;
            let (bw, probe) = bw_at(threads);
            let row = Row {
                backend: kind,
                threads,
                stats,
                others,
                bandwidth: bw,
                probe,
                bytes_per_token,
            };
            eprintln!(
                "prefill {:.1} tok/s, decode {:.1} tok/s",
                row.prefill_tps(),
                row.decode_tps()
            );
            if let (Some((p, d)), false) = (row.traces(), plan.json) {
                trace::print_table(
                    &format!(
                        "{kind} x{threads}: prefill of {} tokens",
                        plan.prompt_tokens
                    ),
                    p,
                    1,
                );
                trace::print_table(
                    &format!("{kind} x{threads}: per decode step"),
                    d,
                    row.stats.steps.len(),
                );
            }
            if plan.json {
                println!("{}", row_json(&row, plan));
            }
            rows.push(row);
        }
    }
    let rss = machine::peak_rss();
    if !plan.json {
        print_table(&rows, plan, &cpu, &bandwidth);
    }
    if let Some(rss) = rss {
        let file_len = std::fs::metadata(&path).map_or(0, |m| m.len());
        eprintln!(
            "peak RSS {:.0} MB (model file {:.0} MB; KV cache {:.1} MB per session)",
            rss as f64 / 1e6,
            file_len as f64 / 1e6,
            kv_bytes(&model, plan) as f64 / 1e6
        );
    }
    Ok(())
}

fn kv_bytes(model: &Qwen3<'_>, plan: &Plan) -> usize {
    let c = &model.config;
    2 * c.layers * (plan.prompt_tokens + plan.tokens + 1) * c.kv_dim() * plan.kv.size()
}

fn row_json(r: &Row, plan: &Plan) -> serde_json::Value {
    let (min, mean, max) = r.min_mean_max();
    let steps = r.stats.steps.len();
    let trace = r.traces().map(
        |(p, d)| json!({ "prefill": trace::to_json(p, 1), "decode": trace::to_json(d, steps) }),
    );
    json!({
        "backend": r.backend.name(),
        "threads": r.threads,
        "prompt_tokens": plan.prompt_tokens,
        "decode_tokens": steps,
        "time_to_first_token_ms": r.stats.time_to_first_token.as_secs_f64() * 1e3,
        "prefill_tokens_per_second": r.prefill_tps(),
        "decode_tokens_per_second": r.decode_tps(),
        "per_forward_ms": { "min": min, "mean": mean, "max": max },
        "read_bandwidth_gb_per_s": r.bandwidth / 1e9,
        "read_bandwidth_probe": r.probe.name(),
        "weight_bytes_per_token": r.bytes_per_token,
        "roofline_tokens_per_second": r.roofline_tps(),
        "roofline_fraction": r.decode_tps() / r.roofline_tps(),
        "other_processes_cpu_share": r.others,
        "busy": r.busy(),
        "kv_cache": plan.kv.to_string(),
        "trace": trace,
    })
}

fn print_table(rows: &[Row], plan: &Plan, cpu: &str, bandwidth: &[(usize, f64, machine::Probe)]) {
    println!(
        "decode: {} prompt tokens, {} decode steps, KV cache {}; {cpu}; kernel {:?}",
        plan.prompt_tokens,
        plan.tokens,
        plan.kv,
        inferno_cpu::quant::Kernel::selected()
    );
    let bw: Vec<String> = bandwidth
        .iter()
        .map(|(t, b, p)| format!("{:.1} GB/s on {t} ({})", b / 1e9, p.name()))
        .collect();
    println!(
        "read bandwidth (matvec::read_bytes, read_bytes_plain or read_bytes_narrow over the loaded model, the fastest): {}",
        bw.join(", ")
    );
    println!();
    println!("| backend  | threads | ttft ms | prefill tok/s | decode tok/s | per_forward ms min / mean / max | roofline tok/s | of roofline | others |");
    println!("|----------|--------:|--------:|--------------:|-------------:|--------------------------------:|---------------:|------------:|-------:|");
    let mut busy = false;
    for r in rows {
        let (min, mean, max) = r.min_mean_max();
        let others = r.others.map_or("n/a".to_string(), |o| {
            format!("{:.0}%{}", o * 100.0, if r.busy() { " *" } else { "" })
        });
        busy |= r.busy();
        println!(
            "| {:<8} | {:>7} | {:>7.1} | {:>13.1} | {:>12.2} | {:>9.2} / {:>7.2} / {:>7.2} | {:>14.1} | {:>10.0}% | {:>6} |",
            r.backend.name(),
            r.threads,
            r.stats.time_to_first_token.as_secs_f64() * 1e3,
            r.prefill_tps(),
            r.decode_tps(),
            min,
            mean,
            max,
            r.roofline_tps(),
            100.0 * r.decode_tps() / r.roofline_tps(),
            others
        );
    }
    println!();
    println!("roofline: read bandwidth at that thread count / weight bytes per token; others: CPU share other processes used during the row");
    if busy {
        println!(
            "* measured while other processes used more than {:.0}% of the CPUs: treat as noise",
            BUSY_SHARE * 100.0
        );
    }
}

/// The default model: the synthetic Qwen3-0.6B, written to the cache
/// directory on first use (with a progress bar) and reused after.
pub fn default_model() -> Result<PathBuf, CliError> {
    let mut bar: Option<indicatif::ProgressBar> = None;
    let path = inferno_cpu::synth::cached_model("0.6b", FileType::Q8_0, 0, |done, total| {
        let b = bar.get_or_insert_with(|| {
            eprintln!("writing the default synthetic Qwen3-0.6B model (once)...");
            progress_bar(total)
        });
        b.set_position(done);
    })
    .map_err(|e| CliError::msg(format!("default model: {e}")))?;
    if let Some(b) = bar {
        b.finish_and_clear();
        eprintln!("wrote {}", path.display());
    }
    Ok(path)
}

/// A byte-count progress bar on stderr.
pub fn progress_bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
    ) {
        bar.set_style(style);
    }
    bar
}
