//! The Tensor Memory Accelerator (TMA, sm_90): one thread asks the copy
//! engine for a whole box of a matrix, and the engine writes it into
//! shared memory, in the layout (and swizzle) the tensor cores read,
//! counting its bytes down on an [`MBarrier`].
//!
//! What to copy is described by a *tensor map* (`CUtensorMap`, 128 bytes)
//! that the host makes with the driver's `cuTensorMapEncodeTiled`: the
//! matrix's address, sizes and row stride, the box size and the swizzle.
//! rustc cannot pass a 64-byte-aligned struct by value as a kernel
//! parameter (../shared/notes/tensor-cores.md), so the host copies the
//! maps into device memory and the kernel gets their address
//! ([`TensorMaps`]).
//!
//! Out-of-range parts of a box (past the matrix's last row or column) are
//! filled with zeros and still count towards the bytes the barrier
//! expects: edge tiles need no code of their own.
//!
//! Safety model:
//!
//! 1. The maps were made by the host for the launch's own buffers, with
//!    the box sizes and swizzle the kernel's `SPEC` states, and stay
//!    unchanged in device memory for the whole launch.
//! 2. The destination is `box bytes` of launch shared memory, aligned as
//!    the swizzle needs (1024 bytes for 128-byte swizzle, 128 without),
//!    which no thread reads or writes until the barrier's phase completes,
//!    and nothing else overwrites before then.
//! 3. The barrier expects the box's bytes in its current phase
//!    ([`MBarrier::arrive_expect_tx`]).
//!
//! Stores run the other way ([`TensorMap::store_2d`]): the engine reads a
//! box from shared memory and writes the part inside the matrix, in bulk
//! groups that the issuing thread commits and later waits on. Their rules:
//!
//! 4. The box in shared memory is complete, written by threads that each
//!    ran [`super::wgmma::fence_proxy_async`] before meeting the issuing
//!    thread at a barrier, and aligned as rule 2 says.
//! 5. Nothing writes those shared words again until the issuing thread's
//!    [`bulk_wait_read`] says the engine has read them, and the block does
//!    not exit before [`bulk_wait`] says every store is done.
//! 6. No other thread writes the part of the matrix the box covers.
//!
//! GPU only, like [`super::mbarrier`]; so are the kernels that use it
//! (steps 12-13, 17-20, 22 and 24-26).

use core::arch::asm;

use super::mbarrier::MBarrier;
use super::shared;
use crate::launch::TENSOR_MAP_BYTES;

/// The tensor maps of A, B and C, one after the other in device memory
/// (C's only where the kernel stores by TMA:
/// `crate::launch::TmaBoxes::c`).
#[derive(Clone, Copy, Debug)]
pub struct TensorMaps {
    maps: *const u8,
}

/// One tensor map in device memory.
#[derive(Clone, Copy, Debug)]
pub struct TensorMap {
    map: *const u8,
}

impl TensorMaps {
    /// The maps at `maps`: A's, then B's `TENSOR_MAP_BYTES` later.
    ///
    /// # Safety
    /// `maps` points at two tensor maps in device memory, 64-byte
    /// aligned, as rule 1 says.
    #[inline(always)]
    pub unsafe fn from_raw(maps: *const u8) -> Self {
        Self { maps }
    }

    pub fn a(self) -> TensorMap {
        TensorMap { map: self.maps }
    }

    pub fn b(self) -> TensorMap {
        TensorMap {
            map: self.maps.wrapping_add(TENSOR_MAP_BYTES),
        }
    }

    /// C's map, `2 * TENSOR_MAP_BYTES` in: made by the host only for a
    /// call `crate::launch::c_by_tma` accepts.
    pub fn c(self) -> TensorMap {
        TensorMap {
            map: self.maps.wrapping_add(2 * TENSOR_MAP_BYTES),
        }
    }
}

impl TensorMap {
    /// `prefetch.tensormap`: brings the map into the TMA unit's cache
    /// before the first copy needs it.
    #[inline(always)]
    pub fn prefetch(self) {
        // SAFETY: a hint; it reads the map (rule 1) and writes nothing.
        unsafe {
            asm!(
                "prefetch.tensormap [{map}];",
                map = in(reg64) self.map,
                options(nostack),
            );
        }
    }

    /// `cp.async.bulk.tensor.2d`: copies the box whose first element is
    /// column `col`, row `row` of the matrix into shared memory at word
    /// `word`, completing on `barrier`.
    ///
    /// # Safety
    /// Rules 1-3.
    #[inline(always)]
    pub unsafe fn load_2d(self, word: usize, col: u32, row: u32, barrier: MBarrier) {
        let dst = shared::address(word);
        // SAFETY: the map describes the launch's buffer (rule 1); the
        // destination and the barrier are the caller's (rules 2, 3).
        unsafe {
            asm!(
                "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes \
                 [{dst}], [{map}, {{{col}, {row}}}], [{bar}];",
                dst = in(reg32) dst,
                map = in(reg64) self.map,
                col = in(reg32) col,
                row = in(reg32) row,
                bar = in(reg32) barrier.address(),
                options(nostack),
            );
        }
    }

