//! Helpers shared by the pool tests that provoke panics and could hang.
#![allow(dead_code)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Mutex, Once};
use std::time::Duration;

/// Panic messages that start with this are planned by a test.
pub const EXPECTED: &str = "expected panic";

/// The last panics [`quiet_panics`] hid, for [`HiddenPanics`] to print.
static HIDDEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
const HIDDEN_KEPT: usize = 16;

/// Keeps the panics a test provokes off the test output, and only those:
/// a panic whose payload is not a string (a test's own `panic_any` type:
/// bombs, share ids) or whose message starts with [`EXPECTED`]. Every
/// other panic (a failed assert, the watchdog's hang report, loom's
/// report, a panic the pool should not have raised) goes to the previous
/// hook and is printed.
///
/// A planned panic can still be the failure: one that should have been
/// caught inside the pool but escaped. Hold the returned guard for the
/// test's length: if the test fails, it prints the last panics hidden.
#[must_use = "hold the guard: it reports the hidden panics if the test fails"]
pub fn quiet_panics() -> HiddenPanics {
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
                _ => {
                    let what = format!(
                        "thread '{}' at {}: {}",
                        std::thread::current().name().unwrap_or("?"),
                        info.location().map_or("?".to_owned(), |l| l.to_string()),
                        message.unwrap_or("(a non-string payload)")
                    );
                    let mut hidden = HIDDEN.lock().unwrap_or_else(|e| e.into_inner());
                    if hidden.len() == HIDDEN_KEPT {
                        hidden.remove(0);
                    }
                    hidden.push(what);
                }
            }
        }))
    });
    HiddenPanics(())
}

/// Prints the last panics [`quiet_panics`] hid (in this test binary) when
/// dropped during a failing test's unwinding.
pub struct HiddenPanics(());

impl Drop for HiddenPanics {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let hidden = HIDDEN.lock().unwrap_or_else(|e| e.into_inner());
            eprintln!("the last {} planned-looking panics hidden:", hidden.len());
            for what in hidden.iter() {
                eprintln!("  {what}");
            }
        }
    }
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
