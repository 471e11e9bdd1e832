//! Where a forward step's time goes, operation by operation.
//!
//! A [`Session`](super::Session) with tracing on
//! ([`set_tracing`](super::Session::set_tracing)) adds the wall time of each
//! step of its forward passes to a [`Trace`]: one clock read between
//! consecutive operations, about 20 ns each on Linux x86_64 (the vDSO
//! clock), so some 400 reads, under 10 µs, on a Qwen3-0.6B decode step of
//! tens of milliseconds. Cheap enough to leave on while measuring.
//!
//! A product's time includes handing it to the backend's threads and
//! waiting for the last of them, so a backend that balances badly shows
//! up in the products' rows.

use std::fmt;
use std::time::{Duration, Instant};

/// One kind of operation of the forward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// Copying (and widening) the tokens' embedding rows.
    Embed,
    /// The RMSNorms before attention, before the MLP and at the end.
    Norm,
    /// Quantizing activations to Q8_0 before a product.
    Quantize,
    /// The query, key and value projections.
    Qkv,
    /// Per-head RMSNorm of queries and keys, RoPE, and storing K and V.
    QkNormRope,
    /// Scores, softmax and the weighted sum of values, every head.
    Attention,
    /// The attention output projection.
    OutProj,
    /// Adding a block's output to the residual stream.
    Residual,
    /// The MLP's gate and up projections.
    GateUp,
    /// `silu(gate) * up`.
    Swiglu,
    /// The MLP's down projection.
    Down,
    /// The output projection to logits.
    LmHead,
    /// Choosing the next token from the logits (recorded by the caller
    /// through [`Trace::add`], e.g. by `inferno generate`).
    Sample,
}

impl Op {
    /// Every operation, in the order a forward pass runs them.
    pub const ALL: [Op; 13] = [
        Op::Embed,
        Op::Norm,
        Op::Quantize,
        Op::Qkv,
        Op::QkNormRope,
        Op::Attention,
        Op::OutProj,
        Op::Residual,
        Op::GateUp,
        Op::Swiglu,
        Op::Down,
        Op::LmHead,
        Op::Sample,
    ];

    /// A short lower-case name (`qkv`, `attention`, ...), used as the JSON
    /// key.
    pub fn name(self) -> &'static str {
        match self {
            Op::Embed => "embed",
            Op::Norm => "norm",
            Op::Quantize => "quantize",
            Op::Qkv => "qkv",
            Op::QkNormRope => "qk_norm_rope",
            Op::Attention => "attention",
            Op::OutProj => "out_proj",
            Op::Residual => "residual",
            Op::GateUp => "gate_up",
            Op::Swiglu => "swiglu",
            Op::Down => "down",
            Op::LmHead => "lm_head",
            Op::Sample => "sample",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Time and call count per [`Op`], summed over the forward steps since the
/// trace was last [cleared](Self::clear).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    time: [Duration; Op::ALL.len()],
    calls: [u64; Op::ALL.len()],
}

impl Trace {
    /// An empty trace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one call of `op` that took `d`.
    pub fn add(&mut self, op: Op, d: Duration) {
        self.time[op.index()] += d;
        self.calls[op.index()] += 1;
    }

    /// Total time spent in `op`.
    pub fn time(&self, op: Op) -> Duration {
        self.time[op.index()]
    }

    /// Calls of `op` recorded.
    pub fn calls(&self, op: Op) -> u64 {
        self.calls[op.index()]
    }

    /// Time spent in all operations.
    pub fn total(&self) -> Duration {
        self.time.iter().sum()
    }

    /// Each operation with its time and calls, in [`Op::ALL`] order,
    /// skipping those never called.
    pub fn iter(&self) -> impl Iterator<Item = (Op, Duration, u64)> + '_ {
        Op::ALL
            .into_iter()
            .map(|op| (op, self.time(op), self.calls(op)))
            .filter(|&(_, _, n)| n > 0)
    }

    /// Forgets everything recorded.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Adds every operation of `other`.
    pub fn merge(&mut self, other: &Trace) {
        for op in Op::ALL {
            self.time[op.index()] += other.time[op.index()];
            self.calls[op.index()] += other.calls[op.index()];
        }
    }
}

/// Times consecutive operations: each [`lap`](Self::lap) charges the time
/// since the previous one to an op. Does nothing (not even read the clock)
/// when the session is not tracing.
pub(crate) struct Laps<'t> {
    on: Option<(&'t mut Trace, Instant)>,
}

impl<'t> Laps<'t> {
    pub(crate) fn new(trace: Option<&'t mut Trace>) -> Self {
        Self {
            on: trace.map(|t| (t, Instant::now())),
        }
    }

    /// Charges the time since the last lap (or the start) to `op`.
    #[inline]
    pub(crate) fn lap(&mut self, op: Op) {
        if let Some((trace, last)) = &mut self.on {
            let now = Instant::now();
            trace.add(op, now - *last);
            *last = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laps_charge_consecutive_intervals() {
        let mut t = Trace::new();
        {
            let mut laps = Laps::new(Some(&mut t));
            std::thread::sleep(Duration::from_millis(2));
            laps.lap(Op::Qkv);
            laps.lap(Op::Norm);
            laps.lap(Op::Qkv);
        }
        assert_eq!(t.calls(Op::Qkv), 2);
        assert_eq!(t.calls(Op::Norm), 1);
        assert_eq!(t.calls(Op::Down), 0);
        assert!(t.time(Op::Qkv) >= Duration::from_millis(2));
        assert_eq!(t.total(), t.time(Op::Qkv) + t.time(Op::Norm));
        let ops: Vec<Op> = t.iter().map(|(op, _, _)| op).collect();
        assert_eq!(ops, [Op::Norm, Op::Qkv]);
        let mut u = t.clone();
        u.merge(&t);
        assert_eq!(u.calls(Op::Qkv), 4);
        u.clear();
        assert_eq!(u, Trace::new());
    }

    #[test]
    fn disabled_laps_record_nothing() {
        let mut laps = Laps::new(None);
        laps.lap(Op::Qkv);
        assert!(laps.on.is_none());
    }

    #[test]
    fn names_are_distinct() {
        let mut names: Vec<&str> = Op::ALL.iter().map(|o| o.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Op::ALL.len());
    }
}
