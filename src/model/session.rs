//! A running conversation with a model: the KV cache, the scratch buffers
//! and the two kinds of forward step.

use crate::backend::{dispatch_of, Backend};
use crate::matvec::Weight;
use crate::quant::{QuantizedBatch, QuantizedVector};

use super::attention::{self, HeadJob, Partial, Scores};
use super::kv_cache::{KvCache, KvDtype};
use super::ops::{self, RopeAngles};
use super::trace::{Laps, Op, Trace};
use super::{ModelError, ModelRef, Qwen3};

/// Tokens a prefill runs through the layers at once. A longer prompt runs
/// in chunks of this many, each reading the weights once, on scratch
/// buffers sized for one chunk; 128 rows of the widest activation
/// (3072 values for Qwen3-0.6B's MLP, quantized) is about 1.2 MB, which
/// stays in the L2 cache of the machines measured while a tile of weight
/// rows is swept over it.
pub const PREFILL_CHUNK: usize = 128;

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
    /// Back the KV cache with transparent huge pages (Linux, for a cache of
    /// 2 MiB or more; elsewhere this does nothing). Attention after a long
    /// prompt then reads its rows without a page walk per 4 KiB: after 511
    /// tokens of Qwen3-0.6B, 10-20% less attention time per decode step
    /// measured on an Intel Xeon VM. But the whole cache is resident from
    /// the first token (every head's rows start a 2 MiB page), where with
    /// 4 KiB pages it grows as positions fill, so it pays when the session
    /// is sized to what it will hold, as `inferno bench` and `inferno
    /// generate` size theirs. Off by default.
    pub huge_pages: bool,
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
pub struct Session<M, B> {
    model: M,
    st: State<B>,
}

/// Everything of a [`Session`] but the model, so that a forward step can
/// borrow the model (through the session's [`ModelRef`]) and mutate this.
#[derive(Debug)]
struct State<B> {
    backend: B,
    cache: KvCache,
    pos: usize,
    rope: RopeAngles,
    x: Vec<f32>,
    xn: Vec<f32>,
    xq: QuantizedVector,
    qkv: Vec<f32>,
    /// Decode attention's tasks: for each key/value head, one per part of
    /// the longest context the cache holds.
    parts: Vec<PartTask>,
    attn: Vec<f32>,
    tmp: Vec<f32>,
    gu: Vec<f32>,
    logits: Vec<f32>,
    /// Prefill's buffers, allocated by the first prefill and kept.
    batch: Option<Box<BatchScratch>>,
    trace: Option<Trace>,
}

/// The buffers of one prefill chunk (up to [`PREFILL_CHUNK`] tokens).
#[derive(Debug)]
struct BatchScratch {
    x: Vec<f32>,
    xn: Vec<f32>,
    xs: QuantizedBatch,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
    tmp: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    /// RoPE angles of the chunk's positions, one row per token.
    cos: Vec<f32>,
    sin: Vec<f32>,
    /// Attention's tasks: for each key/value head, one per
    /// [`PREFILL_TILE`] tokens of the chunk.
    tiles: Vec<TileTask>,
}

/// Tokens of a prefill chunk in one attention task (of one key/value
/// head). Causal attention makes a chunk's later tokens the costlier, so
/// a chunk's tokens are cut into several tasks for the threads to balance:
/// eight per key/value head in a chunk of [`PREFILL_CHUNK`].
const PREFILL_TILE: usize = 16;

/// One decode attention task: a part of one key/value head's positions.
#[derive(Clone, Debug)]
struct PartTask {
    scores: Scores,
    part: Partial,
}

/// One prefill attention task: one key/value head's attention for up to
/// [`PREFILL_TILE`] tokens, each token's parts run in order.
#[derive(Debug)]
struct TileTask {
    /// The current token's queries of the group.
    q: Vec<f32>,
    scores: Scores,
    /// As many as the longest context has parts.
    parts: Vec<Partial>,
    /// The tile's outputs, `group * head_dim` values per token.
    out: Vec<f32>,
}

