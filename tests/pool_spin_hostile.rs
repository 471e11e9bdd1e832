//! The spinning pool at the edges of its spin budget: odd spin times,
//! huge worker stacks, panicking shares and nested dispatches while the
//! workers are parking, waking and restarting their budget, and drops
//! right after a wake-up. Every run is under a watchdog.
#![cfg(not(feature = "loom"))]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use inferno_cpu::{PoolError, ThreadPool};

#[path = "support/watchdog.rs"]
mod watchdog;
use watchdog::{quiet_panics, within, EXPECTED};

/// Stacks the OS cannot give are a typed error, not a panic or an abort.
#[test]
fn huge_stacks_are_spawn_errors() {
    for bytes in [
        usize::MAX,
        usize::MAX - 4095,
        usize::MAX - 1,
        isize::MAX as usize,
        1 << 62,
    ] {
        match ThreadPool::builder().threads(2).stack_size(bytes).build() {
            Err(PoolError::Spawn { index: 1, .. }) => {}
            // An OS that can reserve it is fine too, if the pool works.
            Ok(p) => p.dispatch(|_, _| {}),
            Err(e) => panic!("stack of {bytes:#x} bytes: {e:?}"),
        }
    }
}

/// Spin times of zero, one nanosecond, a tick of the clock and
/// `Duration::MAX` (never parks): dispatches with pauses between them (so
/// workers park and wake, or keep spinning), panics in some shares, nested
/// dispatches from workers, then a drop right after a dispatch.
#[test]
fn spin_time_extremes_with_panics_and_nesting() {
    let _hidden = quiet_panics();
    within(Duration::from_secs(120), "spin_time_extremes", || {
        for spin in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_micros(20),
            Duration::MAX,
        ] {
            for threads in [2, 3, 5] {
                let p = ThreadPool::builder()
                    .threads(threads)
                    .spin_time(spin)
                    .build()
                    .unwrap();
                let hits = AtomicUsize::new(0);
                for round in 0..300usize {
                    if round % 37 == 0 {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        p.dispatch(|id, n| {
                            hits.fetch_add(1, Relaxed);
                            if round % 7 == 3 && id == n - 1 {
                                // Nested: runs inline, all n shares.
                                p.dispatch(|_, _| {
                                    hits.fetch_add(1, Relaxed);
                                });
                            }
                            if round % 5 == 1 && id == round % n {
                                panic!("{EXPECTED}: share {id} of round {round}");
                            }
                        })
                    }));
                    assert_eq!(r.is_err(), round % 5 == 1, "{spin:?} {threads} {round}");
                }
                let nested = (0..300).filter(|r| r % 7 == 3).count();
                assert_eq!(
                    hits.load(Relaxed),
                    300 * threads + nested * threads,
                    "{spin:?} {threads}"
                );
                // Drop right after a dispatch that woke parked workers.
                std::thread::sleep(Duration::from_millis(1));
                p.dispatch(|_, _| {});
                drop(p);
            }
        }
    });
}
