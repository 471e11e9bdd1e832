//! A persistent pool of spinning worker threads for many small parallel jobs.
//!
//! A decoded token of a Qwen3-0.6B model runs ~197 matrix-vector products of
//! a hundred microseconds or less each. A fork-join library that lets its
//! workers sleep between jobs pays an OS wake-up per job, which costs as much
//! as the job; this pool's workers keep spinning on one cache line between
//! jobs. While they spin, [`ThreadPool::dispatch`] takes no lock: it takes
//! a `busy` flag (one compare-and-swap), writes the job to a slot and opens
//! it with one atomic swap of the pool's job word, runs share 0, claims any
//! share still unclaimed with a compare-and-swap on that word, waits with
//! loads of the word until no worker is still inside the job, and releases
//! the flag (one store). A worker that sees the job open registers and
//! claims a share in one compare-and-swap, and leaves with one atomic
//! subtraction.
//!
//! The only system call a dispatch to spinning workers can make is in that
//! wait: if a registered worker is still inside the job after 5 us of pure
//! spinning (it was preempted, or its share is long), the caller calls
//! `sched_yield` (`std::thread::yield_now`) every 13 us until it leaves, so
//! that a worker sharing the caller's core gets to finish. A dispatch whose
//! shares all end within 5 us makes none.
//!
//! Shares are claimed, not assigned: the caller and every worker that
//! shows up take the next unclaimed share until none is left, and the
//! dispatch returns when every share has finished. A worker the OS did not
//! run in time (a busy machine) holds nothing up; its shares are run by
//! whoever is running. Which thread runs a share never changes what it
//! computes, since every share is defined by its id.
//!
//! After a configurable idle time ([`ThreadPoolBuilder::spin_time`])
//! without a job opening, workers park, so an idle pool costs no CPU. The
//! swap that opens a job reports whether one is parked; only then does the
//! dispatch also take a lock and notify the parked workers (the OS wake-up,
//! paid once after an idle period). A worker counts every job it sees
//! open, including one whose shares the caller claimed before it could
//! join, and a woken worker spins again for the full spin time, so a
//! stream of tiny jobs keeps the workers spinning (`[P-spin]` in
//! `src/unsafe_core/PROTOCOL.md`).
//!
//! ```
//! # #[cfg(not(feature = "loom"))] { // the pool runs on loom's scheduler under `loom`
//! use inferno_cpu::ThreadPool;
//!
//! let pool = ThreadPool::new(4)?;
//! let mut out = vec![0u64; 1000];
//! // Each share gets a disjoint, contiguous chunk of `out`.
//! pool.for_each_chunk_mut(&mut out, |range, chunk| {
//!     for (i, x) in range.zip(chunk) {
//!         *x = (i * i) as u64;
//!     }
//! });
//! assert_eq!(out[999], 999 * 999);
//! # }
//! # Ok::<(), inferno_cpu::PoolError>(())
//! ```

mod threads;

use std::ops::Range;
use std::time::Duration;

use crate::unsafe_core::pool::{PoolConfig, RawPool};

pub use crate::unsafe_core::pool::{PoolError, MAX_THREADS, MIN_STACK_SIZE};
pub use threads::{default_threads, threads_from_env, ThreadsEnvError, THREADS_ENV};

/// Default time a worker keeps spinning after its last job before parking.
///
/// Long enough to bridge the serial work between the matvecs of a decoded
/// token (microseconds) and the sampling between tokens, short enough that
/// an idle pool stops burning cores almost at once.
pub const DEFAULT_SPIN_TIME: Duration = Duration::from_millis(2);

/// The range of `0..total` that share `id` of `n` owns.
///
/// The `n` ranges are contiguous, tile `0..total` exactly in order of `id`,
/// and their lengths differ by at most one (the first `total % n` shares
/// get one extra item).
///
/// ```
/// use inferno_cpu::split;
/// assert_eq!(split(10, 0, 3), 0..4);
/// assert_eq!(split(10, 1, 3), 4..7);
/// assert_eq!(split(10, 2, 3), 7..10);
/// ```
///
/// # Panics
///
/// If `n == 0` or `id >= n`.
#[inline]
pub fn split(total: usize, id: usize, n: usize) -> Range<usize> {
    assert!(id < n, "split: share id {id} out of range for {n} shares");
    let base = total / n;
    let extra = total % n;
    // id < n and id * base <= total, so nothing here overflows.
    let start = id * base + id.min(extra);
    let len = base + usize::from(id < extra);
    start..start + len
}

