//! Several threads dispatching on one shared pool, many thousands of times,
//! with panicking jobs mixed in: no hang, no lost or duplicated share, and
//! the pool still works afterwards. Bounded in count and in time.
#![cfg(not(feature = "loom"))]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use inferno_cpu::ThreadPool;

const DISPATCHERS: usize = 4;
const ROUNDS: usize = 5_000;
const TIME_LIMIT: Duration = Duration::from_secs(20);
const LEN: usize = 37;

#[test]
fn concurrent_dispatch_with_panics() {
    // Keep the planned panics off the test output; report any other.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&"planned") {
            default_hook(info);
        }
    }));
    let pool = Arc::new(
        ThreadPool::builder()
            .threads(3)
            .spin_time(Duration::from_micros(200))
            .build()
            .unwrap(),
    );
    let started = Instant::now();
    let handles: Vec<_> = (0..DISPATCHERS)
        .map(|t| {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || {
                let mut out = vec![0u64; LEN];
                let (mut ok, mut panicked) = (0usize, 0usize);
                for round in 0..ROUNDS {
                    if started.elapsed() > TIME_LIMIT {
                        break;
                    }
                    let tag = (t * ROUNDS + round) as u64;
                    // Every 7th round one share panics after writing.
                    let panicking = (round % 7 == 3).then_some(round % 3);
                    let calls = AtomicUsize::new(0);
                    let result = catch_unwind(AssertUnwindSafe(|| {
                        pool.for_each_chunk_mut(&mut out, |range, chunk| {
                            calls.fetch_add(1, Relaxed);
                            for (i, x) in range.clone().zip(chunk.iter_mut()) {
                                *x = tag * 1000 + i as u64;
                            }
                            if panicking
                                .is_some_and(|p| range.start == inferno_cpu::split(LEN, p, 3).start)
                            {
                                panic!("planned");
                            }
                        })
                    }));
                    // Whatever happened, every share ran exactly once and
                    // wrote its whole chunk before dispatch returned.
                    assert_eq!(calls.load(Relaxed), 3, "dispatcher {t} round {round}");
                    for (i, x) in out.iter().enumerate() {
                        assert_eq!(
                            *x,
                            tag * 1000 + i as u64,
                            "dispatcher {t} round {round} element {i}"
                        );
                    }
                    match result {
                        Ok(()) => {
                            assert!(panicking.is_none());
                            ok += 1;
                        }
                        Err(_) => {
                            assert!(panicking.is_some());
                            panicked += 1;
                        }
                    }
                }
                (ok, panicked)
            })
        })
        .collect();
    let mut total = 0;
    for h in handles {
        let (ok, panicked) = h.join().expect("dispatcher thread");
        assert!(panicked > 0 || ok < 7, "no panicking round ran");
        total += ok + panicked;
    }
    assert!(
        total >= DISPATCHERS * 100,
        "only {total} rounds in {TIME_LIMIT:?}"
    );
    // The pool is still usable, and its workers still take part.
    let hits: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
    pool.dispatch(|id, _| {
        hits[id].fetch_add(1, Relaxed);
    });
    assert!(hits.iter().all(|h| h.load(Relaxed) == 1));
}
