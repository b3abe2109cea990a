//! Step 23: two blocks in a cluster share B's tile. In step 22 every
//! block copies its own A (16 KB) and B (32 KB) for each K tile of 64
//! from L2, 48 KB per stage. Two blocks whose tiles of C lie one above
//! the other need the same B; cuBLAS BF16 at n = 4096 runs exactly step
//! 22's tile (128 x 256 of our row-major C), 384 threads and 168
//! registers, but in clusters of two, and under ncu it moves 11 % fewer
//! bytes through L2 and takes 2.5 % less time at the same SM clock
//! (docs/measurements.md, twelfth session).
//!
//! What changes from step 22 (its block, with `CLUSTER = 2`):
//! - **Launched in clusters of two** (`Launch::cluster`; the host writes
//!   `.reqnctapercluster 2, 1, 1` into the entry's PTX and launches whole
//!   clusters, 66 on the H200's 132 SMs). The two blocks of a cluster walk
//!   the same units of two tiles, one above the other, in step 20's
//!   grouped order; block r takes the tile `r * 128` rows down.
//! - **Each producer copies half of B, for both**: block r's producer
//!   issues B's boxes `2r` and `2r + 1` (of four) with
//!   `cp.async.bulk.tensor ... .multicast::cluster`, landing at the same
//!   words of both blocks' stages and counted on both `full` barriers; A's
//!   box stays its own. A block's L2 reads per stage fall from 48 to 32 KB.
//! - **A stage is free when both blocks are done with it**: each `empty`
//!   barrier counts the consumer warps of both blocks, and each warp
//!   arrives on its own block's and on the peer's (`mbarrier.arrive
//!   .shared::cluster` through `mapa`). The cluster meets after the
//!   barriers are initialised and before either block exits
//!   (`device::cluster`, its safety model).
//!
//! A, B and C as they are (NN); the other layouts run step 20's
//! transposed instances.
//!
//! Prediction (H200, n = 4096): cuBLAS's L2 traffic and its time, about
//! 1.00x cuBLAS BF16, where step 22 is 0.97-0.99x; at 8192 as step 22
//! (already above cuBLAS). The measurement lives in docs/bench.json and
//! the README's bench table (`cargo xtask bench`). GPU only, like steps
//! 12-22.

use crate::elem::{Bf16, Element, F16, Math};
#[cfg(target_arch = "nvptx64")]
use crate::device::tma::TensorMaps;
#[cfg(target_arch = "nvptx64")]
use crate::gemm::Gemm;
use crate::k19_wgmma_16bit::Params;
#[cfg(target_arch = "nvptx64")]
use crate::k20_wgmma_persistent::block;
use crate::launch::{KernelSpec, Ops};

/// Blocks per cluster.
pub const CLUSTER: usize = 2;

/// Step 22's spec for the same types, launched in clusters of
/// [`CLUSTER`].
const fn clustered(spec: KernelSpec) -> KernelSpec {
    let mut spec = spec;
    spec.launch.cluster = CLUSTER as u32;
    spec
}

/// One instance: `$spec` for the host; for the GPU the body `$name` on
/// A and B of type `$t` (as stored) and C of type `$c`, and its PTX entry
/// in the `wgmma` module.
macro_rules! instance {
    ($name:ident, $spec:ident, $t:ident, $c:ident, $math:expr, $stages:literal) => {
        pub const $spec: KernelSpec = clustered(Params { stages: $stages }.spec_of(
            stringify!($name),
            (<$t as Element>::ELEM, <$c as Element>::ELEM),
            $math,
            23,
            "step 22 in clusters of two blocks, one tile above the other: each copies half of B's tile for both by TMA multicast",
            (true, Ops::NN, true),
        ));
        /// The body of the PTX entry of the same name (inlined into it).
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        pub fn $name(g: Gemm<$t, $t, $c>, maps: TensorMaps) {
            block::<$t, $c, $stages, { Params { stages: $stages }.stage_words() }, 0, 1, true, CLUSTER>(g, maps)
        }
        #[cfg(any(not(target_arch = "nvptx64"), gemm_module = "wgmma"))]
        mod $name {
            #[cfg(target_arch = "nvptx64")]
            use super::$name;
            crate::gemm_kernel!($name, tensor_maps, elems($t, $t, $c));
        }
    };
}

// C in f32 and C in the input type (`_c16`), A and B as they are.
#[rustfmt::skip]
mod instances {
    use super::*;
    instance!(wgmma_bf16_cluster_128x256x64_s4, SPEC_BF16_128X256X64_S4, Bf16, f32, Math::Bf16, 4);
    instance!(wgmma_f16_cluster_128x256x64_s4, SPEC_F16_128X256X64_S4, F16, f32, Math::F16, 4);
    instance!(wgmma_bf16_cluster_128x256x64_s4_c16, SPEC_BF16_128X256X64_S4_C16, Bf16, Bf16, Math::Bf16, 4);
    instance!(wgmma_f16_cluster_128x256x64_s4_c16, SPEC_F16_128X256X64_S4_C16, F16, F16, Math::F16, 4);
}
pub use instances::*;

/// Every instance.
pub const SPECS: &[KernelSpec] = &[
    SPEC_BF16_128X256X64_S4,
    SPEC_F16_128X256X64_S4,
    SPEC_BF16_128X256X64_S4_C16,
    SPEC_F16_128X256X64_S4_C16,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A persistent grid of whole clusters: 66 clusters on 132 SMs at
    /// n = 4096 (256 units of two tiles), one cluster per unit below.
    #[test]
    fn the_grid_is_whole_clusters_of_units() {
        for spec in SPECS {
            let l = spec.launch;
            assert_eq!(l.cluster, 2);
            assert_eq!(l.persistent_grid(4096, 4096, 132), (132, 1));
            assert_eq!(l.persistent_grid(4096, 4096, 133), (132, 1));
            // 2 units (rows 0-255 and 256-299) of one column: 4 blocks.
            assert_eq!(l.persistent_grid(300, 200, 132), (4, 1));
            assert_eq!(l.persistent_grid(1, 1, 132), (2, 1));
        }
    }
}
