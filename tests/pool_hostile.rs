//! Hostile use of the pool: panics in odd places (payloads whose `Drop`
//! panics or dispatches), hostile sizes, late and parked workers, drop
//! races, concurrent and nested dispatch. Every dispatch runs under a
//! watchdog, so a hang fails the test instead of hanging the binary.
#![cfg(not(feature = "loom"))]

use std::panic::{catch_unwind, panic_any, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use inferno_cpu::{split, PoolError, ThreadPool, MAX_THREADS};

#[path = "support/watchdog.rs"]
mod watchdog;
use watchdog::{quiet_panics, within, EXPECTED};

fn pool(n: usize, spin: Duration) -> ThreadPool {
    ThreadPool::builder()
        .threads(n)
        .spin_time(spin)
        .build()
        .unwrap()
}

struct Bomb(&'static AtomicUsize);
impl Drop for Bomb {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        panic_any(Bomb2);
    }
}
struct Bomb2;
impl Drop for Bomb2 {
    fn drop(&mut self) {
        panic!("{EXPECTED}: bomb2 drop");
    }
}

/// Every share panics with a bomb on every thread count and spin time,
/// including share 0 on the caller. Exactly one payload reaches the caller;
/// every share ran once; the pool still works.
#[test]
fn all_shares_bomb_every_size() {
    let _hidden = quiet_panics();
    within(Duration::from_secs(60), "all_shares_bomb", || {
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        for n in [1, 2, 3, 5, 8] {
            for spin in [
                Duration::ZERO,
                Duration::from_micros(50),
                Duration::from_millis(5),
            ] {
                let p = pool(n, spin);
                for _ in 0..50 {
                    let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                    let before = DROPS.load(SeqCst);
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        p.dispatch(|id, _| {
                            hits[id].fetch_add(1, Relaxed);
                            panic_any(Bomb(&DROPS));
                        })
                    }));
                    let payload = r.expect_err("panic lost");
                    assert!(payload.is::<Bomb>());
                    // all surplus payloads (n - 1) were dropped inside the pool
                    assert_eq!(DROPS.load(SeqCst) - before, n - 1, "n={n}");
                    std::mem::forget(payload);
                    for (i, h) in hits.iter().enumerate() {
                        assert_eq!(h.load(Relaxed), 1, "n={n} share {i}");
                    }
                }
                let c = AtomicUsize::new(0);
                p.dispatch(|_, _| {
                    c.fetch_add(1, Relaxed);
                });
                assert_eq!(c.load(Relaxed), n);
            }
        }
    });
}

/// The caller's own share-0 panic is the one resumed, even if workers
/// panicked too; a plain worker panic is resumed when share 0 is fine.
#[test]
fn share0_panic_wins() {
    let _hidden = quiet_panics();
    within(Duration::from_secs(30), "share0_panic_wins", || {
        let p = pool(4, Duration::from_millis(2));
        for _ in 0..200 {
            let r = catch_unwind(AssertUnwindSafe(|| {
                p.dispatch(|id, _| panic_any(id));
            }));
            // Share 0 may have run on the caller; the caller's *own* first
            // payload is resumed. The caller always runs share 0 first.
            assert_eq!(*r.unwrap_err().downcast::<usize>().unwrap(), 0);
        }
    });
}

/// A payload whose Drop dispatches on the same pool (re-entrancy from
/// `drop_payload` on a worker, on the caller while busy is held, and on the
/// caller after busy is released).
#[test]
fn payload_drop_dispatches_on_pool() {
    let _hidden = quiet_panics();
    within(Duration::from_secs(60), "payload_drop_dispatch", || {
        let p: &'static ThreadPool = Box::leak(Box::new(pool(3, Duration::from_millis(1))));
        static INNER: AtomicUsize = AtomicUsize::new(0);
        struct Redispatch(&'static ThreadPool);
        impl Drop for Redispatch {
            fn drop(&mut self) {
                self.0.dispatch(|_, _| {
                    INNER.fetch_add(1, SeqCst);
                });
                panic!("{EXPECTED}: and then panic in drop");
            }
        }
        for _ in 0..200 {
            let before = INNER.load(SeqCst);
            let r = catch_unwind(AssertUnwindSafe(|| {
                p.dispatch(|_, _| panic_any(Redispatch(p)));
            }));
            let payload = r.unwrap_err();
            assert!(payload.is::<Redispatch>());
            // surplus payloads: 2, each dispatching 3 shares
            assert_eq!(INNER.load(SeqCst) - before, 6);
            std::mem::forget(payload);
        }
    });
}

/// for_each_chunk_mut_dynamic with panics: the panic is forwarded, the pool
/// survives, and every chunk other than the panicking ones is processed
/// exactly once (no chunk is handed out twice).
#[test]
fn dynamic_with_panics() {
    let _hidden = quiet_panics();
    within(Duration::from_secs(60), "dynamic_with_panics", || {
        for n in [1, 2, 3, 4] {
            let p = pool(n, Duration::from_micros(100));
            for len in [0usize, 1, 2, 7, 64, 1000] {
                for chunk in [0usize, 1, 3, 64, usize::MAX] {
                    let mut data = vec![0u8; len];
                    let bad = AtomicUsize::new(0);
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        p.for_each_chunk_mut_dynamic(&mut data, chunk, |range, part| {
                            assert!(range.len() <= chunk.max(1));
                            assert_eq!(range.len(), part.len());
                            for x in part.iter_mut() {
                                *x += 1;
                            }
                            if range.start % 3 == 1 {
                                bad.fetch_add(1, Relaxed);
                                panic!("{EXPECTED}: dyn");
                            }
                        })
                    }));
                    assert_eq!(r.is_err(), bad.load(Relaxed) > 0);
                    assert!(data.iter().all(|&x| x <= 1), "chunk handed out twice");
                }
            }
        }
    });
}

