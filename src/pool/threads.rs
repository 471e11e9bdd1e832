//! Choosing the pool size: the environment, then the machine's physical
//! performance cores.
//!
//! A dispatch is a barrier, so it moves at the pace of its slowest share.
//! Two shares on the SMT siblings of one core, or a share on an efficiency
//! core, slow every one of the ~200 barriers of a decoded token; the default
//! is therefore one share per physical performance core.

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Once;

use super::MAX_THREADS;

/// Environment variable that overrides [`default_threads`].
pub const THREADS_ENV: &str = "INFERNO_THREADS";

/// `INFERNO_THREADS` is set but is not an integer in `1..=`[`MAX_THREADS`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{THREADS_ENV}={value:?} is not a thread count from 1 to {MAX_THREADS}")]
pub struct ThreadsEnvError {
    /// The rejected value.
    pub value: String,
}

/// Reads [`THREADS_ENV`]: `Ok(None)` when unset, `Ok(Some(n))` for an
/// integer from 1 to [`MAX_THREADS`] (surrounding whitespace allowed).
///
/// # Errors
///
/// [`ThreadsEnvError`] when set to anything else (`0`, `-1`, `four`, a
/// count above [`MAX_THREADS`], or a value that is not Unicode).
pub fn threads_from_env() -> Result<Option<NonZeroUsize>, ThreadsEnvError> {
    match std::env::var_os(THREADS_ENV) {
        None => Ok(None),
        Some(raw) => parse_threads(&raw.to_string_lossy()).map(Some),
    }
}

fn parse_threads(value: &str) -> Result<NonZeroUsize, ThreadsEnvError> {
    value
        .trim()
        .parse::<NonZeroUsize>()
        .ok()
        .filter(|n| n.get() <= MAX_THREADS)
        .ok_or_else(|| ThreadsEnvError {
            value: value.to_owned(),
        })
}

/// The default pool size.
///
/// 1. `INFERNO_THREADS`, if it is an integer from 1 to [`MAX_THREADS`].
///    An invalid value (including a larger count) is
///    reported once on standard error and ignored (use
///    [`threads_from_env`] to treat it as an error instead).
/// 2. The number of physical performance cores this process may run on:
///    on Linux from sysfs (SMT siblings counted once; on hybrid CPUs only
///    the performance cores), on macOS from `hw.perflevel0.physicalcpu`.
/// 3. [`std::thread::available_parallelism`], else 1.
///
/// Steps 2 and 3 are capped at [`MAX_THREADS`], so a
/// default-sized pool always builds.
pub fn default_threads() -> usize {
    match threads_from_env() {
        Ok(Some(n)) => return n.get(),
        Ok(None) => {}
        Err(err) => {
            static WARN: Once = Once::new();
            WARN.call_once(|| eprintln!("warning: {err}; using the detected core count"));
        }
    }
    let available = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    let detected = match performance_cores() {
        Some(cores) => cores.clamp(1, available),
        None => available,
    };
    detected.min(MAX_THREADS)
}

#[cfg(target_os = "linux")]
fn performance_cores() -> Option<usize> {
    linux_performance_cores(
        Path::new("/sys/devices/system/cpu"),
        Path::new("/sys/devices"),
    )
}

