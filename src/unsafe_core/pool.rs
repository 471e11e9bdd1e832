//! The spinning pool's protocol: one job word (share cursor, registered
//! workers, park and stop bits) beside a one-job mailbox, park/unpark, and
//! panic forwarding.
//!
//! `src/unsafe_core/PROTOCOL.md` describes the states and every ordering;
//! the section names cited below (`[P-…]`) are its headings, and the
//! `[POOL-…]` IDs of the `SAFETY` comments are listed in `SAFETY.md`.
//!
//! The safe face of this module is [`crate::pool::ThreadPool`]; nothing here
//! is public outside the crate.

use std::any::Any;
use std::io;
use std::marker::PhantomData;
use std::ops::Range;
use std::panic::{self, AssertUnwindSafe};
use std::sync::PoisonError;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::pool::split;
use crate::sync::{
    self, thread, Arc, AtomicBool, AtomicUsize, Backoff, Condvar, Mutex, Ordering, Step, UnsafeCell,
};

/// A caught panic.
type Payload = Box<dyn Any + Send + 'static>;

/// Runs share `id` of `n` of a type-erased job: `call(ctx, data, len, id,
/// n)`. The function knows the closure's type `F` (and, for chunked jobs,
/// the element type `T`).
type Call = unsafe fn(*const (), *mut (), usize, usize, usize);

/// A type-erased job: the closure `&F` behind `ctx`, and for chunked jobs
/// the slice being split (`data`, `len`). Carrying the slice in the job
/// itself, on the cache line the workers already fetch to see the job
/// open, saves each worker a dependent miss on the caller's stack.
#[derive(Clone, Copy)]
struct Job {
    call: Call,
    ctx: *const (),
    data: *mut (),
    len: usize,
}

impl Job {
    /// Runs share `id` of `n`.
    ///
    /// # Safety
    ///
    /// The borrows the job was built from (by `dispatch` or
    /// `for_each_chunk_mut`) are alive, and for chunked jobs no other live
    /// reference overlaps chunk `id` of `n`.
    #[inline(always)]
    unsafe fn run(self, id: usize, n: usize) {
        // SAFETY: [POOL-CTX] forwarded from this function's contract.
        unsafe { (self.call)(self.ctx, self.data, self.len, id, n) }
    }
}

/// Bit 0 of the job word: a worker is (about to be) parked and the next
/// publish must wake it ([P-park]).
const PARKED: usize = 1;
/// Bit 1 of the job word: the pool is shutting down ([P-stop]).
const STOP: usize = 2;
/// The share cursor (next unclaimed share id) starts at this bit.
const CURSOR_SHIFT: u32 = 2;
/// Width of the cursor field and of the registered-worker field: half of
/// what is left above the two flag bits (31 bits on 64-bit targets, 15 on
/// 32-bit ones).
const FIELD_BITS: u32 = (usize::BITS - CURSOR_SHIFT) / 2;
const FIELD_MASK: usize = (1 << FIELD_BITS) - 1;
/// Adding this to the word claims one share.
const CURSOR_ONE: usize = 1 << CURSOR_SHIFT;
/// The registered-worker count starts at this bit.
const ACTIVE_SHIFT: u32 = CURSOR_SHIFT + FIELD_BITS;
/// Adding this to the word registers one worker.
const ACTIVE_ONE: usize = 1 << ACTIVE_SHIFT;

/// The largest number of threads (workers plus the caller) a pool accepts.
///
/// The share cursor and the count of registered workers share one atomic
/// word ([P-word]); this bound keeps both fields far from overflowing on
/// 32-bit targets too, and is above the core count of any machine the
/// crate targets.
pub const MAX_THREADS: usize = 4096;

const _: () = assert!(MAX_THREADS < FIELD_MASK);

/// The smallest worker stack, in bytes, that a pool accepts (64 KiB).
///
/// A share that panics on a worker runs std's panic hook on the worker's
/// stack; the default hook prints the message and, with `RUST_BACKTRACE`
/// set, symbolizes a backtrace, which takes most of the stack. Measured on
/// x86_64 Linux (`tests/pool_stack.rs`, release build, default hook,
/// `RUST_BACKTRACE=full`): 24 KiB overflows and aborts the process, 28 KiB
/// suffices; with no backtrace 16 KiB suffices. The minimum doubles the
/// worst measured need, for debug builds (larger frames) and for hooks
/// that do a little more.
pub const MIN_STACK_SIZE: usize = 64 * 1024;

/// The next unclaimed share id of the job word `word`.
#[inline(always)]
fn cursor(word: usize) -> usize {
    (word >> CURSOR_SHIFT) & FIELD_MASK
}

/// How many workers are registered in the job of `word`.
#[inline(always)]
fn active(word: usize) -> usize {
    word >> ACTIVE_SHIFT
}

/// What the dispatcher writes once per job and the workers read: one cache
/// line, so a worker that sees the job open gets the job itself with the
/// same line transfer ([P-word]).
struct Board {
    /// `active << ACTIVE_SHIFT | cursor << CURSOR_SHIFT | STOP | PARKED`
    /// ([P-word]).
    word: AtomicUsize,
    /// The job whose shares the cursor hands out ([P-publish]). Read only by
    /// registered workers.
    mailbox: UnsafeCell<Option<Job>>,
    /// Set when a worker stored a panic payload during the current job.
    panicked: AtomicBool,
    /// Bumped (wrapping) by every publish: a hint that jobs keep opening,
    /// for workers that never saw one open because the caller claimed
    /// every share first. It orders nothing and decides nothing but how
    /// long a worker spins ([P-spin]).
    epoch: AtomicUsize,
}

