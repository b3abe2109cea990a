//! The device helpers' host backend: what `thread_idx_x`, `sync_threads`
//! and the shared- and global-memory accessors of [`crate::device`] do
//! when a kernel body runs on the CPU.
//!
//! Every emulated GPU thread runs on an OS thread of the launch's pool
//! ([`super::block`]), and a thread-local [`EmuThread`] says which thread
//! it is and which block and launch it belongs to. Memory that threads
//! share is atomics (`Relaxed`, holding `f32` bits), so a racy kernel is
//! a reported finding, never undefined behaviour in Rust. Shared-memory
//! accesses are logged per thread and checked when the barrier interval
//! closes ([`super::check`]); global accesses are checked on the spot.
//! Warp-wide instructions (`mma.sync`, `ldmatrix`, `shfl.sync`) meet at a per-warp rendezvous
//! ([`super::block::Block::warp_collective`]); `cp.async` copies wait in
//! a per-thread queue until their `wait_group`.
//!
//! The accessors are `#[track_caller]`, and so are their callers in
//! `device` on the host only: `Location::caller()` is then the kernel's
//! own call site, which names accesses in reports and tells one access
//! site from another for the bank-conflict accounting.

use std::array;
use std::cell::{Cell, RefCell};
use std::panic::{Location, PanicHookInfo};
use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

use super::block::Block;
use super::report::{BadAccess, GridThread, Memory, Op, Site};
use super::{Launch, SharedAccess};

/// The emulated GPU thread running on this OS thread.
pub(super) struct EmuThread {
    /// Linear id in the block: `y * block_x + x`.
    pub tid: usize,
    pub thread: (usize, usize),
    /// The block it belongs to, and that block's index in the grid.
    pub block: Arc<Block>,
    pub block_idx: (usize, usize),
    pub launch: Arc<Launch>,
    /// This barrier interval's shared-memory accesses, in program order.
    pub log: Vec<SharedAccess>,
    /// Its `cp.async` copies not yet waited for.
    pub copies: async_copy::Copies,
}

thread_local! {
    static THREAD: RefCell<Option<EmuThread>> = const { RefCell::new(None) };
    /// Where this thread's last panic happened (set by the panic hook,
    /// which must not touch `THREAD`: the panic may come from inside a
    /// borrow of it).
    static PANIC_AT: Cell<Option<String>> = const { Cell::new(None) };
    static IS_EMULATED: Cell<bool> = const { Cell::new(false) };
}

/// Makes this OS thread the emulated thread `t` (`None`: no longer one)
/// and returns the previous one.
pub(super) fn set_thread(t: Option<EmuThread>) -> Option<EmuThread> {
    IS_EMULATED.set(t.is_some());
    THREAD.replace(t)
}

/// The panic hook's part: records where an emulated thread panicked and
/// returns true (the panic is reported, not printed), or returns false
/// for any other thread.
pub(super) fn note_panic(info: &PanicHookInfo<'_>) -> bool {
    if !IS_EMULATED.try_with(Cell::get).unwrap_or(false) {
        return false;
    }
    let at = info.location().map(|l| l.to_string());
    let _ = PANIC_AT.try_with(|p| p.set(at));
    true
}

/// Where this thread's last panic happened, if the hook saw it.
pub(super) fn take_panic_location() -> Option<String> {
    PANIC_AT.take()
}

fn with<R>(f: impl FnOnce(&mut EmuThread) -> R) -> R {
    THREAD.with_borrow_mut(|t| match t {
        Some(t) => f(t),
        None => panic!(
            "a device function ran outside an emulated kernel; \
             on the host, kernels run through kernels_gpu::emu::run_gemm"
        ),
    })
}

/// The split of the emulated launch this thread belongs to.
pub(super) fn split() -> super::EmuSplit {
    with(|t| t.launch.split())
}

/// The scales of the launch the calling emulated thread belongs to.
pub fn scales() -> crate::gemm::Scales {
    with(|t| t.launch.scales())
}

