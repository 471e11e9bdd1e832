//! `inferno generate`: text in, streamed text out, then the seed's
//! metrics on stderr.

use std::io::Write as _;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use inferno_cpu::backend::AnyBackend;
use inferno_cpu::model::{KvDtype, Model, Session, SessionOptions, Stats, StopReason};
use inferno_cpu::sample::Sampler;

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

/// Tokenizes, prefills, streams the reply to stdout until an
/// end-of-generation token, the limit or Ctrl-C, then prints the metrics.
pub fn run(args: &Args) -> Result<(), CliError> {
    let synthetic = args.model.is_none();
    let path = crate::bench::model_or_default(args.model.as_deref())?;
    if synthetic {
        eprintln!("note: no --model given; the default synthetic model has random weights, so its text is noise");
    }
    let model = Model::read(&path).map_err(|e| CliError::at(&path, e))?;
    let mut sampler = Sampler::new(args.temperature, args.top_p, args.seed)
        .map_err(|e| CliError::msg(e.to_string()))?;
    let threads = match args.threads {
        Some(t) => t,
        None if matches!(args.backend.as_str(), "scalar" | "simd") => 1,
        None => inferno_cpu::default_threads(),
    };
    let backend = AnyBackend::new(&args.backend, threads)?;
    let text = if args.chat {
        let template = model.chat_template().map_err(|e| CliError::at(&path, e))?;
        template.user_turn(&args.prompt)
    } else {
        args.prompt.clone()
    };
    let ids = model.tokenizer().encode(&text, true);
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
    let stats = session.generate_text(
        model.tokenizer(),
        &ids,
        args.max_tokens as usize,
        &mut sampler,
        |piece| {
            let _ = out.write_all(piece.as_bytes());
            let _ = out.flush();
            if stop.load(Ordering::Relaxed) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        },
    )?;
    let _ = writeln!(out);
    drop(out);
    print_metrics(&stats, &backend);
    if let (Some(p), Some(d)) = (&stats.prefill_trace, &stats.decode_trace) {
        eprintln!();
        crate::trace::print_table(&format!("prefill of {} tokens:", ids.len()), p, 1);
        eprintln!();
        crate::trace::print_table("per decode step:", d, stats.steps.len());
    }
    Ok(())
}

fn print_metrics(stats: &Stats, backend: &AnyBackend) {
    use inferno_cpu::backend::Backend as _;
    let reason = match stats.stop {
        StopReason::Stopped => "interrupted",
        r => r.as_str(),
    };
    eprintln!();
    eprintln!(
        "backend: {} x{}; prompt {} tokens; generated {} ({reason})",
        backend.name(),
        backend.threads(),
        stats.prompt_tokens,
        stats.generated,
    );
    eprintln!("metrics:");
    eprintln!(
        "  time_to_first_token_ms: {:.3}",
        stats.time_to_first_token.as_secs_f64() * 1e3
    );
    let (Some(tps), Some((min, mean, max))) = (stats.decode_tokens_per_second(), stats.step_ms())
    else {
        eprintln!("  decode_tokens_per_second: n/a (no decode step)");
        return;
    };
    eprintln!("  decode_tokens_per_second: {tps:.3}");
    eprintln!(
        "  per_forward_ms: min {min:.3}  max {max:.3}  mean {mean:.3}  (n={})",
        stats.steps.len()
    );
}
