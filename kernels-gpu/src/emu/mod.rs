//! A SIMT emulator: runs the kernels' own bodies on the CPU and checks
//! them (host only).
//!
//! [`run_gemm`] launches a kernel body with the geometry the GPU uses
//! (`spec.launch.grid(m, n)` blocks of `spec.launch.block_threads`
//! threads, `spec.launch.shared_bytes` of shared memory per block). Every
//! GPU thread of a block runs on its own OS thread, so barriers are real
//! barriers and threads really interleave; blocks run one after another
//! on the same threads (`block.rs`: a launch creates one OS thread per
//! thread of a block, however many blocks it has). The device helpers of
//! [`crate::device`] have a host backend ([`backend`]) that makes every
//! access checkable, so no kernel logic is written twice. The
//! [`EmuReport`] holds C and what the checks found:
//!
//! - races: two threads of a block touch the same shared-memory word
//!   between the same two barriers, at least one writing it;
//! - barrier errors: a barrier not every thread of the block reaches
//!   (reported, never a hang: waiting threads are unwound);
//! - bad accesses: outside a buffer or shared memory, or a misaligned
//!   128-bit access (reads give NaN, writes are dropped);
//! - double writes: two threads write the same element of C;
//! - panics of kernel threads (on the GPU, `trap`);
//! - warp collectives (`mma.sync`, `ldmatrix`, `shfl.sync`) that not every lane of the
//!   warp reaches: reported with the barrier errors, never a hang;
//! - `cp.async` copies a thread never waited for;
//! - bank-conflict accounting for shared memory, per access site (see
//!   [`check`] for the model).
//!
//! What a launch costs is blocks x threads x barrier intervals, each an
//! OS thread switch per thread, not its multiply-adds: [`estimate`]
//! measures it before a launch, in tens of milliseconds (`cost.rs`).
//!
//! ```
//! use kernels_gpu::{emu, k02_tiled16};
//! let (m, n, k) = (17, 17, 17);
//! let (a, b) = (vec![1.0; m * k], vec![1.0; k * n]);
//! let report = emu::run_gemm(&k02_tiled16::SPEC, k02_tiled16::tiled16, &a, &b, m, n, k);
//! assert!(report.is_clean(), "{report}");
//! assert!(report.c.iter().all(|&x| x == 17.0));
//! ```

pub(crate) mod backend;
mod block;
mod check;
mod cost;
mod report;

pub use cost::{Estimate, estimate};
pub use report::{
    BadAccess, BankStats, BarrierError, Coord, DoubleWrite, GridThread, Interval, KernelPanic,
    Memory, Op, Race, RaceAccess, Site, SiteStats, Traffic, UnwaitedCopies, Waiters,
};

use std::fmt;
use std::panic;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU32, AtomicUsize};
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::thread;

use crate::device::{GlobalIn, GlobalOut};
use crate::epilogue::{Activation, Epilogue, EpilogueParams, Per};
use crate::gemm::{Gemm, GemmParams};
use crate::launch::{self, KernelSpec};
use backend::global::Buffer;
use block::Pool;

/// What one emulated launch computed and found.
#[derive(Clone, Debug)]
pub struct EmuReport {
    pub kernel: &'static str,
    /// `(m, n, k)` of the launch.
    pub shape: (usize, usize, usize),
    /// The output: C's whole buffer after the launch (row-major m x n for
    /// [`run_gemm`], where elements nobody wrote are NaN).
    pub c: Vec<f32>,
    pub races: Vec<Race>,
    pub barrier_errors: Vec<BarrierError>,
    pub bad_accesses: Vec<BadAccess>,
    pub double_writes: Vec<DoubleWrite>,
    pub panics: Vec<KernelPanic>,
    pub unwaited_copies: Vec<UnwaitedCopies>,
    /// Findings not kept because a list reached [`MAX_FINDINGS`].
    pub omitted: usize,
    /// Shared-memory bank conflicts (not an error: a cost).
    pub banks: BankStats,
}

