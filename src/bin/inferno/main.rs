//! `inferno`: the command-line front end of `inferno-cpu`.
//!
//! Each subcommand lives in its own module; this file only parses the
//! command line and dispatches.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    /// Print a GGUF file's header, metadata and tensor table.
    Inspect(inspect::Args),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Some(Command::Inspect(args)) => inspect::run(&args),
        None => {
            println!("inferno: no command given; try `inferno --help`");
            ExitCode::SUCCESS
        }
    }
}