#[cfg(target_os = "macos")]
fn performance_cores() -> Option<usize> {
    let out = std::process::Command::new("sysctl")
        .args(["-n", "hw.perflevel0.physicalcpu"])
        .output()
        .ok()?;
    let n: usize = String::from_utf8(out.stdout).ok()?.trim().parse().ok()?;
    (n > 0).then_some(n)
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn performance_cores() -> Option<usize> {
    None
}

/// Counts physical performance cores from a sysfs tree.
///
/// `cpu_root` is `/sys/devices/system/cpu`; `devices_root` is
/// `/sys/devices`, where Intel hybrid CPUs list their performance cores in
/// `cpu_core/cpus`. On other hybrid CPUs (Arm big.LITTLE) the performance
/// cores are those with the largest `cpu_capacity`.
fn linux_performance_cores(cpu_root: &Path, devices_root: &Path) -> Option<usize> {
    let online = read_cpu_list(&cpu_root.join("online"))?;
    let mut cpus: BTreeSet<usize> = online;
    if let Some(p_cores) = read_cpu_list(&devices_root.join("cpu_core/cpus")) {
        let hybrid: BTreeSet<usize> = cpus.intersection(&p_cores).copied().collect();
        if !hybrid.is_empty() {
            cpus = hybrid;
        }
    } else {
        let capacity = |cpu: usize| -> Option<u64> {
            let path = cpu_root.join(format!("cpu{cpu}/cpu_capacity"));
            std::fs::read_to_string(path).ok()?.trim().parse().ok()
        };
        let capacities: Vec<(usize, u64)> = cpus
            .iter()
            .filter_map(|&cpu| capacity(cpu).map(|c| (cpu, c)))
            .collect();
        if capacities.len() == cpus.len() {
            if let Some(max) = capacities.iter().map(|&(_, c)| c).max() {
                cpus = capacities
                    .into_iter()
                    .filter(|&(_, c)| c == max)
                    .map(|(cpu, _)| cpu)
                    .collect();
            }
        }
    }
    // One core per distinct (package, core id); SMT siblings share both.
    let mut cores = BTreeSet::new();
    for cpu in cpus {
        let topo = cpu_root.join(format!("cpu{cpu}/topology"));
        let read = |name: &str| -> Option<String> {
            Some(
                std::fs::read_to_string(topo.join(name))
                    .ok()?
                    .trim()
                    .to_owned(),
            )
        };
        let key = match (read("physical_package_id"), read("core_id")) {
            (Some(package), Some(core)) => (package, core),
            // No topology: count the CPU as its own core.
            _ => (String::new(), cpu.to_string()),
        };
        cores.insert(key);
    }
    (!cores.is_empty()).then_some(cores.len())
}

/// Parses a sysfs CPU list such as `0-3,8,10-11`.
fn read_cpu_list(path: &Path) -> Option<BTreeSet<usize>> {
    parse_cpu_list(&std::fs::read_to_string(path).ok()?)
}

fn parse_cpu_list(text: &str) -> Option<BTreeSet<usize>> {
    let mut cpus = BTreeSet::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                // Refuse absurd ranges instead of allocating for them.
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => {
                cpus.insert(part.parse().ok()?);
            }
        }
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn parses_env_values() {
        assert_eq!(parse_threads(" 4\n").map(NonZeroUsize::get), Ok(4));
        assert_eq!(
            parse_threads(&MAX_THREADS.to_string()).map(NonZeroUsize::get),
            Ok(MAX_THREADS)
        );
        let too_many = (MAX_THREADS + 1).to_string();
        for bad in ["0", "-1", "four", "", "2.5", &too_many, "281474976710656"] {
            let err = parse_threads(bad).unwrap_err();
            assert_eq!(err.value, bad);
            assert!(err.to_string().contains(THREADS_ENV));
        }
    }

    #[test]
    fn parses_cpu_lists() {
        let list = parse_cpu_list("0-3,8,10-11\n").unwrap();
        assert_eq!(
            list.into_iter().collect::<Vec<_>>(),
            [0, 1, 2, 3, 8, 10, 11]
        );
        assert!(parse_cpu_list("3-1").is_none());
        assert!(parse_cpu_list("x").is_none());
        assert!(parse_cpu_list("0-99999999999").is_none());
    }

    /// Writes a fake sysfs: `cores[i] = (core_id, capacity)` for cpu i.
    fn fake_sysfs(
        name: &str,
        cores: &[(u32, Option<u32>)],
        p_cores: Option<&str>,
    ) -> std::path::PathBuf {
        let root =
            std::env::temp_dir().join(format!("inferno-sysfs-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let cpu_root = root.join("system/cpu");
        fs::create_dir_all(&cpu_root).unwrap();
        fs::write(cpu_root.join("online"), format!("0-{}\n", cores.len() - 1)).unwrap();
        for (cpu, (core, capacity)) in cores.iter().enumerate() {
            let topo = cpu_root.join(format!("cpu{cpu}/topology"));
            fs::create_dir_all(&topo).unwrap();
            fs::write(topo.join("physical_package_id"), "0\n").unwrap();
            fs::write(topo.join("core_id"), format!("{core}\n")).unwrap();
            if let Some(c) = capacity {
                fs::write(
                    cpu_root.join(format!("cpu{cpu}/cpu_capacity")),
                    format!("{c}\n"),
                )
                .unwrap();
            }
        }
        if let Some(list) = p_cores {
            fs::create_dir_all(root.join("cpu_core")).unwrap();
            fs::write(root.join("cpu_core/cpus"), list).unwrap();
        }
        root
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads files; Miri's isolation stops at `statx`")]
    fn smt_siblings_count_once() {
        // 4 logical CPUs, 2 cores with 2 threads each.
        let root = fake_sysfs("smt", &[(0, None), (1, None), (0, None), (1, None)], None);
        assert_eq!(
            linux_performance_cores(&root.join("system/cpu"), &root),
            Some(2)
        );
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads files; Miri's isolation stops at `statx`")]
    fn intel_hybrid_keeps_p_cores() {
        // CPUs 0-3: two SMT P-cores; CPUs 4-7: four E-cores.
        let cores = [
            (0, None),
            (0, None),
            (4, None),
            (4, None),
            (8, None),
            (9, None),
            (10, None),
            (11, None),
        ];
        let root = fake_sysfs("hybrid", &cores, Some("0-3\n"));
        assert_eq!(
            linux_performance_cores(&root.join("system/cpu"), &root),
            Some(2)
        );
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads files; Miri's isolation stops at `statx`")]
    fn big_little_keeps_largest_capacity() {
        let cores = [
            (0, Some(512)),
            (1, Some(512)),
            (2, Some(1024)),
            (3, Some(1024)),
            (4, Some(1024)),
        ];
        let root = fake_sysfs("biglittle", &cores, None);
        assert_eq!(
            linux_performance_cores(&root.join("system/cpu"), &root),
            Some(3)
        );
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads files; Miri's isolation stops at `statx`")]
    fn default_is_env_then_performance_cores_within_available() {
        // INFERNO_THREADS when valid; else the detected performance cores,
        // never more than the process may run on; else all of those.
        let available = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        let want = match threads_from_env() {
            Ok(Some(n)) => n.get(),
            _ => performance_cores().map_or(available, |c| c.clamp(1, available)),
        };
        assert_eq!(default_threads(), want);
    }
}
