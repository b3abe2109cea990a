//! Thread-block clusters (sm_90): blocks launched together on one GPC,
//! each able to reach the others' shared memory. Step 23 pairs two
//! blocks whose tiles of C lie one above the other: they need the same
//! tile of B, which each block loads half of, for both, by TMA multicast
//! ([`super::tma::TensorMap::load_2d_multicast`]); each tells the other
//! when it is done with a stage ([`super::mbarrier::MBarrier::arrive_remote`]).
//!
//! Safety model:
//!
//! 1. The entry is launched in clusters of the size the kernel assumes
//!    (`Launch::cluster`; the host declares it in the entry's PTX with
//!    `.reqnctapercluster`, so every launch of the entry is one, and
//!    rounds the grid to whole clusters).
//! 2. A block touches another block's shared memory (a remote arrival, a
//!    multicast copy) only between two cluster barriers ([`sync`]) that
//!    every thread of every block of the cluster reaches: one after the
//!    shared state (the `mbarrier`s) is initialised, before the first
//!    remote access, and one before any block exits, after the last. A
//!    block that has exited has no shared memory to reach.
//!
//! GPU only, like [`super::mbarrier`]: the emulator runs one block at a
//! time and has no cluster to model.

use core::arch::asm;

/// `%cluster_ctarank`: this block's rank in its cluster (0 .. the
/// cluster's size).
#[inline(always)]
pub fn block_rank() -> u32 {
    let rank: u32;
    // SAFETY: reads a special register; no memory, no preconditions.
    unsafe {
        asm!(
            "mov.u32 {r}, %cluster_ctarank;",
            r = out(reg32) rank,
            options(pure, nomem, nostack),
        );
    }
    rank
}

/// `barrier.cluster.arrive` + `barrier.cluster.wait`: waits until every
/// thread of every block of the cluster has arrived; memory accesses
/// before it (release) are visible to every thread after it (acquire).
/// Also a barrier for this block's own threads. Every thread of the
/// cluster calls it the same number of times, converged per warp
/// (`.aligned`), like [`super::sync_threads`] (rule 2).
#[inline(always)]
pub fn sync() {
    // SAFETY: barriers; liveness is the callers' (rule 2). No `nomem`:
    // shared and global accesses stay on their side.
    unsafe {
        asm!(
            "barrier.cluster.arrive.aligned;",
            "barrier.cluster.wait.aligned;",
            options(nostack),
        );
    }
}

/// `mapa.shared::cluster`: the address, in the cluster's shared window,
/// of the word at this block's shared address `address` in block `rank`
/// of the cluster (the same offset in its shared memory).
#[inline(always)]
pub fn peer_address(address: u32, rank: u32) -> u32 {
    let remote: u32;
    // SAFETY: address arithmetic; reads no memory.
    unsafe {
        asm!(
            "mapa.shared::cluster.u32 {d}, {a}, {r};",
            d = out(reg32) remote,
            a = in(reg32) address,
            r = in(reg32) rank,
            options(pure, nomem, nostack),
        );
    }
    remote
}