/// ZST slices of length usize::MAX, huge chunk sizes, static split too.
#[test]
fn zst_max_len() {
    within(Duration::from_secs(30), "zst_max_len", || {
        let p = pool(3, Duration::from_micros(100));
        let mut data = vec![(); usize::MAX];
        let total = AtomicUsize::new(0);
        p.for_each_chunk_mut(&mut data, |range, part| {
            assert_eq!(range.len(), part.len());
            total.fetch_add(range.len(), Relaxed);
        });
        assert_eq!(total.load(Relaxed), usize::MAX);
        for chunk in [usize::MAX, usize::MAX / 2, usize::MAX / 5 + 1] {
            let total = AtomicUsize::new(0);
            p.for_each_chunk_mut_dynamic(&mut data, chunk, |range, part| {
                assert_eq!(range.len(), part.len());
                total.fetch_add(range.len(), Relaxed);
            });
            assert_eq!(total.load(Relaxed), usize::MAX, "chunk {chunk}");
        }
    });
}

#[test]
fn builder_limits() {
    for t in [0usize, MAX_THREADS + 1, usize::MAX, usize::MAX / 2] {
        let r = ThreadPool::builder()
            .threads(t)
            .thread_name_prefix("x")
            .build();
        match (t, r) {
            (0, Err(PoolError::ZeroThreads)) => {}
            (_, Err(PoolError::TooManyThreads { requested, .. })) => assert_eq!(requested, t),
            (_, other) => panic!("{t}: {other:?}"),
        }
    }
    // Invalid name and too many threads at once: some typed error, no panic.
    assert!(ThreadPool::builder()
        .threads(usize::MAX)
        .thread_name_prefix("\0")
        .build()
        .is_err());
    // NUL at the very end / only NUL
    for pre in ["\0", "abc\0", "\0abc"] {
        assert!(matches!(
            ThreadPool::builder()
                .threads(2)
                .thread_name_prefix(pre)
                .build(),
            Err(PoolError::InvalidThreadName { .. })
        ));
    }
    // a long, non-ASCII prefix is fine
    let p = ThreadPool::builder()
        .threads(2)
        .thread_name_prefix("é".repeat(100))
        .build()
        .unwrap();
    p.dispatch(|_, _| {});
}

