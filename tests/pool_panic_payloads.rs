//! Panic payloads whose own `Drop` panics, on each path a payload takes
//! through the pool: caught on a worker, caught on the inline path, caught
//! on the caller. The pool must drop every surplus payload without letting
//! that second panic escape: not kill a worker (which would leave a
//! dispatch waiting for it), not skip later shares, not abort the process.
#![cfg(not(feature = "loom"))]

use std::collections::HashSet;
use std::panic::{catch_unwind, panic_any, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use inferno_cpu::ThreadPool;

#[path = "support/watchdog.rs"]
mod watchdog;
use watchdog::{quiet_panics, within, EXPECTED};

/// A panic payload whose `Drop` panics too.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("{EXPECTED}: payload drop");
    }
}

/// Records which thread ran each share, and lets a share wait (bounded)
/// until `want` shares have started, so that the workers take part.
struct Rendezvous {
    started: AtomicUsize,
    threads: Mutex<HashSet<ThreadId>>,
    want: usize,
}

impl Rendezvous {
    fn new(want: usize) -> Self {
        Self {
            started: AtomicUsize::new(0),
            threads: Mutex::new(HashSet::new()),
            want,
        }
    }

    /// Marks a share started on this thread and waits up to 5 s for the
    /// others. (A share must never block on another one without a bound:
    /// on the inline path they run one after another.)
    fn arrive(&self) {
        self.threads
            .lock()
            .unwrap()
            .insert(std::thread::current().id());
        self.started.fetch_add(1, Relaxed);
        let start = Instant::now();
        while self.started.load(Relaxed) < self.want && start.elapsed() < Duration::from_secs(5) {
            std::thread::yield_now();
        }
    }

    fn distinct_threads(&self) -> usize {
        self.threads.lock().unwrap().len()
    }
}

/// Both workers of one job panic with a bomb: the pool keeps one payload,
/// drops the other inside `catch_unwind`, and both workers survive.
#[test]
fn worker_path_bomb_payloads() {
    let _hidden = quiet_panics();
    let pool = Arc::new(ThreadPool::new(3).unwrap());
    let (distinct, panicked) = within(Duration::from_secs(30), "dispatch with two bombs", {
        let pool = Arc::clone(&pool);
        move || {
            let meet = Rendezvous::new(3);
            let result = catch_unwind(AssertUnwindSafe(|| {
                pool.dispatch(|id, _| {
                    meet.arrive();
                    if id != 0 {
                        panic_any(Bomb);
                    }
                })
            }));
            let panicked = match result {
                Err(payload) => {
                    let is_bomb = payload.is::<Bomb>();
                    std::mem::forget(payload);
                    is_bomb
                }
                Ok(()) => false,
            };
            (meet.distinct_threads(), panicked)
        }
    });
    assert!(panicked, "a bomb must reach the caller");
    assert_eq!(distinct, 3, "the workers did not both take a share");
    // Both workers are alive and take part again.
    let meet = within(Duration::from_secs(30), "dispatch after the bombs", {
        let pool = Arc::clone(&pool);
        move || {
            let meet = Rendezvous::new(3);
            pool.dispatch(|_, _| meet.arrive());
            meet.distinct_threads()
        }
    });
    assert_eq!(meet, 3, "a worker died of the bombs");
}

/// On the inline path (a dispatch nested in a job), two bombs must not
/// stop the shares after them from running.
#[test]
fn inline_path_bomb_payloads() {
    let _hidden = quiet_panics();
    let pool = ThreadPool::new(3).unwrap();
    let inner: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
    let nested_panicked = AtomicUsize::new(0);
    pool.dispatch(|outer, _| {
        if outer != 0 {
            return;
        }
        let result = catch_unwind(AssertUnwindSafe(|| {
            pool.dispatch(|id, _| {
                inner[id].fetch_add(1, Relaxed);
                if id < 2 {
                    panic_any(Bomb);
                }
            })
        }));
        if let Err(payload) = result {
            nested_panicked.fetch_add(1, Relaxed);
            std::mem::forget(payload);
        }
    });
    assert_eq!(nested_panicked.load(Relaxed), 1);
    for (id, h) in inner.iter().enumerate() {
        assert_eq!(h.load(Relaxed), 1, "inline share {id}");
    }
}

/// Set in the child process that runs [`caller_path_child`].
const CHILD_ENV: &str = "INFERNO_TEST_BOMB_CHILD";

/// The caller's own share and a worker's both panic with a bomb. Dropping
/// the worker's payload while the caller's unwinds would abort the
/// process, so this runs in a child process and checks its exit status.
#[test]
fn caller_path_bomb_payloads() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "caller_path_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("caller path: ok"),
        "child failed ({:?}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The body of [`caller_path_bomb_payloads`]; does nothing unless run as
/// its child.
#[test]
fn caller_path_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let _hidden = quiet_panics();
    let pool = ThreadPool::new(2).unwrap();
    let meet = Rendezvous::new(2);
    let result = catch_unwind(AssertUnwindSafe(|| {
        // Share 0 is the caller's; it waits for share 1 to start, which a
        // worker must then have claimed.
        pool.dispatch(|_, _| {
            meet.arrive();
            panic_any(Bomb);
        })
    }));
    let payload = result.expect_err("a bomb must reach the caller");
    assert!(payload.is::<Bomb>());
    std::mem::forget(payload);
    assert_eq!(meet.distinct_threads(), 2, "no worker took share 1");
    println!("caller path: ok");
}