/// State shared by the dispatcher and every worker.
struct Shared {
    board: CachePadded<Board>,
    /// Held by the one thread currently dispatching ([P-busy]).
    busy: CachePadded<AtomicBool>,
    /// The first panic payload caught on a worker during the current job.
    panic: Mutex<Option<Payload>>,
    /// Guards the park/wake handshake ([P-park]).
    sleep: Mutex<()>,
    wake: Condvar,
    /// Shares per job: workers plus the dispatching thread.
    threads: usize,
    /// How long a worker waits actively after its last job before parking.
    spin: Duration,
}

// SAFETY: [POOL-SHARED] `Shared` is `!Sync` only because of `mailbox` (an
// `UnsafeCell` holding raw pointers). The mailbox is written only by the
// thread holding `busy`, and only while no worker is registered: before the
// Release swap that opens a job, after the Acquire load that saw every
// registered worker of the previous job leave. Workers read it only while
// registered, after the Acquire compare-exchange that registered them. The
// pointers inside are dereferenced only through `call::<F>` while the
// dispatcher keeps `F` alive ([POOL-CTX]). Checked by: tests/loom_pool.rs
// (every model; loom flags any unsynchronised mailbox access) and Miri over
// `unsafe_core::pool::tests`.
unsafe impl Sync for Shared {}
// SAFETY: [POOL-SHARED] as above: the only non-`Send` field is the mailbox's
// raw pointers, whose accesses are ordered by the protocol wherever the
// `Shared` lives. Checked by: tests/loom_pool.rs.
unsafe impl Send for Shared {}

/// Spawning or sizing a pool failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PoolError {
    /// A pool needs at least one thread (the caller).
    #[error("a thread pool needs at least 1 thread, got 0")]
    ZeroThreads,
    /// More threads than [`MAX_THREADS`].
    #[error("a thread pool takes at most {max} threads, got {requested}")]
    TooManyThreads {
        /// The requested pool size.
        requested: usize,
        /// The largest size accepted.
        max: usize,
    },
    /// The worker stack size is below [`MIN_STACK_SIZE`], too small for a
    /// share that panics on a worker to report its panic.
    #[error("a worker stack of {requested} bytes is below the minimum of {min} bytes")]
    StackTooSmall {
        /// The requested stack size.
        requested: usize,
        /// The smallest size accepted ([`MIN_STACK_SIZE`]).
        min: usize,
    },
    /// The thread-name prefix contains a NUL byte, which OS thread names
    /// cannot hold.
    #[error("thread name prefix {prefix:?} contains a NUL byte")]
    InvalidThreadName {
        /// The rejected prefix.
        prefix: String,
    },
    /// The OS refused to start a worker thread; the workers already started
    /// were stopped and joined.
    #[error("failed to spawn pool worker {index} of {threads}: {source}")]
    Spawn {
        /// Index (1-based, among the `threads - 1` workers) of the worker
        /// that could not be started.
        index: usize,
        /// Requested pool size.
        threads: usize,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// How to build a [`RawPool`]; filled in by `ThreadPoolBuilder`.
#[derive(Clone, Debug)]
pub(crate) struct PoolConfig {
    pub(crate) threads: usize,
    pub(crate) spin: Duration,
    pub(crate) stack_size: Option<usize>,
    pub(crate) name_prefix: String,
}

/// The pool: shared state plus the worker handles.
pub(crate) struct RawPool {
    shared: Arc<Shared>,
    workers: Vec<thread::JoinHandle<()>>,
}

impl std::fmt::Debug for RawPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawPool")
            .field("threads", &self.shared.threads)
            .field("spin", &self.shared.spin)
            .finish_non_exhaustive()
    }
}

impl RawPool {
    /// Spawns `config.threads - 1` workers; the caller of `dispatch` runs
    /// shares too.
    pub(crate) fn spawn(config: PoolConfig) -> Result<Self, PoolError> {
        let threads = config.threads;
        if threads == 0 {
            return Err(PoolError::ZeroThreads);
        }
        if threads > MAX_THREADS {
            return Err(PoolError::TooManyThreads {
                requested: threads,
                max: MAX_THREADS,
            });
        }
        if let Some(requested) = config.stack_size.filter(|&s| s < MIN_STACK_SIZE) {
            return Err(PoolError::StackTooSmall {
                requested,
                min: MIN_STACK_SIZE,
            });
        }
        if config.name_prefix.contains('\0') {
            return Err(PoolError::InvalidThreadName {
                prefix: config.name_prefix,
            });
        }
        let shared = Arc::new(Shared {
            board: CachePadded::new(Board {
                word: AtomicUsize::new(closed_word(threads)),
                mailbox: UnsafeCell::new(None),
                panicked: AtomicBool::new(false),
                epoch: AtomicUsize::new(0),
            }),
            busy: CachePadded::new(AtomicBool::new(false)),
            panic: Mutex::new(None),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
            threads,
            spin: config.spin,
        });
        let mut pool = RawPool {
            shared,
            workers: Vec::with_capacity(threads - 1),
        };
        for index in 1..threads {
            let shared = Arc::clone(&pool.shared);
            let mut builder = thread::Builder::new().name(format!("{}{index}", config.name_prefix));
            if let Some(size) = config.stack_size {
                builder = builder.stack_size(size);
            }
            match builder.spawn(move || worker_main(&shared)) {
                Ok(handle) => pool.workers.push(handle),
                // Dropping `pool` stops and joins the workers started so far.
                Err(source) => {
                    return Err(PoolError::Spawn {
                        index,
                        threads,
                        source,
                    })
                }
            }
        }
        Ok(pool)
    }