/// Findings of one kind kept per launch: a broken kernel finds the same
/// bug in every block, and the first ones say it all.
pub const MAX_FINDINGS: usize = 64;

impl EmuReport {
    /// No races, barrier errors, bad accesses, double writes or panics.
    /// (Bank conflicts are a cost, not an error.)
    pub fn is_clean(&self) -> bool {
        self.races.is_empty()
            && self.barrier_errors.is_empty()
            && self.bad_accesses.is_empty()
            && self.double_writes.is_empty()
            && self.panics.is_empty()
            && self.unwaited_copies.is_empty()
            && self.omitted == 0
    }
}

impl fmt::Display for EmuReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (m, n, k) = self.shape;
        write!(
            f,
            "{} on the CPU emulator, m={m} n={n} k={k}: {} races, {} barrier errors, \
             {} bad accesses, {} double writes, {} panics, {} threads with unwaited copies",
            self.kernel,
            self.races.len(),
            self.barrier_errors.len(),
            self.bad_accesses.len(),
            self.double_writes.len(),
            self.panics.len(),
            self.unwaited_copies.len(),
        )?;
        if self.omitted > 0 {
            write!(f, " ({} more not kept)", self.omitted)?;
        }
        let findings = (self.races.iter().map(|x| x as &dyn fmt::Display))
            .chain(self.barrier_errors.iter().map(|x| x as &dyn fmt::Display))
            .chain(self.bad_accesses.iter().map(|x| x as &dyn fmt::Display))
            .chain(self.double_writes.iter().map(|x| x as &dyn fmt::Display))
            .chain(self.panics.iter().map(|x| x as &dyn fmt::Display))
            .chain(self.unwaited_copies.iter().map(|x| x as &dyn fmt::Display));
        for finding in findings {
            write!(f, "\n- {finding}")?;
        }
        write!(f, "\n{}", self.banks)
    }
}

/// Runs `body` (the kernel `spec` describes) on the CPU for
/// `C = A * B` with row-major `a` (m x k) and `b` (k x n), and reports
/// what it computed and what the checks found. A broken kernel is
/// reported, never a crash or a hang (unless one of its threads loops
/// forever). [`run`] takes leading dimensions, alpha, beta and batches.
///
/// # Panics
/// If `a.len() != m * k` or `b.len() != k * n`, a size does not fit in
/// `u32`, or the OS refuses a thread.
pub fn run_gemm(
    spec: &KernelSpec,
    body: fn(Gemm),
    a: &[f32],
    b: &[f32],
    m: usize,
    n: usize,
    k: usize,
) -> EmuReport {
    run_gemm_scaled(spec, body, a, b, (m, n, k), &EmuScales::default())
}

/// [`run_gemm`] for an FP8 kernel, whose body reads `scales`
/// ([`run_scaled`]).
///
/// # Panics
/// As [`run_gemm`].
pub fn run_gemm_scaled(
    spec: &KernelSpec,
    body: fn(Gemm),
    a: &[f32],
    b: &[f32],
    (m, n, k): (usize, usize, usize),
    scales: &EmuScales,
) -> EmuReport {
    assert_eq!(a.len(), m * k, "A must hold m * k = {m} * {k} floats");
    assert_eq!(b.len(), k * n, "B must hold k * n = {k} * {n} floats");
    let dim = |x: usize| u32::try_from(x).expect("emulated sizes fit in u32");
    // A kernel that reads A or B transposed gets A^T or B^T: the same product.
    let params = GemmParams::dense_in(dim(m), dim(n), dim(k), spec.ops);
    let a = if spec.ops.a == launch::Op::T {
        transpose(a, m, k)
    } else {
        a.to_vec()
    };
    let b = if spec.ops.b == launch::Op::T {
        transpose(b, k, n)
    } else {
        b.to_vec()
    };
    run_scaled(
        spec,
        body,
        &params,
        1,
        &a,
        &b,
        &vec![f32::NAN; m * n],
        scales,
    )
}

/// The `cols x rows` transpose of a row-major `rows x cols` matrix.
pub fn transpose(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0.0; x.len()];
    for (r, row) in x.chunks_exact(cols).enumerate() {
        for (c, &v) in row.iter().enumerate() {
            t[c * rows + r] = v;
        }
    }
    t
}

