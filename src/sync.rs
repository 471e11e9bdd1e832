//! The one switch point between std and loom.
//!
//! The pool's protocol imports its atomics, cells, locks and threads only
//! from here, so the code loom model-checks under `--features loom` is the
//! code that ships. Nothing else in the crate imports `std::sync::atomic`,
//! `std::thread` or `loom` directly.
//!
//! The `loom` feature is for tests only: under it every pool operation runs
//! on loom's scheduler and panics outside `loom::model`.

#[cfg(not(feature = "loom"))]
mod imp {
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    pub(crate) use std::sync::{Arc, Condvar, Mutex};
    pub(crate) use std::thread;

    /// A hint that the caller is busy-waiting. Under loom this yields to the
    /// model's scheduler so that spin loops terminate.
    #[inline(always)]
    pub(crate) fn spin_loop() {
        std::hint::spin_loop();
    }

    /// Gives the core back to the OS scheduler (a loom yield under loom).
    #[inline]
    pub(crate) fn yield_now() {
        std::thread::yield_now();
    }

    /// `UnsafeCell` with loom's closure-based access shape, so the same
    /// code compiles against both.
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }

    /// How long a worker keeps spinning after its last job before it parks.
    ///
    /// Measured in wall-clock time with std; under loom, where time does not
    /// exist, a nonzero budget is a couple of spin rounds.
    #[derive(Debug)]
    pub(crate) struct SpinBudget {
        deadline: Option<std::time::Instant>,
        rounds: u32,
    }

    impl SpinBudget {
        /// How many spin rounds pass between two clock reads.
        const ROUNDS_PER_CLOCK_READ: u32 = 64;

        pub(crate) fn start(spin: std::time::Duration) -> Self {
            Self {
                deadline: std::time::Instant::now().checked_add(spin),
                rounds: 0,
            }
        }

        /// Returns `true` while the budget lasts.
        #[inline]
        pub(crate) fn keep_spinning(&mut self) -> bool {
            self.rounds = self.rounds.wrapping_add(1);
            if !self.rounds.is_multiple_of(Self::ROUNDS_PER_CLOCK_READ) {
                return true;
            }
            match self.deadline {
                Some(deadline) => std::time::Instant::now() < deadline,
                None => true,
            }
        }
    }
}

#[cfg(feature = "loom")]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    pub(crate) use loom::sync::{Arc, Condvar, Mutex};
    pub(crate) use loom::thread;

    /// Under loom a busy-wait must yield, or the model never terminates.
    #[inline]
    pub(crate) fn spin_loop() {
        loom::thread::yield_now();
    }

    /// A loom yield.
    #[inline]
    pub(crate) fn yield_now() {
        loom::thread::yield_now();
    }

    /// Under loom a nonzero spin budget is a couple of rounds, a zero one
    /// none: enough to explore both "job arrived while spinning" and "job
    /// arrived after parking".
    #[derive(Debug)]
    pub(crate) struct SpinBudget {
        rounds_left: u32,
    }

    impl SpinBudget {
        pub(crate) fn start(spin: std::time::Duration) -> Self {
            Self {
                rounds_left: if spin.is_zero() { 0 } else { 2 },
            }
        }

        #[inline]
        pub(crate) fn keep_spinning(&mut self) -> bool {
            if self.rounds_left == 0 {
                return false;
            }
            self.rounds_left -= 1;
            true
        }
    }
}

pub(crate) use imp::*;