impl EmuThread {
    /// Reports an access outside `len` elements, or a misaligned one.
    fn bad_access(
        &self,
        site: Site,
        memory: Memory,
        op: Op,
        index: usize,
        width: usize,
        len: usize,
    ) {
        self.launch.report_bad_access(BadAccess {
            kernel: self.launch.kernel,
            memory,
            op,
            index,
            width,
            len,
            misaligned: index.checked_add(width).is_some_and(|end| end <= len),
            thread: GridThread {
                block: self.block_idx,
                thread: self.thread,
            },
            site,
        });
    }
}

/// `threadIdx.x` of the calling emulated thread.
pub fn thread_idx_x() -> usize {
    with(|t| t.thread.0)
}

/// `threadIdx.y` of the calling emulated thread.
pub fn thread_idx_y() -> usize {
    with(|t| t.thread.1)
}

/// `blockIdx.x` of the calling emulated thread.
pub fn block_idx_x() -> usize {
    with(|t| t.block_idx.0)
}

/// `blockIdx.y` of the calling emulated thread.
pub fn block_idx_y() -> usize {
    with(|t| t.block_idx.1)
}

/// `gridDim.x` of the calling emulated thread's launch.
pub fn grid_dim_x() -> usize {
    with(|t| t.launch.grid.0)
}

/// `gridDim.y` of the calling emulated thread's launch.
pub fn grid_dim_y() -> usize {
    with(|t| t.launch.grid.1)
}

/// `__syncthreads()`: a real barrier across the block's OS threads. A
/// barrier the block cannot complete (some threads exited, or threads
/// wait at different barriers) is reported and unwinds the waiting threads.
#[track_caller]
pub fn sync_threads() {
    let site = Location::caller();
    with(|t| {
        t.block.arrive(t.tid, site, &mut t.log, &t.launch);
        // Copies still in flight may land in the interval that begins.
        t.copies.log_in_flight(&mut t.log);
    });
}

/// `__syncthreads_or(pred)`: three of the block's barriers on the host:
/// the threads whose `pred` holds vote between the first two, every
/// thread reads the vote between the last two, and thread 0 clears it
/// after the third (before any thread can vote again).
#[track_caller]
pub fn sync_threads_or(pred: bool) -> bool {
    sync_threads();
    if pred {
        with(|t| t.block.vote.store(true, SeqCst));
    }
    sync_threads();
    let any = with(|t| t.block.vote.load(SeqCst));
    sync_threads();
    with(|t| {
        if t.tid == 0 {
            t.block.vote.store(false, SeqCst);
        }
    });
    any
}

/// `Ok(())` when `index..index + width` lies in `len` elements and a
/// 128-bit access is aligned; `Err(())` otherwise.
fn check(index: usize, width: usize, len: usize) -> Result<(), ()> {
    let inside = index.checked_add(width).is_some_and(|end| end <= len);
    if inside && index.is_multiple_of(width) {
        Ok(())
    } else {
        Err(())
    }
}

/// Shared memory on the host: the calling block's `Box<[AtomicU32]>`.
pub mod shared {
    use super::*;

    /// A load or store of `W` consecutive words at `word`.
    #[track_caller]
    fn access<const W: usize>(word: usize, op: Op, values: [f32; W]) -> [f32; W] {
        let site = Location::caller();
        with(|t| {
            let memory = &t.block.shared;
            if check(word, W, memory.len()).is_err() {
                t.bad_access(site, Memory::Shared, op, word, W, memory.len());
                return [f32::NAN; W];
            }
            t.log.push(SharedAccess {
                site,
                word: word as u32,
                op,
                width: W as u8,
                banks: true,
            });
            let words = &memory[word..word + W];
            match op {
                Op::Load => array::from_fn(|i| f32::from_bits(words[i].load(Relaxed))),
                Op::Store => {
                    for (w, v) in words.iter().zip(values) {
                        w.store(v.to_bits(), Relaxed);
                    }
                    values
                }
            }
        })
    }

    /// # Safety
    /// None on the host (the access is checked); `unsafe` to match the
    /// nvptx backend, whose contract the caller states.
    #[track_caller]
    pub unsafe fn load(word: usize) -> f32 {
        access::<1>(word, Op::Load, [0.0])[0]
    }

    /// # Safety
    /// As for [`load`].
    #[track_caller]
    pub unsafe fn store(word: usize, value: f32) {
        access::<1>(word, Op::Store, [value]);
    }

