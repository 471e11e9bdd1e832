//! `INFERNO_THREADS` values no pool can have: a typed error from
//! `threads_from_env`, and the default size ignores them (with a warning)
//! instead of trying to allocate for them. Alone in its own test binary,
//! since it sets a process-wide environment variable.
#![cfg(not(feature = "loom"))]

use inferno_cpu::pool::{threads_from_env, THREADS_ENV};
use inferno_cpu::{default_threads, ThreadPool, MAX_THREADS};

#[test]
fn huge_env_thread_counts_are_errors() {
    for huge in [
        "281474976710656",
        "18446744073709551615",
        &(MAX_THREADS + 1).to_string(),
    ] {
        std::env::set_var(THREADS_ENV, huge);
        let err = threads_from_env().expect_err(huge);
        assert_eq!(err.value, huge);
        assert!(err.to_string().contains(&MAX_THREADS.to_string()));
        let threads = default_threads();
        assert!((1..=MAX_THREADS).contains(&threads), "{huge}: {threads}");
        // The builder's default size comes from the same place.
        let pool = ThreadPool::builder().build().unwrap();
        assert_eq!(pool.threads(), threads);
    }
    std::env::set_var(THREADS_ENV, "3");
    assert_eq!(threads_from_env().unwrap().map(|n| n.get()), Some(3));
    std::env::remove_var(THREADS_ENV);
}
