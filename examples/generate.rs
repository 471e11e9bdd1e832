//! Generate text from Rust code: load a Qwen3 GGUF file, apply its chat
//! template, and stream the reply from the spinning pool as it is
//! produced.
//!
//! ```sh
//! cargo run --release --example generate -- Qwen3-0.6B-Q8_0.gguf "Why is the sky blue?"
//! cargo run --release --example generate     # a tiny synthetic model: runs anywhere, prints noise
//! ```

use std::io::Write;
use std::ops::ControlFlow;
use std::process::ExitCode;

use inferno_cpu::backend::Pool;
use inferno_cpu::model::{Model, Session, SessionOptions};
use inferno_cpu::sample::Sampler;
use inferno_cpu::synth::{model_bytes, SynthConfig};

/// Up to `max_tokens` greedy tokens replying to `prompt`, printed as they
/// come.
fn generate(
    model: &Model,
    prompt: &str,
    max_tokens: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    // The file's chat template (ChatML for Qwen3); `true` lets the text's
    // special tokens (`<|im_start|>`...) be recognised as such.
    let text = model.chat_template()?.user_turn(prompt);
    let ids = model.tokenizer().encode(&text, true);

    // The pool backend: decode matvecs and attention on the spinning pool,
    // prefill on rayon. The KV cache is sized for the prompt and reply.
    let backend = Pool::new(inferno_cpu::default_threads())?;
    let opts = SessionOptions {
        max_positions: ids.len() + max_tokens,
        ..SessionOptions::default()
    };
    let mut session = Session::new(model, backend, opts)?;

    let mut out = std::io::stdout().lock();
    let stats = session.generate_text(
        model.tokenizer(),
        &ids,
        max_tokens,
        &mut Sampler::greedy(),
        |piece| {
            // Whole characters only: a character split across tokens is held
            // back until its last byte arrives.
            let _ = out.write_all(piece.as_bytes()).and_then(|()| out.flush());
            ControlFlow::Continue(())
        },
    )?;
    writeln!(out)?;
    eprintln!(
        "[{} prompt tokens, {} generated ({}), prefill {:.1} tokens/s, decode {:.1} tokens/s]",
        stats.prompt_tokens,
        stats.generated,
        stats.stop.as_str(),
        stats.prefill_tokens_per_second(),
        stats.decode_tokens_per_second().unwrap_or(0.0),
    );
    Ok(())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    match args.next() {
        Some(path) => {
            let prompt = args
                .next()
                .unwrap_or_else(|| "Give me a short introduction to large language models.".into());
            generate(&Model::read(&path)?, &prompt, 256)
        }
        None => {
            eprintln!("(no model given: a tiny synthetic Qwen3 with random weights, so the text is noise)");
            let model = Model::from_bytes(&model_bytes(&SynthConfig::tiny(), 7)?)?;
            generate(&model, "Hello!", 16)
        }
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("generate: {e}");
            ExitCode::FAILURE
        }
    }
}
