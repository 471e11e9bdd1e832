//! `--trace` output shared by `bench` and `generate`: where a step's time
//! goes per operation, as a table on stderr or a JSON object.

use inferno_cpu::model::Trace;
use serde_json::json;

/// Prints `trace` as a table: per operation, milliseconds per step
/// (`steps` forward steps were traced), calls per step and share.
pub fn print_table(title: &str, trace: &Trace, steps: usize) {
    let steps = steps.max(1) as f64;
    let total = trace.total().as_secs_f64();
    eprintln!("{title}");
    eprintln!("| op           | ms / step | calls / step | share |");
    eprintln!("|--------------|----------:|-------------:|------:|");
    for (op, time, calls) in trace.iter() {
        let t = time.as_secs_f64();
        eprintln!(
            "| {:<12} | {:>9.3} | {:>12.1} | {:>4.1}% |",
            op.name(),
            t * 1e3 / steps,
            calls as f64 / steps,
            if total > 0.0 { 100.0 * t / total } else { 0.0 }
        );
    }
    eprintln!(
        "| {:<12} | {:>9.3} | {:>12} | {:>5} |",
        "total",
        total * 1e3 / steps,
        "",
        "100%"
    );
}

/// `{"steps": n, "ops": {"qkv": {"ms_per_step": .., "calls_per_step": ..}, ..}}`.
pub fn to_json(trace: &Trace, steps: usize) -> serde_json::Value {
    let per = steps.max(1) as f64;
    let ops: serde_json::Map<String, serde_json::Value> = trace
        .iter()
        .map(|(op, time, calls)| {
            let v = json!({
                "ms_per_step": time.as_secs_f64() * 1e3 / per,
                "calls_per_step": calls as f64 / per,
            });
            (op.name().to_string(), v)
        })
        .collect();
    json!({ "steps": steps, "total_ms_per_step": trace.total().as_secs_f64() * 1e3 / per, "ops": ops })
}
