//! An idle pool parks its workers and costs (almost) no CPU.
//!
//! Alone in its own test binary so no other test's threads use CPU during
//! the measured window.
#![cfg(all(target_os = "linux", not(feature = "loom")))]

use std::time::Duration;

use inferno_cpu::ThreadPool;

/// User + system CPU time of this process, from `/proc/self/stat`.
fn process_cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line, in clock ticks.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // USER_HZ is 100 on every Linux ABI Rust supports.
    Duration::from_millis(ticks * 10)
}

#[test]
fn idle_pool_parks() {
    const WORKERS: usize = 3;
    const WINDOW: Duration = Duration::from_millis(600);
    let pool = ThreadPool::builder()
        .threads(WORKERS + 1)
        .spin_time(Duration::from_millis(5))
        .build()
        .unwrap();
    pool.dispatch(|_, _| {});
    // Let the spin time run out, then measure an idle window.
    std::thread::sleep(Duration::from_millis(50));
    let before = process_cpu_time();
    std::thread::sleep(WINDOW);
    let used = process_cpu_time() - before;
    // Spinning workers would use up to WORKERS * WINDOW (limited by the
    // machine's cores, at least one WINDOW); parked ones use ~0.
    assert!(
        used < WINDOW / 10,
        "idle pool used {used:?} of CPU in a {WINDOW:?} window"
    );
    // Parked workers still wake for the next job.
    let mut out = vec![0u8; 8];
    pool.for_each_chunk_mut(&mut out, |_, chunk| chunk.fill(1));
    assert!(out.iter().all(|&x| x == 1));
    drop(pool);

    // The control, in the same test so nothing runs beside it: a thread
    // that keeps busy shows up in the same measurement, so the assertion
    // above can fail. (A busy thread, not a spinning pool: a pool's
    // spinning workers yield their core whenever another process wants
    // it, so their CPU time depends on the machine's load.)
    let before = process_cpu_time();
    let started = std::time::Instant::now();
    let mut x = 1u64;
    while process_cpu_time() - before < Duration::from_millis(100) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "30 s of busy work did not register 100 ms of CPU time"
        );
        for _ in 0..100_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}
