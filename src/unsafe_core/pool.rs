//! The spinning pool's protocol: one mailbox, one generation counter, one
//! done counter, park/unpark, and panic forwarding.
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

/// Runs share `id` of `n` of a type-erased job: `call(ctx, data, len, id,
/// n)`. The function knows the closure's type `F` (and, for chunked jobs,
/// the element type `T`).
type Call = unsafe fn(*const (), *mut (), usize, usize, usize);

/// A type-erased job: the closure `&F` behind `ctx`, and for chunked jobs
/// the slice being split (`data`, `len`). Carrying the slice in the job
/// itself, on the cache line the workers already fetch to see the
/// generation, saves each worker a dependent miss on the caller's stack.
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

/// What the workers find when the generation moves.
#[derive(Clone, Copy)]
enum Mailbox {
    /// Nothing posted (between dispatches: no pointer outlives its job).
    Empty,
    /// Run `job` with your id.
    Run(Job),
    /// Exit the worker loop.
    Stop,
}

/// Low bit of `state`: a worker is (about to be) parked on the current
/// generation and the next publish must wake it. See [P-park].
const PARKED: usize = 1;
/// The generation lives in the bits above [`PARKED`].
const GEN_SHIFT: u32 = 1;

/// What the dispatcher writes once per job and every spinning worker reads:
/// one cache line, so a worker that sees the new generation gets the job
/// with the same line transfer ([P-layout]).
struct Board {
    /// `generation << 1 | PARKED`.
    state: AtomicUsize,
    /// The job of the current generation ([P-publish]).
    mailbox: UnsafeCell<Mailbox>,
}

/// What every worker writes once per job and the dispatcher reads.
struct Tally {
    /// Jobs finished by workers, summed over all generations: after
    /// generation `g` the dispatcher waits for `g * workers` ([P-done]).
    done: AtomicUsize,
    /// Set when a worker stored a panic payload during the current job.
    panicked: AtomicBool,
}

/// State shared by the dispatcher and every worker.
///
/// The board is written by the dispatcher and read in a loop by every
/// spinning worker; the tally is written by every worker and read in a
/// loop by the dispatcher. Each sits alone on its cache line so the two
/// traffic patterns do not collide (false sharing, [P-layout]).
struct Shared {
    board: CachePadded<Board>,
    tally: CachePadded<Tally>,
    /// Held by the one thread currently dispatching ([P-busy]).
    busy: CachePadded<AtomicBool>,
    /// The first panic payload caught on a worker during the current job.
    panic: Mutex<Option<Box<dyn Any + Send + 'static>>>,
    /// Guards the park/wake handshake ([P-park]).
    sleep: Mutex<()>,
    wake: Condvar,
    /// Shares per job: workers plus the dispatching thread.
    threads: usize,
    /// How long a worker spins after its last job before parking.
    spin: Duration,
}

// SAFETY: [POOL-SHARED] `Shared` is `!Sync` only because of `mailbox` (an
// `UnsafeCell` holding a raw pointer). The mailbox is written only by the
// thread holding `busy` (or by `Drop`, which has `&mut`), and only while no
// worker reads it: before the Release swap of `state` that publishes a job,
// and after the Acquire load of `done` that sees every worker finished.
// Workers read it only after an Acquire load observed the new generation.
// The pointer inside is dereferenced only through `call::<F>` while the
// dispatcher keeps `F` alive ([POOL-CTX]). Checked by: tests/loom_pool.rs
// (every model; loom flags any unsynchronised mailbox access) and Miri over
// `unsafe_core::pool::tests`.
unsafe impl Sync for Shared {}
// SAFETY: [POOL-SHARED] as above: the only non-`Send` field is the mailbox's
// raw pointer, whose accesses are ordered by the protocol wherever the
// `Shared` lives. Checked by: tests/loom_pool.rs.
unsafe impl Send for Shared {}

