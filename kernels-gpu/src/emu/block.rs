//! The blocks of an emulated launch: a pool of OS threads, one per GPU
//! thread of a block, that runs the launch's blocks one after another;
//! the block's shared memory; and its barrier.
//!
//! [`Pool::new`] spawns the threads once per launch (or once for the
//! small launches that measure a kernel's cost); [`Pool::run`] runs one
//! block on them: it resets shared memory and the barrier, publishes the
//! block and wakes the threads, each of which runs the kernel body as its
//! thread of that block and then exits the block. When the last one has
//! exited, the block's last interval is checked and `run` returns. No OS
//! thread is created per block (a launch of the naive kernel at
//! n = 2^20 would otherwise create and destroy 2^24 of them).
//!
//! The barrier counts arrivals and exits under one mutex. When every
//! thread has either arrived or exited, the block cannot make progress
//! alone, so the last one to get there decides: if all arrived at the
//! same barrier site, the barrier interval is closed (its logs checked,
//! see [`super::check`]) and everyone is released; otherwise the barrier
//! is broken, reported, and every waiting thread unwinds with a
//! [`BarrierBroken`] payload. So a barrier that some threads skip is an
//! error, never a hang.
//!
//! Warp collectives (`mma.sync`, `ldmatrix`) meet the same way, per warp:
//! each lane hands in its operands and waits; the last lane of the warp to
//! arrive (at the same site) computes every lane's result and releases
//! the warp. A lane waiting at a collective counts as stopped for the
//! barrier's decision, so a warp whose lanes never all arrive (one
//! exited, or waits at a barrier) breaks the block like a skipped barrier.
//!
//! Waiting is `thread::park` on a counter: a waiter sleeps until the
//! counter it waits on moves, and whoever moves it unparks the threads
//! concerned. Released waiters then run without touching the mutex (a
//! condition variable would make hundreds of woken threads queue for it
//! again on every barrier).

use std::any::Any;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock};
use std::thread::{self, Scope, Thread};

use super::backend::{self, EmuThread};
use super::check::IntervalCheck;
use super::report::{
    BarrierError, Coord, GridThread, Interval, KernelPanic, Site, UnwaitedCopies, Waiters,
};
use super::{Findings, Launch, SharedAccess};
use crate::gemm::Gemm;

/// The panic payload that unwinds a thread out of a broken barrier (it
/// is not a kernel panic: the barrier error is the finding).
struct BarrierBroken;

/// The block the pool is running: its shared memory, barrier and threads.
pub(crate) struct Block {
    pub dims: Coord,
    /// The block's shared memory, `f32` bits per word.
    pub shared: Box<[AtomicU32]>,
    sync: Mutex<Sync>,
    /// Bumped when a block starts, and when the pool stops.
    starts: AtomicU64,
    /// The block that starts (`None`: the pool stops), written before
    /// `starts` moves. Only read while the block runs, so never contended.
    job: RwLock<Option<Job>>,
    /// Bumped when a barrier releases the block or breaks.
    releases: AtomicU64,
    /// Per warp: bumped when a warp collective releases the warp.
    warp_releases: Box<[AtomicU64]>,
    /// Set (before `releases` is bumped) when a barrier of the current
    /// block broke; cleared when the next block starts.
    broken: AtomicBool,
    /// Set when the last thread of the block has exited.
    finished: AtomicBool,
    /// `sync_threads_or`'s vote: set by the threads whose predicate
    /// holds, between its first two barriers.
    pub vote: AtomicBool,
    /// The pool's threads, by linear thread id (set once, before the
    /// first block starts), and the thread that runs the pool.
    threads: OnceLock<Vec<Thread>>,
    coordinator: Thread,
}

/// A block to run: which one, of which launch, with which arguments.
#[derive(Clone)]
struct Job {
    idx: Coord,
    launch: Arc<Launch>,
    gemm: Gemm,
}

