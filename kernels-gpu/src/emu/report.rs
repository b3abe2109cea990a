//! What the emulator found: the findings of one launch, each with a
//! `Display` that says what went wrong, where, and which threads did it.

use std::fmt;
use std::panic::Location;

/// `(x, y)` coordinates: a thread in its block, or a block in the grid.
pub type Coord = (usize, usize);

/// A source location in a kernel: the call site of a device function.
pub type Site = &'static Location<'static>;

/// Which memory an access went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// The input `A` (m x k).
    A,
    /// The input `B` (k x n).
    B,
    /// The output `C` (m x n).
    C,
    /// The scales of an FP8 launch (`emu::run_scaled`): A's, B's, D's.
    ScalesA,
    ScalesB,
    ScalesD,
    /// The epilogue's bias and scales (`emu::run_fused`).
    Bias,
    Scale,
    /// The block's shared memory (indices are 4-byte words).
    Shared,
}

/// A load or a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    Load,
    Store,
}

/// One thread of the launch: its block in the grid and its place in the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridThread {
    pub block: Coord,
    pub thread: Coord,
}

/// The stretch of a block's run between two consecutive barriers, in
/// which accesses by different threads are unordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    /// Barriers the block had completed when the interval began (0: it
    /// began at the kernel's start).
    pub index: usize,
    /// The barrier that opened it (`None`: the kernel's start).
    pub opened_by: Option<Site>,
    /// The barrier that closed it (`None`: the end of the kernel, or a
    /// barrier the block never completed).
    pub closed_by: Option<Site>,
}

/// One side of a race.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaceAccess {
    pub thread: Coord,
    pub op: Op,
    pub site: Site,
}

/// Two threads of a block touched the same shared-memory word between the
/// same pair of barriers, at least one of them writing it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Race {
    pub kernel: &'static str,
    pub block: Coord,
    /// Shared-memory word (4-byte index).
    pub word: usize,
    pub first: RaceAccess,
    pub second: RaceAccess,
    pub interval: Interval,
}

/// Threads that wait at one barrier site, or at one warp collective.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiters {
    pub site: Site,
    pub threads: Vec<Coord>,
    /// A warp-collective instruction (`mma.sync`, `ldmatrix`) that needs
    /// every lane of the warp, not a block-wide barrier.
    pub warp_collective: bool,
}

/// A thread ended the kernel with `cp.async` copies it never waited for
/// (`wait_group`): their data may land after the kernel, or never.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnwaitedCopies {
    pub kernel: &'static str,
    pub thread: GridThread,
    pub copies: usize,
    /// Where the first of them was started.
    pub site: Site,
}

/// A barrier that not every thread of the block reached: some threads
/// exited (returned or panicked) while others waited, the threads wait at
/// different barriers, or some wait at a warp collective that a lane of
/// their warp never reaches. The waiting threads were unwound, not left
/// hanging.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BarrierError {
    pub kernel: &'static str,
    pub block: Coord,
    /// Which barrier of the block's run (1 = the first) failed.
    pub barrier: usize,
    /// The waiting threads, grouped by the barrier they wait at.
    pub waiting: Vec<Waiters>,
    /// Threads that had already finished the kernel (or panicked).
    pub exited: Vec<Coord>,
}

/// An access outside its buffer (or a misaligned 128-bit access). Reads
/// returned NaN; writes were dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadAccess {
    pub kernel: &'static str,
    pub memory: Memory,
    pub op: Op,
    /// First element (or shared word) accessed.
    pub index: usize,
    /// Elements accessed: 1, or 4 for a 128-bit access.
    pub width: usize,
    /// The buffer's length in elements (shared memory: in words).
    pub len: usize,
    /// In bounds, but a 128-bit access whose index is not a multiple of 4.
    pub misaligned: bool,
    pub thread: GridThread,
    pub site: Site,
}

/// Two threads wrote the same element of C.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoubleWrite {
    pub kernel: &'static str,
    /// Element of C, and its row and column.
    pub index: usize,
    pub row: usize,
    pub col: usize,
    pub first: GridThread,
    pub second: GridThread,
    /// Where the second write happened.
    pub site: Site,
}

/// A kernel thread panicked (on the GPU: `trap`, a launch failure).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelPanic {
    pub kernel: &'static str,
    pub thread: GridThread,
    pub message: String,
    /// `file:line:column` of the panic, when known.
    pub location: Option<String>,
}

/// Warp-level shared-memory requests and their bank conflicts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Warp-instructions (one per warp per dynamic execution of a site).
    pub requests: u64,
    /// Extra wavefronts beyond the conflict-free minimum (see `emu::check`).
    pub conflicts: u64,
}

/// Bank-conflict accounting for one shared-memory access site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SiteStats {
    pub site: Site,
    pub op: Op,
    /// Words per thread: 1, 2 or 4 for a 32-, 64- or 128-bit access.
    pub width: usize,
    pub traffic: Traffic,
}

/// Bank-conflict accounting for a launch: totals and per access site.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BankStats {
    pub loads: Traffic,
    pub stores: Traffic,
    /// Per site, in the order the sites were first seen.
    pub sites: Vec<SiteStats>,
}

