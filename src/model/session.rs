//! A running conversation with a model: the KV cache, the scratch buffers
//! and the two kinds of forward step.

use crate::backend::{dispatch_of, Backend};
use crate::matvec::Q8Matrix;
use crate::quant::{QuantizedBatch, QuantizedVector};

use super::kv_cache::{KvCache, KvDtype};
use super::ops::{self, attend, HeadJob, HeadScratch, RopeAngles};
use super::{ModelError, Qwen3};

/// Positions a session holds when [`SessionOptions::max_positions`] is 0
/// and the model's context is longer: enough for the benchmarks and for
/// chat, without reserving the KV cache of a 40960-token context (4.7 GB
/// for Qwen3-0.6B in `f16`) up front.
pub const DEFAULT_MAX_POSITIONS: usize = 4096;

/// How a [`Session`] is set up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionOptions {
    /// Positions the KV cache holds (prompt and generated tokens together).
    /// 0 means the model's context length, capped at
    /// [`DEFAULT_MAX_POSITIONS`].
    pub max_positions: usize,
    /// The KV cache's element type.
    pub kv: KvDtype,
}

/// A model, a backend and a KV cache: feed it tokens, read logits.
///
/// [`prefill`](Self::prefill) runs a prompt as batched products;
/// [`decode`](Self::decode) runs one token. Both append to the cache. All
/// scratch space is allocated when the session is created, so a decode
/// step allocates nothing.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // the pool runs on loom's scheduler under `loom`
/// use inferno_cpu::backend::AnyBackend;
/// use inferno_cpu::gguf::Gguf;
/// use inferno_cpu::model::{Qwen3, Session, SessionOptions};
/// use inferno_cpu::synth::{model_bytes, SynthConfig};
///
/// let bytes = model_bytes(&SynthConfig::tiny(), 7)?;
/// let gguf = Gguf::parse(&bytes)?;
/// let model = Qwen3::load(&gguf)?;
/// let mut session = Session::new(&model, AnyBackend::new("pool", 2)?, SessionOptions::default())?;
/// let logits = session.prefill(&[1, 2, 3])?;
/// let next = inferno_cpu::model::argmax(logits);
/// let logits = session.decode(next)?;
/// assert_eq!(logits.len(), model.config.vocab);
/// assert_eq!(session.position(), 4);
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Session<'m, 'a, B> {
    model: &'m Qwen3<'a>,
    backend: B,
    cache: KvCache,
    pos: usize,
    rope: RopeAngles,
    x: Vec<f32>,
    xn: Vec<f32>,
    xq: QuantizedVector,
    qkv: Vec<f32>,
    heads: Vec<HeadScratch>,
    attn: Vec<f32>,
    tmp: Vec<f32>,
    gu: Vec<f32>,
    logits: Vec<f32>,
}

impl<'m, 'a, B: Backend> Session<'m, 'a, B> {
    /// A session of `model` on `backend` with an empty cache.
    ///
    /// # Errors
    ///
    /// [`ModelError::Options`] if the cache cannot be sized.
    pub fn new(model: &'m Qwen3<'a>, backend: B, opts: SessionOptions) -> Result<Self, ModelError> {
        let c = &model.config;
        let capacity = match opts.max_positions {
            0 => c.context.min(DEFAULT_MAX_POSITIONS),
            n => n,
        };
        let cache = KvCache::new(opts.kv, c.layers, capacity, c.kv_dim())?;
        let widest = c.hidden.max(c.ffn).max(c.q_dim());
        Ok(Self {
            model,
            backend,
            cache,
            pos: 0,
            rope: RopeAngles::new(c.head_dim, c.rope_base),
            x: vec![0.0; c.hidden],
            xn: vec![0.0; c.hidden],
            xq: QuantizedVector::with_capacity(widest),
            qkv: vec![0.0; c.q_dim() + 2 * c.kv_dim()],
            heads: vec![HeadScratch::new(c.head_dim, capacity); c.heads],
            attn: vec![0.0; c.q_dim()],
            tmp: vec![0.0; c.hidden],
            gu: vec![0.0; 2 * c.ffn],
            logits: vec![0.0; c.vocab],
        })
    }

    /// Positions already in the cache (the next token's position).
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Positions the cache holds in all.
    pub fn capacity(&self) -> usize {
        self.cache.capacity()
    }

    /// The KV cache's element type.
    pub fn kv_dtype(&self) -> KvDtype {
        self.cache.dtype()
    }

