//! Barriers: the block-wide one, and (GPU only) barriers among some of a
//! block's warps and within one warp.
//!
//! Safety model: `bar.sync 0` must be reached by every thread of the
//! block, the same number of times; a thread that skips one (an early
//! `return` before a barrier, a barrier inside a branch some threads do
//! not take) leaves the others waiting for arrivals that never come, or
//! syncing with the wrong phase. Kernels keep every barrier at the top
//! level of their loop, with the same trip count for all threads, and
//! apply edge guards to loads and stores, never to barriers.
//!
//! The same rule holds for the smaller barriers, for their members:
//! [`sync_warps`] (`bar.sync id, threads`, a *named* barrier) must be
//! reached by all `threads` threads, whole warps, that use barrier `id`,
//! and by no other; [`sync_warp`] by all 32 lanes of the warp. Both order
//! the members' shared-memory accesses as `bar.sync 0` does the block's.
//! Breaking the rule is a hang or a race, never an access out of bounds,
//! so the functions are safe to call. The CPU emulator runs no kernel
//! that uses the smaller barriers (they serve the Hopper kernels, which
//! are GPU only), so they have no host backend.

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

/// `__syncthreads_or(pred)` (`bar.red.or.pred`): [`sync_threads`], and
/// whether `pred` held in any thread of the block, in every thread (how
/// one thread's finding reaches the block without shared memory).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub fn sync_threads_or(pred: bool) -> bool {
    let any: u32;
    // SAFETY: a barrier (`bar.red` on barrier 0, as `bar.sync 0`); the
    // convergence rule above is a liveness rule that kernels keep.
    unsafe {
        core::arch::asm!(
            "{{ .reg .pred p, q;",
            "setp.ne.u32 p, {x}, 0;",
            "bar.red.or.pred q, 0, p;",
            "selp.u32 {any}, 1, 0, q; }}",
            x = in(reg32) pred as u32,
            any = out(reg32) any,
            options(nostack),
        )
    };
    any != 0
}

// On the host: the emulator's barrier, with the block's vote.
#[cfg(not(target_arch = "nvptx64"))]
pub use crate::emu::backend::sync_threads_or;

/// `bar.sync id, THREADS`: waits until `THREADS` threads (whole warps)
/// have arrived at named barrier `id` (1..16; 0 is [`sync_threads`]'s),
/// and orders their shared-memory accesses. A warpgroup's own barrier:
/// `id` = 1 + its index, `THREADS` = 128.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub fn sync_warps<const THREADS: u32>(id: u32) {
    const { assert!(THREADS.is_multiple_of(32) && THREADS > 0) };
    // SAFETY: a barrier; the membership rule (module docs) is liveness,
    // kept by the callers. The memory clobber keeps shared accesses on
    // their side of it.
    unsafe {
        core::arch::asm!(
            "bar.sync {id}, {n};",
            id = in(reg32) id,
            n = const THREADS,
            options(nostack),
        )
    }
}

/// `bar.warp.sync 0xffffffff`: waits until all 32 lanes of the warp have
/// arrived, and orders their shared-memory accesses (a lane's reads
/// before it, another lane's writes after it).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub fn sync_warp() {
    // SAFETY: as sync_warps: liveness only, kept by the callers.
    unsafe { core::arch::asm!("bar.warp.sync 0xffffffff;", options(nostack)) }
}
