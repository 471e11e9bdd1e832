//! `inferno eval`: the logits a model gives for a list of token ids, for
//! checking against another engine.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use inferno_cpu::model::{argmax, KvDtype, Session, SessionOptions};

use crate::args::{BackendArgs, ModelArgs};
use crate::CliError;

/// Arguments of `inferno eval`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// Token ids, comma-separated, e.g. `1,2,3`.
    #[arg(long, value_delimiter = ',', required = true, num_args = 1..)]
    tokens: Vec<u32>,
    #[command(flatten)]
    backend: BackendArgs,
    /// Run the ids as one prefill batch instead of one decode step each.
    #[arg(long)]
    prefill: bool,
    /// KV cache element type: f16 or f32.
    #[arg(long, default_value = "f16")]
    kv: KvDtype,
    /// Write every position's logits as float32 `.npy` of shape
    /// `[n_tokens, vocab]` here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object on stdout (the ids, each position's argmax,
    /// the vocabulary size and the `--out` path) instead of the lines.
    #[arg(long)]
    json: bool,
}

/// Runs the ids through the model and prints each position's argmax (and
/// writes the logits with `--out`).
pub fn run(args: &Args) -> Result<(), CliError> {
    let (_, model) = args.model.load()?;
    let backend = args.backend.build()?;
    let opts = SessionOptions {
        max_positions: args.tokens.len(),
        kv: args.kv,
        // Sized to the tokens it will hold: see `SessionOptions::huge_pages`.
        huge_pages: true,
    };
    let mut session = Session::new(&model, &backend, opts)?;
    let vocab = model.config().vocab;
    let logits = if args.prefill {
        session.prefill_all(&args.tokens)?
    } else {
        let mut all = Vec::with_capacity(args.tokens.len() * vocab);
        for &t in &args.tokens {
            all.extend_from_slice(session.decode(t)?);
        }
        all
    };
    let best: Vec<u32> = logits.chunks(vocab).map(argmax).collect();
    if let Some(out) = &args.out {
        write_npy(out, &logits, args.tokens.len(), vocab)?;
        eprintln!(
            "wrote {} ({} x {vocab} float32)",
            out.display(),
            args.tokens.len()
        );
    }
    if args.json {
        let out = args.out.as_ref().map(|p| p.display().to_string());
        println!(
            "{}",
            serde_json::json!({ "tokens": args.tokens, "argmax": best, "vocab": vocab, "out": out })
        );
    } else {
        for (pos, id) in best.iter().enumerate() {
            println!("{pos}\t{id}");
        }
    }
    Ok(())
}

/// Writes a C-order little-endian float32 `.npy` file (format 1.0).
fn write_npy(path: &Path, data: &[f32], rows: usize, cols: usize) -> Result<(), CliError> {
    let mut header =
        format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = Vec::with_capacity(10 + header.len() + data.len() * 4);
    bytes.extend_from_slice(b"\x93NUMPY\x01\x00");
    let len = u16::try_from(header.len()).map_err(|_| CliError::msg("npy header too long"))?;
    bytes.extend_from_slice(&len.to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for v in data {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    let mut f = std::fs::File::create(path).map_err(|e| CliError::at(path, e))?;
    f.write_all(&bytes).map_err(|e| CliError::at(path, e))?;
    Ok(())
}