/// The current block's barrier state, and the logs of the open interval.
struct Sync {
    idx: Coord,
    /// Per thread: the barrier site it waits at.
    waiting_at: Vec<Option<Site>>,
    waiting: usize,
    exited: Vec<bool>,
    exits: usize,
    /// Barriers completed, and the last one's site: the open interval.
    barriers: usize,
    last_barrier: Option<Site>,
    /// Per thread: its shared accesses in the open interval.
    logs: Vec<Vec<SharedAccess>>,
    check: IntervalCheck,
    /// Per thread: the warp-collective site it waits at, what it brought
    /// there, and (once the warp is released) what it takes away.
    collective_at: Vec<Option<Site>>,
    collective_in: Vec<Option<Operands>>,
    collective_out: Vec<Option<Operands>>,
    /// Threads waiting at warp collectives.
    collective_waiting: usize,
}

/// A lane's operands or result of a warp collective.
pub(crate) type Operands = Box<dyn Any + Send>;

/// Computes every lane's result of a warp collective from every lane's
/// operands (in lane order).
pub(crate) type Collective<'a> = &'a dyn Fn(Vec<Operands>) -> Vec<Operands>;

/// Threads per warp.
const WARP: usize = 32;

/// The threads that run a kernel's blocks. Dropping it stops them (the
/// scope they were spawned in then joins them).
pub(crate) struct Pool {
    block: Arc<Block>,
}

impl Pool {
    /// Spawns, in `scope`, one OS thread per GPU thread of a block of
    /// `dims` threads with `shared_words` words of shared memory, which
    /// run `body` for each block [`Pool::run`] gives them.
    ///
    /// If the OS refuses a thread, the threads already spawned are
    /// stopped and its error is returned.
    pub fn new<'scope>(
        scope: &'scope Scope<'scope, '_>,
        dims: Coord,
        shared_words: usize,
        body: fn(Gemm),
    ) -> io::Result<Pool> {
        let count = dims.0 * dims.1;
        let block = Arc::new(Block {
            dims,
            shared: (0..shared_words)
                .map(|_| AtomicU32::new(f32::NAN.to_bits()))
                .collect(),
            sync: Mutex::new(Sync {
                idx: (0, 0),
                waiting_at: vec![None; count],
                waiting: 0,
                exited: vec![false; count],
                exits: 0,
                barriers: 0,
                last_barrier: None,
                logs: vec![Vec::new(); count],
                check: IntervalCheck::new(shared_words),
                collective_at: vec![None; count],
                collective_in: (0..count).map(|_| None).collect(),
                collective_out: (0..count).map(|_| None).collect(),
                collective_waiting: 0,
            }),
            starts: AtomicU64::new(0),
            job: RwLock::new(None),
            releases: AtomicU64::new(0),
            warp_releases: (0..count.div_ceil(WARP))
                .map(|_| AtomicU64::new(0))
                .collect(),
            broken: AtomicBool::new(false),
            vote: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            threads: OnceLock::new(),
            coordinator: thread::current(),
        });
        let mut threads = Vec::with_capacity(count);
        for tid in 0..count {
            let serving = Arc::clone(&block);
            let spawned = if refused_by_a_test(tid) {
                Err(io::Error::other("refused by a test"))
            } else {
                thread::Builder::new().spawn_scoped(scope, move || serve(&serving, tid, body))
            };
            match spawned {
                Ok(handle) => threads.push(handle.thread().clone()),
                Err(error) => {
                    // Stop the threads already running, or the scope
                    // would wait for them forever.
                    let _ = block.threads.set(threads);
                    drop(Pool { block });
                    return Err(error);
                }
            }
        }
        // Before any block starts, so every waker finds them.
        let _ = block.threads.set(threads);
        Ok(Pool { block })
    }

    /// Runs block `idx` of `launch` (the kernel's arguments: `gemm`) to
    /// completion, and records what its checks found.
    pub fn run(&self, launch: &Arc<Launch>, gemm: Gemm, idx: Coord) {
        let block = &self.block;
        assert!(
            launch.block_dims == block.dims && launch.shared_words == block.shared.len(),
            "a pool runs blocks of the shape it was made for"
        );
        {
            let mut sync = block.lock();
            for word in block.shared.iter() {
                word.store(f32::NAN.to_bits(), Relaxed);
            }
            sync.idx = idx;
            sync.waiting_at.fill(None);
            sync.waiting = 0;
            sync.exited.fill(false);
            sync.exits = 0;
            sync.barriers = 0;
            sync.last_barrier = None;
            sync.collective_at.fill(None);
            sync.collective_in.iter_mut().for_each(|x| *x = None);
            sync.collective_out.iter_mut().for_each(|x| *x = None);
            sync.collective_waiting = 0;
            block.broken.store(false, Release);
            block.finished.store(false, Release);
            block.vote.store(false, Release);
            *block.job.write().unwrap_or_else(PoisonError::into_inner) = Some(Job {
                idx,
                launch: Arc::clone(launch),
                gemm,
            });
            block.starts.fetch_add(1, Release);
        }
        block.wake_threads();
        park_until(|| block.finished.load(Acquire));
        // Every thread has exited: check the last interval.
        let mut sync = block.lock();
        block.close_interval(&mut sync, launch, None);
        let banks = sync.check.take_banks();
        launch.findings(|f| f.banks.merge(&banks));
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        *self
            .block
            .job
            .write()
            .unwrap_or_else(PoisonError::into_inner) = None;
        self.block.starts.fetch_add(1, Release);
        self.block.wake_threads();
    }
}