    /// # Safety
    /// As for [`load`].
    #[track_caller]
    pub unsafe fn load2(word: usize) -> [f32; 2] {
        access::<2>(word, Op::Load, [0.0; 2])
    }

    /// # Safety
    /// As for [`load`].
    #[track_caller]
    pub unsafe fn store2(word: usize, values: [f32; 2]) {
        access::<2>(word, Op::Store, values);
    }

    /// # Safety
    /// As for [`load`].
    #[track_caller]
    pub unsafe fn load4(word: usize) -> [f32; 4] {
        access::<4>(word, Op::Load, [0.0; 4])
    }

    /// # Safety
    /// As for [`load`].
    #[track_caller]
    pub unsafe fn store4(word: usize, values: [f32; 4]) {
        access::<4>(word, Op::Store, values);
    }
}

/// Global memory on the host: the launch's copies of A and B, and C.
pub mod global {
    use super::*;

    /// A global buffer on the host: which of the launch's buffers, where
    /// the product being computed starts in it (`z * stride` in a batch),
    /// and its whole length in elements, so that every access can be
    /// checked (alignment included, from the buffer's start).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Buffer {
        pub(in crate::emu) memory: Memory,
        pub(in crate::emu) base: usize,
        pub(in crate::emu) len: usize,
    }

    /// `buffer` from element `elements` on: the same memory and length
    /// (accesses are checked against the whole buffer).
    pub fn offset(buffer: Buffer, elements: usize) -> Buffer {
        Buffer {
            base: buffer.base + elements,
            ..buffer
        }
    }

    /// The emulator's buffers start at address 0 (aligned for anything);
    /// a product of a batch starts at its base, `elem_bytes` per element.
    pub fn aligned(buffer: Buffer, bytes: usize, elem_bytes: usize) -> bool {
        (buffer.base * elem_bytes).is_multiple_of(bytes)
    }

    #[track_caller]
    pub(super) fn read_n<const W: usize>(buffer: Buffer, index: usize) -> [f32; W] {
        let site = Location::caller();
        with(|t| {
            let at = buffer.base + index;
            if check(at, W, buffer.len).is_err() {
                t.bad_access(site, buffer.memory, Op::Load, at, W, buffer.len);
                return [f32::NAN; W];
            }
            array::from_fn(|i| t.launch.read(buffer.memory, at + i))
        })
    }

    #[track_caller]
    fn write_n<const W: usize>(buffer: Buffer, index: usize, values: [f32; W]) {
        let site = Location::caller();
        with(|t| {
            let at = buffer.base + index;
            if check(at, W, buffer.len).is_err() {
                t.bad_access(site, buffer.memory, Op::Store, at, W, buffer.len);
                return;
            }
            for (i, v) in values.into_iter().enumerate() {
                t.launch.write_c(at + i, v, t.block_idx, t.thread, site);
            }
        })
    }

    /// # Safety
    /// None on the host (the access is checked); `unsafe` to match the
    /// nvptx backend, whose contract the caller states.
    #[track_caller]
    pub unsafe fn read(buffer: Buffer, index: usize) -> f32 {
        read_n::<1>(buffer, index)[0]
    }

    /// # Safety
    /// As for [`read`].
    #[track_caller]
    pub unsafe fn read2(buffer: Buffer, index: usize) -> [f32; 2] {
        read_n::<2>(buffer, index)
    }

    /// # Safety
    /// As for [`read`].
    #[track_caller]
    pub unsafe fn read4(buffer: Buffer, index: usize) -> [f32; 4] {
        read_n::<4>(buffer, index)
    }

    /// # Safety
    /// As for [`read`].
    #[track_caller]
    pub unsafe fn write(buffer: Buffer, index: usize, value: f32) {
        write_n::<1>(buffer, index, [value]);
    }

    /// Adds 1 to the counter in word `index` of `buffer` (a `u32` in
    /// the bits of the emulated C: `emu::run_split`) and returns what it
    /// held (`u32::MAX` for a word outside the buffer, reported).
    #[track_caller]
    pub fn arrive(buffer: Buffer, index: usize) -> u32 {
        store_1(buffer, index, Location::caller(), |t, at| {
            t.launch.arrive(at)
        })
        .unwrap_or(u32::MAX)
    }

    /// Puts the counter in word `index` of `buffer` back to 0.
    #[track_caller]
    pub fn reset(buffer: Buffer, index: usize) {
        store_1(buffer, index, Location::caller(), |t, at| {
            t.launch.reset_counter(at)
        });
    }

    /// A second store to an element a thread of the same block stored
    /// first (the fused epilogue's pass, after a barrier).
    #[track_caller]
    pub fn rewrite(buffer: Buffer, index: usize, value: f32) {
        let site = Location::caller();
        store_1(buffer, index, site, |t, at| {
            t.launch.rewrite_c(at, value, t.block_idx, t.thread, site)
        });
    }

    /// `f` on the calling thread and the launch-wide index of element
    /// `index` of `buffer`, a one-word store at `site`; `None` (and a bad
    /// access reported) where the element is outside the buffer.
    fn store_1<R>(
        buffer: Buffer,
        index: usize,
        site: Site,
        f: impl FnOnce(&EmuThread, usize) -> R,
    ) -> Option<R> {
        with(|t| {
            let at = buffer.base + index;
            if check(at, 1, buffer.len).is_err() {
                t.bad_access(site, buffer.memory, Op::Store, at, 1, buffer.len);
                return None;
            }
            Some(f(t, at))
        })
    }

    /// # Safety
    /// As for [`read`].
    #[track_caller]
    pub unsafe fn write2(buffer: Buffer, index: usize, values: [f32; 2]) {
        write_n::<2>(buffer, index, values);
    }

    /// # Safety
    /// As for [`read`].
    #[track_caller]
    pub unsafe fn write4(buffer: Buffer, index: usize, values: [f32; 4]) {
        write_n::<4>(buffer, index, values);
    }

    /// `W` elements as one access (a 32-bit load of two 16-bit elements).
    ///
    /// # Safety
    /// As for [`read`].
    #[track_caller]
    pub unsafe fn read_v<const W: usize>(buffer: Buffer, index: usize) -> [f32; W] {
        read_n::<W>(buffer, index)
    }

    /// `W` elements as one access (a 16-byte store of 16-bit elements).
    ///
    /// # Safety
    /// As for [`read`].
    #[track_caller]
    pub unsafe fn write_v<const W: usize>(buffer: Buffer, index: usize, values: [f32; W]) {
        write_n::<W>(buffer, index, values);
    }
}

