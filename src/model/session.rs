//! A running conversation with a model: the KV cache, the scratch buffers
//! and the forward pass that decode (one row) and prefill (a chunk of rows)
//! share.

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
    /// generate` size theirs. Its pages are touched when the session is
    /// made, so the first prefill does not pay their faults. Off by
    /// default.
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
    core: Core<B>,
    /// Decode's buffers: one row.
    one: Rows,
    /// Prefill's buffers, [`PREFILL_CHUNK`] rows, allocated by the first
    /// prefill and kept.
    batch: Option<Box<Rows>>,
    logits: Vec<f32>,
}

/// What a forward step needs beside its rows' buffers.
#[derive(Debug)]
struct Core<B> {
    backend: B,
    cache: KvCache,
    pos: usize,
    rope: RopeAngles,
    /// Attention's tasks for a single row: for each key/value head, one per
    /// part of the longest context the cache holds.
    parts: Vec<PartTask>,
    trace: Option<Trace>,
}

/// The buffers of up to `rows` tokens going through the layers together:
/// one for decode, [`PREFILL_CHUNK`] for a prefill chunk. Each product's
/// outputs are laid out matrix after matrix, `rows` rows of each (`q`,
/// then `k`, then `v`; `gate`, then `up`), so that for one row they are
/// the stacked outputs of one fused matvec.
#[derive(Debug)]
struct Rows {
    rows: usize,
    x: Vec<f32>,
    xn: Vec<f32>,
    quantized: Quantized,
    qkv: Vec<f32>,
    attn: Vec<f32>,
    tmp: Vec<f32>,
    gu: Vec<f32>,
    /// RoPE angles of the rows' positions, one row per token.
    cos: Vec<f32>,
    sin: Vec<f32>,
    /// Attention's tasks for many rows: for each key/value head, one per
    /// [`PREFILL_TILE`] tokens (none for a single row, which runs on
    /// [`Core::parts`]).
    tiles: Vec<TileTask>,
}

/// A product's input, quantized.
#[derive(Debug)]
struct Quantized {
    /// For a product of one row (a fused matvec).
    one: QuantizedVector,
    /// For a product of many (a matmul).
    batch: QuantizedBatch,
}

/// Tokens of a prefill chunk in one attention task (of one key/value
/// head). Causal attention makes a chunk's later tokens the costlier, so
/// a chunk's tokens are cut into several tasks for the threads to balance:
/// eight per key/value head in a chunk of [`PREFILL_CHUNK`].
const PREFILL_TILE: usize = 16;

/// One attention task of a single row: a part of one key/value head's
/// positions.
#[derive(Clone, Debug)]
struct PartTask {
    scores: Scores,
    part: Partial,
}

/// One attention task of many rows: one key/value head's attention for up
/// to [`PREFILL_TILE`] tokens, two tokens at a time
/// ([`attention::attend_pair`]: each key and value row read once for
/// both), each token's parts run in order.
#[derive(Debug)]
struct TileTask {
    /// The current two tokens' queries of the group, one after the other.
    q: Vec<f32>,
    /// Per token of the two.
    scores: [Scores; 2],
    /// Per token of the two, as many as the longest context has parts.
    parts: [Vec<Partial>; 2],
    /// The tile's outputs, `group * head_dim` values per token.
    out: Vec<f32>,
}

/// `kv_heads` runs of one single-row attention task per part of a full
/// cache of `capacity` positions.
fn part_tasks(c: &super::Qwen3Config, capacity: usize) -> Result<Vec<PartTask>, ModelError> {
    let group = c.heads / c.kv_heads;
    try_collect(
        c.kv_heads.saturating_mul(attention::parts(capacity)),
        || {
            Ok(PartTask {
                scores: Scores::new(group)?,
                part: Partial::new(group, c.head_dim)?,
            })
        },
    )
}

