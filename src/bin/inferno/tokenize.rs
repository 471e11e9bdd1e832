//! `inferno tokenize [--model F.gguf] [--no-special] [--json] (TEXT | --file PATH)`:
//! the token ids of a text, so other tools can check their tokenizer
//! against this one.
//!
//! The text is tokenized exactly as given: no BOS is added, nothing is
//! trimmed, and `--file` reads the file's bytes as they are (they must be
//! UTF-8; the tokenizer works on text).

use std::path::PathBuf;

use inferno_cpu::tokenizer::Tokenizer;

use crate::args::ModelPath;
use crate::CliError;

/// Arguments of `inferno tokenize`.
#[derive(clap::Args)]
pub struct Args {
    /// The model whose tokenizer to use (only its metadata is read).
    #[command(flatten)]
    model: ModelPath,
    /// Treat control tokens written in the text (`<|im_start|>`) as plain
    /// text instead of matching them.
    #[arg(long)]
    no_special: bool,
    /// Print one JSON array instead of space-separated ids.
    #[arg(long)]
    json: bool,
    /// Read the text from this file (its exact bytes).
    #[arg(long, conflicts_with = "text")]
    file: Option<PathBuf>,
    /// The text to tokenize.
    #[arg(required_unless_present = "file")]
    text: Option<String>,
}

/// Prints the ids; an error for a model or file that cannot be used.
pub fn run(args: &Args) -> Result<(), CliError> {
    let text = match (&args.file, &args.text) {
        (Some(path), _) => {
            let bytes = std::fs::read(path).map_err(|e| CliError::at(path, e))?;
            String::from_utf8(bytes).map_err(|e| {
                CliError::at(
                    path,
                    format!(
                        "not UTF-8 text (invalid byte at offset {})",
                        e.utf8_error().valid_up_to()
                    ),
                )
            })?
        }
        (None, Some(text)) => text.clone(),
        (None, None) => return Err(CliError::msg("no text: give TEXT or --file PATH")),
    };
    let (path, file) = args.model.open()?;
    let tokenizer = Tokenizer::from_gguf(&file.gguf()).map_err(|e| CliError::at(&path, e))?;
    let ids = tokenizer.encode(&text, !args.no_special);
    if args.json {
        println!("{}", serde_json::Value::from(ids));
    } else {
        let line: Vec<String> = ids.iter().map(u32::to_string).collect();
        println!("{}", line.join(" "));
    }
    Ok(())
}
