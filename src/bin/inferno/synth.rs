//! `inferno synth [--config tiny|0.6b] [--seed N] [--out PATH]`: writes a
//! synthetic Qwen3 model file.
//!
//! Without `--out` the file goes to the per-user cache, where later runs
//! (and the library's `cached_model`) find and reuse it. The file is
//! written beside its destination and renamed into place, so an
//! interrupted run never leaves a partial model under the final name.

use std::path::PathBuf;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use inferno_cpu::synth::{cached_model, write_model_file, FileType, SynthConfig, SynthError};

use crate::CliError;

/// Arguments of `inferno synth`.
#[derive(clap::Args)]
pub struct Args {
    /// Model shape: `tiny` (2 layers, ~0.5 MB), `small` (2 layers whose
    /// widths suit every type, ~2 MB) or `0.6b` (Qwen3-0.6B's shapes,
    /// ~640 MB in Q8_0).
    #[arg(long, default_value = "0.6b", value_parser = ["tiny", "small", "0.6b"])]
    config: String,
    /// Weight types, as llama.cpp names its file types: q8_0, f32, f16,
    /// bf16, q4_0, q4_k_m, q5_k_m or q6_k (written with the crate's quantizers,
    /// which give llama.cpp's bytes without an importance matrix).
    #[arg(long = "type", default_value_t = FileType::Q8_0)]
    file_type: FileType,
    /// Seed of the weights and vocabulary: the same seed gives the same
    /// file, byte for byte.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Output file (default: the cached model's path, reused when it is
    /// already complete).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// A byte-counting progress bar on stderr (hidden when stderr is not a
/// terminal), sized on the first report.
fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::no_length();
    let style = ProgressStyle::with_template(
        "{msg} [{bar:40}] {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
    );
    if let Ok(style) = style {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Writes (or reuses) the file and prints its path on stdout.
pub fn run(args: &Args) -> Result<(), CliError> {
    let start = Instant::now();
    let bar = progress_bar();
    bar.set_message(format!("writing qwen3-{} seed {}", args.config, args.seed));
    let progress = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let result: Result<PathBuf, SynthError> = match &args.out {
        Some(path) => SynthConfig::by_name(&args.config)
            .ok_or_else(|| SynthError::UnknownConfig {
                name: args.config.clone(),
            })
            .and_then(|cfg| {
                let cfg = cfg.with_file_type(args.file_type);
                write_model_file(&cfg, args.seed, path, progress)
            })
            .map(|()| path.clone()),
        None => cached_model(&args.config, args.file_type, args.seed, progress),
    };
    let wrote = bar.length().is_some();
    bar.finish_and_clear();
    let path = result?;
    if wrote {
        eprintln!("wrote in {:.1} s", start.elapsed().as_secs_f64());
    } else {
        eprintln!("reused the cached file");
    }
    println!("{}", path.display());
    Ok(())
}
