//! `inferno`: the command-line front end of `inferno-cpu`.
//!
//! Each subcommand lives in its own module; this file only parses the
//! command line and dispatches. With no subcommand, `inferno` runs `bench`.

use std::fmt;
use std::path::Path;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use inferno_cpu::backend::BackendKind;
use inferno_cpu::model::KvDtype;

mod args;
mod bench;
mod decode_bench;
mod dispatch_bench;
mod eval;
mod generate;
mod inspect;
mod machine;
mod model_matvecs;
mod synth;
mod tokenize;
mod trace;

/// CPU kernels for LLM inference: tools around the `inferno-cpu` crate.
#[derive(Parser)]
#[command(name = "inferno", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Decode speed of a Qwen3 model per backend and thread count, beside
    /// the machine's read bandwidth (the default command).
    Bench(BenchArgs),
    /// Run token ids through a model and write the logits.
    Eval(eval::Args),
    /// Generate text from a prompt, streamed, then print the speed metrics.
    Generate(generate::Args),
    /// Print a GGUF file's header, metadata and tensor table.
    Inspect(inspect::Args),
    /// Print the token ids of a text, as the model's tokenizer encodes it.
    Tokenize(tokenize::Args),
    /// Write a deterministic synthetic Qwen3 model (GGUF, Q8_0 weights).
    Synth(synth::Args),
}

#[derive(Args)]
struct BenchArgs {
    #[command(flatten)]
    model: args::ModelArgs,
    /// Backends to run, e.g. `pool,simd`.
    #[arg(long, value_delimiter = ',', default_values_t = BackendKind::ALL)]
    backends: Vec<BackendKind>,
    /// Thread counts to sweep for parallel and pool, e.g. `1,2,4` (default:
    /// 1 up to the default pool size, see INFERNO_THREADS).
    #[arg(long, value_delimiter = ',', value_parser = args::parse_threads)]
    threads: Vec<usize>,
    /// Decode steps timed per row.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    tokens: u32,
    /// Prompt length prefilled before decoding (16 and 511 reproduce the
    /// short and long-context runs).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    prompt_tokens: u32,
    /// KV cache element type: f16 or f32.
    #[arg(long, default_value = "f16")]
    kv: KvDtype,
    /// One JSON object per row on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Also print where each row's time goes per operation (prefill and
    /// decode), as tables on stderr, or in each JSON row with --json.
    #[arg(long)]
    trace: bool,
    /// Instead of the model, time the kernels alone: dispatch latency
    /// (pool vs rayon) and the 197 decode matvecs of a token, on synthetic
    /// Q8_0 weights of Qwen3-0.6B's shapes, or with --model on the file's
    /// own weights (whatever their types).
    #[arg(long, conflicts_with_all = ["json", "trace", "prompt_tokens", "kv", "backends"])]
    kernels: bool,
    /// With --kernels: dispatch-latency samples per configuration.
    #[arg(long, requires = "kernels", default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(10..=10_000_000))]
    samples: u32,
}

impl Default for BenchArgs {
    fn default() -> Self {
        Self {
            model: args::ModelArgs::default(),
            backends: BackendKind::ALL.to_vec(),
            threads: Vec::new(),
            tokens: 32,
            prompt_tokens: 16,
            kv: KvDtype::F16,
            json: false,
            trace: false,
            kernels: false,
            samples: 20_000,
        }
    }
}

/// A failed command: one line on stderr (`inferno SUBCOMMAND: ...`), exit
/// status 1. Every subcommand returns it; `main` prints it.
#[derive(Debug)]
pub struct CliError(String);

impl CliError {
    pub fn msg(m: impl Into<String>) -> Self {
        Self(m.into())
    }
    /// An error about `path`.
    pub fn at(path: &Path, e: impl fmt::Display) -> Self {
        Self(format!("{}: {e}", path.display()))
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

macro_rules! cli_error_from {
    ($($t:ty),*) => {$(
        impl From<$t> for CliError {
            fn from(e: $t) -> Self {
                Self(e.to_string())
            }
        }
    )*};
}

cli_error_from!(
    inferno_cpu::model::ModelError,
    inferno_cpu::backend::BackendError,
    inferno_cpu::PoolError,
    inferno_cpu::gguf::GgufError,
    inferno_cpu::synth::SynthError,
    std::io::Error,
    Box<dyn std::error::Error>
);

/// Default sweep: every count up to the default pool size when that is
/// small, else powers of two and the default itself.
fn default_sweep() -> Vec<usize> {
    let max = inferno_cpu::default_threads();
    let mut counts: Vec<usize> = if max <= 8 {
        (1..=max).collect()
    } else {
        (0..).map(|p| 1 << p).take_while(|&n| n < max).collect()
    };
    counts.push(max);
    counts.dedup();
    counts
}

fn bench(args: &BenchArgs) -> Result<(), CliError> {
    let threads = if args.threads.is_empty() {
        default_sweep()
    } else {
        args.threads.clone()
    };
    if args.kernels {
        let pooled: Vec<usize> = threads.iter().copied().filter(|&n| n >= 2).collect();
        let counts = if pooled.is_empty() { vec![2] } else { pooled };
        dispatch_bench::run(&counts, args.samples as usize)?;
        println!();
        let tokens = args.tokens.min(64) as usize;
        return if args.model.path.model.is_some() {
            model_matvecs::run(&args.model, &threads, tokens)
        } else {
            Ok(decode_bench::run(&threads, tokens)?)
        };
    }
    let plan = bench::Plan {
        model: args.model.clone(),
        backends: args.backends.clone(),
        threads,
        tokens: args.tokens as usize,
        prompt_tokens: args.prompt_tokens as usize,
        kv: args.kv,
        json: args.json,
        trace: args.trace,
    };
    bench::run(&plan)
}

/// What a `--features loom` build prints instead of running.
const LOOM_BUILD: &str = "error: this `inferno` binary was built with the `loom` feature, which \
replaces the pool's atomics and threads with loom's model-checking versions; they only work \
inside a loom test. Rebuild without it: `cargo build --release`.";

fn main() -> ExitCode {
    // `cargo test --features loom` also rebuilds this binary; refuse to run
    // it rather than panic deep inside the pool.
    if cfg!(feature = "loom") {
        eprintln!("{LOOM_BUILD}");
        return ExitCode::from(2);
    }
    let command = Cli::parse().command;
    // A kernel named in the environment that cannot run is refused here,
    // not silently replaced by the CPU's own choice.
    if let Err(e) = inferno_cpu::quant::Kernel::from_env() {
        let name = match &command {
            Some(Command::Inspect(_)) => "inspect",
            Some(Command::Tokenize(_)) => "tokenize",
            Some(Command::Synth(_)) => "synth",
            Some(Command::Eval(_)) => "eval",
            Some(Command::Generate(_)) => "generate",
            Some(Command::Bench(_)) | None => "bench",
        };
        eprintln!("inferno {name}: {e}");
        return ExitCode::FAILURE;
    }
    let (name, result) = match command {
        Some(Command::Inspect(args)) => ("inspect", inspect::run(&args)),
        Some(Command::Tokenize(args)) => ("tokenize", tokenize::run(&args)),
        Some(Command::Synth(args)) => ("synth", synth::run(&args)),
        Some(Command::Eval(args)) => ("eval", eval::run(&args)),
        Some(Command::Generate(args)) => ("generate", generate::run(&args)),
        Some(Command::Bench(args)) => ("bench", bench(&args)),
        None => ("bench", bench(&BenchArgs::default())),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("inferno {name}: {e}");
            ExitCode::FAILURE
        }
    }
}
