//! Writing a model file safely, and the per-user cache of model files.

use std::fs::{File, OpenOptions};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::model::{model_len, write_model};
use super::{FileType, SynthConfig, SynthError, FORMAT_VERSION};
use crate::gguf::{GgufFile, WriteError};

/// Distinguishes the temporary files of concurrent writes in one process
/// (the process id alone separates processes).
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> SynthError + '_ {
    move |source| SynthError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Writes the model to `path` without ever exposing a partial file.
///
/// The file is written to a temporary file beside `path` (named
/// `<stem>.<pid>-<n>.gguf.tmp`), synced to disk, then renamed over `path`.
/// A rename replaces the directory entry, not the old file's contents, so a
/// process that has the old file memory-mapped keeps reading it unchanged,
/// and a reader opening `path` sees either the old file or the complete new
/// one. On error the temporary file is removed. (On Windows, where an open
/// file cannot be replaced, the rename then fails with an I/O error.)
///
/// # Errors
///
/// [`SynthError::Config`] for an invalid config (nothing is created);
/// [`SynthError::Io`] naming the file when creating, writing, syncing or
/// renaming fails (including a missing parent directory).
pub fn write_model_file(
    cfg: &SynthConfig,
    seed: u64,
    path: &Path,
    progress: impl FnMut(u64, u64),
) -> Result<(), SynthError> {
    cfg.validate()?;
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let temp = path.with_extension(format!("{}-{n}.gguf.tmp", std::process::id()));
    let result = write_temp(cfg, seed, &temp, progress)
        .and_then(|()| std::fs::rename(&temp, path).map_err(io_error(path)));
    if result.is_err() {
        // Best effort: the error being reported is the one that matters.
        let _ = std::fs::remove_file(&temp);
        return result;
    }
    sync_parent(path);
    Ok(())
}

/// Writes and syncs the temporary file; I/O errors name it.
fn write_temp(
    cfg: &SynthConfig,
    seed: u64,
    temp: &Path,
    progress: impl FnMut(u64, u64),
) -> Result<(), SynthError> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temp)
        .map_err(io_error(temp))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    write_model(cfg, seed, &mut out, progress).map_err(|e| match e {
        SynthError::Write(WriteError::Io(source)) => SynthError::Io {
            path: temp.to_owned(),
            source,
        },
        e => e,
    })?;
    let file: File = out
        .into_inner()
        .map_err(|e| io_error(temp)(e.into_error()))?;
    file.sync_all().map_err(io_error(temp))
}

/// Syncs the directory holding `path` so the rename itself survives a
/// crash. Best effort: some platforms and file systems cannot open or sync
/// a directory, and the file's own contents are already on disk.
fn sync_parent(path: &Path) {
    #[cfg(unix)]
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// A non-empty environment variable.
fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Where model files are cached: `INFERNO_CACHE` if set; else
/// `$XDG_CACHE_HOME/inferno` (an absolute `XDG_CACHE_HOME`, as the XDG spec
/// requires, on Unix-like systems); else the platform's cache location:
/// `$HOME/Library/Caches/inferno` on macOS, `%LOCALAPPDATA%\inferno` on
/// Windows, `$HOME/.cache/inferno` elsewhere. `None` when none of these
/// variables is set.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = env_path("INFERNO_CACHE") {
        return Some(dir);
    }
    if cfg!(windows) {
        return env_path("LOCALAPPDATA").map(|d| d.join("inferno"));
    }
    if let Some(xdg) = env_path("XDG_CACHE_HOME").filter(|p| p.is_absolute()) {
        return Some(xdg.join("inferno"));
    }
    let home = env_path("HOME")?;
    Some(if cfg!(target_os = "macos") {
        home.join("Library").join("Caches").join("inferno")
    } else {
        home.join(".cache").join("inferno")
    })
}

/// The cached file name of a named config, file type and seed, e.g.
/// `qwen3-0.6b-synth-s0-v1.gguf` (Q8_0, the default type) or
/// `qwen3-0.6b-q4_k_m-synth-s0-v1.gguf`: the [`FORMAT_VERSION`] in the name
/// keeps files written by an older generator from being reused.
pub fn model_file_name(cfg_name: &str, file_type: FileType, seed: u64) -> String {
    let ty = match file_type {
        FileType::Q8_0 => String::new(),
        t => format!("-{t}"),
    };
    format!("qwen3-{cfg_name}{ty}-synth-s{seed}-v{FORMAT_VERSION}.gguf")
}

/// The path of the synthetic model `cfg_name` (`"tiny"`, `"small"` or
/// `"0.6b"`) of `file_type` with `seed` in [`default_cache_dir`], written
/// there first if needed.
///
/// An existing file is reused when it parses as GGUF and has the length
/// this version writes; anything else (a truncated or foreign file) is
/// replaced through [`write_model_file`], so a file another process has
/// mapped is never modified. `progress` is only called when the file is
/// written.
///
/// # Errors
///
/// [`SynthError::UnknownConfig`], [`SynthError::NoCacheDir`],
/// [`SynthError::Io`] (creating the directory or writing the file).
pub fn cached_model(
    cfg_name: &str,
    file_type: FileType,
    seed: u64,
    progress: impl FnMut(u64, u64),
) -> Result<PathBuf, SynthError> {
    let cfg = SynthConfig::by_name(cfg_name)
        .ok_or_else(|| SynthError::UnknownConfig {
            name: cfg_name.to_owned(),
        })?
        .with_file_type(file_type);
    let dir = default_cache_dir().ok_or(SynthError::NoCacheDir)?;
    std::fs::create_dir_all(&dir).map_err(io_error(&dir))?;
    let path = dir.join(model_file_name(cfg_name, file_type, seed));
    if is_complete(&path, &cfg, seed)? {
        return Ok(path);
    }
    write_model_file(&cfg, seed, &path, progress)?;
    Ok(path)
}

/// Whether `path` holds a valid GGUF file of the length `cfg` and `seed`
/// give. Only the header is read (the file is mapped, not loaded).
fn is_complete(path: &Path, cfg: &SynthConfig, seed: u64) -> Result<bool, SynthError> {
    let expected = model_len(cfg, seed)?;
    match std::fs::metadata(path) {
        Ok(m) if m.len() == expected => {}
        _ => return Ok(false),
    }
    Ok(GgufFile::open(path).is_ok_and(|f| f.gguf().header().file_len() == expected))
}