    /// Number of shares per job (workers + caller).
    #[inline]
    pub(crate) fn threads(&self) -> usize {
        self.shared.threads
    }

    /// Runs `f(id, n)` once for every `id` in `0..n`, `n = self.threads()`,
    /// and returns when all have finished. A panic in any share is resumed
    /// here after every share has finished.
    ///
    /// Shares are claimed, not assigned: the caller and every worker that
    /// registers in time take the next unclaimed id until none is left
    /// ([P-claim]). When another dispatch holds the pool (a second thread,
    /// or a job dispatching from inside itself), every share runs inline on
    /// the calling thread instead ([P-busy]).
    #[inline]
    pub(crate) fn dispatch<F>(&self, f: &F)
    where
        F: Fn(usize, usize) + Sync,
    {
        let job = Job {
            call: call_plain::<F>,
            ctx: (f as *const F).cast::<()>(),
            data: std::ptr::null_mut(),
            len: 0,
        };
        // SAFETY: [POOL-CTX] `job` borrows only `f`, which outlives this
        // call. Checked by: tests/loom_pool.rs::caller_outlives_registered_workers,
        // ::panic_in_share, Miri.
        unsafe { self.execute(job) }
    }

    /// Splits `data` into `self.threads()` contiguous chunks with
    /// [`split`] and runs `f(range, chunk)` on each non-empty one, each
    /// chunk from the share of its index.
    #[inline]
    pub(crate) fn for_each_chunk_mut<T, F>(&self, data: &mut [T], f: &F)
    where
        T: Send,
        F: Fn(Range<usize>, &mut [T]) + Sync,
    {
        let job = Job {
            call: call_chunk::<T, F>,
            ctx: (f as *const F).cast::<()>(),
            data: data.as_mut_ptr().cast::<()>(),
            len: data.len(),
        };
        // SAFETY: [DISJOINT-SPLIT] `job` borrows `f` and `data`, both alive
        // for this call; `data` is exclusively ours (`&mut`) and `execute`
        // runs each share id once (claimed from the cursor), so the chunks
        // `call_chunk` makes from `split` never overlap. `T: Send` because
        // chunks go to workers. Checked by:
        // tests/prop_split.rs::chunks_touch_each_once,
        // tests/loom_pool.rs::chunk_writes_visible, ::each_share_once_two_workers,
        // Miri.
        unsafe { self.execute(job) }
    }

    /// Runs every share of `job` and returns when all have finished,
    /// resuming the first panic of any share.
    ///
    /// # Safety
    ///
    /// The borrows `job` was built from outlive this call, and running each
    /// share id of `0..threads` once, on any thread, is sound for it
    /// (`Job::run`).
    unsafe fn execute(&self, job: Job) {
        let n = self.shared.threads;
        if n == 1 {
            // SAFETY: [POOL-CTX] this function's contract.
            unsafe { job.run(0, 1) };
            return;
        }
        let Some(busy) = BusyGuard::try_acquire(&self.shared.busy) else {
            // SAFETY: [POOL-CTX] this function's contract.
            unsafe { run_inline(job, n) };
            return;
        };

        self.shared.board.mailbox.with_mut(|slot| {
            // SAFETY: [POOL-MAILBOX] we hold `busy`, so no other dispatcher
            // writes the mailbox; the job word is closed (cursor at `n`) with
            // no registered worker, so no worker reads the mailbox: every
            // worker registered in an earlier job left it with a Release
            // decrement that our predecessor (or we) observed with Acquire
            // before releasing `busy`, and our Acquire of `busy` makes that
            // chain ours. Checked by: tests/loom_pool.rs::repeated_generations,
            // ::late_worker_never_touches_closed_job, ::busy_two_dispatchers.
            unsafe { *slot = Some(job) }
        });
        // Opens the job with share 0 already claimed by us.
        self.shared.publish(CURSOR_ONE);

        let mut first_panic = None;
        let mut id = 0;
        loop {
            // SAFETY: [POOL-CTX] this function's contract; `id` was claimed
            // from the cursor, so no other thread runs it.
            let outcome = panic::catch_unwind(AssertUnwindSafe(|| unsafe { job.run(id, n) }));
            if let Err(payload) = outcome {
                keep_first(&mut first_panic, payload);
            }
            match self.shared.claim(n) {
                Some(next) => id = next,
                None => break,
            }
        }
        // Every share is claimed. The job's borrows must outlive every
        // registered worker's use of them: wait for them to leave before
        // anything can unwind past this frame. Workers that never registered
        // are not waited for, and cannot register any more ([P-claim]).
        self.shared.wait_registered_left();
        let theirs = self.shared.take_panic();
        drop(busy);
        match (first_panic, theirs) {
            (Some(mine), theirs) => {
                if let Some(surplus) = theirs {
                    drop_payload(surplus);
                }
                panic::resume_unwind(mine);
            }
            (None, Some(theirs)) => panic::resume_unwind(theirs),
            (None, None) => {}
        }
    }