/// Runs `body` on the CPU for `batch` products `C = alpha * A * B + beta *
/// C` as `params` describes them (leading dimensions, batch strides), on
/// the buffers `a`, `b` and `c` (C's initial contents; NaN where the
/// kernel must not read). The report's `c` is the whole C buffer after the
/// launch. Products run one after another, each a grid of blocks.
///
/// # Panics
/// If a buffer is too short for `params` and `batch`, or the OS refuses a
/// thread.
pub fn run(
    spec: &KernelSpec,
    body: fn(Gemm),
    params: &GemmParams,
    batch: usize,
    a: &[f32],
    b: &[f32],
    c: &[f32],
) -> EmuReport {
    run_fused(
        spec,
        body,
        params,
        batch,
        (a, b, c),
        &EmuScales::default(),
        &EmuEpilogue::default(),
    )
}

/// [`run`] with an FP8 kernel's scales (none for the others) and an
/// epilogue ([`EmuEpilogue`], the same for every product of the batch):
/// what the entry's `ScaleParams` and `EpilogueParams` carry on the GPU.
///
/// # Panics
/// As [`run`], and if a vector of the epilogue holds fewer than the `m`
/// or `n` values its dimension needs.
pub fn run_fused(
    spec: &KernelSpec,
    body: fn(Gemm),
    params: &GemmParams,
    batch: usize,
    (a, b, c): (&[f32], &[f32], &[f32]),
    scales: &EmuScales,
    epilogue: &EmuEpilogue,
) -> EmuReport {
    let p = params;
    assert_buffers(
        spec,
        p,
        batch,
        [
            ("A", a.len(), p.stride_a),
            ("B", b.len(), p.stride_b),
            ("C", c.len(), p.stride_c),
        ],
        epilogue,
    );
    install_panic_hook();
    let launch = Launch::new(spec, p, a.to_vec(), b.to_vec(), c, scales, epilogue);
    let (gx, gy) = launch.grid;
    thread::scope(|scope| {
        let pool = Pool::new(scope, launch.block_dims, launch.shared_words, body)
            .expect("the OS refused a thread for an emulated GPU thread");
        for z in 0..batch {
            let gemm = launch.gemm(p, z);
            for y in 0..gy {
                for x in 0..gx {
                    pool.run(&launch, gemm, (x, y));
                }
            }
        }
    });
    report_of(launch)
}

/// The report of a launch whose threads have all been joined.
fn report_of(launch: Arc<Launch>) -> EmuReport {
    let launch = Arc::into_inner(launch).expect("every emulated thread has been joined");
    let findings = launch
        .findings
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    EmuReport {
        kernel: launch.kernel,
        shape: launch.shape,
        c: launch
            .c
            .into_iter()
            .map(|x| f32::from_bits(x.into_inner()))
            .collect(),
        races: findings.races,
        barrier_errors: findings.barrier_errors,
        bad_accesses: findings.bad_accesses,
        double_writes: findings.double_writes,
        panics: findings.panics,
        unwaited_copies: findings.unwaited_copies,
        omitted: findings.omitted,
        banks: findings.banks,
    }
}