/// Several threads dispatching on one small pool at once, some nested,
/// some chunked: every share of every dispatch runs exactly once, and a
/// late worker never runs a share of a closed job (each dispatch counts its
/// own hits in a fresh heap allocation and a global counter checks totals).
#[test]
fn concurrent_nested_late_workers() {
    let _hidden = quiet_panics();
    within(Duration::from_secs(120), "concurrent_nested", || {
        // More threads than cores: workers are regularly descheduled (late).
        for (n, spin) in [
            (2, Duration::ZERO),
            (5, Duration::from_micros(20)),
            (8, Duration::from_millis(2)),
        ] {
            let p = Arc::new(pool(n, spin));
            let total = Arc::new(AtomicUsize::new(0));
            let expected = Arc::new(AtomicUsize::new(0));
            let deadline = Instant::now() + Duration::from_secs(4);
            let hs: Vec<_> = (0..4)
                .map(|t| {
                    let p = Arc::clone(&p);
                    let total = Arc::clone(&total);
                    let expected = Arc::clone(&expected);
                    std::thread::spawn(move || {
                        let mut round = 0usize;
                        while Instant::now() < deadline {
                            round += 1;
                            let hits: Box<[AtomicUsize]> =
                                (0..n).map(|_| AtomicUsize::new(0)).collect();
                            let nested = round.is_multiple_of(5);
                            let panics = round.is_multiple_of(11);
                            let r = catch_unwind(AssertUnwindSafe(|| {
                                p.dispatch(|id, nn| {
                                    assert_eq!(nn, n);
                                    hits[id].fetch_add(1, Relaxed);
                                    total.fetch_add(1, Relaxed);
                                    if nested {
                                        p.dispatch(|_, _| {
                                            total.fetch_add(1, Relaxed);
                                        });
                                    }
                                    if panics && id == round % n {
                                        panic!("{EXPECTED}: planned");
                                    }
                                })
                            }));
                            assert_eq!(r.is_err(), panics, "t{t} round {round}");
                            expected.fetch_add(n + if nested { n * n } else { 0 }, Relaxed);
                            for (i, h) in hits.iter().enumerate() {
                                assert_eq!(h.load(Relaxed), 1, "t{t} round {round} share {i}");
                            }
                            drop(hits);
                            // static chunks, len < n sometimes
                            let len = round % (2 * n + 1);
                            let mut v = vec![0usize; len];
                            p.for_each_chunk_mut(&mut v, |r, c| {
                                for (i, x) in r.zip(c) {
                                    *x += i + 1;
                                }
                            });
                            assert_eq!(v, (1..=len).collect::<Vec<_>>());
                        }
                        round
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            // After all dispatches returned, no worker may still add.
            std::thread::sleep(Duration::from_millis(20));
            assert_eq!(
                total.load(SeqCst),
                expected.load(SeqCst),
                "n={n}: a share ran twice or late"
            );
        }
    });
}

/// Create, (maybe) dispatch, drop in a tight loop with every spin time so
/// drops hit workers that are starting, spinning, yielding, parking, or
/// still late on a previous job.
#[test]
fn drop_races() {
    within(Duration::from_secs(120), "drop_races", || {
        let deadline = Instant::now() + Duration::from_secs(6);
        let mut i = 0usize;
        while Instant::now() < deadline {
            i += 1;
            let spin = match i % 4 {
                0 => Duration::ZERO,
                1 => Duration::from_nanos(1),
                2 => Duration::from_micros(3),
                _ => Duration::from_millis(1),
            };
            let n = 2 + i % 4;
            let p = pool(n, spin);
            let c = AtomicUsize::new(0);
            for _ in 0..(i % 3) {
                p.dispatch(|_, _| {
                    c.fetch_add(1, Relaxed);
                });
            }
            if i.is_multiple_of(5) {
                std::thread::sleep(Duration::from_micros(200));
            }
            assert_eq!(c.load(Relaxed), n * (i % 3));
            drop(p);
        }
    });
}

/// Names of this process's threads that start with `prefix` (Linux).
#[cfg(target_os = "linux")]
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim().starts_with(prefix))
        .count()
}

/// The drop comes while the workers are still busy with the job before it:
/// woken by its publish and registering or claiming (a dispatch does not
/// wait for a worker that has not registered), or on their way back to
/// parking right after it (zero and near-zero spin times). The workers
/// are parked before the job, so its publish wakes them, and the drop
/// follows after a delay that sweeps the tens of microseconds a wake-up
/// takes. A stop that slips between a worker's last look at the word and
/// its PARKED announcement (a wake-up lost at shutdown) leaves that worker
/// asleep and the drop's join blocked: the watchdog reports the hang.
/// Afterwards no worker thread is left.
#[test]
fn drop_while_workers_mid_claim() {
    const PREFIX: &str = "hostile-mid-";
    within(
        Duration::from_secs(120),
        "drop_while_workers_mid_claim",
        || {
            let deadline = Instant::now() + Duration::from_secs(4);
            let mut i = 0usize;
            while Instant::now() < deadline {
                i += 1;
                let spin = match i % 3 {
                    0 => Duration::ZERO,
                    1 => Duration::from_nanos(1),
                    _ => Duration::from_micros(2),
                };
                let p = ThreadPool::builder()
                    .threads(3)
                    .spin_time(spin)
                    .thread_name_prefix(PREFIX)
                    .build()
                    .unwrap();
                // Let the workers start and park.
                std::thread::sleep(Duration::from_micros(300));
                let c = AtomicUsize::new(0);
                p.dispatch(|_, _| {
                    c.fetch_add(1, Relaxed);
                });
                // 0 to 63 us after the publish that woke them.
                let delay = Duration::from_micros((i * 7 % 64) as u64);
                let t = Instant::now();
                while t.elapsed() < delay {
                    std::hint::spin_loop();
                }
                drop(p);
                assert_eq!(c.load(Relaxed), 3);
            }
        },
    );
    // `drop` joined every worker: none is left, not merely told to stop.
    #[cfg(target_os = "linux")]
    assert_eq!(threads_named(PREFIX), 0, "a worker outlived its pool");
}

/// A pool sent to another thread and dropped there while a worker of it is
/// parked; and a pool dropped right after a dispatch whose shares panicked.
#[test]
fn drop_after_panic_and_on_other_thread() {
    let _hidden = quiet_panics();
    within(Duration::from_secs(30), "drop_after_panic", || {
        for _ in 0..200 {
            let p = pool(3, Duration::ZERO);
            let _ = catch_unwind(AssertUnwindSafe(|| {
                p.dispatch(|_, _| panic!("{EXPECTED}: x"))
            }));
            std::thread::spawn(move || drop(p)).join().unwrap();
        }
    });
}

/// Parked workers are woken by a dispatch after a long idle gap, repeatedly;
/// some dispatches land while workers are between spinning and parking.
#[test]
fn park_unpark_gaps() {
    within(Duration::from_secs(60), "park_unpark_gaps", || {
        let p = pool(4, Duration::from_micros(30));
        let ran_on_worker = AtomicBool::new(false);
        let main = std::thread::current().id();
        for i in 0..400u64 {
            let gap = Duration::from_micros((i * 7919) % 120);
            std::thread::sleep(gap);
            let hits: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(0)).collect();
            let me = std::thread::current().id();
            let _ = main;
            p.dispatch(|id, _| {
                hits[id].fetch_add(1, Relaxed);
                if std::thread::current().id() != me {
                    ran_on_worker.store(true, Relaxed);
                }
                // give workers time to join
                std::thread::sleep(Duration::from_micros(50));
            });
            assert!(hits.iter().all(|h| h.load(Relaxed) == 1));
        }
        assert!(ran_on_worker.load(Relaxed), "workers never woke");
    });
}

/// A dispatch from inside a worker's share onto a *different* pool whose
/// shares dispatch back onto the first: both inline where busy, no deadlock.
#[test]
fn cross_pool_nesting() {
    within(Duration::from_secs(30), "cross_pool", || {
        let a = Arc::new(pool(3, Duration::from_micros(100)));
        let b = Arc::new(pool(3, Duration::from_micros(100)));
        let count = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = [(a.clone(), b.clone()), (b.clone(), a.clone())]
            .into_iter()
            .map(|(x, y)| {
                let count = count.clone();
                std::thread::spawn(move || {
                    for _ in 0..300 {
                        x.dispatch(|_, _| {
                            y.dispatch(|_, _| {
                                x.dispatch(|_, _| {
                                    count.fetch_add(1, Relaxed);
                                });
                            });
                        });
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(count.load(Relaxed), 2 * 300 * 27);
    });
}

/// A dispatch nested in a share (on a worker or the caller) runs inline on
/// the thread of the outer share, never on another worker.
#[test]
fn nested_runs_on_calling_thread() {
    within(Duration::from_secs(30), "nested_same_thread", || {
        let p = pool(4, Duration::from_millis(1));
        let bad = AtomicUsize::new(0);
        for _ in 0..200 {
            p.dispatch(|_, _| {
                let outer = std::thread::current().id();
                p.dispatch(|_, _| {
                    if std::thread::current().id() != outer {
                        bad.fetch_add(1, Relaxed);
                    }
                });
            });
        }
        assert_eq!(bad.load(Relaxed), 0);
    });
}

/// Chunks from a static split are exact even with len < n and n = 1.
#[test]
fn static_split_short_data() {
    for n in [1usize, 2, 3, 7] {
        let p = pool(n, Duration::from_micros(10));
        for len in 0..(3 * n) {
            let mut v = vec![usize::MAX; len];
            let seen = Mutex::new(Vec::new());
            p.for_each_chunk_mut(&mut v, |r, c| {
                assert!(!r.is_empty());
                seen.lock().unwrap().push(r.clone());
                for (i, x) in r.zip(c) {
                    *x = i;
                }
            });
            assert_eq!(v, (0..len).collect::<Vec<_>>());
            let mut s = seen.into_inner().unwrap();
            s.sort_by_key(|r| r.start);
            let expect: Vec<_> = (0..n)
                .map(|id| split(len, id, n))
                .filter(|r| !r.is_empty())
                .collect();
            assert_eq!(s, expect);
        }
    }
}

/// The largest pool the builder accepts: real threads, every share once,
/// workers park at once (2-core machine), drop joins them all.
#[test]
fn max_threads_pool() {
    within(Duration::from_secs(120), "max_threads_pool", || {
        let p = ThreadPool::builder()
            .threads(MAX_THREADS)
            .spin_time(Duration::ZERO)
            .stack_size(64 * 1024)
            .build()
            .unwrap();
        for _ in 0..3 {
            let hits: Vec<AtomicUsize> = (0..MAX_THREADS).map(|_| AtomicUsize::new(0)).collect();
            p.dispatch(|id, n| {
                assert_eq!(n, MAX_THREADS);
                hits[id].fetch_add(1, Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Relaxed) == 1));
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(p);
    });
}
