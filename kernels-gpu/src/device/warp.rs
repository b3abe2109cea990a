//! The warp as a unit: which lane a thread is, and `shfl.sync`, the
//! register exchange between the 32 lanes of a warp, with the sum across
//! a warp built on it (`bfly`), and a value handed from any lane (`idx`:
//! a tile's epilogue operands, read once and spread over the lanes).
//!
//! `shfl.sync.bfly.b32 d, x, mask, 0x1f, 0xffffffff` hands every lane the
//! `x` of lane `lane ^ mask`: no shared memory, no barrier. Five rounds
//! with masks 16, 8, 4, 2, 1 (a butterfly) leave every lane holding the
//! sum of all 32 values, and the same bits in every lane: each round adds
//! the same two numbers in every pair of lanes (`a + b` and `b + a` are
//! equal in IEEE arithmetic), so the order of additions is fixed by the
//! masks alone, and the result is deterministic.
//!
//! Safety model: the member mask is the whole warp, so every one of its
//! 32 lanes must execute the same `shfl.sync` (a lane that left early,
//! or waits under a branch other lanes skip, makes the result undefined
//! on the GPU and is reported as a broken warp collective by the
//! emulator). Kernels call these functions only where every lane of the
//! warp arrives: outside any branch that depends on the lane, with
//! out-of-range lanes contributing zeros instead of returning. Blocks
//! are whole warps. The exchange touches registers only, so the
//! functions are safe to call; breaking the rule is a wrong result, not
//! memory unsafety. (rustc marks no `asm!` as convergent; the PTX tests
//! count the instructions.)
//!
//! On the host the CPU emulator runs the same calls: the warp's lanes
//! meet at a rendezvous and each takes its partner's value.

/// Threads in a warp.
pub const WARP: usize = 32;

/// The calling thread's lane in its warp, for blocks with one row of
/// threads (`blockDim.y == 1`, whose warps are 32 consecutive `x`).
#[inline(always)]
pub fn lane() -> usize {
    crate::device::thread_idx_x() % WARP
}

/// The calling thread's warp in its block, for blocks with one row of
/// threads.
#[inline(always)]
pub fn warp_idx() -> usize {
    crate::device::thread_idx_x() / WARP
}

/// `shfl.sync.bfly`: the `x` of lane `lane() ^ mask` (`mask < 32`).
///
/// Every lane of the warp must make the same call at the same time (see
/// the safety model).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn shuffle_xor(x: f32, mask: u32) -> f32 {
    backend::shuffle_xor(x, mask)
}

/// `shfl.sync.idx`: the `x` of lane `src` (`src < 32`; each lane names
/// its own).
///
/// Every lane of the warp must make the same call at the same time (see
/// the safety model).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn shuffle_idx(x: f32, src: u32) -> f32 {
    backend::shuffle_idx(x, src)
}

/// The sum of `x` over the warp's 32 lanes, in every lane: a butterfly of
/// five [`shuffle_xor`]s, with the same bits in every lane and on every
/// run (module docs).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn warp_sum(x: f32) -> f32 {
    let mut s = x;
    let mut mask = WARP as u32 / 2;
    while mask > 0 {
        s += shuffle_xor(s, mask);
        mask /= 2;
    }
    s
}

/// The largest of `bits` over the warp's 32 lanes, compared as unsigned
/// integers, in every lane: five [`shuffle_xor`] rounds of the bits. For
/// the bits of magnitudes (sign cleared) this is the largest magnitude,
/// with NaN above infinity above every finite value: a maximum that
/// keeps a NaN, whatever the order, so deterministic (the quantizer's
/// amax, `quant`).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn warp_max_bits(bits: u32) -> u32 {
    let mut m = bits;
    let mut mask = WARP as u32 / 2;
    while mask > 0 {
        m = m.max(shuffle_xor(f32::from_bits(m), mask).to_bits());
        mask /= 2;
    }
    m
}

/// The nvptx backend: one instruction.
#[cfg(target_arch = "nvptx64")]
mod backend {
    use core::arch::asm;

    #[inline(always)]
    pub fn shuffle_xor(x: f32, mask: u32) -> f32 {
        let r: f32;
        // SAFETY: registers in, registers out; no memory is touched. The
        // convergence rule of the module's safety model is the caller's;
        // `nomem` without `pure` keeps LLVM from deleting, merging or
        // hoisting the exchange out of the branch it is in.
        unsafe {
            asm!(
                "shfl.sync.bfly.b32 {r}, {x}, {mask}, 0x1f, 0xffffffff;",
                r = out(reg32) r,
                x = in(reg32) x,
                mask = in(reg32) mask,
                options(nomem, nostack),
            );
        }
        r
    }

    #[inline(always)]
    pub fn shuffle_idx(x: f32, src: u32) -> f32 {
        let r: f32;
        // SAFETY: as `shuffle_xor`: registers only, convergence the
        // caller's.
        unsafe {
            asm!(
                "shfl.sync.idx.b32 {r}, {x}, {src}, 0x1f, 0xffffffff;",
                r = out(reg32) r,
                x = in(reg32) x,
                src = in(reg32) src,
                options(nomem, nostack),
            );
        }
        r
    }
}

// On the host: the CPU emulator's warp rendezvous.
#[cfg(not(target_arch = "nvptx64"))]
use crate::emu::backend::warp as backend;
