//! `inferno`: the command-line front end of `inferno-cpu`.
//!
//! Each subcommand lives in its own module; this file only parses the
//! command line and dispatches. With no subcommand, `inferno` runs `bench`.

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

mod decode_bench;
mod dispatch_bench;
mod inspect;

/// CPU kernels for LLM inference: tools around the `inferno-cpu` crate.
#[derive(Parser)]
#[command(name = "inferno", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Measure dispatch latency (pool vs rayon) and decode matvec speed per
    /// backend and thread count (the default command).
    Bench(BenchArgs),
    /// Print a GGUF file's header, metadata and tensor table.
    Inspect(inspect::Args),
}

#[derive(Args, Default)]
struct BenchArgs {
    /// Thread counts to sweep, e.g. `1,2,4` (default: 1 up to the
    /// default pool size, see INFERNO_THREADS).
    #[arg(long, value_delimiter = ',', value_parser = parse_threads)]
    threads: Vec<usize>,
    /// Tokens timed per backend and thread count (the median is reported).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    tokens: u32,
    /// Dispatch-latency samples per configuration.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(10..=10_000_000))]
    samples: u32,
    /// Skip the dispatch-latency table.
    #[arg(long)]
    skip_dispatch: bool,
    /// Skip the decode matvec sweep (which allocates ~633 MB of weights).
    #[arg(long)]
    skip_decode: bool,
}

fn parse_threads(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=1024).contains(&n) => Ok(n),
        _ => Err(format!("{s:?} is not a thread count between 1 and 1024")),
    }
}

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

fn bench(args: &BenchArgs) -> ExitCode {
    let threads = if args.threads.is_empty() {
        default_sweep()
    } else {
        args.threads.clone()
    };
    let pooled: Vec<usize> = threads.iter().copied().filter(|&n| n >= 2).collect();
    if !args.skip_dispatch {
        let counts = if pooled.is_empty() { vec![2] } else { pooled };
        if let Err(err) = dispatch_bench::run(&counts, args.samples as usize) {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
        println!();
    }
    if !args.skip_decode {
        if let Err(err) = decode_bench::run(&threads, args.tokens as usize) {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
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
    match Cli::parse().command {
        Some(Command::Inspect(args)) => inspect::run(&args),
        Some(Command::Bench(args)) => bench(&args),
        None => bench(&BenchArgs {
            tokens: 8,
            samples: 20_000,
            ..BenchArgs::default()
        }),
    }
}
