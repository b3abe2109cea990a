//! One block of an emulated launch: its OS threads, its shared memory and
//! its barrier.
//!
//! The barrier counts arrivals and exits under one mutex. When every
//! thread has either arrived or exited, the block cannot make progress
//! alone, so the last one to get there decides: if all arrived at the
//! same barrier site, the barrier interval is closed (its logs checked,
//! see [`super::check`]) and everyone is released; otherwise the barrier
//! is broken, reported, and every waiting thread unwinds with a
//! [`BarrierBroken`] payload. So a barrier that some threads skip is an
//! error, never a hang.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;

use super::backend::{self, EmuThread};
use super::check::IntervalCheck;
use super::report::{BarrierError, Coord, GridThread, Interval, KernelPanic, Site, Waiters};
use super::{Findings, Launch, SharedAccess};
use crate::gemm::Gemm;

/// The panic payload that unwinds a thread out of a broken barrier (it
/// is not a kernel panic: the barrier error is the finding).
struct BarrierBroken;

pub(crate) struct Block {
    pub idx: Coord,
    pub dims: Coord,
    /// The block's shared memory, `f32` bits per word.
    pub shared: Box<[AtomicU32]>,
    sync: Mutex<Sync>,
    released: Condvar,
}

/// The barrier's state, and the logs of the open interval.
struct Sync {
    /// Per thread: the barrier site it waits at.
    waiting_at: Vec<Option<Site>>,
    waiting: usize,
    exited: Vec<bool>,
    exits: usize,
    /// Bumped each time a barrier releases the block.
    generation: u64,
    broken: bool,
    /// Barriers completed, and the last one's site: the open interval.
    barriers: usize,
    last_barrier: Option<Site>,
    /// Per thread: its shared accesses in the open interval.
    logs: Vec<Vec<SharedAccess>>,
    check: IntervalCheck,
}

impl Block {
    /// Runs block `idx` of `launch` to completion: one OS thread per GPU thread.
    pub fn run(launch: &Arc<Launch>, idx: Coord, body: fn(Gemm), gemm: Gemm) {
        let dims = launch.block_dims;
        let threads = dims.0 * dims.1;
        let block = Arc::new(Block {
            idx,
            dims,
            shared: (0..launch.shared_words)
                .map(|_| AtomicU32::new(f32::NAN.to_bits()))
                .collect(),
            sync: Mutex::new(Sync {
                waiting_at: vec![None; threads],
                waiting: 0,
                exited: vec![false; threads],
                exits: 0,
                generation: 0,
                broken: false,
                barriers: 0,
                last_barrier: None,
                logs: vec![Vec::new(); threads],
                check: IntervalCheck::new(launch.shared_words),
            }),
            released: Condvar::new(),
        });
        thread::scope(|scope| {
            for tid in 0..threads {
                let thread = EmuThread {
                    tid,
                    thread: (tid % dims.0, tid / dims.0),
                    block: Arc::clone(&block),
                    launch: Arc::clone(launch),
                    log: Vec::new(),
                };
                thread::Builder::new()
                    .spawn_scoped(scope, move || run_thread(thread, body, gemm))
                    .expect("the OS refused a thread for an emulated GPU thread");
            }
        });
        // Every thread has exited: check the last interval.
        let mut sync = block.lock();
        block.close_interval(&mut sync, launch, None);
        let banks = sync.check.take_banks();
        launch.findings(|f| f.banks.merge(&banks));
    }

    fn lock(&self) -> MutexGuard<'_, Sync> {
        self.sync.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Thread `tid` arrives at the barrier at `site`, handing in its log
    /// (and getting an empty one back). Returns when the block is
    /// released; unwinds with [`BarrierBroken`] if it never will be.
    pub fn arrive(&self, tid: usize, site: Site, log: &mut Vec<SharedAccess>, launch: &Launch) {
        let mut sync = self.lock();
        if !sync.broken {
            std::mem::swap(&mut sync.logs[tid], log);
            sync.waiting_at[tid] = Some(site);
            sync.waiting += 1;
            let generation = sync.generation;
            self.settle(&mut sync, launch);
            while sync.generation == generation && !sync.broken {
                sync = self
                    .released
                    .wait(sync)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if sync.generation != generation {
                return;
            }
        }
        drop(sync);
        panic::resume_unwind(Box::new(BarrierBroken))
    }

    /// Thread `tid` has left the kernel (returned, panicked or unwound).
    fn exit(&self, tid: usize, log: Vec<SharedAccess>, launch: &Launch) {
        let mut sync = self.lock();
        sync.logs[tid].extend(log);
        sync.exited[tid] = true;
        sync.exits += 1;
        self.settle(&mut sync, launch);
    }

    /// If every thread has arrived or exited and some wait, completes the
    /// barrier or breaks it.
    fn settle(&self, sync: &mut Sync, launch: &Launch) {
        let threads = sync.exited.len();
        if sync.broken || sync.waiting == 0 || sync.waiting + sync.exits < threads {
            return;
        }
        let first = sync.waiting_at.iter().flatten().next().copied();
        let same_site = sync.waiting_at.iter().all(|s| *s == first);
        if sync.exits == 0 && same_site {
            self.close_interval(sync, launch, first);
            sync.barriers += 1;
            sync.last_barrier = first;
            sync.waiting_at.fill(None);
            sync.waiting = 0;
            sync.generation += 1;
        } else {
            sync.broken = true;
            let error = self.barrier_error(sync, launch.kernel);
            launch.findings(|f| Findings::keep(&mut f.barrier_errors, &mut f.omitted, error));
        }
        self.released.notify_all();
    }

    fn barrier_error(&self, sync: &Sync, kernel: &'static str) -> BarrierError {
        let coord = |tid: usize| (tid % self.dims.0, tid / self.dims.0);
        let mut waiting: Vec<Waiters> = Vec::new();
        for (tid, site) in sync.waiting_at.iter().enumerate() {
            let Some(site) = *site else { continue };
            match waiting.iter_mut().find(|w| w.site == site) {
                Some(w) => w.threads.push(coord(tid)),
                None => waiting.push(Waiters {
                    site,
                    threads: vec![coord(tid)],
                }),
            }
        }
        BarrierError {
            kernel,
            block: self.idx,
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
        let Sync { logs, check, .. } = sync;
        let races = check.close(logs, self.idx, self.dims, interval, launch.kernel);
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

/// One emulated GPU thread, start to finish, on its own OS thread.
fn run_thread(thread: EmuThread, body: fn(Gemm), gemm: Gemm) {
    let (tid, coord) = (thread.tid, thread.thread);
    let (block, launch) = (Arc::clone(&thread.block), Arc::clone(&thread.launch));
    backend::set_thread(Some(thread));
    let result = panic::catch_unwind(AssertUnwindSafe(|| body(gemm)));
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
                block: block.idx,
                thread: coord,
            },
            message,
            location: backend::take_panic_location(),
        };
        launch.findings(|f| Findings::keep(&mut f.panics, &mut f.omitted, panic));
    }
    block.exit(tid, thread.log, &launch);
}
