//! loom models of the pool protocol (`src/unsafe_core/PROTOCOL.md`).
//!
//! Run with `cargo test --features loom` (the whole suite under loom, as CI
//! runs it), or the models alone, faster in release: `cargo test --features
//! loom --release --test loom_pool`.
//!
//! Under the `loom` feature the pool's atomics, mailbox cell, locks and
//! threads are loom's, so each model below explores the interleavings (up
//! to a preemption bound) of the real pool code. loom fails a model on a
//! data race on the mailbox cell, on a deadlock (every thread blocked: a
//! lost wake-up), on a leaked thread, and on any failed assert. Every model
//! ends with a conservation assert: each share ran exactly once.
//!
//! Shares are claimed, not assigned ([P-claim]): whoever runs takes the
//! next unclaimed id. The models with three threads (two workers) check the
//! claim protocol itself; a few record, in plain std atomics outside the
//! model, facts that must hold in at least one explored execution (the
//! caller ran every share alone; a worker skipped a job and ran in the
//! next), which is how a model shows the dispatch does not wait for a
//! worker that never came.
//!
//! Output cells are loom atomics written with `Relaxed` ordering by the
//! shares and read with `Relaxed` ordering by the caller after the
//! dispatch: loom lets a relaxed load return any value the happens-before
//! relation does not rule out, so a missing Release/Acquire edge (a
//! worker's leave, the caller's wait) shows up as a stale 0.
#![cfg(feature = "loom")]

use std::time::Duration;

use inferno_cpu::ThreadPool;
use loom::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use loom::sync::Arc;
use loom::thread::ThreadId;

#[path = "support/watchdog.rs"]
mod watchdog;
use watchdog::{quiet_panics, EXPECTED};

/// Spin time that lets workers spin a couple of rounds before parking.
const SPIN: Duration = Duration::from_micros(1);

fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(3, f);
}

/// Runs `f` under loom with at most `bound` preemptions per execution
/// (`LOOM_MAX_PREEMPTIONS` overrides it). Every protocol bug found while
/// building these models (see PROTOCOL.md, "Mutations the models catch")
/// needs at most two preemptions; the bound keeps the state space small.
fn model_bounded(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(bound);
    }
    builder.check(f);
}

fn pool(threads: usize, spin: Duration) -> ThreadPool {
    ThreadPool::builder()
        .threads(threads)
        .spin_time(spin)
        .build()
        .expect("loom pool")
}

fn counters(n: usize) -> Vec<AtomicUsize> {
    (0..n).map(|_| AtomicUsize::new(0)).collect()
}

fn assert_all(cells: &[AtomicUsize], expected: usize) {
    for (i, c) in cells.iter().enumerate() {
        assert_eq!(c.load(Relaxed), expected, "cell {i}");
    }
}

/// The job written to the mailbox before the job is published is what the
/// worker runs (loom's cell tracking rejects a racy mailbox read), and each
/// share runs once.
#[test]
fn job_visible_to_workers() {
    model(|| {
        let pool = pool(2, SPIN);
        let hits = counters(2);
        pool.dispatch(|id, n| {
            assert_eq!(n, 2);
            hits[id].fetch_add(1, Relaxed);
        });
        assert_all(&hits, 1);
    });
}

/// Everything the workers write during a job is visible to the caller when
/// `dispatch` returns (each worker's Release leave, the caller's Acquire
/// wait for the registered count to drop to zero).
#[test]
fn chunk_writes_visible() {
    // Three threads (two workers): a smaller bound keeps this one fast.
    model_bounded(2, || {
        let pool = pool(3, SPIN);
        let mut out = counters(4);
        pool.for_each_chunk_mut(&mut out, |range, chunk| {
            assert_eq!(range.len(), chunk.len());
            for cell in chunk {
                cell.fetch_add(1, Relaxed);
            }
        });
        assert_all(&out, 1);
    });
}

/// Two generations back to back: the second job is not confused with the
/// first, the mailbox rewrite does not race with a slow worker's read, and
/// a worker that loaded the first job's word and registers in the second
/// (the ABA case of [P-claim]) reads the second job: this model fails when
/// the registration's Acquire is weakened.
#[test]
fn repeated_generations() {
    model(|| {
        let pool = pool(2, SPIN);
        let hits = counters(2);
        for round in 1..=2 {
            pool.dispatch(|id, _| {
                hits[id].fetch_add(1, Relaxed);
            });
            assert_all(&hits, round);
        }
    });
}

/// A pool that never ran a job, and one that did, both stop and join their
/// workers on drop (loom fails the model if a thread is left running or
/// blocked forever).
#[test]
fn shutdown() {
    model(|| {
        drop(pool(3, SPIN));
        let pool = pool(2, Duration::ZERO);
        let hits = counters(2);
        pool.dispatch(|id, _| {
            hits[id].fetch_add(1, Relaxed);
        });
        drop(pool);
        assert_all(&hits, 1);
    });
}

