//! Asynchronous copies from global to shared memory (`cp.async`, sm_80 and
//! newer): a thread starts a copy and goes on computing; the data lands in
//! shared memory later, without passing through its registers.
//!
//! Copies are grouped: [`commit_group`] closes the copies this thread
//! started since the last commit into one group, and
//! [`wait_group::<N>()`](wait_group) waits until at most `N` of this
//! thread's groups are still in flight. A multi-stage pipeline keeps
//! `STAGES - 1` groups (tiles) in flight and waits for the oldest.
//!
//! Safety model, on top of [`super::shared`]'s:
//!
//! 1. The copy writes its shared words at an unknown moment between the
//!    call and the `wait_group` that retires its group. Until then no
//!    thread may read or write those words, and the issuing thread's own
//!    reads see them only after that wait; other threads see them only
//!    after the wait *and* a barrier that follows it.
//! 2. The source `src[index..index + valid]` lies inside its buffer (when
//!    `valid > 0`; with `valid == 0` nothing is read), and for the 16-byte
//!    form `index` and the destination word are multiples of 4 (16-byte
//!    aligned: device allocations are 256-byte aligned). The bytes past
//!    `valid` are filled with zeros, which is how edge tiles are padded.
//! 3. Every group a thread commits is waited for before the kernel ends.
//!
//! On the host the CPU emulator keeps each thread's copies pending, writes
//! them at the `wait_group` that retires them, and treats a pending copy
//! as a write in every barrier interval it spans: a missing wait shows up
//! as a race with the threads that read the tile, and a copy never waited
//! for as a finding of its own.

use super::global::GlobalIn;
use super::shared::SharedTile;
use crate::elem::Element;

impl<const ROWS: usize, const COLS: usize> SharedTile<ROWS, COLS> {
    /// Starts copying `src[index..index + valid]` (`valid <= 4` floats)
    /// into `tile[row][col..col + 4]`, zero-filling the rest: one 16-byte
    /// `cp.async.cg` (cached in L2 only).
    ///
    /// # Safety
    /// `row < ROWS`, `col + 4 <= COLS`, the launch provides the tile's
    /// shared memory, and the module's rules 1-3 (alignment included) hold.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn copy4_async(
        self,
        row: usize,
        col: usize,
        src: GlobalIn,
        index: usize,
        valid: usize,
    ) {
        // SAFETY: forwarded from this function's contract.
        unsafe { backend::copy::<4>(self.word(row, col), src, index, valid) }
    }

    /// Starts copying `src[index..index + valid]` (`valid <= 16 / size of
    /// T` elements: 8 of a 16-bit type) into the 16 bytes at
    /// `tile[row][col..col + 4]`, zero-filling the rest: one 16-byte
    /// `cp.async.cg`, for tiles of any stored type (two 16-bit elements
    /// per word, the lower index in the low half).
    ///
    /// # Safety
    /// As [`Self::copy4_async`]; alignment counts bytes: the source
    /// `index` is a multiple of `16 / size of T`.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn copy16_async<T: Element>(
        self,
        row: usize,
        col: usize,
        src: GlobalIn<T>,
        index: usize,
        valid: usize,
    ) {
        // SAFETY: forwarded from this function's contract.
        unsafe { backend::copy16::<T>(self.word(row, col), src, index, valid) }
    }

    /// Starts copying `src[index]` (when `valid`, else zero) into
    /// `tile[row][col]`: one 4-byte `cp.async.ca`, for rows of A or B that
    /// are not 16-byte aligned.
    ///
    /// # Safety
    /// `row < ROWS`, `col < COLS`, and the module's rules 1-3 hold.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn copy1_async(
        self,
        row: usize,
        col: usize,
        src: GlobalIn,
        index: usize,
        valid: bool,
    ) {
        // SAFETY: forwarded from this function's contract.
        unsafe { backend::copy::<1>(self.word(row, col), src, index, usize::from(valid)) }
    }
}

/// `cp.async.commit_group`: the copies this thread started since the last
/// commit become one group.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn commit_group() {
    backend::commit_group()
}

/// `cp.async.wait_group PENDING`: waits until at most `PENDING` of this
/// thread's committed groups are still in flight; the others' data is then
/// in shared memory (visible to other threads after a barrier).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn wait_group<const PENDING: u32>() {
    backend::wait_group::<PENDING>()
}

#[cfg(target_arch = "nvptx64")]
mod backend {
    use super::GlobalIn;
    use crate::device::shared;
    use crate::elem::Element;
    use core::arch::asm;

    /// # Safety
    /// `word..word + W` lies in shared memory; rules 1-3 of the module.
    #[inline(always)]
    pub unsafe fn copy<const W: usize>(word: usize, src: GlobalIn, index: usize, valid: usize) {
        let dst = shared::address(word);
        // With nothing to read, point at the buffer's start: an address
        // that is valid whatever `index` is.
        let src = src.address(if valid > 0 { index } else { 0 });
        let bytes = (4 * valid) as u32;
        // SAFETY: dst is W words of shared memory, src is inside its
        // buffer for `bytes` bytes, both aligned to 4 * W (caller). The
        // memory clobber keeps LLVM from moving shared accesses across it.
        unsafe {
            if W == 4 {
                asm!(
                    "cp.async.cg.shared.global [{dst}], [{src}], 16, {bytes};",
                    dst = in(reg32) dst,
                    src = in(reg64) src,
                    bytes = in(reg32) bytes,
                    options(nostack),
                );
            } else {
                asm!(
                    "cp.async.ca.shared.global [{dst}], [{src}], 4, {bytes};",
                    dst = in(reg32) dst,
                    src = in(reg64) src,
                    bytes = in(reg32) bytes,
                    options(nostack),
                );
            }
        }
    }

    /// # Safety
    /// `word..word + 4` lies in shared memory; rules 1-3 of the module.
    #[inline(always)]
    pub unsafe fn copy16<T: Element>(word: usize, src: GlobalIn<T>, index: usize, valid: usize) {
        let dst = shared::address(word);
        let src = src.address(if valid > 0 { index } else { 0 });
        let bytes = (core::mem::size_of::<T>() * valid) as u32;
        // SAFETY: as for `copy::<4>`: 16 bytes of shared memory, `bytes`
        // inside the source buffer, both 16-byte aligned (caller).
        unsafe {
            asm!(
                "cp.async.cg.shared.global [{dst}], [{src}], 16, {bytes};",
                dst = in(reg32) dst,
                src = in(reg64) src,
                bytes = in(reg32) bytes,
                options(nostack),
            );
        }
    }

    #[inline(always)]
    pub fn commit_group() {
        // SAFETY: no operands; orders nothing but this thread's copies.
        unsafe { asm!("cp.async.commit_group;", options(nostack)) }
    }

    #[inline(always)]
    pub fn wait_group<const PENDING: u32>() {
        // SAFETY: waits only; the memory clobber keeps shared loads after it.
        unsafe { asm!("cp.async.wait_group {n};", n = const PENDING, options(nostack)) }
    }
}

// On the host: the CPU emulator's pending copies.
#[cfg(not(target_arch = "nvptx64"))]
use crate::emu::backend::async_copy as backend;