/// Whether a unit test asked [`Pool::new`] to act as if the OS refused
/// thread `tid` (always false outside `cargo test`).
fn refused_by_a_test(tid: usize) -> bool {
    #[cfg(test)]
    return tests::REFUSE_THREAD.get() == Some(tid);
    #[cfg(not(test))]
    return {
        let _ = tid;
        false
    };
}

/// Parks the calling thread until `ready()`. Whoever makes it true
/// unparks the thread afterwards, so no wake-up is lost (an unpark
/// before the park makes the park return at once).
fn park_until(ready: impl Fn() -> bool) {
    while !ready() {
        thread::park();
    }
}

/// A pool thread's life: run each block it is given as thread `tid`.
fn serve(block: &Arc<Block>, tid: usize, body: fn(Gemm)) {
    let mut seen = 0;
    loop {
        park_until(|| block.starts.load(Acquire) != seen);
        seen = block.starts.load(Acquire);
        let job = block
            .job
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match job {
            Some(job) => run_thread(block, &job, tid, body),
            None => return,
        }
    }
}

impl Block {
    fn lock(&self) -> MutexGuard<'_, Sync> {
        self.sync.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wake_threads(&self) {
        self.threads
            .get()
            .into_iter()
            .flatten()
            .for_each(Thread::unpark);
    }

    /// Thread `tid` arrives at the barrier at `site`, handing in its log
    /// (and getting an empty one back). Returns when the block is
    /// released; unwinds with [`BarrierBroken`] if it never will be.
    pub fn arrive(&self, tid: usize, site: Site, log: &mut Vec<SharedAccess>, launch: &Launch) {
        let mut sync = self.lock();
        if !self.broken.load(Acquire) {
            std::mem::swap(&mut sync.logs[tid], log);
            sync.waiting_at[tid] = Some(site);
            sync.waiting += 1;
            let releases = self.releases.load(Acquire);
            let settled = self.settle(&mut sync, launch);
            drop(sync);
            if settled {
                self.wake_threads();
            }
            park_until(|| self.releases.load(Acquire) != releases);
            if !self.broken.load(Acquire) {
                return;
            }
        } else {
            drop(sync);
        }
        panic::resume_unwind(Box::new(BarrierBroken))
    }

