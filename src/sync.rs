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

    /// What a waiting thread does next; see [`Backoff`].
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Step {
        /// Busy-wait one round (`spin_loop`).
        Spin,
        /// Give the core to any other runnable thread, then look again.
        Yield,
        /// The budget is spent: block.
        Park,
    }

    /// The waiting policy of the pool's spin loops, by wall-clock time:
    /// pure spinning for [`Backoff::PURE_SPIN`], then spinning with a yield
    /// every [`Backoff::YIELD_EVERY`] until the budget is spent.
    ///
    /// Pure spinning answers a new job fastest. The yields matter when the
    /// machine has fewer free cores than the pool has threads: two of the
    /// pool's threads then share a core, and one spinning through its whole
    /// time slice would keep the other (which holds the work it waits for)
    /// off the core for milliseconds at every job.
    ///
    /// Every phase is measured by the clock, read once every
    /// [`Backoff::ROUNDS_PER_CLOCK_READ`] rounds, never by counting rounds:
    /// a round (one load of the job word and one `spin_loop` hint, `pause`
    /// on x86) costs 12-15 ns on the Intel Xeon VMs this crate is measured
    /// on and about 52 ns on the AMD ones (`inferno bench --kernels` prints
    /// it), so a count of rounds would mean a different time on each.
    #[derive(Debug)]
    pub(crate) struct Backoff {
        start: std::time::Instant,
        budget: std::time::Duration,
        rounds: u32,
        /// Time waited at the last yield (or zero).
        yielded: std::time::Duration,
    }

    impl Backoff {
        /// Pure spinning lasts this long. Measured with `inferno bench` on a
        /// 2-core machine, with and without a competing process that left
        /// the pool one core: 5 us costs nothing when the pool has its
        /// cores (tokens/s within noise of 10 and 20 us) and keeps a pool
        /// squeezed onto one core at single-core speed (20 us: 35% slower
        /// than single-core; pure spinning without yields: 15x slower).
        pub(crate) const PURE_SPIN: std::time::Duration = std::time::Duration::from_micros(5);
        /// Time between two yields after the pure phase. Measured on the
        /// AMD machine, where it was first set as 256 rounds of 52 ns:
        /// yielding every 64 rounds (3.3 us) made one run in three of the
        /// decode-pattern dispatch 3x slower (a job landing in a yield
        /// system call); 256 (13 us) did not, and kept the squeezed pool as
        /// fast. On the Intel VMs 256 rounds are only 3-4 us, hence a time.
        pub(crate) const YIELD_EVERY: std::time::Duration = std::time::Duration::from_micros(13);
        /// Spin rounds between two clock reads: 0.4-1.7 us of spinning, so
        /// the clock (a vDSO read of the TSC, ~20 ns) costs a few percent
        /// of a round at most.
        pub(crate) const ROUNDS_PER_CLOCK_READ: u32 = 32;

        /// Starts waiting now; after `budget` [`Backoff::step`] says
        /// [`Step::Park`] (`Duration::MAX`: never).
        pub(crate) fn new(budget: std::time::Duration) -> Self {
            Self {
                start: std::time::Instant::now(),
                budget,
                rounds: 0,
                yielded: std::time::Duration::ZERO,
            }
        }

        /// The next thing to do.
        #[inline]
        pub(crate) fn step(&mut self) -> Step {
            self.rounds = self.rounds.wrapping_add(1);
            if !self.rounds.is_multiple_of(Self::ROUNDS_PER_CLOCK_READ) {
                return Step::Spin;
            }
            let waited = self.start.elapsed();
            if waited >= self.budget {
                Step::Park
            } else if waited < Self::PURE_SPIN || waited - self.yielded < Self::YIELD_EVERY {
                Step::Spin
            } else {
                self.yielded = waited;
                Step::Yield
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use std::time::Duration;

        /// The phases follow the clock: no yield in the pure phase, then
        /// yields at least `YIELD_EVERY` apart, then the park. A thread
        /// descheduled for the whole budget (a loaded machine running the
        /// tests in parallel) may see no yield at all, so the wait runs up
        /// to ten times: every run must keep the order and the spacing, and
        /// one at least must yield.
        #[test]
        fn backoff_phases_follow_the_clock() {
            let budget = Duration::from_millis(30);
            let mut yielded = false;
            for _ in 0..10 {
                // Read before the backoff starts its own clock, so that a
                // thread descheduled in between cannot make the budget look
                // unspent.
                let start = std::time::Instant::now();
                let mut backoff = Backoff::new(budget);
                let mut yields = Vec::new();
                loop {
                    match backoff.step() {
                        Step::Spin => spin_loop(),
                        // The time waited, by the backoff's own clock read.
                        Step::Yield => yields.push(backoff.yielded),
                        Step::Park => break,
                    }
                }
                assert!(start.elapsed() >= budget);
                if let Some(&first) = yields.first() {
                    assert!(first >= Backoff::PURE_SPIN);
                    assert!(*yields.last().unwrap() < budget, "{yields:?}");
                }
                for pair in yields.windows(2) {
                    assert!(pair[1] - pair[0] >= Backoff::YIELD_EVERY, "{yields:?}");
                }
                if !yields.is_empty() {
                    yielded = true;
                    break;
                }
            }
            assert!(yielded, "no yield in ten waits of {budget:?}");
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

    /// What a waiting thread does next.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Step {
        /// Busy-wait one round.
        Spin,
        /// Yield, then look again.
        Yield,
        /// Block.
        Park,
    }

    /// Under loom, where time does not exist, a nonzero budget is one spin
    /// and one yield round, a zero one none: enough to explore "job arrived
    /// while spinning" and "job arrived after parking".
    #[derive(Debug)]
    pub(crate) struct Backoff {
        rounds: u32,
        parks: bool,
    }

    impl Backoff {
        pub(crate) fn new(budget: std::time::Duration) -> Self {
            Self {
                rounds: if budget.is_zero() { 2 } else { 0 },
                parks: budget != std::time::Duration::MAX,
            }
        }

        #[inline]
        pub(crate) fn step(&mut self) -> Step {
            self.rounds = self.rounds.saturating_add(1);
            match self.rounds {
                1 => Step::Spin,
                2 => Step::Yield,
                _ if self.parks => Step::Park,
                _ => Step::Yield,
            }
        }
    }
}

pub(crate) use imp::*;
