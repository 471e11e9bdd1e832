//! The generation loop: prefill, sample, decode until a stop, with the
//! timings every front end reports.
//!
//! [`Session::generate`] works on token ids (a benchmark, or a caller with
//! its own detokenizer); [`Session::generate_text`] adds the tokenizer:
//! it stops at the end of the model's turn and streams whole characters.
//! The `inferno` binary's `generate` and `bench` and the `generate`
//! example all run these, so their numbers mean the same thing.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::sample::Sampler;
use crate::tokenizer::Tokenizer;

use super::trace::{Op, Trace};
use super::{ModelError, ModelRef, Session};

/// Why a generation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model ended its turn (an end-of-generation token, which is not
    /// counted or streamed).
    EndOfGeneration,
    /// The token limit was reached.
    Limit,
    /// The caller's callback asked to stop.
    Stopped,
}

impl StopReason {
    /// A short lowercase description, for logs and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndOfGeneration => "end of generation",
            StopReason::Limit => "limit",
            StopReason::Stopped => "stopped",
        }
    }
}

/// What a generation did and how long it took.
#[derive(Clone, Debug)]
pub struct Stats {
    /// Prompt tokens prefilled.
    pub prompt_tokens: usize,
    /// Tokens generated (handed to the callback and accepted).
    pub generated: usize,
    /// From the start to the first generated token being known: the
    /// prefill and the first sample.
    pub time_to_first_token: Duration,
    /// Each decode step's time (the forward pass and the sample after it).
    pub steps: Vec<Duration>,
    /// Why it stopped.
    pub stop: StopReason,
    /// Per-operation time of the prefill (and first sample), if the
    /// session was tracing.
    pub prefill_trace: Option<Trace>,
    /// Per-operation time of all decode steps together, if tracing.
    pub decode_trace: Option<Trace>,
}

impl Stats {
    /// Prompt tokens per second of the prefill (time to first token).
    pub fn prefill_tokens_per_second(&self) -> f64 {
        self.prompt_tokens as f64 / self.time_to_first_token.as_secs_f64()
    }

    /// Decode steps per second, or `None` without a decode step.
    pub fn decode_tokens_per_second(&self) -> Option<f64> {
        let total: f64 = self.steps.iter().map(Duration::as_secs_f64).sum();
        (!self.steps.is_empty()).then(|| self.steps.len() as f64 / total)
    }

    /// The shortest, mean and longest decode step in milliseconds, or
    /// `None` without a decode step.
    pub fn step_ms(&self) -> Option<(f64, f64, f64)> {
        if self.steps.is_empty() {
            return None;
        }
        let ms: Vec<f64> = self.steps.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        let min = ms.iter().copied().fold(f64::INFINITY, f64::min);
        let max = ms.iter().copied().fold(0.0, f64::max);
        Some((min, ms.iter().sum::<f64>() / ms.len() as f64, max))
    }
}

