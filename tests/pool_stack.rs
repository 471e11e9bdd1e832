//! The smallest worker stack the builder accepts is enough for a share
//! that panics on a worker, with std's default panic hook printing the
//! message and a full backtrace; smaller sizes are refused.
//!
//! A stack overflow aborts the process, so the panicking pool runs in a
//! child process: this test binary re-runs itself with `CHILD_ENV` set.
#![cfg(not(feature = "loom"))]

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use inferno_cpu::pool::MIN_STACK_SIZE;
use inferno_cpu::{PoolError, ThreadPool};

/// Set (to a stack size in bytes) in the child process.
const CHILD_ENV: &str = "INFERNO_TEST_STACK_CHILD";

/// In the child: a pool of two threads with `bytes` of worker stack, and a
/// job whose share 1 panics on the worker (share 0, on the caller, waits
/// until share 1 has started, so the caller cannot claim it).
fn panic_on_worker(bytes: usize) {
    let pool = ThreadPool::builder()
        .threads(2)
        .stack_size(bytes)
        .build()
        .expect("pool");
    let started = AtomicBool::new(false);
    let caller = std::thread::current().id();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.dispatch(|id, _| {
            if id == 0 {
                let t = Instant::now();
                while !started.load(Ordering::Acquire) {
                    assert!(t.elapsed() < Duration::from_secs(30), "no worker");
                    std::hint::spin_loop();
                }
            } else {
                assert_ne!(std::thread::current().id(), caller);
                started.store(true, Ordering::Release);
                panic!("planned panic on a worker with a {bytes}-byte stack");
            }
        })
    }));
    assert!(result.is_err(), "the worker's panic was lost");
    // The worker survived its panic.
    pool.dispatch(|_, _| {});
}

/// Runs `panic_on_worker(bytes)` in a child process with a full backtrace
/// and returns whether it exited cleanly.
fn child_survives(bytes: usize) -> bool {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "minimum_stack_survives_a_panic", "--nocapture"])
        .env(CHILD_ENV, bytes.to_string())
        .env("RUST_BACKTRACE", "full")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        eprintln!("child with a {bytes}-byte stack: {}\n{stderr}", out.status);
    }
    out.status.success()
}

#[test]
fn minimum_stack_survives_a_panic() {
    if let Ok(bytes) = std::env::var(CHILD_ENV) {
        panic_on_worker(bytes.parse().unwrap());
        return;
    }
    assert!(
        child_survives(MIN_STACK_SIZE),
        "a share panicking on a worker with the minimum stack ({MIN_STACK_SIZE} bytes) \
         overflowed"
    );
}

#[test]
fn stacks_below_the_minimum_are_errors() {
    for bytes in [0, 1, 4096, MIN_STACK_SIZE - 1] {
        match ThreadPool::builder().threads(2).stack_size(bytes).build() {
            Err(PoolError::StackTooSmall { requested, min }) => {
                assert_eq!((requested, min), (bytes, MIN_STACK_SIZE));
            }
            other => panic!("stack of {bytes} bytes: expected StackTooSmall, got {other:?}"),
        }
    }
    // The minimum itself builds.
    ThreadPool::builder()
        .threads(2)
        .stack_size(MIN_STACK_SIZE)
        .build()
        .unwrap();
}
