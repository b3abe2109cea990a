//! The block-wide barrier.
//!
//! Safety model: `bar.sync 0` must be reached by every thread of the
//! block, the same number of times; a thread that skips one (an early
//! `return` before a barrier, a barrier inside a branch some threads do
//! not take) leaves the others waiting for arrivals that never come, or
//! syncing with the wrong phase. Kernels keep every barrier at the top
//! level of their loop, with the same trip count for all threads, and
//! apply edge guards to loads and stores, never to barriers.

/// `__syncthreads()`: waits until every thread of the block has arrived,
/// and makes their shared-memory writes visible to each other.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: `bar.sync 0` has no memory-safety preconditions; the
    // convergence rule above is a liveness rule that kernels keep.
    unsafe { core::arch::nvptx::_syncthreads() }
}

// On the host: a real barrier across the CPU emulator's threads of the
// block, which reports (instead of hanging on) a barrier some threads skip.
#[cfg(not(target_arch = "nvptx64"))]
pub use crate::emu::backend::sync_threads;