    /// Hands out `chunk`-sized ranges of `data` from a shared atomic cursor,
    /// so fast threads take more chunks than slow ones; runs `f(range,
    /// chunk)` on each.
    ///
    /// Built on `dispatch`: every share that runs (claimed by the caller or
    /// by a worker that registered in time, [P-claim]) takes ranges until
    /// none is left, so a share claimed late finds the work already done and
    /// returns at once. A share whose `f` panics stops claiming (the panic
    /// unwinds out of its loop); ranges still unclaimed when every share
    /// has stopped so are never run (documented on
    /// `ThreadPool::for_each_chunk_mut_dynamic`).
    pub(crate) fn for_each_chunk_mut_dynamic<T, F>(&self, data: &mut [T], chunk: usize, f: &F)
    where
        T: Send,
        F: Fn(Range<usize>, &mut [T]) + Sync,
    {
        let chunk = chunk.max(1);
        let chunks = DisjointChunks::new(data);
        let len = chunks.len;
        let cursor = sync::AtomicUsize::new(0);
        self.dispatch(&|_, _| loop {
            // Claim `start..end` by moving the cursor from `start` to `end`;
            // the cursor never passes `len`, so it cannot overflow. Relaxed:
            // the cursor only has to hand out distinct ranges; the data
            // written is published by the leave/wait pair ([P-claim]).
            let claimed = cursor.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |start| {
                (start < len).then(|| start + chunk.min(len - start))
            });
            let Ok(start) = claimed else { break };
            let range = start..start + chunk.min(len - start);
            // SAFETY: [DISJOINT-CURSOR] each successful update moves the
            // cursor from `start` to `range.end`, so the claimed ranges are
            // consecutive, disjoint, and inside 0..len; the borrow of `data`
            // outlives the dispatch. Checked by:
            // tests/prop_split.rs::dynamic_chunks_touch_each_once, Miri.
            let part = unsafe { chunks.slice(range.clone()) };
            f(range, part);
        });
    }
}

impl Drop for RawPool {
    fn drop(&mut self) {
        if self.workers.is_empty() {
            return;
        }
        // `&mut self`: no dispatch is in flight and no worker is registered
        // (each dispatch waits for its registered workers before it
        // returns). Workers seeing STOP exit without reading the mailbox.
        self.shared.publish(STOP | closed_word(self.shared.threads));
        for worker in self.workers.drain(..) {
            // Workers catch every job panic, so a join error cannot carry
            // one of ours; there is nothing useful to do with it in drop.
            let _ = worker.join();
        }
    }
}

/// The job word of a pool of `n` threads with no open job: every share
/// claimed, no worker registered.
#[inline(always)]
fn closed_word(n: usize) -> usize {
    n << CURSOR_SHIFT
}

impl Shared {
    /// Replaces the job word with `next` (a job opened with its cursor
    /// past the shares the caller took, or the stop word), publishing the
    /// mailbox, and wakes parked workers if there are any ([P-publish],
    /// [P-park]).
    #[inline]
    fn publish(&self, next: usize) {
        // Relaxed, and a plain load and store: only the `busy` holder (or
        // `Drop`, with `&mut self`) publishes, and the epoch is a spin hint
        // that orders nothing ([P-spin]). Written before the swap. Workers
        // with a zero spin time never read it.
        if !self.spin.is_zero() {
            let epoch = self.board.epoch.load(Ordering::Relaxed);
            self.board
                .epoch
                .store(epoch.wrapping_add(1), Ordering::Relaxed);
        }
        // Release: the mailbox write above happens-before the Acquire
        // compare-exchange of any worker that registers in this job
        // ([P-publish]). A swap, not a store: it reads the latest `PARKED`
        // bit in the word's modification order, which is what makes the
        // park handshake lose no wake-up ([P-park]).
        let previous = self.board.word.swap(next, Ordering::Release);
        debug_assert_eq!(active(previous), 0, "a job opened with a registered worker");
        if previous & PARKED != 0 {
            self.wake_parked();
        }
    }

    #[cold]
    fn wake_parked(&self) {
        // Taking the lock waits out any worker between its PARKED CAS and
        // its `wait`, so the notification cannot fall in that gap.
        let _guard = self.sleep.lock().unwrap_or_else(PoisonError::into_inner);
        self.wake.notify_all();
    }

    /// Claims the next unclaimed share of the open job for a thread that
    /// already takes part in it (the caller, or a registered worker), or
    /// returns `None` once every share is claimed ([P-claim]).
    #[inline]
    fn claim(&self, n: usize) -> Option<usize> {
        // Relaxed: the claimer already has the job (the caller built it; a
        // registered worker acquired it when registering); the cursor only
        // has to hand out distinct ids ([P-claim]).
        let mut word = self.board.word.load(Ordering::Relaxed);
        loop {
            let next = cursor(word);
            if next >= n {
                return None;
            }
            // Relaxed: as above.
            match self.board.word.compare_exchange_weak(
                word,
                word + CURSOR_ONE,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(next),
                Err(actual) => word = actual,
            }
        }
    }