    /// Bytes the KV cache holds.
    pub fn kv_bytes(&self) -> usize {
        self.cache.bytes()
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Forgets every position (the cache's memory is kept).
    pub fn reset(&mut self) {
        self.pos = 0;
    }

    /// The logits of the last step.
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    fn check_room(&self, n: usize) -> Result<(), ModelError> {
        if n > self.capacity() - self.pos {
            return Err(ModelError::ContextFull {
                used: self.pos,
                requested: n,
                capacity: self.capacity(),
            });
        }
        Ok(())
    }

    fn check_token(&self, id: u32) -> Result<usize, ModelError> {
        let vocab = self.model.config.vocab;
        match usize::try_from(id) {
            Ok(i) if i < vocab => Ok(i),
            _ => Err(ModelError::TokenOutOfRange { id, vocab }),
        }
    }

    /// Runs one token at the next position and returns the logits of the
    /// token after it.
    ///
    /// # Errors
    ///
    /// [`ModelError::TokenOutOfRange`]; [`ModelError::ContextFull`].
    pub fn decode(&mut self, token: u32) -> Result<&[f32], ModelError> {
        let id = self.check_token(token)?;
        self.check_room(1)?;
        let model = self.model;
        let (c, w) = (&model.config, &model.weights);
        let (hd, qd, kvd) = (c.head_dim, c.q_dim(), c.kv_dim());
        let pos = self.pos;
        w.embedding.row_into(id, &mut self.x)?;
        self.rope.set_position(pos);
        let dot = dispatch_of(&self.backend);
        for (l, lw) in w.layers.iter().enumerate() {
            // Attention.
            ops::rms_norm(&self.x, &lw.attn_norm, c.rms_eps, &mut self.xn);
            self.backend.quantize(&self.xn, &mut self.xq)?;
            self.backend
                .matvec(&[lw.q, lw.k, lw.v], &self.xq, &mut self.qkv)?;
            let (q, kv) = self.qkv.split_at_mut(qd);
            let (k, v) = kv.split_at_mut(kvd);
            for head in k.chunks_exact_mut(hd) {
                ops::rms_norm_in_place(head, &lw.k_norm, c.rms_eps);
                self.rope.rotate(head);
            }
            self.cache.store(l, pos, k, v);
            for (head, s) in q.chunks_exact_mut(hd).zip(&mut self.heads) {
                ops::rms_norm_in_place(head, &lw.q_norm, c.rms_eps);
                self.rope.rotate(head);
                s.q.copy_from_slice(head);
            }
            let (kc, vc) = self.cache.layer(l, pos + 1);
            let job = HeadJob {
                k: kc,
                v: vc,
                kv_dim: kvd,
                head_dim: hd,
                group: c.heads / c.kv_heads,
                scale: 1.0 / (hd as f32).sqrt(),
                round: self.cache.dtype() == KvDtype::F16,
                dot,
            };
            self.backend
                .for_each_mut(&mut self.heads, |h, s| attend(&job, h, pos + 1, s));
            for (out, s) in self.attn.chunks_exact_mut(hd).zip(&self.heads) {
                out.copy_from_slice(&s.out);
            }
            self.backend.quantize(&self.attn, &mut self.xq)?;
            self.backend.matvec(&[lw.o], &self.xq, &mut self.tmp)?;
            ops::add_assign(&mut self.x, &self.tmp);

            // MLP.
            ops::rms_norm(&self.x, &lw.ffn_norm, c.rms_eps, &mut self.xn);
            self.backend.quantize(&self.xn, &mut self.xq)?;
            self.backend
                .matvec(&[lw.gate, lw.up], &self.xq, &mut self.gu)?;
            let (gate, up) = self.gu.split_at_mut(c.ffn);
            ops::swiglu(gate, up);
            self.backend.quantize(gate, &mut self.xq)?;
            self.backend.matvec(&[lw.down], &self.xq, &mut self.tmp)?;
            ops::add_assign(&mut self.x, &self.tmp);
        }
        ops::rms_norm(&self.x, &w.output_norm, c.rms_eps, &mut self.xn);
        self.backend.quantize(&self.xn, &mut self.xq)?;
        self.backend
            .matvec(&[w.lm_head()], &self.xq, &mut self.logits)?;
        self.pos += 1;
        Ok(&self.logits)
    }

    /// Runs a prompt as one batch (each product a matmul over all its
    /// tokens) and returns the logits after its last token. The logits are
    /// bit-identical to running the tokens through [`decode`](Self::decode)
    /// one at a time.
    ///
    /// # Errors
    ///
    /// [`ModelError::NoTokens`]; [`ModelError::TokenOutOfRange`];
    /// [`ModelError::ContextFull`].
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<&[f32], ModelError> {
        let last = self.prefill_inner(tokens, false)?;
        self.logits.copy_from_slice(&last);
        Ok(&self.logits)
    }

    /// [`prefill`](Self::prefill), returning the logits after every token
    /// (`tokens.len() x vocab`, row-major), for checking against another
    /// engine.
    ///
    /// # Errors
    ///
    /// As [`prefill`](Self::prefill).
    pub fn prefill_all(&mut self, tokens: &[u32]) -> Result<Vec<f32>, ModelError> {
        let all = self.prefill_inner(tokens, true)?;
        let vocab = self.model.config.vocab;
        self.logits.copy_from_slice(&all[all.len() - vocab..]);
        Ok(all)
    }

    fn prefill_inner(&mut self, tokens: &[u32], all: bool) -> Result<Vec<f32>, ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::NoTokens);
        }
        let ids = tokens
            .iter()
            .map(|&t| self.check_token(t))
            .collect::<Result<Vec<_>, _>>()?;
        self.check_room(ids.len())?;
        let model = self.model;
        let (c, w) = (&model.config, &model.weights);
        let (m, h, hd, qd, kvd, f) = (
            ids.len(),
            c.hidden,
            c.head_dim,
            c.q_dim(),
            c.kv_dim(),
            c.ffn,
        );
        let p0 = self.pos;
        let b = &self.backend;
        let mut x = vec![0.0f32; m * h];
        for (row, &id) in x.chunks_exact_mut(h).zip(&ids) {
            w.embedding.row_into(id, row)?;
        }
        let mut xn = vec![0.0f32; m * h];
        let mut xs = QuantizedBatch::new();
        let (mut q, mut k, mut v) = (
            vec![0.0f32; m * qd],
            vec![0.0f32; m * kvd],
            vec![0.0f32; m * kvd],
        );
        let mut attn = vec![0.0f32; m * qd];
        let mut tmp = vec![0.0f32; m * h];
        let (mut gate, mut up) = (vec![0.0f32; m * f], vec![0.0f32; m * f]);
        let dot = dispatch_of(b);
        let norm_rows = |x: &[f32], wt: &[f32], out: &mut [f32]| {
            for (xr, or) in x.chunks_exact(h).zip(out.chunks_exact_mut(h)) {
                ops::rms_norm(xr, wt, c.rms_eps, or);
            }
        };
        for (l, lw) in w.layers.iter().enumerate() {
            norm_rows(&x, &lw.attn_norm, &mut xn);
            xs.quantize_from(&xn, h)?;
            b.matmul(&lw.q, &xs, &mut q)?;
            b.matmul(&lw.k, &xs, &mut k)?;
            b.matmul(&lw.v, &xs, &mut v)?;
            for i in 0..m {
                self.rope.set_position(p0 + i);
                for head in q[i * qd..(i + 1) * qd].chunks_exact_mut(hd) {
                    ops::rms_norm_in_place(head, &lw.q_norm, c.rms_eps);
                    self.rope.rotate(head);
                }
                for head in k[i * kvd..(i + 1) * kvd].chunks_exact_mut(hd) {
                    ops::rms_norm_in_place(head, &lw.k_norm, c.rms_eps);
                    self.rope.rotate(head);
                }
                self.cache.store(
                    l,
                    p0 + i,
                    &k[i * kvd..(i + 1) * kvd],
                    &v[i * kvd..(i + 1) * kvd],
                );
            }
            let (kc, vc) = self.cache.layer(l, p0 + m);
            let job = HeadJob {
                k: kc,
                v: vc,
                kv_dim: kvd,
                head_dim: hd,
                group: c.heads / c.kv_heads,
                scale: 1.0 / (hd as f32).sqrt(),
                round: self.cache.dtype() == KvDtype::F16,
                dot,
            };
            let q = &q;
            b.for_each_chunk(&mut attn, hd, |task, out| {
                let (i, head) = (task / c.heads, task % c.heads);
                let n_pos = p0 + i + 1;
                let mut s = HeadScratch::new(hd, n_pos);
                let at = i * qd + head * hd;
                s.q.copy_from_slice(&q[at..at + hd]);
                attend(&job, head, n_pos, &mut s);
                out.copy_from_slice(&s.out);
            });
            xs.quantize_from(&attn, qd)?;
            b.matmul(&lw.o, &xs, &mut tmp)?;
            ops::add_assign(&mut x, &tmp);

            norm_rows(&x, &lw.ffn_norm, &mut xn);
            xs.quantize_from(&xn, h)?;
            b.matmul(&lw.gate, &xs, &mut gate)?;
            b.matmul(&lw.up, &xs, &mut up)?;
            ops::swiglu(&mut gate, &up);
            xs.quantize_from(&gate, f)?;
            b.matmul(&lw.down, &xs, &mut tmp)?;
            ops::add_assign(&mut x, &tmp);
        }
        self.pos += m;
        let lm: Q8Matrix<'_> = w.lm_head();
        let first = if all { 0 } else { m - 1 };
        let rows = m - first;
        norm_rows(&x[first * h..], &w.output_norm, &mut xn[..rows * h]);
        xs.quantize_from(&xn[..rows * h], h)?;
        let mut logits = vec![0.0f32; rows * c.vocab];
        b.matmul(&lm, &xs, &mut logits)?;
        Ok(logits)
    }
}

/// The index of the largest value (the first one on ties; NaNs are
/// skipped), as a token id. 0 for an empty slice.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0usize;
    let mut best_v = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > best_v {
            best = i;
            best_v = v;
        }
    }
    u32::try_from(best).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::argmax;

    #[test]
    fn argmax_takes_the_first_of_tied_values() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax(&[0.5; 7]), 0);
        assert_eq!(argmax(&[-1.0, f32::NAN, 2.0, -0.0, 2.0]), 2);
        assert_eq!(argmax(&[f32::NEG_INFINITY, f32::NEG_INFINITY]), 0);
        assert_eq!(argmax(&[]), 0);
    }
}