/// Decode's attention tasks: `kv_heads` runs of one per part of a full
/// cache of `capacity` positions.
fn part_tasks(c: &super::Qwen3Config, capacity: usize) -> Result<Vec<PartTask>, ModelError> {
    let group = c.heads / c.kv_heads;
    let task = PartTask {
        scores: Scores::new(group),
        part: Partial::new(group, c.head_dim),
    };
    super::kv_cache::try_filled(
        c.kv_heads.saturating_mul(attention::parts(capacity)),
        task,
        || format!("attention scratch for {capacity} positions"),
    )
}

impl BatchScratch {
    fn new(c: &super::Qwen3Config, capacity: usize) -> Result<Self, ModelError> {
        let n = PREFILL_CHUNK;
        let (h, qd, kvd, f) = (c.hidden, c.q_dim(), c.kv_dim(), c.ffn);
        let half = c.head_dim / 2;
        Ok(Self {
            x: vec![0.0; n * h],
            xn: vec![0.0; n * h],
            xs: QuantizedBatch::new(),
            q: vec![0.0; n * qd],
            k: vec![0.0; n * kvd],
            v: vec![0.0; n * kvd],
            attn: vec![0.0; n * qd],
            tmp: vec![0.0; n * h],
            gate: vec![0.0; n * f],
            up: vec![0.0; n * f],
            cos: vec![0.0; n * half],
            sin: vec![0.0; n * half],
            tiles: (0..c.kv_heads * n.div_ceil(PREFILL_TILE))
                .map(|_| {
                    let (g, hd) = (c.heads / c.kv_heads, c.head_dim);
                    let parts = super::kv_cache::try_filled(
                        attention::parts(capacity),
                        Partial::new(g, hd),
                        || format!("attention scratch for {capacity} positions"),
                    )?;
                    Ok(TileTask {
                        q: vec![0.0; g * hd],
                        scores: Scores::new(g),
                        parts,
                        out: vec![0.0; PREFILL_TILE * g * hd],
                    })
                })
                .collect::<Result<_, ModelError>>()?,
        })
    }
}

impl<M: ModelRef, B: Backend> Session<M, B> {
    /// A session of `model` on `backend` with an empty cache.
    ///
    /// `model` is anything that leads to a [`Qwen3`]: a borrowed
    /// `&Qwen3`, or an owned handle such as `Arc<Model>`, which makes the
    /// session `'static` and, with a `Send` backend, `Send`.
    ///
    /// # Errors
    ///
    /// [`ModelError::Options`] if the cache cannot be sized.
    pub fn new(model: M, backend: B, opts: SessionOptions) -> Result<Self, ModelError> {
        let st = State::new(model.qwen3(), backend, opts)?;
        Ok(Self { model, st })
    }

    /// The model this session runs.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// Turns the per-operation trace on (from an empty [`Trace`]) or off.
    /// While on, every forward step adds its time per [`Op`] to it.
    pub fn set_tracing(&mut self, on: bool) {
        self.st.trace = on.then(Trace::new);
    }

    /// The trace, if tracing is on.
    pub fn trace(&self) -> Option<&Trace> {
        self.st.trace.as_ref()
    }

    /// The trace, if tracing is on, to clear it or add the caller's own
    /// operations (such as [`Op::Sample`]).
    pub fn trace_mut(&mut self) -> Option<&mut Trace> {
        self.st.trace.as_mut()
    }

    /// Positions already in the cache (the next token's position).
    pub fn position(&self) -> usize {
        self.st.pos
    }

    /// Positions the cache holds in all.
    pub fn capacity(&self) -> usize {
        self.st.cache.capacity()
    }

    /// The KV cache's element type.
    pub fn kv_dtype(&self) -> KvDtype {
        self.st.cache.dtype()
    }

    /// Bytes the KV cache holds.
    pub fn kv_bytes(&self) -> usize {
        self.st.cache.bytes()
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.st.backend
    }

    /// Forgets every position (the cache's memory is kept).
    pub fn reset(&mut self) {
        self.st.pos = 0;
    }

    /// The logits of the last step.
    pub fn logits(&self) -> &[f32] {
        &self.st.logits
    }