impl<M: ModelRef, B: Backend> Session<M, B> {
    /// Prefills `prompt`, then samples and decodes up to `max_tokens`
    /// tokens, handing each to `on_token` as soon as it is sampled.
    ///
    /// `on_token` returns [`ControlFlow::Break`] with the reason to stop
    /// before that token is counted (an end-of-turn token, a cancelled
    /// request); otherwise the loop stops after `max_tokens` tokens. The
    /// last token handed over is not decoded, so the session ends
    /// positioned after the prompt and every token but the last:
    /// [`decode`](Self::decode) it to continue.
    ///
    /// ```
    /// # #[cfg(not(feature = "loom"))] {
    /// use std::ops::ControlFlow;
    /// use inferno_cpu::backend::Simd;
    /// use inferno_cpu::model::{Model, SessionOptions, StopReason};
    /// use inferno_cpu::sample::Sampler;
    /// use inferno_cpu::synth::{model_bytes, SynthConfig};
    ///
    /// let model = std::sync::Arc::new(Model::from_bytes(&model_bytes(&SynthConfig::tiny(), 7)?)?);
    /// let mut session = model.session(Simd, SessionOptions::default())?;
    /// let mut ids = Vec::new();
    /// let stats = session.generate(&[1, 2, 3], 5, &mut Sampler::greedy(), |id| {
    ///     ids.push(id);
    ///     ControlFlow::Continue(())
    /// })?;
    /// assert_eq!((ids.len(), stats.generated, stats.stop), (5, 5, StopReason::Limit));
    /// assert_eq!(stats.steps.len(), 4);
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// Any [`ModelError`] of [`prefill`](Self::prefill) or
    /// [`decode`](Self::decode); [`ModelError::ContextFull`] if the prompt
    /// and `max_tokens - 1` decode steps do not fit, checked before the
    /// prefill.
    pub fn generate<F>(
        &mut self,
        prompt: &[u32],
        max_tokens: usize,
        sampler: &mut Sampler,
        mut on_token: F,
    ) -> Result<Stats, ModelError>
    where
        F: FnMut(u32) -> ControlFlow<StopReason>,
    {
        let needed = prompt.len().saturating_add(max_tokens.saturating_sub(1));
        if needed > self.capacity() - self.position() {
            return Err(ModelError::ContextFull {
                used: self.position(),
                requested: needed,
                capacity: self.capacity(),
            });
        }
        let start = Instant::now();
        self.prefill(prompt)?;
        let mut token = self.sample(sampler);
        let time_to_first_token = start.elapsed();
        let prefill_trace = self.trace().cloned();
        if let Some(t) = self.trace_mut() {
            t.clear();
        }
        let mut steps = Vec::with_capacity(max_tokens.saturating_sub(1));
        let mut generated = 0;
        let stop = loop {
            if max_tokens == 0 {
                break StopReason::Limit;
            }
            if let ControlFlow::Break(reason) = on_token(token) {
                break reason;
            }
            generated += 1;
            if generated >= max_tokens {
                break StopReason::Limit;
            }
            let t = Instant::now();
            self.decode(token)?;
            token = self.sample(sampler);
            steps.push(t.elapsed());
        };
        Ok(Stats {
            prompt_tokens: prompt.len(),
            generated,
            time_to_first_token,
            steps,
            stop,
            prefill_trace,
            decode_trace: self.trace().cloned(),
        })
    }

    /// [`generate`](Self::generate) with text: stops when the model ends
    /// its turn ([`Tokenizer::is_end_of_generation`]) and hands `on_text`
    /// each token's text as soon as it forms whole characters (a
    /// character split across tokens waits for its last byte). Return
    /// [`ControlFlow::Break`] from `on_text` to stop early.
    ///
    /// # Errors
    ///
    /// As [`generate`](Self::generate); [`ModelError::Tokenizer`] if a
    /// token is outside the tokenizer's vocabulary.
    pub fn generate_text<F>(
        &mut self,
        tokenizer: &Tokenizer,
        prompt: &[u32],
        max_tokens: usize,
        sampler: &mut Sampler,
        mut on_text: F,
    ) -> Result<Stats, ModelError>
    where
        F: FnMut(&str) -> ControlFlow<()>,
    {
        let mut decoder = tokenizer.stream_decoder();
        let mut failed = None;
        let stats = self.generate(prompt, max_tokens, sampler, |id| {
            if tokenizer.is_end_of_generation(id) {
                return ControlFlow::Break(StopReason::EndOfGeneration);
            }
            match decoder.push(id) {
                Ok(piece) => match on_text(&piece) {
                    ControlFlow::Continue(()) => ControlFlow::Continue(()),
                    ControlFlow::Break(()) => ControlFlow::Break(StopReason::Stopped),
                },
                Err(e) => {
                    failed = Some(e);
                    ControlFlow::Break(StopReason::Stopped)
                }
            }
        })?;
        if let Some(e) = failed {
            return Err(e.into());
        }
        let rest = decoder.finish();
        if !rest.is_empty() {
            let _ = on_text(&rest);
        }
        Ok(stats)
    }

    /// Samples from the current logits, charging the time to the trace.
    fn sample(&mut self, sampler: &mut Sampler) -> u32 {
        let t = Instant::now();
        let id = sampler.sample(self.logits());
        if let Some(trace) = self.trace_mut() {
            trace.add(Op::Sample, t.elapsed());
        }
        id
    }
}