/// The tensor-core helpers on the host: `mma.sync` and `ldmatrix` as warp
/// collectives (`super::block`), TF32 rounding bit for bit.
pub mod mma {
    use super::*;
    use crate::elem::{Element, Fp8};
    use crate::emu::block::Operands;

    /// `cvt.rna.tf32.f32`: round to the nearest TF32 value, ties away from
    /// zero (add half of the last kept bit, then clear the 13 bits TF32
    /// drops); NaN and infinity pass unchanged.
    pub fn to_tf32(x: f32) -> u32 {
        let bits = x.to_bits();
        if !x.is_finite() {
            return bits;
        }
        // Finite: the carry can at most reach the exponent (rounding up
        // to the next binade, or to infinity), which is what rna does.
        bits.wrapping_add(0x1000) & !0x1fff
    }

    /// One lane's operands of an `mma.sync` m16n8kK: A's and B's fragment
    /// registers, C (the same for TF32 k8 and 16-bit k16).
    type MmaLane = ([u32; 4], [u32; 2], [f32; 4]);

    /// Puts lane `l`'s A and B registers into the 16 x K A and the K x 8 B.
    type Unpack<const K: usize> = fn(usize, &MmaLane, &mut [[f64; K]; 16], &mut [[f64; 8]; K]);