/// Spawning or sizing a pool failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PoolError {
    /// A pool needs at least one thread (the caller).
    #[error("a thread pool needs at least 1 thread, got 0")]
    ZeroThreads,
    /// The OS refused to start a worker thread; the workers already started
    /// were stopped and joined.
    #[error("failed to spawn pool worker {index} of {threads}: {source}")]
    Spawn {
        /// Share id of the worker that could not be started.
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
    /// Spawns `config.threads - 1` workers; the caller of `dispatch` is
    /// share 0.
    pub(crate) fn spawn(config: PoolConfig) -> Result<Self, PoolError> {
        if config.threads == 0 {
            return Err(PoolError::ZeroThreads);
        }
        let shared = Arc::new(Shared {
            board: CachePadded::new(Board {
                state: AtomicUsize::new(0),
                mailbox: UnsafeCell::new(Mailbox::Empty),
            }),
            tally: CachePadded::new(Tally {
                done: AtomicUsize::new(0),
                panicked: AtomicBool::new(false),
            }),
            busy: CachePadded::new(AtomicBool::new(false)),
            panic: Mutex::new(None),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
            threads: config.threads,
            spin: config.spin,
        });
        let mut pool = RawPool {
            shared,
            workers: Vec::with_capacity(config.threads - 1),
        };
        for id in 1..config.threads {
            let shared = Arc::clone(&pool.shared);
            let mut builder = thread::Builder::new().name(format!("{}{id}", config.name_prefix));
            if let Some(size) = config.stack_size {
                builder = builder.stack_size(size);
            }
            match builder.spawn(move || worker_main(&shared, id)) {
                Ok(handle) => pool.workers.push(handle),
                // Dropping `pool` stops and joins the workers started so far.
                Err(source) => {
                    return Err(PoolError::Spawn {
                        index: id,
                        threads: config.threads,
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
    /// When another dispatch holds the pool (a second thread, or a job
    /// dispatching from inside itself), every share runs inline on the
    /// calling thread instead ([P-busy]).
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
        // call. Checked by: tests/loom_pool.rs::panic_in_share, Miri.
        unsafe { self.execute(job) }
    }

    /// Splits `data` into `self.threads()` contiguous chunks with
    /// [`split`] and runs `f(range, chunk)` on each non-empty one from its
    /// own share.
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
        // runs each share id once, so the chunks `call_chunk` makes from
        // `split` never overlap. `T: Send` because chunks go to workers.
        // Checked by: tests/prop_split.rs::chunks_touch_each_once,
        // tests/loom_pool.rs::chunk_writes_visible, Miri.
        unsafe { self.execute(job) }
    }

    /// Runs every share of `job` (share 0 on this thread) and returns when
    /// all have finished, resuming the first panic of any share.
    ///
    /// # Safety
    ///
    /// The borrows `job` was built from outlive this call, and running each
    /// share id of `0..threads` once is sound for it (`Job::run`).
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
            // writes the mailbox, and every worker finished reading the
            // previous job before its Release increment of `done`, which our
            // predecessor (or we) observed with Acquire before releasing
            // `busy`; our Acquire of `busy` makes that chain ours. Checked by:
            // tests/loom_pool.rs::repeated_generations, ::busy_two_dispatchers.
            unsafe { *slot = Mailbox::Run(job) }
        });
        let generation = self.shared.publish();

        // SAFETY: [POOL-CTX] this function's contract.
        let mine = panic::catch_unwind(AssertUnwindSafe(|| unsafe { job.run(0, n) }));
        // Whatever share 0 did, the job's borrows must outlive every
        // worker's use of them: wait for all of them before anything can
        // unwind past this frame.
        self.shared.wait_done(generation.wrapping_mul(n - 1));
        self.shared.board.mailbox.with_mut(|slot| {
            // SAFETY: [POOL-MAILBOX] every worker finished this job (Acquire
            // on `done` in `wait_done`) and none reads the mailbox again
            // before the next publish, which only a `busy` holder makes.
            // Checked by: tests/loom_pool.rs::repeated_generations.
            unsafe { *slot = Mailbox::Empty }
        });
        let theirs = self.shared.take_panic();
        drop(busy);
        if let Err(payload) = mine {
            panic::resume_unwind(payload);
        }
        if let Some(payload) = theirs {
            panic::resume_unwind(payload);
        }
    }

    /// Hands out `chunk`-sized ranges of `data` from a shared atomic cursor,
    /// so fast threads take more chunks than slow ones; runs `f(range,
    /// chunk)` on each.
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
            // written is published by `done` ([P-done]).
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
        self.shared.board.mailbox.with_mut(|slot| {
            // SAFETY: [POOL-MAILBOX] `&mut self`: no dispatch is in flight
            // (each one waits for every worker before returning), so no
            // worker is reading the mailbox. Checked by:
            // tests/loom_pool.rs::shutdown.
            unsafe { *slot = Mailbox::Stop }
        });
        self.shared.publish();
        for worker in self.workers.drain(..) {
            // Workers catch every job panic, so a join error cannot carry
            // one of ours; there is nothing useful to do with it in drop.
            let _ = worker.join();
        }
    }
}

impl Shared {
    /// Moves the generation on, publishing the mailbox, and wakes parked
    /// workers if there are any ([P-publish], [P-park]). Returns the new
    /// generation.
    #[inline]
    fn publish(&self) -> usize {
        // Relaxed: only `busy` holders (or `Drop`) change the generation
        // bits, and we synchronised with the previous one through `busy`.
        let generation = (self.board.state.load(Ordering::Relaxed) >> GEN_SHIFT).wrapping_add(1);
        let next = generation << GEN_SHIFT;
        // Release: the mailbox write above happens-before any worker's
        // Acquire load that sees `next` ([P-publish]). A swap, not a store:
        // it reads the latest `PARKED` bit in `state`'s modification order,
        // which is what makes the park handshake lose no wake-up ([P-park]).
        let previous = self.board.state.swap(next, Ordering::Release);
        if previous & PARKED != 0 {
            self.wake_parked();
        }
        // The generation keeps `usize::BITS - 1` bits, so it wraps after
        // 2^63 jobs on 64-bit targets, centuries at any dispatch rate.
        next >> GEN_SHIFT
    }

