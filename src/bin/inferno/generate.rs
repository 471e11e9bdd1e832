//! `inferno generate`: text in, streamed text out, then the seed's
//! metrics on stderr.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use inferno_cpu::backend::AnyBackend;
use inferno_cpu::gguf::GgufFile;
use inferno_cpu::model::{KvDtype, Qwen3, Session, SessionOptions};
use inferno_cpu::sample::Sampler;
use inferno_cpu::tokenizer::Tokenizer;

use crate::CliError;

/// Arguments of `inferno generate`.
#[derive(clap::Args)]
pub struct Args {
    /// The prompt.
    prompt: String,
    /// The GGUF model (default: the synthetic Qwen3-0.6B, whose weights are
    /// random: its text is noise).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Backend: scalar, simd, parallel or pool.
    #[arg(long, default_value = "pool")]
    backend: String,
    /// Threads for parallel and pool (default: the default pool size).
    #[arg(long, value_parser = crate::parse_threads)]
    threads: Option<usize>,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_tokens: u32,
    /// Wrap the prompt in Qwen3's chat template.
    #[arg(long)]
    chat: bool,
    /// Sampling temperature (0: greedy, the default).
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Nucleus sampling: keep the most likely tokens up to this mass.
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Seed of the sampler (the same seed gives the same text).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// KV cache element type: f16 or f32.
    #[arg(long, default_value = "f16")]
    kv: KvDtype,
    /// After the metrics, print where the prefill's and the decode steps'
    /// time went per operation (sampling included).
    #[arg(long)]
    trace: bool,
}

/// Qwen3's chat template for one user turn, ready for the reply.
fn chat_template(prompt: &str) -> String {
    format!("<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n")
}

/// Tokenizes, prefills, streams the reply to stdout until an
/// end-of-generation token, the limit or Ctrl-C, then prints the metrics.
pub fn run(args: &Args) -> Result<(), CliError> {
    let synthetic = args.model.is_none();
    let path = crate::bench::model_or_default(args.model.as_deref())?;
    if synthetic {
        eprintln!("note: no --model given; the default synthetic model has random weights, so its text is noise");
    }
    let file = GgufFile::open(&path).map_err(|e| CliError::at(&path, e))?;
    let gguf = file.gguf();
    let model = Qwen3::load(&gguf).map_err(|e| CliError::at(&path, e))?;
    let tokenizer = Tokenizer::from_gguf(&gguf).map_err(|e| CliError::at(&path, e))?;
    let mut sampler = Sampler::new(args.temperature, args.top_p, args.seed)
        .map_err(|e| CliError::msg(e.to_string()))?;
    let threads = match args.threads {
        Some(t) => t,
        None if matches!(args.backend.as_str(), "scalar" | "simd") => 1,
        None => inferno_cpu::default_threads(),
    };
    let backend = AnyBackend::new(&args.backend, threads)?;
    let text = if args.chat {
        chat_template(&args.prompt)
    } else {
        args.prompt.clone()
    };
    let ids = tokenizer.encode(&text, true);
    if ids.is_empty() {
        return Err(CliError::msg("the prompt is empty"));
    }
    let opts = SessionOptions {
        max_positions: ids.len() + args.max_tokens as usize,
        kv: args.kv,
    };
    let mut session = Session::new(&model, &backend, opts)?;
    session.set_tracing(args.trace);

    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        // Without a handler (another one is installed) Ctrl-C just ends
        // the process, as usual.
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed));
    }

    let mut out = std::io::stdout().lock();
    let start = Instant::now();
    session.prefill(&ids)?;
    let t = Instant::now();
    let mut token = sampler.sample(session.logits());
    add_sample_time(&mut session, t.elapsed());
    let ttft = start.elapsed();
    let prefill_trace = session.trace().cloned();
    if let Some(t) = session.trace_mut() {
        t.clear();
    }
    let mut steps: Vec<Duration> = Vec::with_capacity(args.max_tokens as usize);
    let mut decoder = tokenizer.stream_decoder();
    let mut generated = 0usize;
    let mut reason = "limit";
    loop {
        if tokenizer.is_end_of_generation(token) {
            reason = "end of generation";
            break;
        }
        let piece = decoder
            .push(token)
            .map_err(|e| CliError::msg(e.to_string()))?;
        let _ = out.write_all(piece.as_bytes());
        let _ = out.flush();
        generated += 1;
        if generated >= args.max_tokens as usize {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            reason = "interrupted";
            break;
        }
        let t = Instant::now();
        session.decode(token)?;
        let sampled = Instant::now();
        token = sampler.sample(session.logits());
        add_sample_time(&mut session, sampled.elapsed());
        steps.push(t.elapsed());
    }
    let _ = out.write_all(decoder.finish().as_bytes());
    let _ = writeln!(out);
    drop(out);
    print_metrics(ttft, &steps, ids.len(), generated, reason, &backend);
    if let (Some(p), Some(d)) = (prefill_trace, session.trace()) {
        eprintln!();
        crate::trace::print_table(&format!("prefill of {} tokens:", ids.len()), &p, 1);
        eprintln!();
        crate::trace::print_table("per decode step:", d, steps.len());
    }
    Ok(())
}

/// Charges sampling to the session's trace, if it is tracing.
fn add_sample_time<B: inferno_cpu::backend::Backend>(
    session: &mut Session<'_, '_, B>,
    d: Duration,
) {
    if let Some(t) = session.trace_mut() {
        t.add(inferno_cpu::model::Op::Sample, d);
    }
}

fn print_metrics(
    ttft: Duration,
    steps: &[Duration],
    prompt: usize,
    generated: usize,
    reason: &str,
    backend: &AnyBackend,
) {
    use inferno_cpu::backend::Backend as _;
    let ms = |d: &Duration| d.as_secs_f64() * 1e3;
    eprintln!();
    eprintln!(
        "backend: {} x{}; prompt {prompt} tokens; generated {generated} ({reason})",
        backend.name(),
        backend.threads()
    );
    eprintln!("metrics:");
    eprintln!("  time_to_first_token_ms: {:.3}", ms(&ttft));
    if steps.is_empty() {
        eprintln!("  decode_tokens_per_second: n/a (no decode step)");
        return;
    }
    let total: f64 = steps.iter().map(Duration::as_secs_f64).sum();
    let v: Vec<f64> = steps.iter().map(ms).collect();
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(0.0, f64::max);
    eprintln!(
        "  decode_tokens_per_second: {:.3}",
        steps.len() as f64 / total
    );
    eprintln!(
        "  per_forward_ms: min {min:.3}  max {max:.3}  mean {:.3}  (n={})",
        v.iter().sum::<f64>() / v.len() as f64,
        v.len()
    );
}
