//! loom models of the pool protocol (`src/unsafe_core/PROTOCOL.md`).
//!
//! Run with `cargo test --features loom --release --test loom_pool`.
//!
//! Under the `loom` feature the pool's atomics, mailbox cell, locks and
//! threads are loom's, so each model below explores the interleavings (up
//! to a preemption bound) of the real pool code. loom fails a model on a
//! data race on the mailbox cell, on a deadlock (every thread blocked: a
//! lost wake-up), on a leaked thread, and on any failed assert. Every model
//! ends with a conservation assert: each share ran exactly once.
//!
//! Output cells are loom atomics written with `Relaxed` ordering by the
//! shares and read with `Relaxed` ordering by the caller after the
//! dispatch: loom lets a relaxed load return any value the happens-before
//! relation does not rule out, so a missing Release/Acquire edge on `done`
//! shows up as a stale 0.
#![cfg(feature = "loom")]

use std::time::Duration;

use inferno_cpu::ThreadPool;
use loom::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use loom::sync::Arc;

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

/// The job written to the mailbox before the generation moves is what the
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
/// `dispatch` returns (Release increment of `done`, Acquire wait).
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
/// the `done` reset does not lose a count.
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

/// Workers park at once (zero spin time). Every dispatch must wake them: a
/// lost wake-up leaves the caller waiting on `done` and the worker asleep,
/// which loom reports as a deadlock.
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
    // Keep expected panics off the test output.
    std::panic::set_hook(Box::new(|_| {}));
    model(|| {
        let pool = pool(2, SPIN);
        let hits = counters(2);
        for panicking in [1, 0] {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.dispatch(|id, _| {
                    hits[id].fetch_add(1, Relaxed);
                    if id == panicking {
                        panic!("share {id}");
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
    let _ = std::panic::take_hook();
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