/// Runs `body`'s in-launch split entry ([`crate::split`]) on the CPU:
/// `slices` products of `params` (the call's C, ldc, alpha and beta;
/// `k_slice` and the slices' strides of A and B), each slice's partial
/// sums in a plane of a workspace, the last block of each tile adding
/// them into C with `epilogue`. The workspace (NaN) and the tile
/// counters (0) lie after C in the emulated C buffer, each view checked
/// against its own part. Returns the report (its `c` is C alone) and the
/// counters after the launch, which the launch must leave at 0.
///
/// # Panics
/// As [`run`]; and if the grid has more than `split::MAX_TILES` tiles or
/// the spec's blocks are not one row of whole warps.
pub fn run_split(
    spec: &KernelSpec,
    body: fn(Gemm),
    params: &GemmParams,
    slices: usize,
    (a, b, c): (&[f32], &[f32], &[f32]),
    epilogue: &EmuEpilogue,
) -> (EmuReport, Vec<u32>) {
    let p = params;
    let (m, n) = (p.m as usize, p.n as usize);
    let plane = m * n;
    let (gx, gy) = spec.launch.grid(m, n);
    let tiles = gx * gy;
    assert!(tiles <= crate::split::MAX_TILES, "{tiles} tiles: too many");
    let (threads, rows) = spec.launch.block_threads;
    assert!(
        rows == 1 && threads % 32 == 0,
        "a split entry's block is one row of whole warps"
    );
    // One C for every slice (stride 0): the call's.
    assert_buffers(
        spec,
        p,
        slices,
        [
            ("A", a.len(), p.stride_a),
            ("B", b.len(), p.stride_b),
            ("C", c.len(), 0),
        ],
        epilogue,
    );
    let (ws_at, counters_at) = (c.len(), c.len() + slices * plane);
    let mut memory = c.to_vec();
    memory.extend(std::iter::repeat_n(f32::NAN, slices * plane));
    memory.extend(std::iter::repeat_n(0.0, tiles));
    install_panic_hook();
    let launch = Launch::new(
        spec,
        p,
        a.to_vec(),
        b.to_vec(),
        &memory,
        &EmuScales::default(),
        epilogue,
    );
    let view = |base, len| Buffer {
        memory: Memory::C,
        base,
        len,
    };
    let part = GemmParams {
        ldc: p.n,
        alpha: 1.0,
        beta: 0.0,
        stride_c: plane as u64,
        ..*p
    };
    let mut call = launch.gemm(p, 0);
    call.c = GlobalOut::emulated(view(0, c.len()));
    let split = EmuSplit {
        body,
        call,
        split: crate::split::Split {
            ws: GlobalOut::emulated(view(ws_at, counters_at)),
            counters: crate::device::atomic::Counters::emulated(view(counters_at, memory.len())),
            slices,
            tile: spec.launch.block_tile,
            threads: threads as usize,
        },
    };
    assert!(launch.split.set(split).is_ok(), "a new launch");
    thread::scope(|scope| {
        let pool = Pool::new(scope, launch.block_dims, launch.shared_words, split_entry)
            .expect("the OS refused a thread for an emulated GPU thread");
        for z in 0..slices {
            let mut gemm = launch.gemm(&part, z);
            gemm.c = GlobalOut::emulated(view(ws_at + z * plane, counters_at));
            gemm.ep = Epilogue::NONE;
            for y in 0..gy {
                for x in 0..gx {
                    pool.run(&launch, gemm, (x, y));
                }
            }
        }
    });
    let mut report = report_of(launch);
    let counters = report.c[counters_at..]
        .iter()
        .map(|x| x.to_bits())
        .collect();
    report.c.truncate(c.len());
    (report, counters)
}

/// Panics unless each buffer of `lens` (name, length, batch stride)
/// holds what `batch` products of `p` read or write there, and the
/// epilogue's vectors hold a value per row or column of C.
fn assert_buffers(
    spec: &KernelSpec,
    p: &GemmParams,
    batch: usize,
    lens: [(&str, usize, u64); 3],
    epilogue: &EmuEpilogue,
) {
    for z in 0..batch {
        let stored = spec.stored(p, p.depth(z as u32));
        for ((name, len, stride), (rows, cols, ld)) in lens.into_iter().zip(stored) {
            let end = z * stride as usize + crate::gemm::span(rows, cols, ld) as usize;
            assert!(
                len >= end,
                "{name} must hold {end} floats for these parameters"
            );
        }
    }
    for (what, v) in [("bias", &epilogue.bias), ("scales", &epilogue.scale)] {
        if let Some((v, per)) = v {
            let len = per.len(p.m as usize, p.n as usize);
            assert!(
                v.len() >= len,
                "the epilogue's {what} must hold {len} floats"
            );
        }
    }
}

