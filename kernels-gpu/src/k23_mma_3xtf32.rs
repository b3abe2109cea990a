//! Step 23: FP32 accuracy from TF32 tensor cores (3xTF32). Step 11 rounds
//! each f32 factor to TF32 (11 significant bits) before the `mma`, so its
//! products carry relative errors up to 2^-10 and a product of random
//! matrices is some 100x less accurate than SGEMM's. This step keeps step
//! 11's block (tiles, `cp.async` stages, swizzles, epilogue) and changes
//! only what the warp does with its fragments.
//!
//! What changes from step 11 (its body, with `SPLIT`):
//! - **Each factor is split in registers** as it leaves shared memory:
//!   `x = big + small` with `big = tf32(x)` and `small = tf32(x - big)`,
//!   both rounded to nearest (`cvt.rna`; [`crate::device::mma::split_tf32`]).
//!   The subtraction is exact, and `big + small` holds about 22 of the 24
//!   significant bits of `x`.
//! - **Three `mma`s per fragment pair**: `small * big`, then `big *
//!   small`, then `big * big`, the two small terms first. `small * small`
//!   (about 2^-22 of a product) is dropped.
//! - **Each k-step's three products go into a partial sum of their own**,
//!   which the FMA pipe then adds into the f32 accumulators (four adds per
//!   three `mma`s). The tensor cores' internal additions truncate; fed the
//!   whole running sum as their accumulator, they lose low bits of it at
//!   every `mma`, a bias that grows with K. Without this promotion the
//!   first version was many times less accurate than SGEMM at every size
//!   (docs/measurements.md, twelfth session), which no split can repair.
//! - **Checked as an FP32 kernel** (`Math::Tf32x3`, named `3xTF32`): the
//!   FP32 tolerance, the emulator's f32 bound on the inputs as stored (not
//!   rounded to TF32), and in the bench against cuBLAS SGEMM.
//!
//! Registers: the split doubles the fragments. 64 x 64 warp tiles take
//! all 255 registers in step 11 already, and step 11's 32 x 64 and 64 x
//! 32 warp tiles spill with the split under ptxas for sm_80 (`ptxas -v`
//! in the PTX tests), so the instance is a 32 x 32 warp tile (32
//! accumulators) in a 64 x 64 block of four warps.
//!
//! Prediction (H200, n = 4096; made before the promotion was added):
//! three times step 11's tensor work and three times its `mma` issue on
//! the same data, and the split's ALU work (two conversions, a
//! subtraction and a test per value), so about a third of step 11's rate,
//! some 50 TFLOP/s: about cuBLAS SGEMM's, with its error. The Hopper 3xTF32 on steps 17-18's pipeline is where the
//! speed is meant to come from; this step is the portable one, and the
//! one the CPU emulator checks. The measurement lives in docs/bench.json
//! and the README's bench table (`cargo xtask bench`).

use crate::elem::Elems;
use crate::gemm::Gemm;
use crate::k11_mma::{B_PAD, BK, NONE, Params, mma};
use crate::launch::KernelSpec;

/// One instance: `SPEC` for the host, the body `name` for the emulator,
/// and the PTX entry `name` (in the `mma` module, with step 11's).
macro_rules! instance {
    ($name:ident, $spec:ident, $bm:literal, $bn:literal, $wm:literal, $wn:literal, $s:literal) => {
        pub const $spec: KernelSpec = Params {
            bm: $bm,
            bn: $bn,
            bk: BK,
            wm: $wm,
            wn: $wn,
            stages: $s,
        }
        .spec_of(
            stringify!($name),
            $name,
            (23, Elems::TF32X3),
            "3xTF32: step 11 with each f32 factor split into two TF32 parts in registers, three mma.sync per pair",
        );
        /// The body of the PTX entry of the same name (inlined into it).
        #[inline(always)]
        pub fn $name(g: Gemm) {
            mma::<$bm, $bn, BK, $wm, $wn, $s, { $wm / 16 }, { $wn / 8 }, { $s - 2 }, { $bn + B_PAD }, NONE, true>(g)
        }
        mod $name {
            #[cfg(target_arch = "nvptx64")]
            use super::$name;
            crate::gemm_kernel!($name, one_product);
        }
    };
}

#[rustfmt::skip]
mod instances {
    use super::*;
    instance!(mma_3xtf32_64x64x32_w32x32_s2, SPEC_64X64X32_W32X32_S2, 64, 64, 32, 32, 2);
}
pub use instances::*;

/// Every instance.
pub const SPECS: &[KernelSpec] = &[SPEC_64X64X32_W32X32_S2];
