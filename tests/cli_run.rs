//! `inferno generate`, `eval` and `bench` on the committed tiny model:
//! their exit codes, their JSON, and their errors.
#![cfg(all(feature = "cli", not(feature = "loom")))]

use std::process::{Command, Output};

use serde_json::Value;

const MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/qwen3-tiny-s7.gguf"
);

fn inferno(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_inferno"))
        .args(args)
        .output()
        .unwrap()
}

fn ok_json(args: &[&str]) -> Vec<Value> {
    let out = inferno(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// Status 1 and one line, `inferno SUB: ...`, containing `want`.
fn fails_with(args: &[&str], want: &str) {
    fails_with_env(args, &[], want);
}

fn fails_with_env(args: &[&str], env: &[(&str, &str)], want: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_inferno"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.starts_with(&format!("inferno {}: ", args[0])), "{err}");
    assert!(err.contains(want), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn generate_json_is_one_object_with_text_and_metrics() {
    for backend in ["simd", "pool"] {
        let v = ok_json(&[
            "generate",
            "--model",
            MODEL,
            "--backend",
            backend,
            "--threads",
            "1",
            "--max-tokens",
            "5",
            "--json",
            "--chat",
            "Hello",
        ]);
        assert_eq!(v.len(), 1);
        let v = &v[0];
        assert_eq!(v["backend"], backend);
        assert!(v["text"].is_string());
        let generated = v["generated_tokens"].as_u64().unwrap();
        assert!(generated <= 5);
        let stop = v["stop"].as_str().unwrap();
        assert!(
            (generated == 5 && stop == "limit") || (generated < 5 && stop == "end of generation"),
            "{v}"
        );
        assert!(v["prompt_tokens"].as_u64().unwrap() > 3);
        assert!(v["time_to_first_token_ms"].as_f64().unwrap() > 0.0);
        assert!(v["trace"].is_null());
    }
    // The same seed gives the same text, sampled or greedy.
    let run = |seed: &str| {
        ok_json(&[
            "generate",
            "--model",
            MODEL,
            "--json",
            "--max-tokens",
            "8",
            "--temperature",
            "1",
            "--seed",
            seed,
            "Once",
        ])[0]["text"]
            .clone()
    };
    assert_eq!(run("3"), run("3"));
}

#[test]
fn generate_streams_text_and_prints_metrics() {
    let out = inferno(&[
        "generate",
        "--model",
        MODEL,
        "--max-tokens",
        "4",
        "--trace",
        "Hi",
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "time_to_first_token_ms",
        "decode_tokens_per_second",
        "per decode step:",
    ] {
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn eval_json_matches_its_lines() {
    let v = &ok_json(&["eval", "--model", MODEL, "--tokens", "1,2,3", "--json"])[0];
    assert_eq!(v["tokens"], serde_json::json!([1, 2, 3]));
    assert_eq!(v["vocab"], 512);
    let argmax = v["argmax"].as_array().unwrap();
    assert_eq!(argmax.len(), 3);
    let out = inferno(&[
        "eval",
        "--model",
        MODEL,
        "--tokens",
        "1,2,3",
        "--prefill",
        "--backend",
        "pool",
    ]);
    let lines = String::from_utf8(out.stdout).unwrap();
    let ids: Vec<u64> = lines
        .lines()
        .map(|l| l.split('\t').nth(1).unwrap().parse().unwrap())
        .collect();
    let want: Vec<u64> = argmax.iter().map(|a| a.as_u64().unwrap()).collect();
    assert_eq!(
        ids, want,
        "prefill on pool and decode on the default backend agree"
    );
}

#[test]
fn bench_json_has_one_row_per_backend_and_thread_count() {
    let rows = ok_json(&[
        "bench",
        "--model",
        MODEL,
        "--backends",
        "simd,pool",
        "--threads",
        "1,2",
        "--tokens",
        "3",
        "--prompt-tokens",
        "4",
        "--json",
        "--mmap",
    ]);
    let got: Vec<(String, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["backend"].as_str().unwrap().to_string(),
                r["threads"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [("simd".into(), 1), ("pool".into(), 1), ("pool".into(), 2)]
    );
    for r in &rows {
        assert_eq!(r["decode_tokens"], 3);
        assert_eq!(r["prompt_tokens"], 4);
        assert!(r["decode_tokens_per_second"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn errors_are_one_line_with_status_1() {
    let missing = "/nonexistent/model.gguf";
    for sub in ["generate", "eval", "bench", "tokenize", "inspect"] {
        let mut args = vec![sub, "--model", missing];
        match sub {
            "generate" | "tokenize" => args.push("hi"),
            "eval" => args.extend(["--tokens", "1"]),
            _ => {}
        }
        fails_with(&args, missing);
    }
    fails_with(
        &["eval", "--model", MODEL, "--tokens", "1,99999"],
        "out of range",
    );
    fails_with(
        &["generate", "--model", MODEL, "--top-p", "0", "hi"],
        "top-p",
    );
    fails_with(
        &[
            "generate",
            "--model",
            MODEL,
            "--backend",
            "simd",
            "--threads",
            "2",
            "hi",
        ],
        "single-threaded",
    );
    // A kernel named in the environment is refused if unknown or if this
    // CPU cannot run it, before any work.
    let inspect = ["inspect", "--model", MODEL];
    fails_with_env(&inspect, &[("INFERNO_KERNEL", "sse4")], "names no kernel");
    let foreign = if cfg!(target_arch = "aarch64") {
        "avx2"
    } else {
        "neon"
    };
    fails_with_env(&inspect, &[("INFERNO_KERNEL", foreign)], "not available");
    // A bad flag is clap's: status 2.
    let out = inferno(&["generate", "--model", MODEL, "--backend", "gpu", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pool"));
}

/// `bench --kernels --model F` times F's own decode products: a Q4_K_M
/// file's mix of types is named, every backend row is printed, and the
/// outputs are checked bit for bit; the model-run flags it has no use for
/// are refused (clap's status 2).
#[test]
fn bench_kernels_times_a_files_own_weights() {
    let dir = std::env::temp_dir().join(format!("inferno-cli-kernels-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("small-q4_k_m.gguf");
    let file = file.to_str().unwrap();
    let synth = inferno(&[
        "synth", "--config", "small", "--type", "q4_k_m", "--out", file,
    ]);
    assert!(
        synth.status.success(),
        "{}",
        String::from_utf8_lossy(&synth.stderr)
    );
    let out = inferno(&[
        "bench",
        "--kernels",
        "--model",
        file,
        "--threads",
        "2",
        "--samples",
        "10",
        "--tokens",
        "2",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("decode matvecs of"), "{stdout}");
    assert!(
        stdout.contains("Q4_K") && stdout.contains("Q6_K"),
        "{stdout}"
    );
    for row in [
        "| simd     |       1",
        "| pool     |       2",
        "| parallel |       2",
    ] {
        assert!(stdout.contains(row), "{row}: {stdout}");
    }
    assert!(stdout.contains("bit-identical to simd's"), "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();

    for flag in ["--json", "--trace"] {
        let out = inferno(&["bench", "--kernels", "--model", MODEL, flag]);
        assert_eq!(out.status.code(), Some(2), "{flag}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
    }
    // And `--samples` means nothing without `--kernels`.
    let out = inferno(&["bench", "--model", MODEL, "--samples", "10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--kernels"));
}
