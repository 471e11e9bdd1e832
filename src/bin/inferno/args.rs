//! Arguments shared by the subcommands, and how each is turned into what
//! it names: a model file, a loaded model, a backend.

use std::path::PathBuf;

use inferno_cpu::backend::{AnyBackend, BackendKind};
use inferno_cpu::gguf::GgufFile;
use inferno_cpu::model::Model;

use crate::CliError;

/// `--model`: which GGUF file.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ModelPath {
    /// GGUF model file (default: a synthetic Qwen3-0.6B with random
    /// weights, written once to the cache directory: INFERNO_CACHE, else
    /// the platform's).
    #[arg(long, value_name = "FILE")]
    pub model: Option<PathBuf>,
}

impl ModelPath {
    /// The file's path, writing the default model first if it is needed
    /// and not cached yet.
    pub fn path(&self) -> Result<PathBuf, CliError> {
        match &self.model {
            Some(p) => Ok(p.clone()),
            None => crate::bench::default_model(),
        }
    }

    /// The file, memory-mapped and validated: for the subcommands that
    /// read its header and metadata, not its weights.
    pub fn open(&self) -> Result<(PathBuf, GgufFile), CliError> {
        let path = self.path()?;
        let file = GgufFile::open(&path).map_err(|e| CliError::at(&path, e))?;
        Ok((path, file))
    }
}

/// `--model` and `--mmap`: the model a subcommand runs.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ModelArgs {
    #[command(flatten)]
    pub path: ModelPath,
    /// Memory-map the model instead of reading it into memory. Reading it
    /// (the default) puts the weights in huge pages where the OS gives them
    /// (Linux: `MADV_HUGEPAGE`), which measured 8-29% faster decode than
    /// the map's 4 KiB pages; the map starts faster and shares the page
    /// cache.
    #[arg(long)]
    pub mmap: bool,
}

impl ModelArgs {
    /// The model file, read (or mapped) and validated.
    pub fn open(&self) -> Result<(PathBuf, GgufFile), CliError> {
        let path = self.path.path()?;
        let file = if self.mmap {
            GgufFile::open(&path)
        } else {
            GgufFile::read(&path)
        }
        .map_err(|e| CliError::at(&path, e))?;
        Ok((path, file))
    }

    /// The model and its tokenizer, loaded.
    pub fn load(&self) -> Result<(PathBuf, Model), CliError> {
        let (path, file) = self.open()?;
        let model = Model::from_file(file).map_err(|e| CliError::at(&path, e))?;
        Ok((path, model))
    }
}

/// `--backend` and `--threads`: what one run computes on.
#[derive(clap::Args, Clone, Debug)]
pub struct BackendArgs {
    /// Backend: scalar, simd, parallel (rayon) or pool (the spinning pool
    /// for decode, rayon for prefill).
    #[arg(long, default_value_t = BackendKind::Pool)]
    pub backend: BackendKind,
    /// Threads of parallel and pool (default: INFERNO_THREADS, else the
    /// default pool size); scalar and simd run on one.
    #[arg(long, value_parser = parse_threads)]
    pub threads: Option<usize>,
}

impl BackendArgs {
    /// The backend, with its threads started.
    pub fn build(&self) -> Result<AnyBackend, CliError> {
        let threads = match self.threads {
            Some(t) => t,
            None if self.backend.is_single_threaded() => 1,
            None => inferno_cpu::default_threads(),
        };
        Ok(AnyBackend::with_kind(self.backend, threads)?)
    }
}

/// A thread count between 1 and 1024.
pub fn parse_threads(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=1024).contains(&n) => Ok(n),
        _ => Err(format!("{s:?} is not a thread count between 1 and 1024")),
    }
}
