//! Serve several conversations from one loaded model: the model is loaded
//! once into an `Arc<Model>`, and each request gets its own session (its
//! own KV cache) on its own thread, all reading the same weights.
//!
//! ```sh
//! cargo run --release --example serve -- Qwen3-0.6B-Q8_0.gguf
//! cargo run --release --example serve     # a tiny synthetic model: runs anywhere, prints noise
//! ```
//!
//! Each worker uses the single-threaded `Simd` backend here, so the
//! requests run side by side on separate cores; an engine with fewer,
//! longer requests would rather give each session a `Pool` of several
//! threads.

use std::ops::ControlFlow;
use std::process::ExitCode;
use std::sync::Arc;

use inferno_cpu::backend::Simd;
use inferno_cpu::model::{Model, SessionOptions, Stats};
use inferno_cpu::sample::Sampler;
use inferno_cpu::synth::{model_bytes, SynthConfig};

const PROMPTS: [&str; 4] = [
    "What is a prime number?",
    "Name three colours.",
    "Why do cats purr?",
    "Write a haiku about rain.",
];

/// One request: its own session on the shared model, a sampler seeded by
/// the request number, the reply collected as text.
fn answer(
    model: &Arc<Model>,
    n: usize,
    prompt: &str,
    max_tokens: usize,
) -> Result<(String, Stats), inferno_cpu::model::ModelError> {
    let ids = model
        .tokenizer()
        .encode(&model.chat_template()?.user_turn(prompt), true);
    let opts = SessionOptions {
        max_positions: ids.len() + max_tokens,
        ..SessionOptions::default()
    };
    let mut session = model.session(Simd, opts)?;
    let mut sampler = Sampler::new(0.7, 0.9, n as u64).expect("valid sampling settings");
    let mut reply = String::new();
    let stats =
        session.generate_text(model.tokenizer(), &ids, max_tokens, &mut sampler, |piece| {
            reply.push_str(piece);
            ControlFlow::Continue(())
        })?;
    Ok((reply, stats))
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let (model, max_tokens) = match std::env::args().nth(1) {
        Some(path) => (Model::read(&path)?, 64),
        None => {
            eprintln!("(no model given: a tiny synthetic Qwen3 with random weights, so the text is noise)");
            (
                Model::from_bytes(&model_bytes(&SynthConfig::tiny(), 7)?)?,
                12,
            )
        }
    };
    let model = Arc::new(model);
    let workers: Vec<_> = PROMPTS
        .iter()
        .enumerate()
        .map(|(n, prompt)| {
            let model = Arc::clone(&model);
            std::thread::spawn(move || answer(&model, n, prompt, max_tokens))
        })
        .collect();
    for (prompt, worker) in PROMPTS.iter().zip(workers) {
        let (reply, stats) = worker.join().map_err(|_| "a worker panicked")??;
        println!("> {prompt}\n{}\n", reply.trim());
        eprintln!(
            "  [{} + {} tokens, {}, decode {:.1} tokens/s]",
            stats.prompt_tokens,
            stats.generated,
            stats.stop.as_str(),
            stats.decode_tokens_per_second().unwrap_or(0.0)
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("serve: {e}");
            ExitCode::FAILURE
        }
    }
}
