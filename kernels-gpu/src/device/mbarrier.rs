//! Transaction barriers in shared memory (`mbarrier`, sm_90): how a
//! thread learns that a TMA copy ([`super::tma`]) has landed.
//!
//! An [`MBarrier`] is one 64-bit word of shared memory holding a phase
//! bit, a count of arrivals still expected and a count of bytes still
//! expected. A phase completes when both counts reach zero; the phase bit
//! then flips and the counts reset. Step 12 uses each barrier with one
//! arrival per phase: the thread that starts a stage's copies arrives
//! once, announcing the bytes they will bring
//! ([`MBarrier::arrive_expect_tx`]), and the copies count those bytes
//! down as they land. Waiters spin on [`MBarrier::try_wait`] with the
//! parity of the phase they need.
//!
//! Safety model:
//!
//! 1. The barrier's word lies inside the launch's shared memory, is
//!    8-byte aligned, and is used for nothing else while the kernel runs.
//! 2. [`MBarrier::init`] runs once, by one thread, before any other use,
//!    and a block-wide barrier ([`super::sync_threads`]) separates it from
//!    every other thread's first use (with [`fence_init`] in between, so
//!    the TMA unit sees the initialised word).
//! 3. The program keeps the phases straight: a waiter asks for the parity
//!    of a phase that has not completed twice since (parity is one bit).
//!    Getting that wrong is a hang or reading a stage too early, not
//!    memory unsafety by itself; the callers say why it holds.
//!
//! GPU only: the CPU emulator does not model `mbarrier`, TMA or `wgmma`
//! (their asynchronous proxy has no equivalent among its threads), so
//! step 12 runs on the GPU alone (README, "What the emulator runs").

use core::arch::asm;

use super::shared;

/// A transaction barrier at a fixed word of shared memory.
#[derive(Clone, Copy, Debug)]
pub struct MBarrier {
    /// Its shared-memory address (the `.shared` window).
    address: u32,
}

impl MBarrier {
    /// The barrier at word `word` (4 bytes each) of the block's shared
    /// memory; `word` must be even (8-byte aligned).
    #[inline(always)]
    pub fn at(word: usize) -> Self {
        Self {
            address: shared::address(word),
        }
    }

    /// `mbarrier.init`: the barrier expects `arrivals` arrivals per phase,
    /// and starts in phase 0.
    ///
    /// # Safety
    /// Rules 1 and 2: one thread, before any other use.
    #[inline(always)]
    pub unsafe fn init(self, arrivals: u32) {
        // SAFETY: writes the barrier's own word (rule 1), before any
        // other thread uses it (rule 2).
        unsafe {
            asm!(
                "mbarrier.init.shared::cta.b64 [{bar}], {n};",
                bar = in(reg32) self.address,
                n = in(reg32) arrivals,
                options(nostack),
            );
        }
    }

    /// `mbarrier.arrive.expect_tx`: this thread's arrival, announcing that
    /// copies will bring `bytes` more bytes in the current phase.
    ///
    /// # Safety
    /// Rules 1-3; the copies that complete on this barrier bring exactly
    /// `bytes` bytes in this phase.
    #[inline(always)]
    pub unsafe fn arrive_expect_tx(self, bytes: u32) {
        // SAFETY: updates the barrier's own word (rule 1), initialised (rule 2).
        unsafe {
            asm!(
                "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{bar}], {bytes};",
                bar = in(reg32) self.address,
                bytes = in(reg32) bytes,
                options(nostack),
            );
        }
    }

    /// `mbarrier.arrive`: this thread's arrival, with no bytes announced.
    ///
    /// # Safety
    /// Rules 1-3; the barrier expects this arrival in its current phase.
    #[inline(always)]
    pub unsafe fn arrive(self) {
        // SAFETY: updates the barrier's own word (rule 1), initialised (rule 2).
        unsafe {
            asm!(
                "mbarrier.arrive.shared::cta.b64 _, [{bar}];",
                bar = in(reg32) self.address,
                options(nostack),
            );
        }
    }

    /// Waits until the phase with parity `parity` (0 or 1) has completed.
    /// After it returns, the bytes copied in that phase are visible to
    /// this thread.
    ///
    /// # Safety
    /// Rules 1-3.
    #[inline(always)]
    pub unsafe fn wait(self, parity: u32) {
        loop {
            let done: u32;
            // SAFETY: reads the barrier's own word (rules 1, 2). The memory
            // clobber keeps the stage's loads after the wait.
            unsafe {
                asm!(
                    "{{",
                    ".reg .pred done;",
                    "mbarrier.try_wait.parity.shared::cta.b64 done, [{bar}], {parity};",
                    "selp.u32 {out}, 1, 0, done;",
                    "}}",
                    bar = in(reg32) self.address,
                    parity = in(reg32) parity,
                    out = out(reg32) done,
                    options(nostack),
                );
            }
            if done != 0 {
                return;
            }
        }
    }

    /// Its shared-memory address, for the copies that complete on it.
    pub(crate) fn address(self) -> u32 {
        self.address
    }
}

/// `fence.mbarrier_init.release.cluster`: makes barriers this thread
/// initialised visible to the TMA unit (and the cluster), rule 2.
#[inline(always)]
pub fn fence_init() {
    // SAFETY: a fence; no operands, no preconditions.
    unsafe { asm!("fence.mbarrier_init.release.cluster;", options(nostack)) }
}