    /// Runs one token at the next position and returns the logits of the
    /// token after it.
    ///
    /// # Errors
    ///
    /// [`ModelError::TokenOutOfRange`]; [`ModelError::ContextFull`].
    pub fn decode(&mut self, token: u32) -> Result<&[f32], ModelError> {
        self.st.decode(self.model.qwen3(), token)
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
        let last = self.st.prefill_inner(self.model.qwen3(), tokens, false)?;
        self.st.logits.copy_from_slice(&last);
        Ok(&self.st.logits)
    }

    /// [`prefill`](Self::prefill), returning the logits after every token
    /// (`tokens.len() x vocab`, row-major), for checking against another
    /// engine.
    ///
    /// # Errors
    ///
    /// As [`prefill`](Self::prefill).
    pub fn prefill_all(&mut self, tokens: &[u32]) -> Result<Vec<f32>, ModelError> {
        let all = self.st.prefill_inner(self.model.qwen3(), tokens, true)?;
        let vocab = self.st.logits.len();
        self.st.logits.copy_from_slice(&all[all.len() - vocab..]);
        Ok(all)
    }
}

impl<B: Backend> State<B> {
    fn new(model: &Qwen3<'_>, backend: B, opts: SessionOptions) -> Result<Self, ModelError> {
        let c = &model.config;
        let capacity = match opts.max_positions {
            0 => c.context.min(DEFAULT_MAX_POSITIONS),
            n => n,
        };
        let cache = KvCache::new(
            opts.kv,
            c.layers,
            capacity,
            c.kv_heads,
            c.head_dim,
            opts.huge_pages,
        )?;
        let widest = c.hidden.max(c.ffn).max(c.q_dim());
        Ok(Self {
            backend,
            cache,
            pos: 0,
            rope: RopeAngles::new(c.head_dim, c.rope_base),
            x: vec![0.0; c.hidden],
            xn: vec![0.0; c.hidden],
            xq: QuantizedVector::with_capacity(widest),
            qkv: vec![0.0; c.q_dim() + 2 * c.kv_dim()],
            parts: part_tasks(c, capacity)?,
            attn: vec![0.0; c.q_dim()],
            tmp: vec![0.0; c.hidden],
            gu: vec![0.0; 2 * c.ffn],
            logits: vec![0.0; c.vocab],
            batch: None,
            trace: None,
        })
    }

    fn check_room(&self, n: usize) -> Result<(), ModelError> {
        let capacity = self.cache.capacity();
        if n > capacity - self.pos {
            return Err(ModelError::ContextFull {
                used: self.pos,
                requested: n,
                capacity,
            });
        }
        Ok(())
    }

    fn check_token(&self, id: u32) -> Result<usize, ModelError> {
        let vocab = self.logits.len();
        match usize::try_from(id) {
            Ok(i) if i < vocab => Ok(i),
            _ => Err(ModelError::TokenOutOfRange { id, vocab }),
        }
    }