    /// The warp's `D = A * B + C` for one 16 x 8 x `K` tile, as a warp
    /// collective at `site`: every lane hands in its fragments, `unpack`
    /// puts lane `l`'s A and B registers into the 16 x K and K x 8
    /// matrices (the layout of its form), C and D follow the layout both
    /// forms share (`crate::device::mma`). Products are exact, each sum is
    /// taken in f64 and rounded once.
    #[track_caller]
    fn mma_warp<const K: usize>(c: &mut [f32; 4], a: [u32; 4], b: [u32; 2], unpack: Unpack<K>) {
        let site = Location::caller();
        let lanes = |inputs: Vec<Operands>| -> Vec<Operands> {
            assert_eq!(
                inputs.len(),
                32,
                "mma.sync needs all 32 lanes of a warp, this warp has {}",
                inputs.len()
            );
            let lane: Vec<MmaLane> = inputs
                .into_iter()
                .map(|x| *x.downcast::<MmaLane>().expect("mma operands"))
                .collect();
            let (mut am, mut bm, mut cm) = ([[0.0; K]; 16], [[0.0; 8]; K], [[0.0; 8]; 16]);
            for (l, operands) in lane.iter().enumerate() {
                unpack(l, operands, &mut am, &mut bm);
                let (g, t, c) = (l / 4, l % 4, operands.2);
                (
                    cm[g][2 * t],
                    cm[g][2 * t + 1],
                    cm[g + 8][2 * t],
                    cm[g + 8][2 * t + 1],
                ) = (c[0].into(), c[1].into(), c[2].into(), c[3].into());
            }
            let d = |row: usize, col: usize| -> f32 {
                let sum: f64 = (0..K).map(|k| am[row][k] * bm[k][col]).sum();
                (cm[row][col] + sum) as f32
            };
            (0..32)
                .map(|l| {
                    let (g, t) = (l / 4, l % 4);
                    let out = [
                        d(g, 2 * t),
                        d(g, 2 * t + 1),
                        d(g + 8, 2 * t),
                        d(g + 8, 2 * t + 1),
                    ];
                    Box::new(out) as Operands
                })
                .collect()
        };
        let out = with(|t| {
            t.block
                .warp_collective(t.tid, site, Box::new((a, b, *c)), &lanes, &t.launch)
        });
        *c = *out.downcast::<[f32; 4]>().expect("mma result");
    }

    /// `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32` for the warp:
    /// every lane hands in its fragments; the result follows the layout
    /// of [`crate::device::mma`]. A and B keep only their TF32 bits (the
    /// hardware ignores the low 13).
    #[track_caller]
    pub fn mma_m16n8k8_tf32(c: &mut [f32; 4], a: [u32; 4], b: [u32; 2]) {
        mma_warp::<8>(c, a, b, |l, (a, b, _), am, bm| {
            let tf32 = |bits: u32| f64::from(f32::from_bits(bits & !0x1fff));
            let (g, t) = (l / 4, l % 4);
            (am[g][t], am[g + 8][t], am[g][t + 4], am[g + 8][t + 4]) =
                (tf32(a[0]), tf32(a[1]), tf32(a[2]), tf32(a[3]));
            (bm[t][g], bm[t + 4][g]) = (tf32(b[0]), tf32(b[1]));
        });
    }

    /// The 16-bit value in half `half` (0: low, 1: high) of `word`, as
    /// `T` widened to f64 (exact).
    fn half<T: Element>(word: u32, half: usize) -> f64 {
        f64::from(T::from_bits((word >> (16 * half)) & 0xffff).to_f32())
    }

    /// `mma.sync.aligned.m16n8k32.row.col.f32.{e4m3,e5m2}.{e4m3,e5m2}` for
    /// the warp, in the layout of [`crate::device::mma`]'s third table:
    /// each register four neighbours along K, the lowest in the lowest
    /// byte. The FP8 values are decoded by [`crate::elem::Fp8Format`]
    /// (every encoding checked against the OCP table in `elem`); their
    /// products are exact in f64.
    #[track_caller]
    pub fn mma_m16n8k32<A: Fp8, B: Fp8>(c: &mut [f32; 4], a: [u32; 4], b: [u32; 2]) {
        fn byte<T: Fp8>(word: u32, i: usize) -> f64 {
            f64::from(T::FORMAT.to_f32((word >> (8 * i)) as u8))
        }
        mma_warp::<32>(c, a, b, |l, (a, b, _), am, bm| {
            let (g, t) = (l / 4, l % 4);
            for i in 0..4 {
                let k = 4 * t + i;
                (am[g][k], am[g + 8][k], am[g][k + 16], am[g + 8][k + 16]) = (
                    byte::<A>(a[0], i),
                    byte::<A>(a[1], i),
                    byte::<A>(a[2], i),
                    byte::<A>(a[3], i),
                );
                (bm[k][g], bm[k + 16][g]) = (byte::<B>(b[0], i), byte::<B>(b[1], i));
            }
        });
    }

