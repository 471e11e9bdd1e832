//! Generate text from Rust code: load a Qwen3 GGUF file, tokenize a chat
//! prompt, prefill it, then decode greedily on the spinning pool, printing
//! the reply as it is produced.
//!
//! ```sh
//! cargo run --release --example generate -- Qwen3-0.6B-Q8_0.gguf "Why is the sky blue?"
//! cargo run --release --example generate     # a tiny synthetic model: runs anywhere, prints noise
//! ```

use std::io::Write;
use std::process::ExitCode;

use inferno_cpu::backend::Pool;
use inferno_cpu::gguf::{Gguf, GgufFile};
use inferno_cpu::model::{argmax, Qwen3, Session, SessionOptions};
use inferno_cpu::synth::{model_bytes, SynthConfig};
use inferno_cpu::tokenizer::Tokenizer;

/// Up to `max_tokens` greedy tokens after `prompt`, printed as they come.
fn generate(
    gguf: &Gguf<'_>,
    prompt: &str,
    max_tokens: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    // Zero-copy: the weights are views of the file's bytes.
    let model = Qwen3::load(gguf)?;
    let tokenizer = Tokenizer::from_gguf(gguf)?;

    // Qwen3's chat template; `true` lets the text's special tokens
    // (`<|im_start|>`...) be recognised as such.
    let text = format!("<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n");
    let ids = tokenizer.encode(&text, true);

    // The pool backend: decode matvecs and attention on the spinning pool,
    // prefill on rayon. The KV cache is sized for the prompt and reply.
    let backend = Pool::new(inferno_cpu::default_threads())?;
    let opts = SessionOptions {
        max_positions: ids.len() + max_tokens,
        ..SessionOptions::default()
    };
    let mut session = Session::new(&model, backend, opts)?;

    let mut out = std::io::stdout().lock();
    let mut decoder = tokenizer.stream_decoder();
    let started = std::time::Instant::now();
    let mut token = argmax(session.prefill(&ids)?);
    let mut generated = 0;
    for _ in 0..max_tokens {
        if tokenizer.is_end_of_generation(token) {
            break;
        }
        generated += 1;
        // Whole characters only: a character split across tokens is held
        // back until its last byte arrives.
        out.write_all(decoder.push(token)?.as_bytes())?;
        out.flush()?;
        token = argmax(session.decode(token)?);
    }
    writeln!(out, "{}", decoder.finish())?;
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "[{} prompt tokens, {generated} generated in {secs:.2} s, {:.1} tokens/s]",
        ids.len(),
        generated as f64 / secs
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
            let file = GgufFile::open(&path)?;
            generate(&file.gguf(), &prompt, 256)
        }
        None => {
            eprintln!("(no model given: a tiny synthetic Qwen3 with random weights, so the text is noise)");
            let bytes = model_bytes(&SynthConfig::tiny(), 7)?;
            generate(&Gguf::parse(&bytes)?, "Hello!", 16)
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