    /// [`Session::decode`] on `model`, the model this state was made for.
    fn decode(&mut self, model: &Qwen3<'_>, token: u32) -> Result<&[f32], ModelError> {
        let id = self.check_token(token)?;
        self.check_room(1)?;
        let (c, w) = (&model.config, &model.weights);
        let (hd, qd, kvd) = (c.head_dim, c.q_dim(), c.kv_dim());
        let pos = self.pos;
        let mut lap = Laps::new(self.trace.as_mut());
        w.embedding.row_into(id, &mut self.x)?;
        self.rope.set_position(pos);
        lap.lap(Op::Embed);
        let dot = dispatch_of(&self.backend);
        for (l, lw) in w.layers.iter().enumerate() {
            // Attention.
            ops::rms_norm(&self.x, &lw.attn_norm, c.rms_eps, &mut self.xn);
            lap.lap(Op::Norm);
            let qkv = [lw.q, lw.k, lw.v];
            self.backend
                .quantize(&self.xn, Weight::forms_of(&qkv), &mut self.xq)?;
            lap.lap(Op::Quantize);
            self.backend.matvec(&qkv, &self.xq, &mut self.qkv)?;
            lap.lap(Op::Qkv);
            let (q, kv) = self.qkv.split_at_mut(qd);
            let (k, v) = kv.split_at_mut(kvd);
            for head in k.chunks_exact_mut(hd) {
                ops::rms_norm_in_place(head, &lw.k_norm, c.rms_eps);
                self.rope.rotate(head);
            }
            self.cache.store(l, pos, k, v);
            for head in q.chunks_exact_mut(hd) {
                ops::rms_norm_in_place(head, &lw.q_norm, c.rms_eps);
                self.rope.rotate(head);
            }
            lap.lap(Op::QkNormRope);
            let (kc, vc) = self.cache.layer(l, pos + 1);
            let job = HeadJob {
                k: kc,
                v: vc,
                head_stride: self.cache.head_stride(),
                head_dim: hd,
                scale: 1.0 / (hd as f32).sqrt(),
                round: self.cache.dtype() == KvDtype::F16,
                dot,
            };
            attention::prepare_queries(&job, q);
            let (q, gw, n_pos) = (&*q, qd / c.kv_heads, pos + 1);
            // One task per (key/value head, part), parts in position order.
            let np = attention::parts(n_pos);
            let tasks = &mut self.parts[..c.kv_heads * np];
            self.backend.for_each_mut(tasks, |i, t| {
                let (g, part) = (i / np, i % np);
                let range = attention::part_range(part, n_pos);
                let qg = &q[g * gw..(g + 1) * gw];
                attention::attend_part(&job, g, qg, range, &mut t.scores, &mut t.part);
            });
            for (out, tasks) in self.attn.chunks_exact_mut(gw).zip(tasks.chunks_exact(np)) {
                attention::merge(tasks.iter().map(|t| &t.part), hd, out);
            }
            lap.lap(Op::Attention);
            self.backend
                .quantize(&self.attn, lw.o.forms(), &mut self.xq)?;
            lap.lap(Op::Quantize);
            self.backend.matvec(&[lw.o], &self.xq, &mut self.tmp)?;
            lap.lap(Op::OutProj);
            ops::add_assign(&mut self.x, &self.tmp);
            lap.lap(Op::Residual);

            // MLP.
            ops::rms_norm(&self.x, &lw.ffn_norm, c.rms_eps, &mut self.xn);
            lap.lap(Op::Norm);
            let gu = [lw.gate, lw.up];
            self.backend
                .quantize(&self.xn, Weight::forms_of(&gu), &mut self.xq)?;
            lap.lap(Op::Quantize);
            self.backend.matvec(&gu, &self.xq, &mut self.gu)?;
            lap.lap(Op::GateUp);
            let (gate, up) = self.gu.split_at_mut(c.ffn);
            ops::swiglu(gate, up);
            lap.lap(Op::Swiglu);
            self.backend.quantize(gate, lw.down.forms(), &mut self.xq)?;
            lap.lap(Op::Quantize);
            self.backend.matvec(&[lw.down], &self.xq, &mut self.tmp)?;
            lap.lap(Op::Down);
            ops::add_assign(&mut self.x, &self.tmp);
            lap.lap(Op::Residual);
        }
        ops::rms_norm(&self.x, &w.output_norm, c.rms_eps, &mut self.xn);
        lap.lap(Op::Norm);
        let lm_head = w.lm_head();
        self.backend
            .quantize(&self.xn, lm_head.forms(), &mut self.xq)?;
        lap.lap(Op::Quantize);
        self.backend
            .matvec(&[lm_head], &self.xq, &mut self.logits)?;
        lap.lap(Op::LmHead);
        self.pos += 1;
        Ok(&self.logits)
    }

