//! Helpers shared by the pool tests that provoke panics and could hang.
#![allow(dead_code)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Once};
use std::time::Duration;

/// Keeps expected panics (bombs, panicking drops) off the test output.
pub fn quiet_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::panic::set_hook(Box::new(|_| {})));
}

/// Runs `f` on a helper thread and returns its result, resuming its panic
/// if it panicked; fails if it does not finish within `limit`, so a hung
/// dispatch fails the test instead of hanging the test binary.
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("{what}: did not finish within {limit:?} (hang)"),
    }
}
