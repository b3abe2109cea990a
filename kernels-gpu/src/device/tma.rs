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
//! GPU only, like [`super::mbarrier`].

use core::arch::asm;

use super::mbarrier::MBarrier;
use super::shared;
use crate::launch::TENSOR_MAP_BYTES;

/// The tensor maps of A and B, one after the other in device memory.
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
}