    /// Runs `tokens` in chunks of [`PREFILL_CHUNK`]; returns the logits of
    /// every token if `all`, else those of the last.
    fn prefill_inner(
        &mut self,
        model: &Qwen3<'_>,
        tokens: &[u32],
        all: bool,
    ) -> Result<Vec<f32>, ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::NoTokens);
        }
        for &t in tokens {
            self.check_token(t)?;
        }
        self.check_room(tokens.len())?;
        let vocab = model.config.vocab;
        let mut logits = Vec::with_capacity(if all { tokens.len() * vocab } else { vocab });
        let mut batch = match self.batch.take() {
            Some(b) => b,
            None => Box::new(BatchScratch::new(&model.config, self.cache.capacity())?),
        };
        let mut result = Ok(());
        for (n, chunk) in tokens.chunks(PREFILL_CHUNK).enumerate() {
            let last = (n + 1) * PREFILL_CHUNK >= tokens.len();
            let want = if all {
                0..chunk.len()
            } else if last {
                chunk.len() - 1..chunk.len()
            } else {
                0..0
            };
            result = self.prefill_chunk(model, &mut batch, chunk, want, &mut logits);
            if result.is_err() {
                break;
            }
        }
        self.batch = Some(batch);
        result.map(|()| logits)
    }

    /// Runs one chunk of at most [`PREFILL_CHUNK`] checked tokens at the
    /// next positions, appending the logits of the chunk's tokens `want` to
    /// `logits`. The per-token work (norms, QK-norm and RoPE, attention,
    /// SwiGLU) fans out over the backend's threads like the products.
    fn prefill_chunk(
        &mut self,
        model: &Qwen3<'_>,
        bs: &mut BatchScratch,
        ids: &[u32],
        want: std::ops::Range<usize>,
        logits: &mut Vec<f32>,
    ) -> Result<(), ModelError> {
        let (c, w) = (&model.config, &model.weights);
        let (m, h, hd, qd, kvd, f) = (
            ids.len(),
            c.hidden,
            c.head_dim,
            c.q_dim(),
            c.kv_dim(),
            c.ffn,
        );
        let half = hd / 2;
        let p0 = self.pos;
        let b = &self.backend;
        let mut lap = Laps::new(self.trace.as_mut());
        let x = &mut bs.x[..m * h];
        for (row, &id) in x.chunks_exact_mut(h).zip(ids) {
            w.embedding.row_into(id as usize, row)?;
        }
        let (cos, sin) = (&mut bs.cos[..m * half], &mut bs.sin[..m * half]);
        self.rope.fill_rows(p0, cos, sin);
        let (cos, sin) = (&*cos, &*sin);
        lap.lap(Op::Embed);
        let (xn, tmp) = (&mut bs.xn[..m * h], &mut bs.tmp[..m * h]);
        let (q, k, v) = (
            &mut bs.q[..m * qd],
            &mut bs.k[..m * kvd],
            &mut bs.v[..m * kvd],
        );
        let attn = &mut bs.attn[..m * qd];
        let (gate, up) = (&mut bs.gate[..m * f], &mut bs.up[..m * f]);
        let xs = &mut bs.xs;
        let dot = dispatch_of(b);
        let eps = c.rms_eps;
        let norm_rows = |x: &[f32], wt: &[f32], out: &mut [f32]| {
            b.for_each_chunk(out, h, |i, row| {
                ops::rms_norm(&x[i * h..(i + 1) * h], wt, eps, row)
            });
        };
        // QK-norm and RoPE of every head of every token's row of width `d`.
        let norm_rope = |rows: &mut [f32], d: usize, wt: &[f32]| {
            b.for_each_chunk(rows, d, |i, row| {
                let (cs, sn) = (
                    &cos[i * half..(i + 1) * half],
                    &sin[i * half..(i + 1) * half],
                );
                for head in row.chunks_exact_mut(hd) {
                    ops::rms_norm_in_place(head, wt, eps);
                    ops::rotate_neox(cs, sn, head);
                }
            });
        };
        for (l, lw) in w.layers.iter().enumerate() {
            norm_rows(x, &lw.attn_norm, xn);
            lap.lap(Op::Norm);
            xs.quantize_forms_on(b, xn, h, Weight::forms_of(&[lw.q, lw.k, lw.v]))?;
            lap.lap(Op::Quantize);
            b.matmul(&lw.q, xs, q)?;
            b.matmul(&lw.k, xs, k)?;
            b.matmul(&lw.v, xs, v)?;
            lap.lap(Op::Qkv);
            norm_rope(q, qd, &lw.q_norm);
            norm_rope(k, kvd, &lw.k_norm);
            for (i, (kr, vr)) in k.chunks_exact(kvd).zip(v.chunks_exact(kvd)).enumerate() {
                self.cache.store(l, p0 + i, kr, vr);
            }
            lap.lap(Op::QkNormRope);
            let (kc, vc) = self.cache.layer(l, p0 + m);
            let job = HeadJob {
                k: kc,
                v: vc,
                head_stride: self.cache.head_stride(),
                head_dim: hd,
                scale: 1.0 / (hd as f32).sqrt(),
                round: self.cache.dtype() == KvDtype::F16,
                dot,
            };
            let q = &*q;
            let gw = qd / c.kv_heads;
            // One task per (key/value head, tile of tokens), each token's
            // attention as decode runs it.
            let tiles = m.div_ceil(PREFILL_TILE);
            let tasks = &mut bs.tiles[..c.kv_heads * tiles];
            b.for_each_chunk(tasks, 1, |i, task| {
                let t = &mut task[0];
                let (g, tile) = (i / tiles, i % tiles);
                let first = tile * PREFILL_TILE;
                let n = PREFILL_TILE.min(m - first);
                for (j, o) in t.out[..n * gw].chunks_exact_mut(gw).enumerate() {
                    let at = (first + j) * qd + g * gw;
                    t.q.copy_from_slice(&q[at..at + gw]);
                    attention::prepare_queries(&job, &mut t.q);
                    let n_pos = p0 + first + j + 1;
                    attention::attend(&job, g, &t.q, n_pos, &mut t.scores, &mut t.parts, o);
                }
            });
            for (i, t) in tasks.iter().enumerate() {
                let (g, tile) = (i / tiles, i % tiles);
                let first = tile * PREFILL_TILE;
                let n = PREFILL_TILE.min(m - first);
                for (j, o) in t.out[..n * gw].chunks_exact(gw).enumerate() {
                    let at = (first + j) * qd + g * gw;
                    attn[at..at + gw].copy_from_slice(o);
                }
            }
            lap.lap(Op::Attention);
            xs.quantize_forms_on(b, attn, qd, lw.o.forms())?;
            lap.lap(Op::Quantize);
            b.matmul(&lw.o, xs, tmp)?;
            lap.lap(Op::OutProj);
            ops::add_assign(x, tmp);
            lap.lap(Op::Residual);

            norm_rows(x, &lw.ffn_norm, xn);
            lap.lap(Op::Norm);
            xs.quantize_forms_on(b, xn, h, Weight::forms_of(&[lw.gate, lw.up]))?;
            lap.lap(Op::Quantize);
            b.matmul(&lw.gate, xs, gate)?;
            b.matmul(&lw.up, xs, up)?;
            lap.lap(Op::GateUp);
            let up = &*up;
            b.for_each_chunk(gate, f, |i, g| ops::swiglu(g, &up[i * f..(i + 1) * f]));
            lap.lap(Op::Swiglu);
            xs.quantize_forms_on(b, gate, f, lw.down.forms())?;
            lap.lap(Op::Quantize);
            b.matmul(&lw.down, xs, tmp)?;
            lap.lap(Op::Down);
            ops::add_assign(x, tmp);
            lap.lap(Op::Residual);
        }
        self.pos += m;
        if want.is_empty() {
            return Ok(());
        }
        let rows = want.len();
        let xn = &mut xn[..rows * h];
        norm_rows(&x[want.start * h..want.end * h], &w.output_norm, xn);
        lap.lap(Op::Norm);
        let lm_head = w.lm_head();
        let at = logits.len();
        logits.resize(at + rows * c.vocab, 0.0);
        if rows == 1 {
            // The usual case (the last token's logits): decode's product,
            // split over the threads by output rows and prefetching, where
            // a one-row prefill product would run on one thread. The same
            // bits either way.
            b.quantize(xn, lm_head.forms(), &mut self.xq)?;
            lap.lap(Op::Quantize);
            b.matvec(&[lm_head], &self.xq, &mut logits[at..])?;
        } else {
            xs.quantize_forms_on(b, xn, h, lm_head.forms())?;
            lap.lap(Op::Quantize);
            b.matmul(&lm_head, xs, &mut logits[at..])?;
        }
        lap.lap(Op::LmHead);
        Ok(())
    }
}