    /// `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}` for the warp, in
    /// the layout of [`crate::device::mma`]'s second table: each register
    /// two neighbours along K, the lower in the low half.
    #[track_caller]
    pub fn mma_m16n8k16<T: Element>(c: &mut [f32; 4], a: [u32; 4], b: [u32; 2]) {
        mma_warp::<16>(c, a, b, |l, (a, b, _), am, bm| {
            let (g, t) = (l / 4, l % 4);
            for h in 0..2 {
                let k = 2 * t + h;
                (am[g][k], am[g + 8][k], am[g][k + 8], am[g + 8][k + 8]) = (
                    half::<T>(a[0], h),
                    half::<T>(a[1], h),
                    half::<T>(a[2], h),
                    half::<T>(a[3], h),
                );
                (bm[k][g], bm[k + 8][g]) = (half::<T>(b[0], h), half::<T>(b[1], h));
            }
        });
    }

    /// `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`: each lane reads
    /// its own 16-byte row (8 16-bit values) as for [`load_matrix_x4`];
    /// then lane `(g, t)` gets, of each matrix `i` (rows from lanes `8i ..
    /// 8i + 8`), value `g` of row `2t` in its low half and of row `2t + 1`
    /// in its high half.
    ///
    /// # Safety
    /// None on the host (the access is checked); `unsafe` to match the
    /// nvptx backend, whose contract the caller states.
    #[track_caller]
    pub unsafe fn load_matrix_x4_trans(word: usize) -> [u32; 4] {
        let site = Location::caller();
        // SAFETY: checked on the host (a bad row reads NaN and is reported).
        let row = unsafe { super::shared::load4(word) }.map(f32::to_bits);
        let trade = |inputs: Vec<Operands>| -> Vec<Operands> {
            assert_eq!(
                inputs.len(),
                32,
                "ldmatrix.x4.trans needs all 32 lanes of a warp, this warp has {}",
                inputs.len()
            );
            let rows: Vec<[u32; 4]> = inputs
                .into_iter()
                .map(|x| *x.downcast::<[u32; 4]>().expect("ldmatrix row"))
                .collect();
            // Value j (0..8) of the row lane r read.
            let value = |r: usize, j: usize| (rows[r][j / 2] >> (16 * (j % 2))) & 0xffff;
            (0..32)
                .map(|l| {
                    let (g, t) = (l / 4, l % 4);
                    let out: [u32; 4] = array::from_fn(|i| {
                        value(8 * i + 2 * t, g) | (value(8 * i + 2 * t + 1, g) << 16)
                    });
                    Box::new(out) as Operands
                })
                .collect()
        };
        let out = with(|t| {
            t.block
                .warp_collective(t.tid, site, Box::new(row), &trade, &t.launch)
        });
        *out.downcast::<[u32; 4]>().expect("ldmatrix result")
    }

    /// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`: this lane reads its own
    /// 16-byte row (logged and checked as a 128-bit shared load, which is
    /// also how the hardware serves it: one matrix, 8 rows, per pass), then
    /// the warp trades: lane L gets word L % 4 of row L / 4 of each matrix,
    /// whose rows lanes 8i .. 8i + 8 read.
    ///
    /// # Safety
    /// None on the host (the access is checked); `unsafe` to match the
    /// nvptx backend, whose contract the caller states.
    #[track_caller]
    pub unsafe fn load_matrix_x4(word: usize) -> [f32; 4] {
        let site = Location::caller();
        // SAFETY: checked on the host (a bad row reads NaN and is reported).
        let row = unsafe { super::shared::load4(word) };
        let trade = |inputs: Vec<Operands>| -> Vec<Operands> {
            assert_eq!(
                inputs.len(),
                32,
                "ldmatrix.x4 needs all 32 lanes of a warp, this warp has {}",
                inputs.len()
            );
            let rows: Vec<[f32; 4]> = inputs
                .into_iter()
                .map(|x| *x.downcast::<[f32; 4]>().expect("ldmatrix row"))
                .collect();
            (0..32)
                .map(|l| {
                    let out: [f32; 4] = array::from_fn(|i| rows[8 * i + l / 4][l % 4]);
                    Box::new(out) as Operands
                })
                .collect()
        };
        let out = with(|t| {
            t.block
                .warp_collective(t.tid, site, Box::new(row), &trade, &t.launch)
        });
        *out.downcast::<[f32; 4]>().expect("ldmatrix result")
    }
}