/// The scales of an emulated FP8 launch ([`run_scaled`]): what an FP8
/// kernel reads through [`crate::gemm::Scales`], each `None` for a scale
/// of 1 (as a 0 address on the GPU). Per tensor each holds one value;
/// with block scales A's and B's hold `Scaling::a_scales` and
/// `Scaling::b_scales` values, D's one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EmuScales {
    pub a: Option<Vec<f32>>,
    pub b: Option<Vec<f32>>,
    pub d: Option<Vec<f32>>,
}

/// [`run`] for an FP8 kernel, whose body reads `scales` (each access
/// checked as A's, B's and C's are).
///
/// # Panics
/// As [`run`].
#[allow(clippy::too_many_arguments)]
pub fn run_scaled(
    spec: &KernelSpec,
    body: fn(Gemm),
    params: &GemmParams,
    batch: usize,
    a: &[f32],
    b: &[f32],
    c: &[f32],
    scales: &EmuScales,
) -> EmuReport {
    run_fused(
        spec,
        body,
        params,
        batch,
        (a, b, c),
        scales,
        &EmuEpilogue::default(),
    )
}

/// The epilogue of an emulated launch ([`run_fused`]): the activation,
/// and the bias and the scales with the dimension of C they run along
/// (`None`: absent), as `EpilogueParams` describes them on the GPU.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EmuEpilogue {
    pub activation: Activation,
    pub bias: Option<(Vec<f32>, Per)>,
    pub scale: Option<(Vec<f32>, Per)>,
}

impl EmuEpilogue {
    /// The flags the GPU's entry would get (addresses aside).
    pub fn params(&self) -> EpilogueParams {
        EpilogueParams::new(
            self.activation,
            self.bias.as_ref().map(|(_, per)| (0, *per)),
            self.scale.as_ref().map(|(_, per)| (0, *per)),
        )
    }
}

/// Kernel panics are findings: an emulated thread's panic is recorded by
/// the report instead of printed. Other threads' panics go to the hook
/// that was there before.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !backend::note_panic(info) {
                previous(info)
            }
        }));
    });
}

/// One shared-memory access, as a thread logs it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SharedAccess {
    pub site: Site,
    pub word: u32,
    pub op: Op,
    /// Words: 1, 2 or 4 for a 32-, 64- or 128-bit access.
    pub width: u8,
    /// Whether it is an instruction of its own for the bank-conflict
    /// accounting (false for a `cp.async` copy logged again because it may
    /// still land in a later interval: the race check needs it there).
    pub banks: bool,
}

/// Everything a launch's threads share.
pub(crate) struct Launch {
    pub kernel: &'static str,
    pub shape: (usize, usize, usize),
    /// C's leading dimension (to name the row and column of an element).
    ldc: usize,
    pub grid: Coord,
    pub block_dims: Coord,
    pub shared_words: usize,
    a: Vec<f32>,
    b: Vec<f32>,
    /// A's, B's and D's scales ([`EmuScales`]; `None`: a scale of 1),
    /// then the epilogue's bias and scales ([`EmuEpilogue`]).
    scales: [Option<Vec<f32>>; 5],
    /// The epilogue's flags ([`EpilogueParams::flags`]).
    epilogue_flags: u32,
    /// C as `f32` bits: threads of a racy kernel may write it at once.
    c: Vec<AtomicU32>,
    /// Who wrote each element of C: 0 for nobody, else the writer's
    /// launch-wide thread id plus one.
    c_writer: Vec<AtomicUsize>,
    findings: Mutex<Findings>,
    /// An in-launch split ([`run_split`]): what its entry adds to the body.
    split: std::sync::OnceLock<EmuSplit>,
}

/// What the split entry of an emulated launch ([`run_split`]) passes to
/// `split::in_launch` besides the slice's own arguments.
#[derive(Clone, Copy)]
pub(crate) struct EmuSplit {
    body: fn(Gemm),
    call: Gemm,
    split: crate::split::Split,
}