/// Workers park at once (zero spin time). A dispatch no longer waits for a
/// worker that did not come, so a lost wake-up does not stall the job: it
/// leaves the worker asleep through the drop, whose join loom then reports
/// as a deadlock.
#[test]
fn park_unpark_no_lost_wakeup() {
    model(|| {
        let pool = pool(2, Duration::ZERO);
        let hits = counters(2);
        for round in 1..=2 {
            pool.dispatch(|id, _| {
                hits[id].fetch_add(1, Relaxed);
            });
            assert_all(&hits, round);
        }
    });
}

/// A panic in a worker's share and one in the caller's share both reach
/// the caller after every share finished, and the pool keeps working.
#[test]
fn panic_in_share() {
    // Keep the planned panics off the test output, and only those: loom's
    // own report of a failed model stays visible.
    let _hidden = quiet_panics();
    model(|| {
        let pool = pool(2, SPIN);
        let hits = counters(2);
        for panicking in [1, 0] {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.dispatch(|id, _| {
                    hits[id].fetch_add(1, Relaxed);
                    if id == panicking {
                        panic!("{EXPECTED}: share {id}");
                    }
                })
            }));
            assert!(result.is_err(), "panic of share {panicking} was lost");
        }
        assert_all(&hits, 2);
        pool.dispatch(|id, _| {
            hits[id].fetch_add(1, Relaxed);
        });
        assert_all(&hits, 3);
    });
}

/// Two threads dispatch on one pool at once. One takes the workers, the
/// other finds the pool busy and runs its shares inline; the mailbox never
/// sees two writers, and each dispatch runs each of its shares once.
#[test]
fn busy_two_dispatchers() {
    model(|| {
        let pool = Arc::new(pool(2, SPIN));
        let a = Arc::new(counters(2));
        let b = Arc::new(counters(2));
        let other = {
            let (pool, b) = (Arc::clone(&pool), Arc::clone(&b));
            loom::thread::spawn(move || {
                pool.dispatch(|id, _| {
                    b[id].fetch_add(1, Relaxed);
                });
            })
        };
        pool.dispatch(|id, _| {
            a[id].fetch_add(1, Relaxed);
        });
        other.join().unwrap();
        assert_all(&a, 1);
        assert_all(&b, 1);
    });
}

/// A job that dispatches on its own pool runs the inner shares inline
/// instead of deadlocking on the busy pool.
#[test]
fn nested_dispatch_inline() {
    model(|| {
        let pool = pool(2, SPIN);
        let inner = counters(2);
        pool.dispatch(|_, _| {
            pool.dispatch(|id, _| {
                inner[id].fetch_add(1, Relaxed);
            });
        });
        // Each of the 2 outer shares ran the 2 inner shares once.
        assert_all(&inner, 2);
    });
}

/// What a share writes into `alive` while the job is live, and what the
/// caller stores once `dispatch` returned (the closure is gone).
const LIVE: usize = 1;
const DEAD: usize = 2;

/// The thread running the current share.
fn me() -> ThreadId {
    loom::thread::current().id()
}

/// One loom "thread id" cell per share: which thread ran it.
struct Runners(Vec<loom::sync::Mutex<Option<ThreadId>>>);

impl Runners {
    fn new(n: usize) -> Self {
        Self((0..n).map(|_| loom::sync::Mutex::new(None)).collect())
    }
    fn record(&self, id: usize) {
        let previous = self.0[id].lock().unwrap().replace(me());
        assert!(previous.is_none(), "share {id} ran twice");
    }
    fn get(&self) -> Vec<ThreadId> {
        self.0
            .iter()
            .enumerate()
            .map(|(id, r)| {
                r.lock()
                    .unwrap()
                    .unwrap_or_else(|| panic!("share {id} never ran"))
            })
            .collect()
    }
}

/// Two workers: each share id is claimed by exactly one of the three
/// threads, and its writes reach the caller.
#[test]
fn each_share_once_two_workers() {
    model_bounded(2, || {
        let pool = pool(3, SPIN);
        let hits = counters(3);
        pool.dispatch(|id, n| {
            assert_eq!(n, 3);
            hits[id].fetch_add(1, Relaxed);
        });
        assert_all(&hits, 1);
    });
}

/// The caller does not return while a registered worker may still run a
/// share: every share sees the job live at its start and at its end, and
/// the caller marks it dead only after `dispatch` returned. A share that
/// could run after the return would be able to read `DEAD` (loom lets a
/// relaxed load return any store not ordered after it).
#[test]
fn caller_outlives_registered_workers() {
    model_bounded(2, || {
        let pool = pool(3, SPIN);
        let alive = AtomicUsize::new(LIVE);
        let hits = counters(3);
        pool.dispatch(|id, _| {
            assert_eq!(
                alive.load(Relaxed),
                LIVE,
                "share {id} started on a dead job"
            );
            hits[id].fetch_add(1, Relaxed);
            assert_eq!(
                alive.load(Relaxed),
                LIVE,
                "share {id} outlived the dispatch"
            );
        });
        alive.store(DEAD, Relaxed);
        assert_all(&hits, 1);
    });
}

