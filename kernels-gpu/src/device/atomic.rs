//! Between the blocks of one launch: a device-wide fence, tile counters
//! that blocks arrive at (`atom.add`), and reads of what other blocks
//! wrote. What lets the last block of a tile add up the partial sums of
//! a split K inside the launch that computed them ([`crate::split`]).
//!
//! The pattern, and why it is ordered: each block stores its partial
//! sums, every thread runs [`fence`] (`fence.acq_rel.gpu`: its stores
//! are visible to the whole GPU before anything it does after), the
//! block meets at a barrier, and one thread [`Counters::arrive`]s
//! (`atom.acq_rel.gpu.add`). The block that sees the count reach the
//! number of slices is the last: every other block's stores came before
//! its arrival, so after a fence of its own the last block reads them
//! through [`GlobalOut::read_l2`] (`ld.global.cg`, from L2, where the
//! other SMs' stores are; its own L1 never held those lines). The last
//! block puts the counter back to 0 ([`Counters::reset`]) for the next
//! launch, which the stream runs after this one.
//!
//! Safety model: a counter is a `u32` of a device buffer the host zeroed
//! once and every launch leaves at zero; an index is the only thing a
//! kernel can get wrong, so [`Counters::arrive`] and
//! [`Counters::reset`] are `unsafe fn`s whose callers state why the
//! index is inside the buffer. Nothing here waits for another block, so
//! no launch can hang on it, whatever order the blocks run in.
//!
//! On the host the CPU emulator runs blocks one after another, so the
//! fence has nothing to order; the counters are words of the emulated C
//! buffer (`emu::run_split` places them after C and the partial sums),
//! and every access is checked as C's are.

use crate::device::GlobalOut;

/// `fence.acq_rel.gpu` (`__threadfence()`): this thread's memory
/// accesses before it are seen by every thread of the GPU before its
/// accesses after it.
#[inline(always)]
pub fn fence() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence has no operands and no preconditions; the memory
    // clobber keeps the compiler's accesses on their side of it.
    unsafe {
        core::arch::asm!("fence.acq_rel.gpu;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// A buffer of `u32` counters in global memory, one per tile of C.
#[derive(Clone, Copy, Debug)]
pub struct Counters {
    #[cfg(target_arch = "nvptx64")]
    ptr: *mut u32,
    #[cfg(not(target_arch = "nvptx64"))]
    buffer: crate::emu::backend::global::Buffer,
}

impl Counters {
    /// Wraps a kernel argument.
    ///
    /// # Safety
    /// `ptr` addresses a live buffer of counters for the whole launch,
    /// each 0 at its start unless a block of this launch arrived at it.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut u32) -> Self {
        Self { ptr }
    }

    /// The counters the emulator keeps in the words of `buffer`.
    #[cfg(not(target_arch = "nvptx64"))]
    pub(crate) fn emulated(buffer: crate::emu::backend::global::Buffer) -> Self {
        Self { buffer }
    }

    /// Adds 1 to counter `index` and returns what it held before
    /// (`atom.acq_rel.gpu.global.add.u32`).
    ///
    /// # Safety
    /// `index` is inside the buffer.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn arrive(self, index: usize) -> u32 {
        #[cfg(target_arch = "nvptx64")]
        {
            let old: u32;
            // SAFETY: in bounds by this function's contract; an atomic
            // access, so concurrent arrivals are not a race.
            unsafe {
                core::arch::asm!(
                    "atom.acq_rel.gpu.global.add.u32 {old}, [{at}], 1;",
                    old = out(reg32) old,
                    at = in(reg64) self.ptr.add(index),
                    options(nostack),
                )
            };
            old
        }
        #[cfg(not(target_arch = "nvptx64"))]
        crate::emu::backend::global::arrive(self.buffer, index)
    }

    /// Puts counter `index` back to 0 (`st.relaxed.gpu`), for the next
    /// launch.
    ///
    /// # Safety
    /// `index` is inside the buffer, and no block of this launch arrives
    /// at it after the call.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn reset(self, index: usize) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: in bounds by this function's contract; every arrival
        // at this counter came before (the contract).
        unsafe {
            core::arch::asm!(
                "st.relaxed.gpu.global.u32 [{at}], 0;",
                at = in(reg64) self.ptr.add(index),
                options(nostack),
            )
        };
        #[cfg(not(target_arch = "nvptx64"))]
        crate::emu::backend::global::reset(self.buffer, index)
    }
}

impl GlobalOut<f32> {
    /// Reads element `index`, which another block of the launch wrote
    /// before an [`arrive`](Counters::arrive) this thread's block saw
    /// (`ld.global.cg`: from L2, not from this SM's L1).
    ///
    /// # Safety
    /// `index` is inside the buffer; the element's writer ran [`fence`]
    /// before its block arrived, and this thread ran it after.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read_l2(self, index: usize) -> f32 {
        #[cfg(target_arch = "nvptx64")]
        {
            let v: f32;
            // SAFETY: in bounds by this function's contract; written
            // before the arrival this thread's block saw.
            unsafe {
                core::arch::asm!(
                    "ld.global.cg.f32 {v}, [{at}];",
                    v = out(reg32) v,
                    at = in(reg64) self.address(index),
                    options(nostack, readonly),
                )
            };
            v
        }
        #[cfg(not(target_arch = "nvptx64"))]
        // SAFETY: checked by the emulator.
        unsafe {
            self.read(index)
        }
    }
}
