//! Helpers shared by the pool tests that provoke panics and could hang.
#![allow(dead_code)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Once};
use std::time::Duration;

/// Panic messages that start with this are planned by a test.
pub const EXPECTED: &str = "expected panic";

/// Keeps the panics a test provokes off the test output, and only those:
/// a panic whose payload is not a string (a test's own `panic_any` type:
/// bombs, share ids) or whose message starts with [`EXPECTED`]. Every
/// other panic (a failed assert, the watchdog's hang report, a panic the
/// pool should not have raised) goes to the previous hook and is printed.
pub fn quiet_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
            match message {
                Some(m) if !m.starts_with(EXPECTED) => previous(info),
                _ => {}
            }
        }))
    });
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
