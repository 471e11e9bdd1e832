//! The steady-state decode step allocates nothing: every buffer is made
//! when the session is. Counted with dhat's counting allocator, for the
//! single-threaded backends and the pool (rayon's own queues allocate,
//! so `parallel` is not held to this).
#![cfg(not(feature = "loom"))]

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use inferno_cpu::backend::AnyBackend;
use inferno_cpu::gguf::Gguf;
use inferno_cpu::model::{argmax, KvDtype, Qwen3, Session, SessionOptions};
use inferno_cpu::synth::{model_bytes, FileType, SynthConfig};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn allocations() -> u64 {
    dhat::HeapStats::get().total_blocks
}

/// Returns once every worker of a pool backend has run a share. A new
/// thread allocates while it starts (the standard library names it), and
/// the pool's dispatches do not wait for workers that have not started, so
/// without this a late worker's start-up could land in the counted steps.
fn wait_for_workers(b: &AnyBackend) {
    let AnyBackend::Pool(p) = b else { return };
    let pool = p.thread_pool();
    let seen = Mutex::new(HashSet::new());
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.lock().unwrap().len() < pool.threads() {
        assert!(Instant::now() < deadline, "pool workers never started");
        pool.dispatch(|_, _| {
            seen.lock().unwrap().insert(std::thread::current().id());
            std::thread::sleep(Duration::from_millis(1));
        });
    }
}

#[test]
fn decode_steps_allocate_nothing() {
    let _profiler = dhat::Profiler::builder().testing().build();
    // Q8_0, a mixed Q4_K/Q6_K file (two activation forms per step), Q4_0
    // (the activation's block pairs, on AVX-512, at the hidden and the
    // MLP width), and F16 and BF16 files (the activation rounded, not
    // quantized).
    for cfg in [
        SynthConfig::tiny(),
        SynthConfig::small().with_file_type(FileType::Q4KM),
        SynthConfig::small().with_file_type(FileType::Q4_0),
        SynthConfig::tiny().with_file_type(FileType::F16),
        SynthConfig::tiny().with_file_type(FileType::BF16),
    ] {
        let bytes = model_bytes(&cfg, 3).unwrap();
        let gguf = Gguf::parse(&bytes).unwrap();
        let model = Qwen3::load(&gguf).unwrap();
        decode_allocates_nothing(&model, &cfg);
    }
}

fn decode_allocates_nothing(model: &Qwen3<'_>, cfg: &SynthConfig) {
    for (name, threads) in [
        ("scalar", 1),
        ("simd", 1),
        ("pool", 1),
        ("pool", 2),
        ("pool", 3),
    ] {
        for kv in [KvDtype::F16, KvDtype::F32] {
            let b = AnyBackend::new(name, threads).unwrap();
            wait_for_workers(&b);
            let opts = SessionOptions {
                max_positions: 40,
                kv,
                ..SessionOptions::default()
            };
            let mut s = Session::new(model, &b, opts).unwrap();
            let mut t = argmax(s.prefill(&[1, 2, 3]).unwrap());
            t = argmax(s.decode(t).unwrap()); // first step: the pool's threads wake
            let before = allocations();
            for _ in 0..20 {
                t = argmax(s.decode(t).unwrap());
            }
            let n = allocations() - before;
            assert_eq!(
                n, 0,
                "{} {name} x{threads} ({kv}): {n} allocations in 20 decode steps",
                cfg.file_type
            );
        }
    }
}