/// The warp helpers on the host: `shfl.sync` as a warp collective
/// (`super::block`).
pub mod warp {
    use super::*;
    use crate::emu::block::Operands;

    /// `shfl.sync.bfly.b32` with the whole warp as members: every lane
    /// hands in its value and gets back lane `lane ^ mask`'s.
    #[track_caller]
    pub fn shuffle_xor(x: f32, mask: u32) -> f32 {
        shuffle(x, mask, |lane, mask| lane ^ mask as usize)
    }

    /// `shfl.sync.idx.b32` with the whole warp as members: every lane
    /// hands in its value and the lane it reads, and gets back that
    /// lane's value.
    #[track_caller]
    pub fn shuffle_idx(x: f32, src: u32) -> f32 {
        shuffle(x, src, |_, src| src as usize)
    }

    /// `shfl.sync` with the whole warp as members: every lane hands in
    /// its value and its operand `arg`, and gets back the value of lane
    /// `source(lane, arg) % 32`.
    #[track_caller]
    fn shuffle(x: f32, arg: u32, source: fn(usize, u32) -> usize) -> f32 {
        let site = Location::caller();
        let trade = |inputs: Vec<Operands>| -> Vec<Operands> {
            assert_eq!(
                inputs.len(),
                32,
                "shfl.sync needs all 32 lanes of a warp, this warp has {}",
                inputs.len()
            );
            let lanes: Vec<(f32, u32)> = inputs
                .into_iter()
                .map(|x| *x.downcast::<(f32, u32)>().expect("shuffled value"))
                .collect();
            (0..32)
                .map(|l| Box::new(lanes[source(l, lanes[l].1) & 31].0) as Operands)
                .collect()
        };
        let out = with(|t| {
            t.block
                .warp_collective(t.tid, site, Box::new((x, arg)), &trade, &t.launch)
        });
        *out.downcast::<f32>().expect("shuffle result")
    }
}

/// `cp.async` on the host: a copy reads its source when it starts, but
/// writes shared memory only at the `wait_group` that retires its group.
/// Until then it counts as a write in every barrier interval it spans
/// (logged again after each barrier), so a thread that reads the words
/// before the wait and a barrier is reported as a race; a copy a thread
/// never waits for is a finding of its own ([`super::report::UnwaitedCopies`]).
pub mod async_copy {
    use super::*;
    use crate::device::GlobalIn;
    use crate::elem::Element;

    /// A copy in flight: where it goes, what it carries, where it started.
    #[derive(Clone, Copy, Debug)]
    pub(in crate::emu) struct Copy {
        word: usize,
        width: usize,
        values: [f32; 4],
        pub(in crate::emu) site: Site,
    }

    /// A thread's copies not yet waited for: the open group (since the
    /// last commit), then the committed groups, oldest first.
    #[derive(Debug, Default)]
    pub(in crate::emu) struct Copies {
        open: Vec<Copy>,
        groups: std::collections::VecDeque<Vec<Copy>>,
    }

    impl Copies {
        pub(in crate::emu) fn pending(&self) -> impl Iterator<Item = &Copy> {
            self.open.iter().chain(self.groups.iter().flatten())
        }

        /// Logs every pending copy as a write in a new interval.
        pub(in crate::emu) fn log_in_flight(&self, log: &mut Vec<SharedAccess>) {
            log.extend(self.pending().map(|c| c.access(false)));
        }
    }

