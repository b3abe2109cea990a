//! Step 25: FP8 inputs. Hopper's tensor cores multiply E4M3 and E5M2 at
//! twice the 16-bit rate (8192 against 4096 FLOP per clock per SM), and
//! each value is one byte: a stage of step 22 holds twice the K. This
//! step is step 22's block (persistent grid, a TMA producer warpgroup,
//! two consumer warpgroups, C written by TMA) with FP8 A and B, generic
//! over the pair of types ([`Fp8Pair`](crate::device::wgmma::Fp8Pair): `wgmma` lets A and B differ) and
//! over C's type, and with per-tensor scales.
//!
//! What changes from step 22:
//! - **`wgmma ... m64n256k32.f32.e4m3.e4m3`**: a 128-byte row of a stage
//!   holds 128 values of K (BK = 128), still four `wgmma` steps of 32
//!   bytes per stage, with the same descriptors. The stage's bytes, the
//!   boxes' rows and the pipeline are step 22's; only the values per row
//!   and the instruction differ
//!   ([`WgmmaAb`](crate::device::wgmma::WgmmaAb)).
//! - **B is read transposed**: FP8 `wgmma` has no transpose bit, so both
//!   tiles must be K-major. A is (M x K, K contiguous); B must be given as
//!   B^T (N x K, K contiguous: BLAS's column-major B, the layout
//!   cuBLASLt's FP8 path requires too). The kernel's layout is `NT`
//!   ([`Ops::NT`]); the library refuses the others with a typed error
//!   rather than copying B in every call.
//! - **Scales**: `D = scale_d * (alpha * scale_a * scale_b * A B + beta
//!   C)`, each scale an f32 in device memory
//!   ([`ScaleParams`](crate::gemm::ScaleParams), the
//!   entry's last parameter, as cuBLASLt's scale pointers), folded into
//!   the epilogue's alpha and beta once per thread
//!   ([`Gemm::scaled`](crate::gemm::Gemm::scaled)).
//!   The accumulators are the tensor cores' own: no promotion of partial
//!   sums (the block-scaled kernel will promote every 128 of K).
//!
//! Tile: BM = 128, BN = 256, BK = 128, four stages of 48 KB, step 22's
//! staging boxes; 128 f32 accumulators per consumer thread.
//!
//! Prediction (H200, n = 4096): twice step 22's rate if the tensor pipe
//! stays as busy, but each K tile now takes half the time while the
//! epilogue, the producer's issue and the barriers cost what they did, so
//! the pipe is busy a smaller share of the time: about 1.6x step 22, some
//! 0.85-0.9x cuBLASLt FP8 with per-tensor scales. The measurement lives
//! in docs/bench.json and the README's bench table (`cargo xtask bench`).
//! GPU only, like steps 12-22.

#[cfg(target_arch = "nvptx64")]
use crate::device::tma::TensorMaps;
#[cfg(target_arch = "nvptx64")]
use crate::device::wgmma::Fp8Pair;
use crate::elem::{Bf16, E4m3, E5m2, Element, F16, Math};
#[cfg(target_arch = "nvptx64")]
use crate::gemm::{Gemm, ScaleParams};
use crate::k19_wgmma_16bit::Params;
#[cfg(target_arch = "nvptx64")]
use crate::k20_wgmma_persistent::block;
use crate::launch::{KernelSpec, Ops};

/// K values per stage: one 128-byte row of FP8.
pub const BK: usize = 128;

/// One instance: `$spec` for the host; for the GPU the body `$name` on A
/// of type `$a`, B^T of type `$b` and C of type `$c`, and its PTX entry
/// in the FP8 module.
macro_rules! instance {
    ($name:ident, $spec:ident, $a:ident, $b:ident, $c:ident, $stages:literal) => {
        pub const $spec: KernelSpec = Params::new($stages).spec_of(
            stringify!($name),
            (<$a as Element>::ELEM, <$b as Element>::ELEM, <$c as Element>::ELEM),
            Math::Fp8,
            25,
            "FP8 A and B^T (E4M3, E5M2): step 22 with wgmma m64n256k32, 128 of K per stage, per-tensor scales in the epilogue",
            (true, Ops::NT, true),
        );
        /// The body of the PTX entry of the same name (inlined into it).
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        pub fn $name(g: Gemm<$a, $b, $c>, maps: TensorMaps, scales: ScaleParams) {
            block::<Fp8Pair<$a, $b>, $c, $stages, { Params::new($stages).stage_words() }, BK, 0, 0, true>(
                g,
                maps,
                Some(scales),
            )
        }
        #[cfg(any(not(target_arch = "nvptx64"), gemm_module = "wgmma_fp8"))]
        mod $name {
            #[cfg(target_arch = "nvptx64")]
            use super::$name;
            crate::gemm_kernel!($name, scaled, elems($a, $b, $c));
        }
    };
}

// E4M3 x E4M3 into each output type; the mixed pairs (E5M2 for
// gradients, E4M3 for weights and activations) into BF16.
#[rustfmt::skip]
mod instances {
    use super::*;
    instance!(wgmma_e4m3_128x256x128_s4, SPEC_E4M3_128X256X128_S4, E4m3, E4m3, Bf16, 4);
    instance!(wgmma_e4m3_128x256x128_s4_f16, SPEC_E4M3_128X256X128_S4_F16, E4m3, E4m3, F16, 4);
    instance!(wgmma_e4m3_128x256x128_s4_f32, SPEC_E4M3_128X256X128_S4_F32, E4m3, E4m3, f32, 4);
    instance!(wgmma_e5m2_e4m3_128x256x128_s4, SPEC_E5M2_E4M3_128X256X128_S4, E5m2, E4m3, Bf16, 4);
    instance!(wgmma_e4m3_e5m2_128x256x128_s4, SPEC_E4M3_E5M2_128X256X128_S4, E4m3, E5m2, Bf16, 4);
}
pub use instances::*;

/// Every instance.
pub const SPECS: &[KernelSpec] = &[
    SPEC_E4M3_128X256X128_S4,
    SPEC_E4M3_128X256X128_S4_F16,
    SPEC_E4M3_128X256X128_S4_F32,
    SPEC_E5M2_E4M3_128X256X128_S4,
    SPEC_E4M3_E5M2_128X256X128_S4,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::Operands;

    /// The boxes are step 22's bytes: A's 128 rows and B^T's 256 of 128
    /// FP8 values, C's 16 rows of 128 bytes; B is read transposed.
    #[test]
    fn the_boxes_hold_128_bytes_of_k() {
        for spec in SPECS {
            let Operands::TensorMaps(boxes) = spec.operands else { panic!("{}", spec.name) };
            assert_eq!((boxes.a, boxes.b), ((128, BK as u32), (256, BK as u32)), "{}", spec.name);
            let (rows, cols) = boxes.c.expect(spec.name);
            assert_eq!((rows, cols as usize * spec.elems.c.bytes()), (16, 128), "{}", spec.name);
            assert_eq!(spec.ops, Ops::NT);
            assert_eq!(spec.module.name, "wgmma_fp8");
            assert!(spec.launch.shared_bytes <= 227 * 1024);
        }
    }
}
