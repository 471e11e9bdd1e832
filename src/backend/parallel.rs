//! rayon for everything, and the rayon pieces [`Pool`](super::Pool) shares
//! for prefill.

use std::ops::Range;

use rayon::prelude::*;

use super::{dispatch_of, Backend, BackendError, BackendKind};
use crate::matvec::{check_batch_any, matmul_any_rayon, ShapeError, Weight};
use crate::quant::dot::Dispatch;
use crate::quant::{Kernel, QuantizedBatch};

/// rayon for everything, decode included: what a fork-join pool gives
/// when every product of a token is split across its threads.
#[derive(Debug)]
pub struct Parallel {
    rayon: RayonPool,
}

impl Parallel {
    /// A backend on its own rayon pool of `threads` threads.
    ///
    /// # Errors
    ///
    /// [`BackendError::Threads`] for 0; [`BackendError::Rayon`] if the
    /// threads cannot start.
    pub fn new(threads: usize) -> Result<Self, BackendError> {
        if threads == 0 {
            return Err(BackendError::zero_threads(BackendKind::Parallel));
        }
        Ok(Self {
            rayon: rayon_pool(threads)?,
        })
    }
}

impl Backend for Parallel {
    fn name(&self) -> &'static str {
        "parallel"
    }
    fn threads(&self) -> usize {
        self.rayon.current_num_threads()
    }
    fn kernel(&self) -> Kernel {
        Kernel::selected()
    }
    fn matmul(
        &self,
        w: &Weight<'_>,
        xs: &QuantizedBatch,
        out: &mut [f32],
    ) -> Result<(), ShapeError> {
        matmul_rayon(&self.rayon, dispatch_of(self), w, xs, out)
    }
    fn for_each_range<T, F>(&self, data: &mut [T], f: F)
    where
        T: Send,
        F: Fn(Range<usize>, &mut [T]) + Sync,
    {
        // One contiguous range per thread, as the pool splits them.
        let chunk = data.len().div_ceil(self.threads()).max(1);
        self.rayon.install(|| {
            data.par_chunks_mut(chunk)
                .enumerate()
                .for_each(|(i, part)| {
                    let start = i * chunk;
                    f(start..start + part.len(), part);
                });
        });
    }
    fn for_each_mut<T, F>(&self, items: &mut [T], f: F)
    where
        T: Send,
        F: Fn(usize, &mut T) + Sync,
    {
        // One task per item (per head), for work stealing to balance.
        self.rayon.install(|| {
            items
                .par_iter_mut()
                .enumerate()
                .for_each(|(i, item)| f(i, item));
        });
    }
    fn for_each_chunk<T, F>(&self, data: &mut [T], chunk: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
    {
        for_each_chunk_rayon(&self.rayon, data, chunk, f);
    }
}