/// A persistent pool of `n` threads: `n - 1` spinning workers plus the
/// thread that dispatches, which runs share 0 and any share no worker
/// claimed in time.
///
/// Every method takes `&self`, and the pool is `Sync`: any number of threads
/// may dispatch on one pool. One dispatch at a time gets the workers; a
/// dispatch that finds the pool busy (another thread's, or a job dispatching
/// from inside itself) runs all its shares inline on its own thread instead
/// of waiting, so nested dispatch never deadlocks. Results do not depend on
/// which path ran, since every share is defined by its id.
///
/// A panic in any share is caught; the dispatch waits for every other share
/// to finish, then resumes the panic on the caller. The pool stays usable.
///
/// Dropping the pool stops and joins its workers.
///
/// # Sizing
///
/// A dispatch returns when every share has finished. Shares are claimed by
/// whichever threads are running, so a worker that the OS does not run
/// (another busy process, a container quota) does not hold a dispatch up:
/// the running threads take its shares. A share already claimed is still
/// waited for, so the pool is as fast as its slowest running thread. Give
/// it at most as many threads as the machine has free cores
/// ([`default_threads`] counts physical performance cores). Waiting threads
/// yield their core after a few microseconds instead of spinning it away,
/// so a squeezed pool runs at about single-core speed rather than
/// stalling; it does not get faster than one thread on a core it does not
/// have.
///
/// A pool has at most [`MAX_THREADS`] threads.
#[derive(Debug)]
pub struct ThreadPool {
    raw: RawPool,
}

impl ThreadPool {
    /// Starts a pool of `threads` shares (`threads - 1` worker threads) with
    /// the default spin time. `threads` may be at most [`MAX_THREADS`].
    ///
    /// # Errors
    ///
    /// [`PoolError::ZeroThreads`] for `threads == 0`;
    /// [`PoolError::TooManyThreads`] above [`MAX_THREADS`];
    /// [`PoolError::Spawn`] when the OS refuses a thread (workers already
    /// started are joined).
    pub fn new(threads: usize) -> Result<Self, PoolError> {
        ThreadPoolBuilder::new().threads(threads).build()
    }

    /// A builder for a pool with non-default settings.
    pub fn builder() -> ThreadPoolBuilder {
        ThreadPoolBuilder::new()
    }

    /// Number of shares each dispatch runs (workers plus the caller).
    #[inline]
    pub fn threads(&self) -> usize {
        self.raw.threads()
    }

    /// Runs `f(id, n)` once for every share `id` in `0..n`, where
    /// `n = self.threads()`, and returns when all have finished.
    ///
    /// The calling thread runs share 0; every other share is run by
    /// whichever thread claims it first (a worker, or the caller once its
    /// own share is done), so one thread may run several shares, one after
    /// another. A share must therefore never block on another share of the
    /// same dispatch (a `Barrier` across shares, a channel between them):
    /// when one thread runs both, or when the dispatch runs inline (nested
    /// in a job, or concurrent with another dispatch on the same pool, where
    /// all shares run one after another on the calling thread), the first
    /// waits forever for the second.
    ///
    /// ```
    /// # #[cfg(not(feature = "loom"))] { // the pool runs on loom's scheduler under `loom`
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = inferno_cpu::ThreadPool::new(3)?;
    /// let sum = AtomicUsize::new(0);
    /// pool.dispatch(|id, n| {
    ///     assert_eq!(n, 3);
    ///     sum.fetch_add(id, Ordering::Relaxed);
    /// });
    /// assert_eq!(sum.into_inner(), 0 + 1 + 2);
    /// # }
    /// # Ok::<(), inferno_cpu::PoolError>(())
    /// ```
    ///
    /// Shares run on several threads at once, so the closure must be
    /// `Sync`; one that mutates through a `Cell` does not compile:
    ///
    /// ```compile_fail
    /// let pool = inferno_cpu::ThreadPool::new(2).unwrap();
    /// let count = std::cell::Cell::new(0);
    /// pool.dispatch(|_, _| count.set(count.get() + 1));
    /// ```
    ///
    /// # Panics
    ///
    /// Resumes one of the panics raised by the shares, after all shares
    /// ended: the calling thread's own first panic if it had one, else the
    /// first a worker recorded (a dispatch that ran inline resumes the
    /// lowest share's). The other payloads are dropped, each inside
    /// `catch_unwind`; if such a drop panics, that panic is caught and its
    /// own payload forgotten (leaked) rather than unwound through the pool.
    #[inline]
    pub fn dispatch<F>(&self, f: F)
    where
        F: Fn(usize, usize) + Sync,
    {
        self.raw.dispatch(&f);
    }

