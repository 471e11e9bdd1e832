//! The pool's life: creation, sizes, panics, nesting, spawn failure, drop.
#![cfg(not(feature = "loom"))]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use inferno_cpu::{default_threads, PoolError, ThreadPool, MAX_THREADS};

fn counters(n: usize) -> Vec<AtomicUsize> {
    (0..n).map(|_| AtomicUsize::new(0)).collect()
}

fn assert_each_once(hits: &[AtomicUsize]) {
    for (id, h) in hits.iter().enumerate() {
        assert_eq!(h.load(Relaxed), 1, "share {id}");
    }
}

#[test]
fn pool_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<ThreadPool>();
}

#[test]
fn sizes_one_two_and_all_cores() {
    for threads in [1, 2, default_threads(), default_threads() + 1] {
        let pool = ThreadPool::new(threads).unwrap();
        assert_eq!(pool.threads(), threads);
        let hits = counters(threads);
        pool.dispatch(|id, n| {
            assert_eq!(n, threads);
            hits[id].fetch_add(1, Relaxed);
        });
        assert_each_once(&hits);
    }
}

#[test]
fn fewer_rows_than_threads_and_threads_plus_one() {
    let pool = ThreadPool::new(4).unwrap();
    for len in [0, 1, 3, 4, 5] {
        let mut out = vec![0usize; len];
        let calls = AtomicUsize::new(0);
        pool.for_each_chunk_mut(&mut out, |range, chunk| {
            calls.fetch_add(1, Relaxed);
            for (i, x) in range.zip(chunk) {
                *x = i + 1;
            }
        });
        assert_eq!(out, (1..=len).collect::<Vec<_>>());
        // Empty chunks are not handed out.
        assert_eq!(calls.load(Relaxed), len.min(4));
    }
}

#[test]
fn panics_propagate_and_pool_survives() {
    let pool = ThreadPool::new(3).unwrap();
    for panicking in 0..3 {
        let finished = counters(3);
        let err = catch_unwind(AssertUnwindSafe(|| {
            pool.dispatch(|id, _| {
                if id == panicking {
                    panic!("boom in share {id}");
                }
                std::thread::sleep(Duration::from_millis(5));
                finished[id].fetch_add(1, Relaxed);
            })
        }))
        .expect_err("the panic must reach the caller");
        assert_eq!(
            err.downcast_ref::<String>().map(String::as_str),
            Some(format!("boom in share {panicking}").as_str())
        );
        // Every other share ran to completion before the panic resumed.
        for (id, f) in finished.iter().enumerate() {
            assert_eq!(f.load(Relaxed), usize::from(id != panicking), "share {id}");
        }
    }
    let hits = counters(3);
    pool.dispatch(|id, _| {
        hits[id].fetch_add(1, Relaxed);
    });
    assert_each_once(&hits);
}

#[test]
fn every_share_panicking_reports_one_panic() {
    let pool = ThreadPool::new(3).unwrap();
    let result = catch_unwind(AssertUnwindSafe(|| {
        pool.dispatch(|id, _| panic!("share {id}"))
    }));
    assert!(result.is_err());
    let hits = counters(3);
    pool.dispatch(|id, _| {
        hits[id].fetch_add(1, Relaxed);
    });
    assert_each_once(&hits);
}

#[test]
fn nested_dispatch_does_not_deadlock() {
    let pool = ThreadPool::new(3).unwrap();
    let inner = counters(3);
    let mut out = vec![0u8; 9];
    pool.for_each_chunk_mut(&mut out, |_, chunk| {
        pool.dispatch(|id, _| {
            inner[id].fetch_add(1, Relaxed);
        });
        chunk.fill(7);
    });
    assert!(out.iter().all(|&x| x == 7));
    for h in &inner {
        assert_eq!(h.load(Relaxed), 3);
    }
}

#[test]
fn zero_threads_is_an_error() {
    let err = ThreadPool::new(0).unwrap_err();
    assert!(matches!(err, PoolError::ZeroThreads));
    assert!(err.to_string().contains("at least 1 thread"));
}

/// Sizes no pool can have are refused with a typed error before anything
/// is allocated or spawned (they used to overflow a capacity computation or
/// abort on a failed allocation).
#[test]
fn oversized_pools_are_errors() {
    for threads in [usize::MAX, 1 << 48, MAX_THREADS + 1] {
        match ThreadPool::new(threads) {
            Err(PoolError::TooManyThreads { requested, max }) => {
                assert_eq!(requested, threads);
                assert_eq!(max, MAX_THREADS);
            }
            other => panic!("new({threads}): expected TooManyThreads, got {other:?}"),
        }
    }
    let err = ThreadPool::new(usize::MAX).unwrap_err();
    assert!(err.to_string().contains(&MAX_THREADS.to_string()));
}

/// A thread-name prefix with a NUL byte is a typed error (it used to
/// panic inside `std::thread`).
#[test]
fn nul_in_thread_name_is_an_error() {
    let result = ThreadPool::builder()
        .threads(2)
        .thread_name_prefix("bad\0name-")
        .build();
    match result {
        Err(PoolError::InvalidThreadName { prefix }) => assert_eq!(prefix, "bad\0name-"),
        other => panic!("expected InvalidThreadName, got {other:?}"),
    }
    // A single-thread pool spawns no thread, but the prefix is still wrong.
    assert!(ThreadPool::builder()
        .threads(1)
        .thread_name_prefix("\0")
        .build()
        .is_err());
}

#[test]
fn spawn_failure_is_an_error() {
    // No machine can give a thread a 64 TiB stack.
    let result = ThreadPool::builder().threads(3).stack_size(1 << 46).build();
    match result {
        Err(PoolError::Spawn { index, threads, .. }) => {
            assert_eq!(index, 1);
            assert_eq!(threads, 3);
        }
        other => panic!("expected a spawn error, got {other:?}"),
    }
}

/// Names of this process's threads (Linux only).
#[cfg(target_os = "linux")]
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_owned())
        .collect()
}

/// Polls `cond` for up to 10 s.
#[cfg(target_os = "linux")]
fn wait_for(cond: impl Fn() -> bool, what: &str) {
    let started = std::time::Instant::now();
    while !cond() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no {what} after 10 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(target_os = "linux")]
#[test]
fn drop_joins_workers() {
    let count = || {
        thread_names()
            .iter()
            .filter(|n| n.starts_with("lc-drop-"))
            .count()
    };
    let pool = ThreadPool::builder()
        .threads(4)
        .thread_name_prefix("lc-drop-")
        .build()
        .unwrap();
    pool.dispatch(|_, _| {});
    // A dispatch does not wait for workers that have not started (shares
    // are claimed by whoever runs), and a new thread names itself once it
    // runs: wait for all three names to appear.
    wait_for(|| count() == 3, "3 named workers");
    drop(pool);
    // `drop` joined them: the threads are gone, not merely told to stop.
    // A join returns when the thread has cleared its id on the way out,
    // which the kernel does a moment before it removes the thread's
    // `/proc/self/task` entry, so a loaded machine can still list an
    // exiting one: allow it 100 ms. That no longer tells a join from a
    // prompt exit, but a pool that left its workers running still fails.
    let started = std::time::Instant::now();
    while count() != 0 && started.elapsed() < Duration::from_millis(100) {
        std::thread::yield_now();
    }
    assert_eq!(count(), 0);
}
