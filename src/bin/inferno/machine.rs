//! What the machine is doing while a benchmark runs: its read bandwidth,
//! the CPU time other processes take, and this process's peak memory.

use std::time::Instant;

use inferno_cpu::{split, ThreadPool};

/// Read bandwidth in bytes per second over `bytes` on `threads` threads
/// (each reading one contiguous share), the best of `reps` passes of each
/// probe, alternated: the selected kernel's widest loads with the decode
/// products' software prefetch
/// ([`read_bytes`](inferno_cpu::matvec::read_bytes)) and without
/// ([`read_bytes_plain`](inferno_cpu::matvec::read_bytes_plain)), and the
/// portable loop's loads
/// ([`read_bytes_narrow`](inferno_cpu::matvec::read_bytes_narrow)); the
/// probe that read fastest is returned beside it. `bytes`
/// should be far larger than the last-level cache: the model's own weights
/// are (hundreds of MB), and reading them costs no extra memory.
pub fn read_bandwidth(
    bytes: &[u8],
    threads: usize,
    reps: usize,
) -> Result<(f64, Probe), inferno_cpu::PoolError> {
    let pool = ThreadPool::new(threads)?;
    let mut best = (0.0f64, Probe::Prefetch);
    let sink = std::sync::atomic::AtomicU64::new(0);
    for _ in 0..reps.max(1) {
        for probe in [Probe::Prefetch, Probe::Plain, Probe::Narrow] {
            let start = Instant::now();
            pool.dispatch(|id, n| {
                let part = &bytes[split(bytes.len(), id, n)];
                let sum = match probe {
                    Probe::Prefetch => inferno_cpu::matvec::read_bytes(part),
                    Probe::Plain => inferno_cpu::matvec::read_bytes_plain(part),
                    Probe::Narrow => inferno_cpu::matvec::read_bytes_narrow(part),
                };
                sink.fetch_xor(sum, std::sync::atomic::Ordering::Relaxed);
            });
            let rate = bytes.len() as f64 / start.elapsed().as_secs_f64();
            if rate > best.0 {
                best = (rate, probe);
            }
        }
    }
    std::hint::black_box(sink.into_inner());
    Ok(best)
}

/// Which read loop measured a bandwidth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// [`read_bytes`](inferno_cpu::matvec::read_bytes): with the decode
    /// products' software prefetch.
    Prefetch,
    /// [`read_bytes_plain`](inferno_cpu::matvec::read_bytes_plain): the
    /// same loads, nothing asked for ahead.
    Plain,
    /// [`read_bytes_narrow`](inferno_cpu::matvec::read_bytes_narrow): the
    /// portable loop's loads, nothing asked for ahead.
    Narrow,
}

impl Probe {
    /// The probe's name in the bench's output.
    pub fn name(self) -> &'static str {
        match self {
            Probe::Prefetch => "prefetch",
            Probe::Plain => "plain",
            Probe::Narrow => "narrow",
        }
    }
}

/// CPU time counters from `/proc` (Linux); `None` elsewhere.
#[derive(Clone, Copy, Debug)]
pub struct CpuTimes {
    /// Busy jiffies of all CPUs together.
    busy: u64,
    /// Jiffies this process used (all its threads).
    own: u64,
    at: Instant,
}

/// Jiffies per second of `/proc/stat` (Linux's `USER_HZ`, 100 on every
/// mainstream architecture).
const USER_HZ: f64 = 100.0;

impl CpuTimes {
    pub fn now() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let cpu: Vec<u64> = stat
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        // user nice system idle iowait irq softirq steal
        let busy = [0, 1, 2, 5, 6, 7]
            .iter()
            .map(|&i| cpu.get(i).copied().unwrap_or(0))
            .sum();
        let own_stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let fields: Vec<&str> = own_stat.rsplit_once(')')?.1.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the whole line.
        let own = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(Self {
            busy,
            own,
            at: Instant::now(),
        })
    }

    /// The share of all CPUs' time that other processes used since
    /// `self` (0.0 to 1.0).
    pub fn others_since(&self) -> Option<f64> {
        let now = Self::now()?;
        let others =
            now.busy.saturating_sub(self.busy) as f64 - now.own.saturating_sub(self.own) as f64;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let capacity = now.at.duration_since(self.at).as_secs_f64() * USER_HZ * cpus;
        // /proc/stat counts whole jiffies per CPU: allow a couple of ticks.
        Some(((others - 2.0).max(0.0) / capacity.max(1.0)).min(1.0))
    }
}

/// Peak resident memory of this process in bytes (`VmHWM`), on Linux.
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The CPU's model name, for the report.
pub fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}