    /// Registers the calling worker in the open job of `word` and claims a
    /// share for it, in one compare-exchange; `None` when the job is closed
    /// (every share claimed) or the pool is stopping ([P-claim]).
    #[inline]
    fn register(&self, mut word: usize, n: usize) -> Option<usize> {
        loop {
            let next = cursor(word);
            if word & STOP != 0 || next >= n {
                return None;
            }
            // Acquire on success: reads the publishing swap's Release (or a
            // later read-modify-write of the word, which continues its
            // release sequence), so the mailbox write happens-before our
            // read of it. Relaxed on failure: we only retry ([P-claim]).
            match self.board.word.compare_exchange_weak(
                word,
                word + CURSOR_ONE + ACTIVE_ONE,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(next),
                Err(actual) => word = actual,
            }
        }
    }

    /// Unregisters the calling worker; its last touch of the job.
    #[inline]
    fn leave(&self) {
        // Release: our shares' writes (and our read of the mailbox) happen-
        // before the caller's Acquire load that sees the registered count
        // reach zero ([P-claim]).
        self.board.word.fetch_sub(ACTIVE_ONE, Ordering::Release);
    }

    /// Waits until no worker is registered in the current job (whose shares
    /// are all claimed): spins, then spins and yields ([`Backoff`]), never
    /// parks.
    #[inline]
    fn wait_registered_left(&self) {
        let mut backoff = Backoff::new(Duration::MAX);
        // Acquire: reads the last leave in the word's modification order;
        // every earlier leave heads a release sequence that this value
        // continues (each later change is a read-modify-write), so every
        // registered worker's writes are visible once the count is zero
        // ([P-claim]).
        while active(self.board.word.load(Ordering::Acquire)) != 0 {
            match backoff.step() {
                Step::Spin | Step::Park => sync::spin_loop(),
                Step::Yield => sync::yield_now(),
            }
        }
    }

    /// Returns the first job word with an unclaimed share or the stop bit:
    /// spins, then spins and yields, and parks once a spin time has passed
    /// without a job opening ([P-spin], [P-park]).
    ///
    /// `seen` is the epoch this worker saw when its budget last ran out.
    /// When the budget runs out again, a different epoch (a job opened
    /// meanwhile, whether or not this worker got into it) restarts the
    /// budget instead of parking; so does a wake-up: a woken worker spins
    /// again for the full spin time instead of parking at once when the job
    /// it was woken for has already closed. With a zero spin time neither
    /// applies: the worker parks at once and stays parked until a job opens.
    #[inline]
    fn wait_for_job(&self, seen: &mut usize) -> usize {
        let n = self.threads;
        let mut backoff = Backoff::new(self.spin);
        loop {
            // Acquire: belt and braces. The job is acquired by the
            // registering compare-exchange, whose own Acquire is what orders
            // the mailbox read (the ABA case of [P-claim]); coherence alone
            // keeps that compare-exchange from reading a word older than
            // this one (and one that did would only fail and retry).
            let word = self.board.word.load(Ordering::Acquire);
            if word & STOP != 0 || cursor(word) < n {
                return word;
            }
            match backoff.step() {
                Step::Spin => sync::spin_loop(),
                Step::Yield => sync::yield_now(),
                Step::Park => {
                    if !self.spin.is_zero() {
                        // Relaxed: a hint, on the line just read ([P-spin]).
                        let epoch = self.board.epoch.load(Ordering::Relaxed);
                        if epoch != *seen {
                            // Jobs opened during the budget: spin another.
                            *seen = epoch;
                            backoff = Backoff::new(self.spin);
                            continue;
                        }
                    }
                    self.park();
                    // Woken (by a publish, or spuriously): back to spinning
                    // with a full budget ([P-spin]).
                    backoff = Backoff::new(self.spin);
                }
            }
        }
    }

    /// Sleeps until a job opens, the pool stops or a publish wakes us
    /// ([P-park]); the caller re-reads the word.
    #[cold]
    fn park(&self) {
        let n = self.threads;
        let mut guard = self.sleep.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            // Acquire: as in `wait_for_job`.
            let word = self.board.word.load(Ordering::Acquire);
            if word & STOP != 0 || cursor(word) < n {
                return;
            }
            if word & PARKED == 0 {
                // Announce the sleep only if the word is still closed and
                // unchanged: a publish in between makes the CAS fail and we
                // re-read. Relaxed: the bit carries no data; the job is
                // acquired by registering once we wake ([P-park]).
                if self
                    .board
                    .word
                    .compare_exchange(word, word | PARKED, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
            }
            guard = self
                .wake
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
            // Woken (by a publish, the stop, or spuriously): with a spin
            // time, the caller spins again before it parks again; without
            // one, spinning would only come straight back here.
            if !self.spin.is_zero() {
                return;
            }
        }
    }

