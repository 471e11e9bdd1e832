//! `inferno`: the command-line front end of `inferno-cpu`.

mod dispatch_bench;

fn main() {
    let threads = inferno_cpu::default_threads();
    let mut counts = vec![2, threads];
    counts.sort_unstable();
    counts.dedup();
    if let Err(err) = dispatch_bench::run(&counts, 20_000) {
        eprintln!("error: {err}");
        std::process::exit(1);
    }
}
