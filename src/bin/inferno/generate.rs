//! `inferno generate`: text in, streamed text out, then the speed metrics
//! on stderr (time to first token, decode tokens per second, per-step
//! milliseconds).

use std::io::Write as _;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use inferno_cpu::backend::AnyBackend;
use inferno_cpu::model::{KvDtype, Session, SessionOptions, Stats, StopReason};
use inferno_cpu::sample::Sampler;
use serde_json::json;

use crate::args::{BackendArgs, ModelArgs};
use crate::CliError;

/// Arguments of `inferno generate`.
#[derive(clap::Args)]
pub struct Args {
    /// The prompt.
    prompt: String,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    backend: BackendArgs,
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
    /// Print one JSON object on stdout when done (the text, the stop
    /// reason, the metrics, with --trace the traces) instead of streaming
    /// the text.
    #[arg(long)]
    json: bool,
}

/// Tokenizes, prefills, streams the reply to stdout until an
/// end-of-generation token, the limit or Ctrl-C, then prints the metrics.
pub fn run(args: &Args) -> Result<(), CliError> {
    if args.model.path.model.is_none() {
        eprintln!("note: no --model given; the default synthetic model has random weights, so its text is noise");
    }
    let mut sampler = Sampler::new(args.temperature, args.top_p, args.seed)
        .map_err(|e| CliError::msg(e.to_string()))?;
    let (path, model) = args.model.load()?;
    let backend = args.backend.build()?;
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
        // Sized to the tokens it will hold: see `SessionOptions::huge_pages`.
        huge_pages: true,
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
    let mut text = String::new();
    let stats = session.generate_text(
        model.tokenizer(),
        &ids,
        args.max_tokens as usize,
        &mut sampler,
        |piece| {
            if args.json {
                text.push_str(piece);
            } else {
                let _ = out.write_all(piece.as_bytes());
                let _ = out.flush();
            }
            if stop.load(Ordering::Relaxed) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        },
    )?;
    if args.json {
        let _ = writeln!(out, "{}", to_json(&text, &stats, &backend));
        return Ok(());
    }
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

/// The stop reason as printed: a stop by the callback is Ctrl-C here.
fn reason(stats: &Stats) -> &'static str {
    match stats.stop {
        StopReason::Stopped => "interrupted",
        r => r.as_str(),
    }
}

/// `--json`: the whole result as one object.
fn to_json(text: &str, stats: &Stats, backend: &AnyBackend) -> serde_json::Value {
    use inferno_cpu::backend::Backend as _;
    let (min, mean, max) = stats.step_ms().unwrap_or((f64::NAN, f64::NAN, f64::NAN));
    let steps = stats.steps.len();
    let trace = stats
        .prefill_trace
        .as_ref()
        .zip(stats.decode_trace.as_ref())
        .map(|(p, d)| json!({ "prefill": crate::trace::to_json(p, 1), "decode": crate::trace::to_json(d, steps) }));
    json!({
        "text": text,
        "backend": backend.name(),
        "threads": backend.threads(),
        "prompt_tokens": stats.prompt_tokens,
        "generated_tokens": stats.generated,
        "stop": reason(stats),
        "time_to_first_token_ms": stats.time_to_first_token.as_secs_f64() * 1e3,
        "prefill_tokens_per_second": stats.prefill_tokens_per_second(),
        "decode_tokens_per_second": stats.decode_tokens_per_second(),
        "per_forward_ms": (steps > 0).then(|| json!({ "min": min, "mean": mean, "max": max })),
        "trace": trace,
    })
}

fn print_metrics(stats: &Stats, backend: &AnyBackend) {
    use inferno_cpu::backend::Backend as _;
    let reason = reason(stats);
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