    #[cold]
    fn wake_parked(&self) {
        // Taking the lock waits out any worker between its PARKED CAS and
        // its `wait`, so the notification cannot fall in that gap.
        let _guard = self.sleep.lock().unwrap_or_else(PoisonError::into_inner);
        self.wake.notify_all();
    }

    /// Waits until the done tally reaches `target`: spins, then spins and
    /// yields ([`Backoff`]), never parks.
    #[inline]
    fn wait_done(&self, target: usize) {
        let mut backoff = Backoff::new(Duration::MAX);
        // Acquire: pairs with each worker's Release increment, so their
        // writes (the job's output) are visible once we see `target`
        // ([P-done]).
        while self.tally.done.load(Ordering::Acquire) != target {
            match backoff.step() {
                Step::Spin | Step::Park => sync::spin_loop(),
                Step::Yield => sync::yield_now(),
            }
        }
    }

    /// Returns the first generation different from `seen`: spins, then
    /// spins and yields, and parks once the configured spin time is spent
    /// ([P-park]).
    #[inline]
    fn wait_for_job(&self, seen: usize) -> usize {
        let mut backoff = Backoff::new(self.spin);
        loop {
            // Acquire: pairs with the Release swap in `publish`, making the
            // mailbox write visible ([P-publish]).
            let generation = self.board.state.load(Ordering::Acquire) >> GEN_SHIFT;
            if generation != seen {
                return generation;
            }
            match backoff.step() {
                Step::Spin => sync::spin_loop(),
                Step::Yield => sync::yield_now(),
                Step::Park => return self.park(seen),
            }
        }
    }

    /// Sleeps until the generation moves past `seen` ([P-park]).
    #[cold]
    fn park(&self, seen: usize) -> usize {
        let mut guard = self.sleep.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            // Acquire: as in `wait_for_job`.
            let state = self.board.state.load(Ordering::Acquire);
            let generation = state >> GEN_SHIFT;
            if generation != seen {
                return generation;
            }
            if state & PARKED == 0 {
                // Announce the sleep only if the generation is still
                // `seen`: a publish in between makes the CAS fail and we
                // re-read. Relaxed: the bit carries no data; the job is
                // synchronised by the Acquire load above once we wake.
                if self
                    .board
                    .state
                    .compare_exchange(state, state | PARKED, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
            }
            guard = self
                .wake
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    #[cold]
    fn record_panic(&self, payload: Box<dyn Any + Send + 'static>) {
        let mut slot = self.panic.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(payload);
        }
        // Relaxed: published by the worker's Release `done` increment that
        // follows ([P-panic]).
        self.tally.panicked.store(true, Ordering::Relaxed);
    }

    /// The panic a worker caught during the job that just finished, if any.
    /// Only the dispatcher calls this, after `wait_done`.
    #[inline]
    fn take_panic(&self) -> Option<Box<dyn Any + Send + 'static>> {
        // Relaxed: `wait_done`'s Acquire already ordered every worker's
        // store before this load ([P-panic]).
        if !self.tally.panicked.load(Ordering::Relaxed) {
            return None;
        }
        self.tally.panicked.store(false, Ordering::Relaxed);
        self.panic
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// A worker's life: wait for a generation, run its share, count itself
/// done, repeat until the mailbox says stop.
fn worker_main(shared: &Shared, id: usize) {
    let mut seen = 0;
    loop {
        seen = shared.wait_for_job(seen);
        let mailbox = shared.board.mailbox.with(|slot| {
            // SAFETY: [POOL-MAILBOX] we observed the new generation with
            // Acquire, which synchronises with the Release publish that
            // followed the mailbox write, and the dispatcher does not write
            // it again before we increment `done`. Checked by:
            // tests/loom_pool.rs::job_visible_to_workers.
            unsafe { *slot }
        });
        let job = match mailbox {
            Mailbox::Run(job) => job,
            Mailbox::Stop => return,
            // Unreachable by the protocol (a generation is only published
            // with `Run` or `Stop` in the mailbox); count ourselves done so
            // a dispatcher could never hang on it.
            Mailbox::Empty => {
                shared.tally.done.fetch_add(1, Ordering::Release);
                continue;
            }
        };
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: [POOL-CTX] the dispatcher's `execute` keeps the job's
            // borrows alive and does not return (or unwind) before our
            // `done` increment below; each worker runs only its own id.
            // Checked by: tests/loom_pool.rs::panic_in_share,
            // tests/pool_lifecycle.rs, Miri.
            unsafe { job.run(id, shared.threads) }
        }));
        if let Err(payload) = outcome {
            shared.record_panic(payload);
        }
        // Release: our share's writes happen-before the dispatcher's Acquire
        // that sees the count ([P-done]). After this increment the job's
        // closure may be gone: we must not touch `job` again.
        shared.tally.done.fetch_add(1, Ordering::Release);
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
            first_panic.get_or_insert(payload);
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
        // mailbox writes and its view of `done` happen-before ours
        // ([P-busy]).
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
}