/// A rayon pool whose threads are joined when it drops.
///
/// rayon's own pool only tells its threads to stop when it drops; they
/// finish exiting later, on their own. A backend dropped while the next
/// one runs would then still have threads winding down (allocating while
/// they exit, taking a core) beside it; so the threads here are spawned
/// with their handles kept, and joined after the pool is gone.
///
/// Two cases let them go instead, as rayon would: a drop on one of the
/// pool's own threads (a job of the caller's, `rayon::spawn`ed from a
/// closure the backend ran, holding the backend's last handle), which
/// could only wait for itself; and threads still running such a job
/// [`JOIN_WAIT`] after the drop began, so a drop never waits on the
/// caller's own work.
#[derive(Debug)]
pub(super) struct RayonPool {
    pool: Option<rayon::ThreadPool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl core::ops::Deref for RayonPool {
    type Target = rayon::ThreadPool;

    fn deref(&self) -> &rayon::ThreadPool {
        self.pool.as_ref().expect("the pool lives until drop")
    }
}

/// How long a dropped [`RayonPool`] waits for its threads to exit before
/// it lets the rest go. The backend's own work is done when a drop can
/// begin (every use of it blocks until its work is), so only a job the
/// caller spawned onto the pool can hold a thread this long.
const JOIN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Drop for RayonPool {
    fn drop(&mut self) {
        let on_own_thread = self
            .pool
            .as_ref()
            .is_some_and(|p| p.current_thread_index().is_some());
        // Dropping rayon's pool tells its threads to stop once their work
        // is done.
        drop(self.pool.take());
        if on_own_thread {
            // The handles drop unjoined: the threads run on, detached.
            return;
        }
        let deadline = std::time::Instant::now() + JOIN_WAIT;
        for t in self.threads.drain(..) {
            while !t.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            if t.is_finished() {
                // A rayon thread catches its jobs' panics; a join error
                // has nothing to report in a drop.
                let _ = t.join();
            }
        }
    }
}

/// A rayon pool of `threads` threads, every one of them started, joined
/// when it drops ([`RayonPool`]).
pub(super) fn rayon_pool(threads: usize) -> Result<RayonPool, BackendError> {
    rayon_pool_named(threads, "inferno-rayon-")
}

/// [`rayon_pool`] with threads named `prefix` and their index.
fn rayon_pool_named(threads: usize, prefix: &str) -> Result<RayonPool, BackendError> {
    let mut handles = Vec::with_capacity(threads);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .spawn_handler(|thread| {
            let name = format!("{prefix}{}", thread.index());
            handles.push(
                std::thread::Builder::new()
                    .name(name)
                    .spawn(|| thread.run())?,
            );
            Ok(())
        })
        .build()?;
    // Wait until every thread has started, so a session's first prefill
    // pays no thread start-up, and nothing starts (or allocates) later.
    pool.broadcast(|_| ());
    Ok(RayonPool {
        pool: Some(pool),
        threads: handles,
    })
}

/// rayon's parallel matmul for prefill, shared by [`Parallel`] and
/// [`Pool`](super::Pool); with one thread, the serial matmul on the
/// calling thread.
///
/// Handed to a pool of one thread, every product ran on that pool's
/// thread, away from the caller that had just written its batch: on an
/// AMD EPYC (Zen 4) VM a Q6_K Qwen3-0.6B's prefill of 128 tokens ran at
/// 183-197 tok/s on one thread of `pool` against 200-221 for `simd`, and
/// 218-229 against 215-234 on the calling thread (`inferno bench
/// --backends simd,pool,parallel --threads 1`, three alternated rounds).
pub(super) fn matmul_rayon(
    rayon: &rayon::ThreadPool,
    k: Dispatch,
    w: &Weight<'_>,
    xs: &QuantizedBatch,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    check_batch_any(w, xs, out)?;
    if rayon.current_num_threads() == 1 {
        // On the calling thread, which wrote the batch: the same bits as
        // the tasks give (each weight row's values are the same dots).
        crate::matvec::matmul_any_with(k, w, xs, out);
    } else {
        rayon.install(|| matmul_any_rayon(k, w, xs, out));
    }
    Ok(())
}

/// The prefill fan-out on rayon, one task per chunk, shared by
/// [`Parallel`] and [`Pool`](super::Pool).
pub(super) fn for_each_chunk_rayon<T, F>(
    rayon: &rayon::ThreadPool,
    data: &mut [T],
    chunk: usize,
    f: F,
) where
    T: Send,
    F: Fn(usize, &mut [T]) + Sync,
{
    if rayon.current_num_threads() == 1 {
        // A pool of one thread: the chunks in order on the calling thread.
        for (i, c) in data.chunks_mut(chunk.max(1)).enumerate() {
            f(i, c);
        }
        return;
    }
    rayon.install(|| {
        data.par_chunks_mut(chunk.max(1))
            .enumerate()
            .for_each(|(i, c)| f(i, c));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names of this process's threads that start with `prefix`
    /// (Linux's `/proc/self/task/*/comm`).
    #[cfg(target_os = "linux")]
    fn threads_named(prefix: &str) -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|name| name.starts_with(prefix))
            .count()
    }

    /// A dropped rayon pool's threads have exited when the drop returns
    /// (rayon's own pool lets them exit later), and a live pool's have
    /// all started: counted by a name no other pool's threads have.
    #[cfg(target_os = "linux")]
    #[cfg_attr(miri, ignore = "spawns threads and reads /proc, which Miri isolates")]
    #[test]
    fn a_dropped_pool_leaves_no_thread() {
        for threads in [1, 3] {
            let pool = rayon_pool_named(threads, "rjoin-test-").unwrap();
            assert_eq!(pool.current_num_threads(), threads);
            assert_eq!(threads_named("rjoin-test-"), threads);
            drop(pool);
            assert_eq!(threads_named("rjoin-test-"), 0);
        }
    }

    /// A pool whose last handle a job on one of its own threads drops
    /// lets its threads go (joining would wait for that very thread);
    /// with one thread and with three.
    #[cfg_attr(miri, ignore = "spawns threads")]
    #[test]
    fn a_pool_dropped_on_its_own_thread_returns() {
        use std::sync::{mpsc, Arc};
        for threads in [1, 3] {
            let pool = Arc::new(rayon_pool_named(threads, "rjoin-self-").unwrap());
            let held = Arc::clone(&pool);
            let (tx, rx) = mpsc::channel();
            pool.spawn(move || {
                while Arc::strong_count(&held) > 1 {
                    std::thread::yield_now();
                }
                drop(held);
                tx.send(()).unwrap();
            });
            drop(pool);
            rx.recv_timeout(std::time::Duration::from_secs(60))
                .expect("the drop on the pool's own thread returned");
        }
    }

    /// A drop does not wait on a job the caller spawned onto the pool
    /// that waits for the caller: after [`JOIN_WAIT`] it lets the thread
    /// go, and the job finishes once released.
    #[cfg_attr(miri, ignore = "spawns threads")]
    #[test]
    fn a_drop_does_not_wait_on_the_caller_s_own_job() {
        use std::sync::mpsc;
        let pool = rayon_pool_named(2, "rjoin-wait-").unwrap();
        let (go, wait) = mpsc::channel::<()>();
        let (done, finished) = mpsc::channel();
        pool.spawn(move || {
            let _ = wait.recv();
            done.send(()).unwrap();
        });
        let started = std::time::Instant::now();
        drop(pool);
        assert!(started.elapsed() >= JOIN_WAIT);
        go.send(()).unwrap();
        finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap();
    }
}