/// `n` values of `make`, every allocation checked: the scratch of a
/// session sized for a long context can be as large as its KV cache, and
/// not fitting is [`ModelError::Options`], not an aborted process.
fn try_collect<T>(
    n: usize,
    mut make: impl FnMut() -> Result<T, ModelError>,
) -> Result<Vec<T>, ModelError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        ModelError::Options(format!(
            "attention scratch of {n} tasks does not fit in memory"
        ))
    })?;
    for _ in 0..n {
        v.push(make()?);
    }
    Ok(v)
}

impl Rows {
    fn new(c: &super::Qwen3Config, rows: usize, capacity: usize) -> Result<Self, ModelError> {
        let (h, qd, kvd, f) = (c.hidden, c.q_dim(), c.kv_dim(), c.ffn);
        let (g, hd) = (c.heads / c.kv_heads, c.head_dim);
        let tiles = if rows > 1 {
            c.kv_heads * rows.div_ceil(PREFILL_TILE)
        } else {
            0
        };
        Ok(Self {
            rows,
            x: vec![0.0; rows * h],
            xn: vec![0.0; rows * h],
            quantized: Quantized {
                one: QuantizedVector::with_capacity(h.max(f).max(qd)),
                batch: QuantizedBatch::new(),
            },
            qkv: vec![0.0; rows * (qd + 2 * kvd)],
            attn: vec![0.0; rows * qd],
            tmp: vec![0.0; rows * h],
            gu: vec![0.0; rows * 2 * f],
            cos: vec![0.0; rows * (hd / 2)],
            sin: vec![0.0; rows * (hd / 2)],
            tiles: try_collect(tiles, || {
                let parts = || try_collect(attention::parts(capacity), || Partial::new(g, hd));
                Ok(TileTask {
                    q: vec![0.0; 2 * g * hd],
                    scores: [Scores::new(g)?, Scores::new(g)?],
                    parts: [parts()?, parts()?],
                    out: vec![0.0; PREFILL_TILE * g * hd],
                })
            })?,
        })
    }
}

/// Runs `f(i, row_i)` for every `width`-long row of `data`: on this thread
/// for a single row, else fanned out over the backend's threads.
fn each_row<B: Backend, T: Send>(
    b: &B,
    data: &mut [T],
    width: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    if data.len() <= width {
        f(0, data);
    } else {
        b.for_each_chunk(data, width, f);
    }
}