impl BankStats {
    /// Adds `conflicts` for one warp-instruction of `site`.
    pub(super) fn add(&mut self, site: Site, op: Op, width: usize, conflicts: u64) {
        let total = match op {
            Op::Load => &mut self.loads,
            Op::Store => &mut self.stores,
        };
        total.requests += 1;
        total.conflicts += conflicts;
        let stats = match self
            .sites
            .iter_mut()
            .find(|s| s.site == site && s.op == op && s.width == width)
        {
            Some(s) => s,
            None => {
                self.sites.push(SiteStats {
                    site,
                    op,
                    width,
                    traffic: Traffic::default(),
                });
                self.sites.last_mut().expect("just pushed")
            }
        };
        stats.traffic.requests += 1;
        stats.traffic.conflicts += conflicts;
    }

    /// Adds another block's accounting to this one.
    pub(super) fn merge(&mut self, other: &BankStats) {
        for s in &other.sites {
            // Fold the other block's per-site totals in, keeping first-seen order.
            match self
                .sites
                .iter_mut()
                .find(|t| t.site == s.site && t.op == s.op && t.width == s.width)
            {
                Some(t) => {
                    t.traffic.requests += s.traffic.requests;
                    t.traffic.conflicts += s.traffic.conflicts;
                }
                None => self.sites.push(*s),
            }
        }
        for (mine, theirs) in [
            (&mut self.loads, other.loads),
            (&mut self.stores, other.stores),
        ] {
            mine.requests += theirs.requests;
            mine.conflicts += theirs.conflicts;
        }
    }
}

/// A thread list short enough for one line: the first few, then a count.
struct Threads<'a>(&'a [Coord]);

impl fmt::Display for Threads<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 6;
        let n = self.0.len();
        write!(f, "{n} thread{} [", if n == 1 { "" } else { "s" })?;
        for (i, (x, y)) in self.0.iter().take(SHOWN).enumerate() {
            write!(f, "{}({x}, {y})", if i > 0 { ", " } else { "" })?;
        }
        if n > SHOWN {
            write!(f, ", ... {} more", n - SHOWN)?;
        }
        write!(f, "]")
    }
}

impl fmt::Display for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Memory::A => "A",
            Memory::B => "B",
            Memory::C => "C",
            Memory::ScalesA => "A's scales",
            Memory::ScalesB => "B's scales",
            Memory::ScalesD => "D's scale",
            Memory::Bias => "the epilogue's bias",
            Memory::Scale => "the epilogue's scales",
            Memory::Shared => "shared memory",
        })
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Load => "load",
            Op::Store => "store",
        })
    }
}

impl fmt::Display for GridThread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ((bx, by), (tx, ty)) = (self.block, self.thread);
        write!(f, "block ({bx}, {by}) thread ({tx}, {ty})")
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.opened_by {
            Some(site) => write!(f, "between barrier #{} ({site})", self.index)?,
            None => write!(f, "between the kernel's start")?,
        }
        match self.closed_by {
            Some(site) => write!(f, " and barrier #{} ({site})", self.index + 1),
            None => write!(f, " and the end of the kernel"),
        }
    }
}

impl fmt::Display for Race {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (bx, by) = self.block;
        let (a, b) = (self.first, self.second);
        write!(
            f,
            "{}: race in block ({bx}, {by}) on shared word {} (bank {}): \
             thread ({}, {}) {}s it at {} and thread ({}, {}) {}s it at {}, {}",
            self.kernel,
            self.word,
            self.word % 32,
            a.thread.0,
            a.thread.1,
            a.op,
            a.site,
            b.thread.0,
            b.thread.1,
            b.op,
            b.site,
            self.interval,
        )
    }
}

impl fmt::Display for BarrierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (bx, by) = self.block;
        write!(
            f,
            "{}: barrier #{} of block ({bx}, {by}) is not reached by every thread:",
            self.kernel, self.barrier
        )?;
        for (i, w) in self.waiting.iter().enumerate() {
            let sep = if i > 0 { ";" } else { "" };
            let what = if w.warp_collective {
                "the warp collective at "
            } else {
                ""
            };
            write!(f, "{sep} {} wait at {what}{}", Threads(&w.threads), w.site)?;
        }
        if !self.exited.is_empty() {
            write!(f, "; {} exited", Threads(&self.exited))?;
        }
        Ok(())
    }
}

impl fmt::Display for BadAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.misaligned {
            "misaligned 128-bit"
        } else {
            "out-of-bounds"
        };
        let span = if self.width == 1 {
            format!("[{}]", self.index)
        } else {
            format!("[{}..{}]", self.index, self.index + self.width)
        };
        write!(
            f,
            "{}: {what} {} of {}{span} (length {}) by {} at {}",
            self.kernel, self.op, self.memory, self.len, self.thread, self.site
        )
    }
}

impl fmt::Display for DoubleWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: C[{}] (row {}, col {}) written by {} and by {} (at {})",
            self.kernel, self.index, self.row, self.col, self.first, self.second, self.site
        )
    }
}

impl fmt::Display for KernelPanic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} panicked", self.kernel, self.thread)?;
        if let Some(at) = &self.location {
            write!(f, " at {at}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl fmt::Display for UnwaitedCopies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} ended with {} cp.async cop{} never waited for (the first started at {})",
            self.kernel,
            self.thread,
            self.copies,
            if self.copies == 1 { "y" } else { "ies" },
            self.site
        )
    }
}

impl fmt::Display for Traffic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} requests, {} bank conflicts",
            self.requests, self.conflicts
        )
    }
}

impl fmt::Display for BankStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "shared loads: {}; shared stores: {}",
            self.loads, self.stores
        )?;
        for s in &self.sites {
            let bits = s.width * 32;
            write!(f, "\n  {} {bits}-bit at {}: {}", s.op, s.site, s.traffic)?;
        }
        Ok(())
    }
}