    #[cold]
    fn record_panic(&self, payload: Payload) {
        let surplus = {
            let mut slot = self.panic.lock().unwrap_or_else(PoisonError::into_inner);
            if slot.is_none() {
                *slot = Some(payload);
                None
            } else {
                Some(payload)
            }
        };
        // Relaxed: published by the worker's Release leave that follows
        // ([P-panic]).
        self.board.panicked.store(true, Ordering::Relaxed);
        if let Some(payload) = surplus {
            drop_payload(payload);
        }
    }

    /// The panic a worker caught during the job that just finished, if any.
    /// Only the dispatcher calls this, after `wait_registered_left`.
    #[inline]
    fn take_panic(&self) -> Option<Payload> {
        // Relaxed: `wait_registered_left`'s Acquire already ordered every
        // registered worker's store before this load ([P-panic]).
        if !self.board.panicked.load(Ordering::Relaxed) {
            return None;
        }
        self.board.panicked.store(false, Ordering::Relaxed);
        self.panic
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// Drops a panic payload whose `Drop` may itself panic: such a second panic
/// is caught, and its own payload forgotten rather than dropped, so nothing
/// escapes ([P-panic]).
#[cold]
fn drop_payload(payload: Payload) {
    if let Err(inner) = panic::catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(inner);
    }
}

/// Keeps the first payload in `slot` and drops any later one safely.
#[cold]
fn keep_first(slot: &mut Option<Payload>, payload: Payload) {
    if slot.is_none() {
        *slot = Some(payload);
    } else {
        drop_payload(payload);
    }
}

/// A worker's registration in one job; dropping it leaves the job, so the
/// leave happens on every path out of the registered section, unwinding
/// included.
struct Registration<'a>(&'a Shared);

impl Drop for Registration<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.leave();
    }
}

/// A worker's life: wait for an open job, register and claim a share, run
/// shares until none is left, leave, repeat until the pool stops.
fn worker_main(shared: &Shared) {
    let n = shared.threads;
    // The epoch the pool starts with: a worker that starts after some
    // publishes merely spins one budget more ([P-spin]).
    let mut seen = 0;
    loop {
        let word = shared.wait_for_job(&mut seen);
        if word & STOP != 0 {
            return;
        }
        let Some(mut id) = shared.register(word, n) else {
            // The job closed before we got in: never read it.
            continue;
        };
        let registration = Registration(shared);
        let mailbox = shared.board.mailbox.with(|slot| {
            // SAFETY: [POOL-MAILBOX] we are registered: our Acquire
            // compare-exchange read the publishing swap's release sequence,
            // so the mailbox write happens-before this read, and the
            // dispatcher neither returns nor writes the mailbox again before
            // our leave. Checked by: tests/loom_pool.rs::job_visible_to_workers,
            // ::late_worker_never_touches_closed_job.
            unsafe { *slot }
        });
        // `None` is unreachable by the protocol (a job is opened only after
        // the mailbox holds it); leaving at once is still correct.
        if let Some(job) = mailbox {
            loop {
                let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
                    // SAFETY: [POOL-CTX] the dispatcher's `execute` keeps the
                    // job's borrows alive and does not return (or unwind)
                    // before we leave; `id` was claimed from the cursor, so
                    // no other thread runs it. Checked by:
                    // tests/loom_pool.rs::caller_outlives_registered_workers,
                    // ::panics_in_two_workers, tests/pool_lifecycle.rs, Miri.
                    unsafe { job.run(id, n) }
                }));
                if let Err(payload) = outcome {
                    shared.record_panic(payload);
                }
                match shared.claim(n) {
                    Some(next) => id = next,
                    None => break,
                }
            }
        }
        // After this the job's closure may be gone: we must not touch `job`
        // again.
        drop(registration);
    }
}

/// Runs every share of `job` on the calling thread, with the same panic
/// contract as a pooled dispatch: all shares run, then the first panic is
/// resumed.
///
/// # Safety
///
/// As `RawPool::execute`.
#[cold]
unsafe fn run_inline(job: Job, n: usize) {
    let mut first_panic = None;
    for id in 0..n {
        // SAFETY: [POOL-CTX] forwarded from this function's contract; ids
        // run one after another, each once.
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| unsafe { job.run(id, n) }));
        if let Err(payload) = outcome {
            keep_first(&mut first_panic, payload);
        }
    }
    if let Some(payload) = first_panic {
        panic::resume_unwind(payload);
    }
}

/// Share `id` of a plain dispatch: calls the `&F` behind `ctx`.
///
/// # Safety
///
/// `ctx` must come from a `&F` that is alive for the whole call.
unsafe fn call_plain<F>(ctx: *const (), _data: *mut (), _len: usize, id: usize, n: usize)
where
    F: Fn(usize, usize) + Sync,
{
    // SAFETY: [POOL-CTX] guaranteed by the caller (see `Job::run`).
    let f = unsafe { &*ctx.cast::<F>() };
    f(id, n);
}