/// The split entry on the emulator (`gemm_kernel!(name, split ..)` on
/// the GPU): the body on `part`, then the tile's sum.
fn split_entry(part: Gemm) {
    let s = backend::split();
    // SAFETY: `run_split` laid out the planes and counters the views
    // address, and every block runs this entry.
    unsafe { crate::split::in_launch(s.body, part, s.call, s.split) }
}

/// A launch's findings so far.
#[derive(Default)]
pub(crate) struct Findings {
    pub races: Vec<Race>,
    pub barrier_errors: Vec<BarrierError>,
    pub bad_accesses: Vec<BadAccess>,
    pub double_writes: Vec<DoubleWrite>,
    pub panics: Vec<KernelPanic>,
    pub unwaited_copies: Vec<UnwaitedCopies>,
    pub omitted: usize,
    pub banks: BankStats,
}

impl Findings {
    /// Keeps `finding` in `list` unless the list is full.
    pub fn keep<T>(list: &mut Vec<T>, omitted: &mut usize, finding: T) {
        if list.len() < MAX_FINDINGS {
            list.push(finding);
        } else {
            *omitted += 1;
        }
    }
}

impl Launch {
    /// The launch of `spec` for the products `p` describes, on copies of
    /// the caller's buffers.
    fn new(
        spec: &KernelSpec,
        p: &GemmParams,
        a: Vec<f32>,
        b: Vec<f32>,
        c: &[f32],
        scales: &EmuScales,
        epilogue: &EmuEpilogue,
    ) -> Arc<Launch> {
        let (bx, by) = spec.launch.block_threads;
        let (m, n, k) = (p.m as usize, p.n as usize, p.k as usize);
        Arc::new(Launch {
            kernel: spec.name,
            shape: (m, n, k),
            ldc: p.ldc as usize,
            grid: spec.launch.grid(m, n),
            block_dims: (bx as usize, by as usize),
            shared_words: spec.launch.shared_bytes / 4,
            a,
            b,
            scales: [
                scales.a.clone(),
                scales.b.clone(),
                scales.d.clone(),
                epilogue.bias.as_ref().map(|(v, _)| v.clone()),
                epilogue.scale.as_ref().map(|(v, _)| v.clone()),
            ],
            epilogue_flags: epilogue.params().flags,
            c: c.iter().map(|x| AtomicU32::new(x.to_bits())).collect(),
            c_writer: c.iter().map(|_| AtomicUsize::new(0)).collect(),
            findings: Mutex::new(Findings::default()),
            split: std::sync::OnceLock::new(),
        })
    }

    /// The kernel's arguments for product `z` of the batch: what
    /// `Gemm::from_raw` makes on the GPU, with checked buffers.
    fn gemm(&self, p: &GemmParams, z: usize) -> Gemm {
        let buffer = |memory, stride: u64, len| Buffer {
            memory,
            base: z * stride as usize,
            len,
        };
        let (a, b, c) = (
            buffer(Memory::A, p.stride_a, self.a.len()),
            buffer(Memory::B, p.stride_b, self.b.len()),
            buffer(Memory::C, p.stride_c, self.c.len()),
        );
        Gemm::new(
            GlobalIn::emulated(a),
            GlobalIn::emulated(b),
            GlobalOut::emulated(c),
            *p,
            z as u32,
            Epilogue::emulated(
                self.view(3, Memory::Bias),
                self.view(4, Memory::Scale),
                self.epilogue_flags,
            ),
        )
    }

    /// A view of vector `i` of [`Self::scales`], if the launch has it.
    fn view(&self, i: usize, memory: Memory) -> Option<GlobalIn<f32>> {
        let len = self.scales[i].as_ref()?.len();
        Some(GlobalIn::emulated(Buffer {
            memory,
            base: 0,
            len,
        }))
    }

    /// The launch's split ([`run_split`]).
    pub fn split(&self) -> EmuSplit {
        *self.split.get().expect("only the split entry asks")
    }

    /// Views of the launch's scales, as [`crate::gemm::Scales`] holds them.
    pub fn scales(&self) -> crate::gemm::Scales {
        crate::gemm::Scales {
            a: self.view(0, Memory::ScalesA),
            b: self.view(1, Memory::ScalesB),
            d: self.view(2, Memory::ScalesD),
        }
    }