    /// Splits `data` into one contiguous chunk per share with [`split`] and
    /// runs `f(range, chunk)` for each non-empty one, where `chunk` is
    /// `&mut data[range]`.
    ///
    /// The static split suits uniform work on cores of one speed: it costs
    /// nothing to hand out. For uneven work see
    /// [`for_each_chunk_mut_dynamic`](Self::for_each_chunk_mut_dynamic).
    ///
    /// The elements cross threads, so they must be `Send`:
    ///
    /// ```compile_fail
    /// let pool = inferno_cpu::ThreadPool::new(2).unwrap();
    /// let mut data = vec![std::rc::Rc::new(0); 4];
    /// pool.for_each_chunk_mut(&mut data, |_, _| {});
    /// ```
    ///
    /// # Panics
    ///
    /// Resumes one of the panics raised by the shares, after all shares
    /// ended: the calling thread's own first panic if it had one, else the
    /// first a worker recorded (a dispatch that ran inline resumes the
    /// lowest share's). The other payloads are dropped, each inside
    /// `catch_unwind`; if such a drop panics, that panic is caught and its
    /// own payload forgotten (leaked) rather than unwound through the pool.
    #[inline]
    pub fn for_each_chunk_mut<T, F>(&self, data: &mut [T], f: F)
    where
        T: Send,
        F: Fn(Range<usize>, &mut [T]) + Sync,
    {
        self.raw.for_each_chunk_mut(data, &f);
    }

    /// Like [`for_each_chunk_mut`](Self::for_each_chunk_mut), but every
    /// share claims `chunk`-element pieces from a shared atomic cursor until
    /// none is left, so a share on a slow or busy core takes fewer pieces.
    /// The last piece may be shorter; `chunk == 0` is treated as 1.
    ///
    /// ```
    /// # #[cfg(not(feature = "loom"))] { // the pool runs on loom's scheduler under `loom`
    /// let pool = inferno_cpu::ThreadPool::new(2)?;
    /// let mut data = vec![0u8; 100];
    /// pool.for_each_chunk_mut_dynamic(&mut data, 16, |range, piece| {
    ///     assert!(range.len() <= 16);
    ///     piece.fill(1);
    /// });
    /// assert!(data.iter().all(|&x| x == 1));
    /// # }
    /// # Ok::<(), inferno_cpu::PoolError>(())
    /// ```
    ///
    /// # Panics
    ///
    /// Resumes one of the panics raised by the shares, after all shares
    /// ended: the calling thread's own first panic if it had one, else the
    /// first a worker recorded (a dispatch that ran inline resumes the
    /// lowest share's). The other payloads are dropped, each inside
    /// `catch_unwind`; if such a drop panics, that panic is caught and its
    /// own payload forgotten (leaked) rather than unwound through the pool.
    ///
    /// No piece is ever passed to `f` twice. If no call of `f` panics,
    /// every piece is passed once. A share whose call of `f` panics claims
    /// no further piece (the piece it was on is left as `f` left it); the
    /// other shares keep claiming. So the pieces that may be skipped are
    /// those still unclaimed once every one of the `self.threads()` shares
    /// has stopped on a panic: with every piece panicking, exactly
    /// `self.threads()` pieces are attempted (2 of 64 on 2 threads), and
    /// which ones depends on scheduling. Pieces skipped this way are not
    /// touched at all.
    #[inline]
    pub fn for_each_chunk_mut_dynamic<T, F>(&self, data: &mut [T], chunk: usize, f: F)
    where
        T: Send,
        F: Fn(Range<usize>, &mut [T]) + Sync,
    {
        self.raw.for_each_chunk_mut_dynamic(data, chunk, &f);
    }
}

