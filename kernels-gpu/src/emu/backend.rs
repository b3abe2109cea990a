//! The device helpers' host backend: what `thread_idx_x`, `sync_threads`
//! and the shared- and global-memory accessors of [`crate::device`] do
//! when a kernel body runs on the CPU.
//!
//! Every emulated GPU thread runs on an OS thread of the launch's pool
//! ([`super::block`]), and a thread-local [`EmuThread`] says which thread
//! it is and which block and launch it belongs to. Memory that threads
//! share is atomics (`Relaxed`, holding `f32` bits), so a racy kernel is
//! a reported finding, never undefined behaviour in Rust. Shared-memory accesses are logged per thread and
//! checked when the barrier interval closes ([`super::check`]); global
//! accesses are checked on the spot.
//!
//! The accessors are `#[track_caller]`, and so are their callers in
//! `device` on the host only: `Location::caller()` is then the kernel's
//! own call site, which names accesses in reports and tells one access
//! site from another for the bank-conflict accounting.

use std::array;
use std::cell::{Cell, RefCell};
use std::panic::{Location, PanicHookInfo};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

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

/// `__syncthreads()`: a real barrier across the block's OS threads. A
/// barrier the block cannot complete (some threads exited, or threads
/// wait at different barriers) is reported and unwinds the waiting threads.
#[track_caller]
pub fn sync_threads() {
    let site = Location::caller();
    with(|t| t.block.arrive(t.tid, site, &mut t.log, &t.launch));
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

    /// A global buffer on the host: which of the launch's buffers, and
    /// its length in elements, so that every access can be checked.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Buffer {
        pub(in crate::emu) memory: Memory,
        pub(in crate::emu) len: usize,
    }

    #[track_caller]
    fn read_n<const W: usize>(buffer: Buffer, index: usize) -> [f32; W] {
        let site = Location::caller();
        with(|t| {
            if check(index, W, buffer.len).is_err() {
                t.bad_access(site, buffer.memory, Op::Load, index, W, buffer.len);
                return [f32::NAN; W];
            }
            let data = t.launch.input(buffer.memory);
            array::from_fn(|i| data[index + i])
        })
    }

    #[track_caller]
    fn write_n<const W: usize>(buffer: Buffer, index: usize, values: [f32; W]) {
        let site = Location::caller();
        with(|t| {
            if check(index, W, buffer.len).is_err() {
                t.bad_access(site, buffer.memory, Op::Store, index, W, buffer.len);
                return;
            }
            for (i, v) in values.into_iter().enumerate() {
                t.launch.write_c(index + i, v, t.block_idx, t.thread, site);
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
    pub unsafe fn read4(buffer: Buffer, index: usize) -> [f32; 4] {
        read_n::<4>(buffer, index)
    }

    /// # Safety
    /// As for [`read`].
    #[track_caller]
    pub unsafe fn write(buffer: Buffer, index: usize, value: f32) {
        write_n::<1>(buffer, index, [value]);
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
}

// TRANSIENT: replaced by the warp rendezvous and pending copies.
pub mod mma {
    pub fn to_tf32(x: f32) -> u32 {
        x.to_bits()
    }
    #[track_caller]
    pub fn mma_m16n8k8_tf32(_c: &mut [f32; 4], _a: [u32; 4], _b: [u32; 2]) {
        unimplemented!("emulated mma")
    }
    #[track_caller]
    pub unsafe fn load_matrix_x4(_word: usize) -> [f32; 4] {
        unimplemented!("emulated ldmatrix")
    }
}
pub mod async_copy {
    use crate::device::GlobalIn;
    #[track_caller]
    pub unsafe fn copy<const W: usize>(_word: usize, _src: GlobalIn, _index: usize, _valid: usize) {
        unimplemented!("emulated cp.async")
    }
    #[track_caller]
    pub fn commit_group() {}
    #[track_caller]
    pub fn wait_group<const N: u32>() {}
}