/// The products of `ws` (matrices of `x`'s width) with every `width`-long
/// row of `x`, into `out`, matrix after matrix, each matrix's rows of
/// outputs token after token: one fused matvec on the quantized row for a
/// single row, else a matmul per matrix on the quantized batch. The
/// quantizing is charged to [`Op::Quantize`], the products to `op`.
#[allow(clippy::too_many_arguments)]
fn products<B: Backend>(
    b: &B,
    ws: &[Weight<'_>],
    x: &[f32],
    width: usize,
    xq: &mut Quantized,
    out: &mut [f32],
    lap: &mut Laps<'_>,
    op: Op,
) -> Result<(), ModelError> {
    let forms = Weight::forms_of(ws);
    if x.len() == width {
        b.quantize(x, forms, &mut xq.one)?;
        lap.lap(Op::Quantize);
        b.matvec(ws, &xq.one, out)?;
    } else {
        let layouts = Weight::batch_layouts(crate::quant::dot::selected().1, ws);
        xq.batch.quantize_forms_on(b, x, width, forms, layouts)?;
        lap.lap(Op::Quantize);
        let m = x.len() / width;
        let mut rest = out;
        for w in ws {
            let (o, r) = rest.split_at_mut(m * w.rows());
            b.matmul(w, &xq.batch, o)?;
            rest = r;
        }
    }
    lap.lap(op);
    Ok(())
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
        self.st.core.trace = on.then(Trace::new);
    }

    /// The trace, if tracing is on.
    pub fn trace(&self) -> Option<&Trace> {
        self.st.core.trace.as_ref()
    }

    /// The trace, if tracing is on, to clear it or add the caller's own
    /// operations (such as [`Op::Sample`]).
    pub fn trace_mut(&mut self) -> Option<&mut Trace> {
        self.st.core.trace.as_mut()
    }

    /// Positions already in the cache (the next token's position).
    pub fn position(&self) -> usize {
        self.st.core.pos
    }

    /// Positions the cache holds in all.
    pub fn capacity(&self) -> usize {
        self.st.core.cache.capacity()
    }

    /// The KV cache's element type.
    pub fn kv_dtype(&self) -> KvDtype {
        self.st.core.cache.dtype()
    }

    /// Bytes the KV cache holds.
    pub fn kv_bytes(&self) -> usize {
        self.st.core.cache.bytes()
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.st.core.backend
    }

    /// Forgets every position (the cache's memory is kept).
    pub fn reset(&mut self) {
        self.st.core.pos = 0;
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

/// Attention's tasks: [`Core::parts`] for one row, [`Rows::tiles`] for
/// many.
struct Tasks<'a> {
    parts: &'a mut [PartTask],
    tiles: &'a mut [TileTask],
}

/// Attention of every row's queries `q` (rows of `q_dim`, at positions
/// `p0..`) over the cache of `job`, into `attn` (laid out as `q`).
///
/// One row (decode) is a task per (key/value head, part), the parts in
/// position order merged on this thread; many rows are a task per
/// (key/value head, tile of tokens), each token's parts run in order and
/// merged in its task. Both merge the same parts in the same order, so a
/// token gets the same bits either way.
#[allow(clippy::too_many_arguments)]
fn attend_rows<B: Backend>(
    b: &B,
    job: &HeadJob<'_>,
    tasks: Tasks<'_>,
    kv_heads: usize,
    q_dim: usize,
    p0: usize,
    q: &mut [f32],
    attn: &mut [f32],
) {
    let (hd, qd, m) = (job.head_dim, q_dim, q.len() / q_dim);
    let gw = qd / kv_heads;
    if m == 1 {
        attention::prepare_queries(job, q);
        let (q, n_pos) = (&*q, p0 + 1);
        let np = attention::parts(n_pos);
        let tasks = &mut tasks.parts[..kv_heads * np];
        b.for_each_mut(tasks, |i, t| {
            let (g, part) = (i / np, i % np);
            let range = attention::part_range(part, n_pos);
            let qg = &q[g * gw..(g + 1) * gw];
            attention::attend_part(job, g, qg, range, &mut t.scores, &mut t.part);
        });
        for (out, tasks) in attn.chunks_exact_mut(gw).zip(tasks.chunks_exact(np)) {
            attention::merge(tasks.iter().map(|t| &t.part), hd, out);
        }
        return;
    }
    let q = &*q;
    let tiles = m.div_ceil(PREFILL_TILE);
    let tasks = &mut tasks.tiles[..kv_heads * tiles];
    // Task `i`: key/value head `i / tiles`, tokens from `first(i)`.
    let first = |i: usize| (i % tiles) * PREFILL_TILE;
    b.for_each_chunk(tasks, 1, |i, task| {
        let t = &mut task[0];
        let (g, first) = (i / tiles, first(i));
        let n = PREFILL_TILE.min(m - first);
        let [s0, s1] = &mut t.scores;
        let [parts0, parts1] = &mut t.parts;
        // Tokens `j` and `j + 1` together, a last odd one alone.
        for (pair, o) in t.out[..n * gw].chunks_mut(2 * gw).enumerate() {
            let j = 2 * pair;
            let at = (first + j) * qd + g * gw;
            let n_pos = p0 + first + j + 1;
            if o.len() == 2 * gw {
                let (qa, qb) = t.q.split_at_mut(gw);
                qa.copy_from_slice(&q[at..at + gw]);
                qb.copy_from_slice(&q[at + qd..at + qd + gw]);
                attention::prepare_queries(job, qa);
                attention::prepare_queries(job, qb);
                let (oa, ob) = o.split_at_mut(gw);
                let (scores, parts) = ([&mut *s0, &mut *s1], [&mut parts0[..], &mut parts1[..]]);
                attention::attend_pair(job, g, [qa, qb], n_pos, scores, parts, [oa, ob]);
            } else {
                let qa = &mut t.q[..gw];
                qa.copy_from_slice(&q[at..at + gw]);
                attention::prepare_queries(job, qa);
                attention::attend(job, g, qa, n_pos, s0, parts0, o);
            }
        }
    });
    for (i, t) in tasks.iter().enumerate() {
        let (g, first) = (i / tiles, first(i));
        let n = PREFILL_TILE.min(m - first);
        for (j, o) in t.out[..n * gw].chunks_exact(gw).enumerate() {
            let at = (first + j) * qd + g * gw;
            attn[at..at + gw].copy_from_slice(o);
        }
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
        Ok(Self {
            core: Core {
                backend,
                cache,
                pos: 0,
                rope: RopeAngles::new(c.head_dim, c.rope_base),
                parts: part_tasks(c, capacity)?,
                trace: None,
            },
            one: Rows::new(c, 1, capacity)?,
            batch: None,
            logits: vec![0.0; c.vocab],
        })
    }

    fn check_room(&self, n: usize) -> Result<(), ModelError> {
        let capacity = self.core.cache.capacity();
        if n > capacity - self.core.pos {
            return Err(ModelError::ContextFull {
                used: self.core.pos,
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

    /// [`Session::decode`] on `model`, the model this state was made for:
    /// the forward pass over one row.
    fn decode(&mut self, model: &Qwen3<'_>, token: u32) -> Result<&[f32], ModelError> {
        self.check_token(token)?;
        self.check_room(1)?;
        self.core
            .forward(model, &mut self.one, &[token], 0..1, &mut self.logits)?;
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
        let batch = match &mut self.batch {
            Some(b) => b,
            b @ None => b.insert(Box::new(Rows::new(
                &model.config,
                PREFILL_CHUNK,
                self.core.cache.capacity(),
            )?)),
        };
        for (n, chunk) in tokens.chunks(PREFILL_CHUNK).enumerate() {
            let last = (n + 1) * PREFILL_CHUNK >= tokens.len();
            let want = if all {
                0..chunk.len()
            } else if last {
                chunk.len() - 1..chunk.len()
            } else {
                0..0
            };
            let at = logits.len();
            logits.resize(at + want.len() * vocab, 0.0);
            self.core
                .forward(model, batch, chunk, want, &mut logits[at..])?;
        }
        Ok(logits)
    }
}

impl<B: Backend> Core<B> {
    /// The forward pass of `ids` (checked, at most `r.rows` of them) at the
    /// next positions, leaving the logits of the tokens `want` in `logits`
    /// (`want.len()` rows of the vocabulary). Decode is the one-row case,
    /// a prefill chunk the many-row one, and both run this routine: per
    /// layer, the norms, QK-norm and RoPE, SwiGLU and attention fan out over
    /// the backend's threads for many rows and run on the calling thread
    /// for one (where a fan-out would cost more than the work), and the
    /// products are one fused matvec for one row and a matmul per matrix
    /// for many, which give the same bits.
    fn forward(
        &mut self,
        model: &Qwen3<'_>,
        r: &mut Rows,
        ids: &[u32],
        want: std::ops::Range<usize>,
        logits: &mut [f32],
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
        assert!(0 < m && m <= r.rows, "forward: {m} rows");
        let (half, p0, eps) = (hd / 2, self.pos, c.rms_eps);
        let b = &self.backend;
        let mut lap = Laps::new(self.trace.as_mut());
        let x = &mut r.x[..m * h];
        for (row, &id) in x.chunks_exact_mut(h).zip(ids) {
            w.embedding.row_into(id as usize, row)?;
        }
        let (cos, sin) = (&mut r.cos[..m * half], &mut r.sin[..m * half]);
        self.rope.fill_rows(p0, cos, sin);
        let (cos, sin) = (&*cos, &*sin);
        lap.lap(Op::Embed);
        let (xn, tmp, attn) = (
            &mut r.xn[..m * h],
            &mut r.tmp[..m * h],
            &mut r.attn[..m * qd],
        );
        let qkv = &mut r.qkv[..m * (qd + 2 * kvd)];
        let gu = &mut r.gu[..2 * m * f];
        let xq = &mut r.quantized;
        let norm_rows = |x: &[f32], wt: &[f32], out: &mut [f32]| {
            each_row(b, out, h, |i, row| {
                ops::rms_norm(&x[i * h..(i + 1) * h], wt, eps, row)
            });
        };
        // QK-norm and RoPE of every head of every token's row of width `d`.
        let norm_rope = |rows: &mut [f32], d: usize, wt: &[f32]| {
            each_row(b, rows, d, |i, row| {
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
        let dot = dispatch_of(b);
        for (l, lw) in w.layers.iter().enumerate() {
            norm_rows(x, &lw.attn_norm, xn);
            lap.lap(Op::Norm);
            let qkv_w = [lw.q, lw.k, lw.v];
            products(b, &qkv_w, xn, h, xq, qkv, &mut lap, Op::Qkv)?;
            let (q, kv) = qkv.split_at_mut(m * qd);
            let (k, v) = kv.split_at_mut(m * kvd);
            norm_rope(q, qd, &lw.q_norm);
            norm_rope(k, kvd, &lw.k_norm);
            for (i, (kr, vr)) in k.chunks_exact(kvd).zip(v.chunks_exact(kvd)).enumerate() {
                self.cache.store(dot, l, p0 + i, kr, vr);
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
            let tasks = Tasks {
                parts: &mut self.parts,
                tiles: &mut r.tiles,
            };
            attend_rows(b, &job, tasks, c.kv_heads, qd, p0, q, attn);
            lap.lap(Op::Attention);
            products(b, &[lw.o], attn, qd, xq, tmp, &mut lap, Op::OutProj)?;
            ops::add_assign(x, tmp);
            lap.lap(Op::Residual);

            norm_rows(x, &lw.ffn_norm, xn);
            lap.lap(Op::Norm);
            let gu_w = [lw.gate, lw.up];
            products(b, &gu_w, xn, h, xq, gu, &mut lap, Op::GateUp)?;
            let (gate, up) = gu.split_at_mut(m * f);
            let up = &*up;
            if m == 1 {
                // One row: its values spread over the threads (the same
                // operation on each value, so the same bits).
                b.for_each_range(gate, |r, g| dot.swiglu(g, &up[r]));
            } else {
                each_row(b, gate, f, |i, g| dot.swiglu(g, &up[i * f..(i + 1) * f]));
            }
            lap.lap(Op::Swiglu);
            products(b, &[lw.down], gate, f, xq, tmp, &mut lap, Op::Down)?;
            ops::add_assign(x, tmp);
            lap.lap(Op::Residual);
        }
        self.pos += m;
        if want.is_empty() {
            return Ok(());
        }
        let xn = &mut xn[..want.len() * h];
        norm_rows(&x[want.start * h..want.end * h], &w.output_norm, xn);
        lap.lap(Op::Norm);
        // One row (decode, or a prefill's last token): the fused matvec,
        // split over the threads by output rows and prefetching, where a
        // one-row matmul would run on one thread. The same bits either way.
        let lm_head = w.lm_head();
        products(b, &[lm_head], xn, h, xq, logits, &mut lap, Op::LmHead)?;
        Ok(())
    }
}