/// Settings for a [`ThreadPool`].
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // the pool runs on loom's scheduler under `loom`
/// use std::time::Duration;
/// let pool = inferno_cpu::ThreadPool::builder()
///     .threads(2)
///     .spin_time(Duration::from_micros(500))
///     .build()?;
/// assert_eq!(pool.threads(), 2);
/// # }
/// # Ok::<(), inferno_cpu::PoolError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ThreadPoolBuilder {
    threads: Option<usize>,
    spin: Duration,
    stack_size: Option<usize>,
    name_prefix: String,
}

impl Default for ThreadPoolBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl ThreadPoolBuilder {
    /// Default settings: [`default_threads()`] shares,
    /// [`DEFAULT_SPIN_TIME`], the platform's default stack size.
    pub fn new() -> Self {
        Self {
            threads: None,
            spin: DEFAULT_SPIN_TIME,
            stack_size: None,
            name_prefix: "inferno-pool-".to_owned(),
        }
    }

    /// Number of shares per dispatch (worker threads + the caller), from 1
    /// to [`MAX_THREADS`]; [`build`](Self::build) rejects other values.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// How long a worker keeps waiting actively without seeing a job open
    /// before it parks: a few microseconds of pure spinning, then spinning
    /// with periodic yields (so that a pool squeezed onto fewer cores than
    /// it has threads still makes progress). A job the worker sees open
    /// counts even if the caller claimed all its shares first, and the
    /// budget is checked when it runs out, so a worker parks between one
    /// and two spin times after the last job; a woken worker spins again
    /// for the full time. `Duration::ZERO` parks at once (every dispatch
    /// then pays an OS wake-up).
    pub fn spin_time(mut self, spin: Duration) -> Self {
        self.spin = spin;
        self
    }

    /// Stack size of the worker threads, in bytes, at least
    /// [`MIN_STACK_SIZE`] (64 KiB; [`build`](Self::build) rejects less). A
    /// share that panics on a worker runs the panic hook on that stack, and
    /// std's default hook needs 28 KiB to print a backtrace on x86_64
    /// Linux; a smaller stack would overflow and abort the process.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Worker threads are named `{prefix}{index}`, `index` in `1..threads`.
    /// The prefix must not contain a NUL byte ([`build`](Self::build)
    /// rejects it).
    pub fn thread_name_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.name_prefix = prefix.into();
        self
    }

    /// Starts the pool.
    ///
    /// # Errors
    ///
    /// As [`ThreadPool::new`], [`PoolError::InvalidThreadName`] when
    /// the thread-name prefix contains a NUL byte, and
    /// [`PoolError::StackTooSmall`] for a stack size below
    /// [`MIN_STACK_SIZE`].
    pub fn build(self) -> Result<ThreadPool, PoolError> {
        let threads = self.threads.unwrap_or_else(default_threads);
        RawPool::spawn(PoolConfig {
            threads,
            spin: self.spin,
            stack_size: self.stack_size,
            name_prefix: self.name_prefix,
        })
        .map(|raw| ThreadPool { raw })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_small_cases() {
        assert_eq!(split(0, 0, 1), 0..0);
        assert_eq!(split(3, 4, 5), 3..3);
        assert_eq!(split(7, 0, 2), 0..4);
        assert_eq!(split(7, 1, 2), 4..7);
        assert_eq!(split(usize::MAX, 1, 2), usize::MAX / 2 + 1..usize::MAX);
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn split_rejects_bad_id() {
        let _ = split(10, 2, 2);
    }

    #[test]
    fn zero_threads_is_an_error() {
        assert!(matches!(ThreadPool::new(0), Err(PoolError::ZeroThreads)));
    }
}