    /// `cp.async.bulk.tensor.3d`: [`Self::load_2d`] in matrix `product`
    /// of a batch, the third dimension of the map (a map the host made
    /// with three: steps 17-18).
    ///
    /// # Safety
    /// Rules 1-3.
    #[inline(always)]
    pub unsafe fn load_3d(self, word: usize, col: u32, row: u32, product: u32, barrier: MBarrier) {
        let dst = shared::address(word);
        // SAFETY: as load_2d's.
        unsafe {
            asm!(
                "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes \
                 [{dst}], [{map}, {{{col}, {row}, {product}}}], [{bar}];",
                dst = in(reg32) dst,
                map = in(reg64) self.map,
                col = in(reg32) col,
                row = in(reg32) row,
                product = in(reg32) product,
                bar = in(reg32) barrier.address(),
                options(nostack),
            );
        }
    }

    /// [`Self::load_2d`], or [`Self::load_3d`] in matrix `product` where
    /// the kernel's maps have a third dimension (`Some`).
    ///
    /// # Safety
    /// Rules 1-3.
    #[inline(always)]
    pub unsafe fn load(
        self,
        word: usize,
        col: u32,
        row: u32,
        product: Option<u32>,
        barrier: MBarrier,
    ) {
        // SAFETY: forwarded.
        unsafe {
            match product {
                None => self.load_2d(word, col, row, barrier),
                Some(z) => self.load_3d(word, col, row, z, barrier),
            }
        }
    }

    /// `cp.async.bulk.tensor.2d` from shared memory at word `word` to the
    /// box whose first element is column `col`, row `row` of the matrix,
    /// in this thread's current bulk group: only the box's part inside the
    /// matrix is written.
    ///
    /// # Safety
    /// Rules 1, 4, 5 and 6.
    #[inline(always)]
    pub unsafe fn store_2d(self, word: usize, col: u32, row: u32) {
        let src = shared::address(word);
        // SAFETY: the map describes the launch's C (rule 1); the box is
        // complete and stays until read (rules 4, 5), its part of C is
        // this block's alone (rule 6).
        unsafe {
            asm!(
                "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [{map}, {{{col}, {row}}}], [{src}];",
                map = in(reg64) self.map,
                col = in(reg32) col,
                row = in(reg32) row,
                src = in(reg32) src,
                options(nostack),
            );
        }
    }
}

/// `cp.async.bulk` (no tensor map): copies `bytes` contiguous bytes of
/// global memory at `src` into shared memory at word `word`, completing
/// on `barrier` (step 26's block scales, a slice of a plain array).
///
/// # Safety
/// Rules 2 and 3 for the destination and the barrier (16-byte aligned is
/// enough here); `src..src + bytes` is live global memory, unchanged for
/// the launch, `src` and `bytes` multiples of 16.
#[inline(always)]
pub unsafe fn bulk_load(word: usize, src: u64, bytes: u32, barrier: MBarrier) {
    let dst = shared::address(word);
    // SAFETY: the source is the caller's live global memory, the
    // destination and the barrier the caller's (rules 2, 3).
    unsafe {
        asm!(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{dst}], [{src}], {bytes}, [{bar}];",
            dst = in(reg32) dst,
            src = in(reg64) src,
            bytes = in(reg32) bytes,
            bar = in(reg32) barrier.address(),
            options(nostack),
        );
    }
}

/// `cp.async.bulk.commit_group`: this thread's stores issued since the
/// last commit become one bulk group.
#[inline(always)]
pub fn bulk_commit() {
    // SAFETY: no operands; groups only this thread's own stores.
    unsafe { asm!("cp.async.bulk.commit_group;", options(nostack)) }
}

/// `cp.async.bulk.wait_group.read N`: waits until at most `N` of this
/// thread's bulk groups still read their shared memory (rule 5: the words
/// of the older ones may be written again).
#[inline(always)]
pub fn bulk_wait_read<const N: u32>() {
    // SAFETY: a wait; the memory clobber keeps later shared writes after it.
    unsafe { asm!("cp.async.bulk.wait_group.read {n};", n = const N, options(nostack)) }
}

/// `cp.async.bulk.wait_group 0`: waits until every bulk group of this
/// thread is complete, its writes to global memory done (rule 5).
#[inline(always)]
pub fn bulk_wait() {
    // SAFETY: a wait; no operands.
    unsafe { asm!("cp.async.bulk.wait_group 0;", options(nostack)) }
}