    /// Runs `f` on the findings (blocks and threads report concurrently).
    pub fn findings<R>(&self, f: impl FnOnce(&mut Findings) -> R) -> R {
        f(&mut self.findings.lock().unwrap_or_else(PoisonError::into_inner))
    }

    pub fn report_bad_access(&self, bad: BadAccess) {
        self.findings(|f| Findings::keep(&mut f.bad_accesses, &mut f.omitted, bad));
    }

    /// Element `index` of the global buffer `memory` (checked by the caller).
    pub fn read(&self, memory: Memory, index: usize) -> f32 {
        match memory {
            Memory::A => self.a[index],
            Memory::B => self.b[index],
            Memory::C => f32::from_bits(self.c[index].load(Relaxed)),
            Memory::ScalesA | Memory::ScalesB | Memory::ScalesD | Memory::Bias | Memory::Scale => {
                let i = memory as usize - Memory::ScalesA as usize;
                self.scales[i]
                    .as_ref()
                    .expect("views are made of given scales only")[index]
            }
            Memory::Shared => unreachable!("global views are only made for A, B, C and scales"),
        }
    }

    /// `C[index] = value` by `thread` of `block`; reports a second writer.
    pub fn write_c(&self, index: usize, value: f32, block: Coord, thread: Coord, site: Site) {
        self.store_c(index, value, (block, thread), site, false);
    }

    /// `C[index] = value` by `thread` of `block` over a value a thread of
    /// the same block stored (the fused epilogue's pass over the block's
    /// tile, after a barrier): reports a first writer of another block,
    /// or none (a pass over an element nobody stored).
    pub fn rewrite_c(&self, index: usize, value: f32, block: Coord, thread: Coord, site: Site) {
        self.store_c(index, value, (block, thread), site, true);
    }

    /// The store of [`Self::write_c`] and [`Self::rewrite_c`], and the
    /// check of the element's writer before it.
    fn store_c(
        &self,
        index: usize,
        value: f32,
        (block, thread): (Coord, Coord),
        site: Site,
        rewrite: bool,
    ) {
        let id = self.launch_thread_id(block, thread) + 1;
        let per_block = self.block_dims.0 * self.block_dims.1;
        self.c[index].store(value.to_bits(), Relaxed);
        let previous = self.c_writer[index].swap(id, Relaxed);
        let wrong = if rewrite {
            previous == 0 || (previous - 1) / per_block != (id - 1) / per_block
        } else {
            previous != 0 && previous != id
        };
        if wrong {
            let double = DoubleWrite {
                kernel: self.kernel,
                index,
                row: index / self.ldc,
                col: index % self.ldc,
                first: if previous == 0 {
                    GridThread { block, thread }
                } else {
                    self.grid_thread(previous - 1)
                },
                second: GridThread { block, thread },
                site,
            };
            self.findings(|f| Findings::keep(&mut f.double_writes, &mut f.omitted, double));
        }
    }

    /// Adds 1 to the counter in the bits of C's element `index`
    /// (`emu::run_split`) and returns what it held.
    pub fn arrive(&self, index: usize) -> u32 {
        self.c[index].fetch_add(1, Relaxed)
    }

    /// Puts the counter in C's element `index` back to 0.
    pub fn reset_counter(&self, index: usize) {
        self.c[index].store(0, Relaxed);
    }

    /// `(block linear id) * threads per block + (thread linear id)`.
    fn launch_thread_id(&self, (bx, by): Coord, (tx, ty): Coord) -> usize {
        let (dx, dy) = self.block_dims;
        (by * self.grid.0 + bx) * (dx * dy) + ty * dx + tx
    }

    /// The thread whose launch-wide id is `id`.
    fn grid_thread(&self, id: usize) -> GridThread {
        let (dx, dy) = self.block_dims;
        let (block, tid) = (id / (dx * dy), id % (dx * dy));
        GridThread {
            block: (block % self.grid.0, block / self.grid.0),
            thread: (tid % dx, tid / dx),
        }
    }
}
