//! The owned model handle: one `Arc<Model>` shared by sessions on several
//! threads, each getting exactly the logits it gets alone.

#![cfg(not(feature = "loom"))]

use std::sync::Arc;

use inferno_cpu::backend::{AnyBackend, Simd};
use inferno_cpu::model::{argmax, Model, ModelError, SessionOptions};
use inferno_cpu::synth::{model_bytes, SynthConfig};

fn tiny() -> Arc<Model> {
    Arc::new(Model::from_bytes(&model_bytes(&SynthConfig::tiny(), 11).unwrap()).unwrap())
}

/// Prompt `n`: different lengths and tokens per thread.
fn prompt(n: usize) -> Vec<u32> {
    (0..5 + 3 * n as u32)
        .map(|i| (i * 37 + n as u32 * 101) % 400 + 1)
        .collect()
}

/// Prefill logits and then six greedy decode steps' logits, concatenated.
fn run(model: &Arc<Model>, backend: AnyBackend, ids: &[u32]) -> Result<Vec<f32>, ModelError> {
    let mut s = model.session(backend, SessionOptions::default())?;
    let mut out = s.prefill(ids)?.to_vec();
    let mut token = argmax(s.logits());
    for _ in 0..6 {
        let logits = s.decode(token)?;
        token = argmax(logits);
        out.extend_from_slice(logits);
    }
    Ok(out)
}

#[test]
fn sessions_on_four_threads_match_one_alone() {
    let model = tiny();
    let backends = ["scalar", "simd", "pool", "parallel"];
    let backend = |n: usize| AnyBackend::new(backends[n], if n < 2 { 1 } else { 2 }).unwrap();
    let alone: Vec<Vec<f32>> = (0..4)
        .map(|n| run(&model, backend(n), &prompt(n)).unwrap())
        .collect();
    // The four at once, three times over, each thread with its own backend
    // (two of them multi-threaded themselves) on the one shared model.
    for _ in 0..3 {
        let handles: Vec<_> = (0..4)
            .map(|n| {
                let (model, backend) = (Arc::clone(&model), backend(n));
                std::thread::spawn(move || run(&model, backend, &prompt(n)).unwrap())
            })
            .collect();
        for (n, h) in handles.into_iter().enumerate() {
            let together = h.join().unwrap();
            assert_eq!(together, alone[n], "thread {n} ({})", backends[n]);
        }
    }
}

#[test]
fn model_outlives_its_loader() {
    // The session is built in a function that returns it; the model is
    // held by the session alone.
    fn open_session() -> inferno_cpu::model::Session<Arc<Model>, Simd> {
        tiny().session(Simd, SessionOptions::default()).unwrap()
    }
    let mut s = open_session();
    let a = s.prefill(&[3, 4, 5]).unwrap().to_vec();
    let model = tiny();
    let mut fresh = model.session(Simd, SessionOptions::default()).unwrap();
    assert_eq!(a, fresh.prefill(&[3, 4, 5]).unwrap());
    assert_eq!(Arc::strong_count(s.model()), 1);
}

#[test]
fn model_files_load_through_every_constructor() {
    let bytes = model_bytes(&SynthConfig::tiny(), 11).unwrap();
    let dir = std::env::temp_dir().join(format!("inferno-handle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tiny.gguf");
    std::fs::write(&path, &bytes).unwrap();
    let ids = prompt(1);
    let want = run(&tiny(), AnyBackend::new("simd", 1).unwrap(), &ids).unwrap();
    for model in [Model::open(&path).unwrap(), Model::read(&path).unwrap()] {
        assert_eq!(model.file().path(), path);
        let got = run(&Arc::new(model), AnyBackend::new("simd", 1).unwrap(), &ids).unwrap();
        assert_eq!(got, want);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_file_is_a_typed_error() {
    assert!(matches!(
        Model::from_bytes(b"GGUF"),
        Err(ModelError::Gguf(_))
    ));
    let missing = std::env::temp_dir().join("inferno-no-such-model.gguf");
    assert!(matches!(Model::open(&missing), Err(ModelError::Gguf(_))));
}

/// The last `Arc<Model>` is dropped by whichever session thread finishes
/// last, while the others are still decoding: the loader's handle is gone
/// before any of them starts, one thread panics mid-generation (its
/// session, and perhaps the model, dropped during unwinding), and a
/// session is moved to a second thread half-way. Every surviving thread
/// gets the logits it gets alone, for mapped and in-memory files, and the
/// model is freed once all are done.
#[test]
fn the_last_handle_drops_on_whichever_thread_finishes_last() {
    use std::sync::{Barrier, Weak};
    let bytes = model_bytes(&SynthConfig::tiny(), 11).unwrap();
    let dir = std::env::temp_dir().join(format!("inferno-last-drop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tiny.gguf");
    std::fs::write(&path, &bytes).unwrap();
    let backends = ["scalar", "simd", "pool", "parallel"];
    let backend =
        |n: usize| AnyBackend::new(backends[n % 4], if n % 4 < 2 { 1 } else { 2 }).unwrap();
    let alone: Vec<Vec<f32>> = (0..5)
        .map(|n| run(&tiny(), backend(n), &prompt(n)).unwrap())
        .collect();
    for round in 0..6 {
        let model = Arc::new(if round % 2 == 0 {
            Model::open(&path).unwrap()
        } else {
            Model::from_bytes(&bytes).unwrap()
        });
        let weak: Weak<Model> = Arc::downgrade(&model);
        let start = Arc::new(Barrier::new(5));
        let handles: Vec<_> = (0..5)
            .map(|n| {
                let mut s = model
                    .session(backend(n), SessionOptions::default())
                    .unwrap();
                let start = Arc::clone(&start);
                std::thread::spawn(move || {
                    start.wait();
                    let ids = prompt(n);
                    let mut out = s.prefill(&ids).unwrap().to_vec();
                    let mut token = argmax(s.logits());
                    for step in 0..6 {
                        if n == 4 && step == 3 {
                            panic!("a session thread panics mid-generation");
                        }
                        if n == 3 && step == 2 {
                            // Finish on another thread.
                            let (s2, rest) = std::thread::spawn(move || {
                                let mut rest = Vec::new();
                                for _ in step..6 {
                                    let l = s.decode(token).unwrap();
                                    token = argmax(l);
                                    rest.extend_from_slice(l);
                                }
                                (s, rest)
                            })
                            .join()
                            .unwrap();
                            drop(s2);
                            out.extend(rest);
                            return out;
                        }
                        let l = s.decode(token).unwrap();
                        token = argmax(l);
                        out.extend_from_slice(l);
                    }
                    out
                })
            })
            .collect();
        drop(model);
        for (n, h) in handles.into_iter().enumerate() {
            match h.join() {
                Ok(got) => assert_eq!(got, alone[n], "round {round} thread {n}"),
                Err(_) => assert_eq!(n, 4, "round {round}: thread {n} panicked"),
            }
        }
        assert!(
            weak.upgrade().is_none(),
            "round {round}: the model outlived every handle"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