/// Share `id` of a chunked dispatch: calls the `&F` behind `ctx` with
/// chunk `split(len, id, n)` of the `[T]` at `data`, if it is not empty.
///
/// # Safety
///
/// `ctx` must come from a `&F` and `data`/`len` from a `&mut [T]`, both
/// alive for the whole call, and no other live reference may overlap
/// chunk `id` of `n`.
unsafe fn call_chunk<T, F>(ctx: *const (), data: *mut (), len: usize, id: usize, n: usize)
where
    F: Fn(Range<usize>, &mut [T]) + Sync,
{
    let range = split(len, id, n);
    if range.is_empty() {
        return;
    }
    // SAFETY: [POOL-CTX] guaranteed by the caller (see `Job::run`).
    let f = unsafe { &*ctx.cast::<F>() };
    // SAFETY: [DISJOINT-SPLIT] `range` lies in `0..len` of the caller's
    // slice and overlaps no other share's chunk (caller's contract, and
    // `split` tiles `0..len` disjointly). Checked by:
    // tests/prop_split.rs::chunks_touch_each_once, Miri.
    let chunk =
        unsafe { std::slice::from_raw_parts_mut(data.cast::<T>().add(range.start), range.len()) };
    f(range, chunk);
}

/// Releases `busy` on drop.
struct BusyGuard<'a>(&'a AtomicBool);

impl<'a> BusyGuard<'a> {
    #[inline]
    fn try_acquire(flag: &'a AtomicBool) -> Option<Self> {
        // Acquire: synchronises with the previous holder's Release, so its
        // mailbox write and everything it saw of its job's end
        // happen-before ours ([P-busy]).
        flag.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| Self(flag))
    }
}

impl Drop for BusyGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release: see `try_acquire`.
        self.0.store(false, Ordering::Release);
    }
}

/// A `&mut [T]` lent to the shares of one dispatch, each of which takes a
/// disjoint sub-slice (the safe form of a raw "send pointer").
struct DisjointChunks<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: [DISJOINT-SEND] sharing `DisjointChunks` lets other threads obtain
// `&mut` to disjoint parts of the slice, which is moving access to those
// `T`s across threads: sound exactly when `T: Send`, as for `&mut [T]`.
// Checked by: the compile-fail doctest on `ThreadPool::for_each_chunk_mut`.
unsafe impl<T: Send> Sync for DisjointChunks<'_, T> {}

impl<'a, T> DisjointChunks<'a, T> {
    fn new(data: &'a mut [T]) -> Self {
        Self {
            ptr: data.as_mut_ptr(),
            len: data.len(),
            _borrow: PhantomData,
        }
    }

    /// # Safety
    ///
    /// `range` must lie inside `0..self.len`, and no two live slices
    /// obtained from the same `DisjointChunks` may overlap.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice(&self, range: Range<usize>) -> &'a mut [T] {
        debug_assert!(range.start <= range.end && range.end <= self.len);
        // SAFETY: [DISJOINT-CURSOR] the range is in bounds
        // of the original `&'a mut [T]` and not aliased (caller's contract).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(range.start), range.len()) }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    //! Run under Miri by `ci/miri.sh`: these exercise every unsafe block of
    //! the pool with real threads.
    use super::*;

    fn pool(threads: usize, spin: Duration) -> RawPool {
        RawPool::spawn(PoolConfig {
            threads,
            spin,
            stack_size: None,
            name_prefix: "test-pool-".into(),
        })
        .expect("spawn")
    }

    #[test]
    fn every_share_runs_once() {
        let p = pool(3, Duration::from_micros(50));
        for _ in 0..4 {
            let hits: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
            p.dispatch(&|id, n| {
                assert_eq!(n, 3);
                hits[id].fetch_add(1, Ordering::Relaxed);
            });
            for h in &hits {
                assert_eq!(h.load(Ordering::Relaxed), 1);
            }
        }
    }

    #[test]
    fn chunks_written_and_visible() {
        let p = pool(3, Duration::ZERO);
        let mut data = vec![0u32; 10];
        for round in 1..=3u32 {
            p.for_each_chunk_mut(&mut data, &|range, chunk| {
                for (i, x) in range.zip(chunk.iter_mut()) {
                    *x = round * 100 + i as u32;
                }
            });
            for (i, x) in data.iter().enumerate() {
                assert_eq!(*x, round * 100 + i as u32);
            }
        }
        p.for_each_chunk_mut_dynamic(&mut data, 3, &|range, chunk| {
            for (i, x) in range.zip(chunk.iter_mut()) {
                *x += i as u32;
            }
        });
        for (i, x) in data.iter().enumerate() {
            assert_eq!(*x, 300 + 2 * i as u32);
        }
    }