    /// Lane `tid` of its warp arrives at the warp collective at `site` with
    /// `operands`; returns its part of the result once every lane of the
    /// warp has arrived there (the last one computes `collective` for
    /// all); unwinds with [`BarrierBroken`] if that never happens.
    pub fn warp_collective(
        &self,
        tid: usize,
        site: Site,
        operands: Operands,
        collective: Collective<'_>,
        launch: &Launch,
    ) -> Operands {
        let warp = tid / WARP;
        let lanes = warp * WARP..((warp + 1) * WARP).min(self.dims.0 * self.dims.1);
        let mut sync = self.lock();
        if self.broken.load(Acquire) {
            drop(sync);
            panic::resume_unwind(Box::new(BarrierBroken))
        }
        sync.collective_at[tid] = Some(site);
        sync.collective_in[tid] = Some(operands);
        sync.collective_waiting += 1;
        let releases = self.warp_releases[warp].load(Acquire);
        let complete = lanes
            .clone()
            .all(|lane| sync.collective_at[lane] == Some(site));
        if complete {
            let inputs = lanes
                .clone()
                .map(|lane| {
                    sync.collective_in[lane]
                        .take()
                        .expect("every lane handed in")
                })
                .collect();
            let outputs = collective(inputs);
            assert_eq!(outputs.len(), lanes.len(), "a result for every lane");
            for (lane, out) in lanes.clone().zip(outputs) {
                sync.collective_at[lane] = None;
                sync.collective_out[lane] = Some(out);
            }
            sync.collective_waiting -= lanes.len();
            self.warp_releases[warp].fetch_add(1, Release);
            let mine = sync.collective_out[tid].take().expect("just set");
            drop(sync);
            if let Some(threads) = self.threads.get() {
                lanes
                    .filter(|&l| l != tid)
                    .for_each(|l| threads[l].unpark());
            }
            return mine;
        }
        let settled = self.settle(&mut sync, launch);
        drop(sync);
        if settled {
            self.wake_threads();
        }
        park_until(|| {
            self.warp_releases[warp].load(Acquire) != releases || self.broken.load(Acquire)
        });
        let mine = self.lock().collective_out[tid].take();
        match mine {
            Some(out) => out,
            None => panic::resume_unwind(Box::new(BarrierBroken)),
        }
    }

    /// Thread `tid` has left the kernel (returned, panicked or unwound).
    fn exit(&self, tid: usize, log: Vec<SharedAccess>, launch: &Launch) {
        let mut sync = self.lock();
        sync.logs[tid].extend(log);
        sync.exited[tid] = true;
        sync.exits += 1;
        let settled = self.settle(&mut sync, launch);
        let finished = sync.exits == sync.exited.len();
        if finished {
            self.finished.store(true, Release);
        }
        drop(sync);
        if settled {
            self.wake_threads();
        }
        if finished {
            self.coordinator.unpark();
        }
    }

    /// If every thread has arrived or exited and some wait, completes the
    /// barrier or breaks it, and returns true: the caller then wakes the
    /// threads. (A warp collective completes when its last lane arrives,
    /// so one still waiting when every thread has stopped never will.)
    fn settle(&self, sync: &mut Sync, launch: &Launch) -> bool {
        let threads = sync.exited.len();
        let stopped = sync.waiting + sync.collective_waiting + sync.exits;
        if self.broken.load(Acquire)
            || sync.waiting + sync.collective_waiting == 0
            || stopped < threads
        {
            return false;
        }
        let first = sync.waiting_at.iter().flatten().next().copied();
        let same_site = sync.waiting_at.iter().all(|s| *s == first);
        if sync.exits == 0 && sync.collective_waiting == 0 && same_site {
            self.close_interval(sync, launch, first);
            sync.barriers += 1;
            sync.last_barrier = first;
            sync.waiting_at.fill(None);
            sync.waiting = 0;
        } else {
            self.broken.store(true, Release);
            let error = self.barrier_error(sync, launch.kernel);
            launch.findings(|f| Findings::keep(&mut f.barrier_errors, &mut f.omitted, error));
        }
        self.releases.fetch_add(1, Release);
        true
    }