/// Facts that must hold in at least one execution of a model.
static CALLER_ALONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static SKIPPED_THEN_RAN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Two jobs back to back on three threads. A worker that saw the first job
/// open only after it closed must not read its mailbox or run its closure:
/// loom's cell tracking reports a mailbox read that races with the second
/// job's write, and a share of a dead job trips the `alive` check.
///
/// Also: in some execution the caller runs every share of a job alone (the
/// dispatch does not wait for workers that never came), and in some
/// execution a worker that ran nothing of the first job runs a share of the
/// second (skipping a job does not take a worker out of the pool).
#[test]
fn late_worker_never_touches_closed_job() {
    CALLER_ALONE.store(false, std::sync::atomic::Ordering::Relaxed);
    SKIPPED_THEN_RAN.store(false, std::sync::atomic::Ordering::Relaxed);
    // One preemption already explores both facts below; two take minutes.
    model_bounded(1, || {
        let pool = pool(3, SPIN);
        let caller = me();
        let mut ran: Vec<Vec<ThreadId>> = Vec::new();
        for _ in 0..2 {
            let alive = AtomicUsize::new(LIVE);
            let runners = Runners::new(3);
            pool.dispatch(|id, _| {
                assert_eq!(alive.load(Relaxed), LIVE, "share {id} of a closed job ran");
                runners.record(id);
            });
            alive.store(DEAD, Relaxed);
            ran.push(runners.get());
        }
        if ran.iter().any(|job| job.iter().all(|&t| t == caller)) {
            CALLER_ALONE.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let skipped_then_ran = ran[1].iter().any(|&t| t != caller && !ran[0].contains(&t));
        if skipped_then_ran {
            SKIPPED_THEN_RAN.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    assert!(
        CALLER_ALONE.load(std::sync::atomic::Ordering::Relaxed),
        "no execution let the caller finish a job without the workers"
    );
    assert!(
        SKIPPED_THEN_RAN.load(std::sync::atomic::Ordering::Relaxed),
        "no execution had a worker skip a job and run in the next"
    );
}

/// Repeated jobs on three threads with one worker that skips some of them:
/// three dispatches, in which the workers come and go as loom schedules
/// them; each share of each job runs exactly once, and the state left by
/// a job a worker skipped does not confuse the next.
#[test]
fn repeated_generations_worker_skips() {
    model_bounded(1, || {
        let pool = pool(3, SPIN);
        let hits = counters(3);
        for round in 1..=3 {
            pool.dispatch(|id, _| {
                hits[id].fetch_add(1, Relaxed);
            });
            assert_all(&hits, round);
        }
    });
}

/// Two workers that park at once (zero spin time): two dispatches, then
/// the drop. A wake-up lost on the way leaves a worker asleep; the drop's
/// join then blocks forever, which loom reports as a deadlock.
#[test]
fn park_unpark_two_workers() {
    model_bounded(2, || {
        let pool = pool(3, Duration::ZERO);
        let hits = counters(3);
        for round in 1..=2 {
            pool.dispatch(|id, _| {
                hits[id].fetch_add(1, Relaxed);
            });
            assert_all(&hits, round);
        }
        drop(pool);
    });
}

/// A panic payload whose `Drop` panics too.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("{EXPECTED}: payload drop");
    }
}

static TWO_WORKERS_PANICKED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Shares 1 and 2 panic with a payload whose `Drop` panics, so in some
/// executions two workers panic in one job. The caller gets one payload,
/// every share ran once, and no worker dies (a dead worker would fail the
/// model).
#[test]
fn panics_in_two_workers() {
    let _hidden = quiet_panics();
    TWO_WORKERS_PANICKED.store(false, std::sync::atomic::Ordering::Relaxed);
    model_bounded(2, || {
        let pool = pool(3, SPIN);
        let caller = me();
        let hits = counters(3);
        let runners = Runners::new(3);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.dispatch(|id, _| {
                hits[id].fetch_add(1, Relaxed);
                runners.record(id);
                if id != 0 {
                    std::panic::panic_any(Bomb);
                }
            })
        }));
        let payload = result.expect_err("the panics were lost");
        assert!(payload.is::<Bomb>());
        std::mem::forget(payload);
        assert_all(&hits, 1);
        let ran = runners.get();
        if ran[1] != caller && ran[2] != caller && ran[1] != ran[2] {
            TWO_WORKERS_PANICKED.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        // Both workers are still there: the drop joins them (a worker
        // killed by an escaping panic fails the model when its loom thread
        // panics). That the pool keeps working after panics is
        // `panic_in_share`'s job, with one worker, where loom is fast.
        drop(pool);
    });
    assert!(
        TWO_WORKERS_PANICKED.load(std::sync::atomic::Ordering::Relaxed),
        "no execution had both panicking shares on workers"
    );
}