    #[test]
    fn panics_are_forwarded_and_pool_survives() {
        let p = pool(2, Duration::from_micros(10));
        for panicking in [0, 1] {
            let r = panic::catch_unwind(AssertUnwindSafe(|| {
                p.dispatch(&|id, _| {
                    if id == panicking {
                        panic!("share {id}");
                    }
                })
            }));
            let payload = r.expect_err("panic must reach the caller");
            let msg = payload.downcast_ref::<String>().expect("string payload");
            assert_eq!(msg, &format!("share {panicking}"));
        }
        let count = AtomicUsize::new(0);
        p.dispatch(&|_, _| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn nested_dispatch_runs_inline() {
        let p = pool(2, Duration::from_micros(10));
        let count = AtomicUsize::new(0);
        p.dispatch(&|_, _| {
            p.dispatch(&|_, _| {
                count.fetch_add(1, Ordering::Relaxed);
            });
        });
        assert_eq!(count.load(Ordering::Relaxed), 4);
    }

    #[test]
    fn parked_workers_wake() {
        let p = pool(2, Duration::ZERO);
        let count = AtomicUsize::new(0);
        for _ in 0..3 {
            // Give the worker time to park between dispatches.
            std::thread::sleep(Duration::from_millis(2));
            p.dispatch(&|_, _| {
                count.fetch_add(1, Ordering::Relaxed);
            });
        }
        assert_eq!(count.load(Ordering::Relaxed), 6);
    }

    /// The job word after a dispatch is the word before it: nothing in the
    /// protocol counts dispatches, so nothing can wrap, whatever the width
    /// of `usize` ([P-word]).
    #[test]
    fn state_does_not_count_dispatches() {
        for threads in [2, 3] {
            let p = pool(threads, Duration::from_micros(50));
            let closed = closed_word(threads);
            let word = || p.shared.board.word.load(Ordering::Acquire) & !PARKED;
            assert_eq!(word(), closed);
            for _ in 0..100 {
                p.dispatch(&|_, _| {});
                assert_eq!(word(), closed);
            }
        }
    }

    #[test]
    fn word_fields_hold_the_largest_pool() {
        let full = closed_word(MAX_THREADS) + (MAX_THREADS - 1) * ACTIVE_ONE + STOP + PARKED;
        assert_eq!(cursor(full), MAX_THREADS);
        assert_eq!(active(full), MAX_THREADS - 1);
        // One more claim and registration than the largest pool can make.
        let over = full + CURSOR_ONE + ACTIVE_ONE;
        assert_eq!(cursor(over), MAX_THREADS + 1);
        assert_eq!(active(over), MAX_THREADS);
    }

    #[test]
    fn caller_runs_every_share_when_workers_are_parked() {
        // Workers park at once; shares are claimed by whoever runs, so the
        // dispatch completes even if no worker wakes in time.
        let p = pool(3, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(5));
        let hits: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
        p.dispatch(&|id, _| {
            hits[id].fetch_add(1, Ordering::Relaxed);
        });
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
    }
}

/// loom models that need the pool's internals (run by `ci/loom.sh`, which
/// includes `--lib`); the models of the public face are in
/// `tests/loom_pool.rs`.
#[cfg(all(test, feature = "loom"))]
mod loom_models {
    use super::*;

    fn pool(threads: usize, spin: Duration) -> RawPool {
        RawPool::spawn(PoolConfig {
            threads,
            spin,
            stack_size: None,
            name_prefix: "loom-pool-".into(),
        })
        .expect("spawn")
    }

    /// [P-spin]: a worker that sees jobs open (a new epoch), whether or not
    /// it gets a share of them, restarts its spin budget, but still parks
    /// once jobs stop, and a parked worker is woken by the next publish.
    ///
    /// Two tiny jobs (in many executions the caller claims both shares
    /// before the worker looks, so the worker sees only the epoch move);
    /// then the caller waits until the worker has announced its sleep (a
    /// worker that never parks makes this wait endless, which loom reports
    /// as exceeding its branch limit); then a third job, whose publish must
    /// wake it, and the drop, which joins it (a lost wake-up deadlocks).
    #[test]
    fn worker_seeing_jobs_parks_once_they_stop() {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(2);
        }
        builder.check(|| {
            let p = pool(2, Duration::from_micros(1));
            let hits = AtomicUsize::new(0);
            for _ in 0..2 {
                p.dispatch(&|_, _| {
                    hits.fetch_add(1, Ordering::Relaxed);
                });
            }
            // SeqCst: reads the latest word, so the wait ends as soon as the
            // worker's PARKED CAS is done.
            while p.shared.board.word.load(Ordering::SeqCst) & PARKED == 0 {
                thread::yield_now();
            }
            p.dispatch(&|_, _| {
                hits.fetch_add(1, Ordering::Relaxed);
            });
            drop(p);
            assert_eq!(hits.load(Ordering::Relaxed), 6);
        });
    }

    /// [P-spin], [P-stop]: a worker with a spin time parks, then is woken
    /// by the drop alone (no job between): the stop must reach it whether
    /// it is still announcing its sleep, waiting, or spinning again after a
    /// wake-up (a lost wake-up deadlocks the join).
    #[test]
    fn spinning_worker_parked_then_dropped() {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(3);
        }
        builder.check(|| {
            let p = pool(2, Duration::from_micros(1));
            while p.shared.board.word.load(Ordering::SeqCst) & PARKED == 0 {
                thread::yield_now();
            }
            drop(p);
        });
    }

    /// [P-spin]: two workers with a spin time, one job, then the drop at
    /// any point of their spinning, parking or re-spinning after the wake:
    /// every share runs once and both workers join.
    #[test]
    fn two_spinning_workers_one_job_then_drop() {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(2);
        }
        builder.check(|| {
            let p = pool(3, Duration::from_micros(1));
            let hits = AtomicUsize::new(0);
            p.dispatch(&|_, _| {
                hits.fetch_add(1, Ordering::Relaxed);
            });
            drop(p);
            assert_eq!(hits.load(Ordering::Relaxed), 3);
        });
    }
}