    impl Copy {
        fn access(&self, banks: bool) -> SharedAccess {
            SharedAccess {
                site: self.site,
                word: self.word as u32,
                op: Op::Store,
                width: self.width as u8,
                banks,
            }
        }
    }

    /// Starts a copy of `src[index..index + valid]` (`valid <= W`) to the
    /// `W` shared words at `word`, zero-filling the rest.
    ///
    /// # Safety
    /// None on the host (both sides are checked); `unsafe` to match the
    /// nvptx backend, whose contract the caller states.
    #[track_caller]
    pub unsafe fn copy<const W: usize>(word: usize, src: GlobalIn, index: usize, valid: usize) {
        let site = Location::caller();
        let buffer = src.buffer();
        let mut values = [0.0f32; 4];
        if valid > W || (W == 4 && !(buffer.base + index).is_multiple_of(4)) {
            // Beyond cp-size, or a misaligned 16-byte source: report the
            // whole span as a bad access.
            let at = buffer.base + index;
            with(|t| t.bad_access(site, buffer.memory, Op::Load, at, W, buffer.len));
            values = [f32::NAN; 4];
        } else {
            for (j, v) in values.iter_mut().enumerate().take(valid) {
                *v = super::global::read_n::<1>(buffer, index + j)[0];
            }
        }
        with(|t| {
            let len = t.block.shared.len();
            if check(word, W, len).is_err() {
                t.bad_access(site, Memory::Shared, Op::Store, word, W, len);
                return;
            }
            let copy = Copy {
                word,
                width: W,
                values,
                site,
            };
            t.log.push(copy.access(true));
            t.copies.open.push(copy);
        });
    }

    /// Starts a 16-byte copy of `src[index..index + valid]` (`valid <=
    /// 16 / size of T`) to the 4 shared words at `word`, zero-filling the
    /// rest: the elements' bits packed as the GPU stores them (two 16-bit
    /// elements per word, the lower index in the low half).
    ///
    /// # Safety
    /// As [`copy`].
    #[track_caller]
    pub unsafe fn copy16<T: Element>(word: usize, src: GlobalIn<T>, index: usize, valid: usize) {
        let site = Location::caller();
        let buffer = src.buffer();
        let size = core::mem::size_of::<T>();
        let per_chunk = 16 / size;
        let mut bytes = [0u8; 16];
        let values = if valid > per_chunk || !(buffer.base + index).is_multiple_of(per_chunk) {
            let at = buffer.base + index;
            with(|t| t.bad_access(site, buffer.memory, Op::Load, at, per_chunk, buffer.len));
            [f32::NAN; 4]
        } else {
            for j in 0..valid {
                let x = T::from_f32(super::global::read_n::<1>(buffer, index + j)[0]).bits();
                bytes[j * size..(j + 1) * size].copy_from_slice(&x.to_le_bytes()[..size]);
            }
            array::from_fn(|w| {
                f32::from_bits(u32::from_le_bytes(
                    bytes[4 * w..4 * w + 4].try_into().expect("4 bytes"),
                ))
            })
        };
        with(|t| {
            let len = t.block.shared.len();
            if check(word, 4, len).is_err() {
                t.bad_access(site, Memory::Shared, Op::Store, word, 4, len);
                return;
            }
            let copy = Copy {
                word,
                width: 4,
                values,
                site,
            };
            t.log.push(copy.access(true));
            t.copies.open.push(copy);
        });
    }

    /// `cp.async.commit_group`.
    #[track_caller]
    pub fn commit_group() {
        with(|t| {
            let group = std::mem::take(&mut t.copies.open);
            t.copies.groups.push_back(group);
        });
    }

    /// `cp.async.wait_group PENDING`: the copies of all but the newest
    /// `PENDING` committed groups land now.
    #[track_caller]
    pub fn wait_group<const PENDING: u32>() {
        with(|t| {
            while t.copies.groups.len() > PENDING as usize {
                let group = t.copies.groups.pop_front().expect("len > PENDING");
                for c in group {
                    for (w, v) in t.block.shared[c.word..c.word + c.width]
                        .iter()
                        .zip(c.values)
                    {
                        w.store(v.to_bits(), Relaxed);
                    }
                    t.log.push(c.access(false));
                }
            }
        });
    }
}