    fn barrier_error(&self, sync: &Sync, kernel: &'static str) -> BarrierError {
        let coord = |tid: usize| (tid % self.dims.0, tid / self.dims.0);
        let mut waiting: Vec<Waiters> = Vec::new();
        let barriers = sync.waiting_at.iter().map(|s| (*s, false));
        let collectives = sync.collective_at.iter().map(|s| (*s, true));
        for (tid, (site, warp_collective)) in barriers.enumerate().chain(collectives.enumerate()) {
            let Some(site) = site else { continue };
            match waiting
                .iter_mut()
                .find(|w| w.site == site && w.warp_collective == warp_collective)
            {
                Some(w) => w.threads.push(coord(tid)),
                None => waiting.push(Waiters {
                    site,
                    threads: vec![coord(tid)],
                    warp_collective,
                }),
            }
        }
        BarrierError {
            kernel,
            block: sync.idx,
            barrier: sync.barriers + 1,
            waiting,
            exited: (sync.exited.iter().enumerate())
                .filter(|(_, e)| **e)
                .map(|(tid, _)| coord(tid))
                .collect(),
        }
    }

    /// Checks the open interval's logs (closed by the barrier at
    /// `closed_by`, or by the end of the kernel) and empties them.
    fn close_interval(&self, sync: &mut Sync, launch: &Launch, closed_by: Option<Site>) {
        let interval = Interval {
            index: sync.barriers,
            opened_by: sync.last_barrier,
            closed_by,
        };
        let Sync {
            idx, logs, check, ..
        } = sync;
        let races = check.close(logs, *idx, self.dims, interval, launch.kernel);
        if !races.is_empty() {
            launch.findings(|f| {
                for race in races {
                    Findings::keep(&mut f.races, &mut f.omitted, race);
                }
            });
        }
        logs.iter_mut().for_each(Vec::clear);
    }
}

/// Thread `tid` of `job`'s block, start to finish, on a pool thread.
fn run_thread(block: &Arc<Block>, job: &Job, tid: usize, body: fn(Gemm)) {
    let Job { idx, launch, gemm } = job;
    let coord = (tid % block.dims.0, tid / block.dims.0);
    backend::set_thread(Some(EmuThread {
        tid,
        thread: coord,
        block_idx: *idx,
        block: Arc::clone(block),
        launch: Arc::clone(launch),
        log: Vec::new(),
        copies: Default::default(),
    }));
    let result = panic::catch_unwind(AssertUnwindSafe(|| body(*gemm)));
    let thread = backend::set_thread(None).expect("set above");
    if let Err(payload) = result
        && !payload.is::<BarrierBroken>()
    {
        let message = (payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(a panic payload that is not a string)".into());
        let panic = KernelPanic {
            kernel: launch.kernel,
            thread: GridThread {
                block: *idx,
                thread: coord,
            },
            message,
            location: backend::take_panic_location(),
        };
        launch.findings(|f| Findings::keep(&mut f.panics, &mut f.omitted, panic));
    }
    let pending = thread.copies.pending().count();
    if let Some(first) = thread.copies.pending().next() {
        let unwaited = UnwaitedCopies {
            kernel: launch.kernel,
            thread: GridThread {
                block: *idx,
                thread: coord,
            },
            copies: pending,
            site: first.site,
        };
        launch.findings(|f| Findings::keep(&mut f.unwaited_copies, &mut f.omitted, unwaited));
    }
    block.exit(tid, thread.log, launch);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::sync::mpsc;
    use std::time::Duration;

    thread_local! {
        /// The thread [`Pool::new`] pretends the OS refused, if any.
        pub(super) static REFUSE_THREAD: Cell<Option<usize>> = const { Cell::new(None) };
    }

    /// The OS refuses thread 200 of 256: `Pool::new` returns the error and
    /// the 200 threads already running stop, so the scope ends (a thread
    /// left waiting for a block would make it wait forever).
    #[test]
    fn refused_thread_stops_the_threads_already_spawned() {
        let (done, finished) = mpsc::channel();
        thread::spawn(move || {
            REFUSE_THREAD.set(Some(200));
            let refused =
                thread::scope(|scope| Pool::new(scope, (256, 1), 16, |_| {}).map(|_| ()).is_err());
            let _ = done.send(refused);
        });
        match finished.recv_timeout(Duration::from_secs(30)) {
            Ok(refused) => assert!(refused, "Pool::new did not return the refusal"),
            Err(_) => panic!("the threads spawned before the refusal never stopped"),
        }
    }
}
