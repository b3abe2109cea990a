//! Every kernel the PTX module exports, in ladder order (host side only).

use crate::launch::KernelSpec;

/// The kernels, in ladder order. `name` is also the PTX entry's name.
/// Steps 10-13 and 17-27 list every instance (also as `k10_tuned::SPECS`, `k11_mma::SPECS`, `k12_wgmma::SPECS`, `k13_wgmma_ws::SPECS`, `k17_wgmma_ss::SPECS`, `k18_wgmma_tr::SPECS`, `k19_wgmma_16bit::SPECS`, `k20_wgmma_persistent::SPECS`, `k21_mma_16bit::SPECS`, `k22_wgmma_tma_store::SPECS`, `k23_mma_3xtf32::SPECS`, `k24_wgmma_3xtf32::SPECS`, `k25_wgmma_fp8::SPECS`, `k26_wgmma_fp8_blocks::SPECS`, `k27_mma_fp8::SPECS`) and step 29's `small_k_64x128`; steps 25-27 read B transposed (FP8 `wgmma` and 8-bit `ldmatrix` take K-major tiles only), the only layout they have.
pub const KERNELS: &[KernelSpec] = &[
    crate::k01_naive::SPEC,
    crate::k02_tiled16::SPEC,
    crate::k02_tiled16::SPEC_NOPAD,
    crate::k03_tiled32::SPEC,
    crate::k04_blocktile_1d::SPEC,
    crate::k05_blocktile_2d::SPEC,
    crate::k06_vectorized::SPEC,
    crate::k07_double_buffer::SPEC,
    crate::k08_warptile::SPEC,
    crate::k09_prefetch::SPEC,
    crate::k10_tuned::SPEC_128X128X8_W64X64,
    crate::k10_tuned::SPEC_256X64X8_W64X64,
    crate::k10_tuned::SPEC_128X64X8_W64X64,
    crate::k10_tuned::SPEC_128X128X16_W64X64,
    crate::k10_tuned::SPEC_256X128X8_W64X64,
    crate::k10_tuned::SPEC_256X128X16_W64X64,
    crate::k10_tuned::SPEC_64X128X8_W32X64,
    crate::k10_tuned::SPEC_128X128X8_W32X64,
    crate::k10_tuned::SPEC_128X128X16_W32X64,
    crate::k10_tuned::SPEC_64X64X16_W32X32,
    crate::k10_tuned::SPEC_32X64X16_W16X32,
    crate::k10_tuned::SPEC_32X32X16_W16X32,
    crate::k11_mma::SPEC_128X128X32_W64X64_S2,
    crate::k11_mma::SPEC_256X128X32_W64X64_S3,
    crate::k11_mma::SPEC_64X128X32_W32X64_S2,
    crate::k11_mma::SPEC_128X64X32_W64X32_S2,
    crate::k12_wgmma::SPEC_256X128X32_S4,
    crate::k13_wgmma_ws::SPEC_256X128X32_S4,
    crate::k15_skinny::SPEC,
    crate::k15_skinny::SPEC_1X512,
    crate::k16_gemv::SPEC,
    crate::k17_wgmma_ss::SPEC_256X128X32_S4,
    crate::k18_wgmma_tr::SPEC_256X128X32_S4,
    crate::k18_wgmma_tr::SPEC_128X128X32_S6,
    crate::k19_wgmma_16bit::SPEC_BF16_128X256X64_S4,
    crate::k19_wgmma_16bit::SPEC_F16_128X256X64_S4,
    crate::k20_wgmma_persistent::SPEC_BF16_128X256X64_S4,
    crate::k20_wgmma_persistent::SPEC_F16_128X256X64_S4,
    crate::k20_wgmma_persistent::SPEC_BF16_128X256X64_S4_C16,
    crate::k20_wgmma_persistent::SPEC_F16_128X256X64_S4_C16,
    crate::k21_mma_16bit::SPEC_BF16_128X256X64_W64X64_S3,
    crate::k21_mma_16bit::SPEC_F16_128X256X64_W64X64_S3,
    crate::k21_mma_16bit::SPEC_BF16_128X128X64_W64X64_S4,
    crate::k21_mma_16bit::SPEC_F16_128X128X64_W64X64_S4,
    crate::k21_mma_16bit::SPEC_BF16_128X128X64_W64X64_S4_C16,
    crate::k21_mma_16bit::SPEC_F16_128X128X64_W64X64_S4_C16,
    crate::k22_wgmma_tma_store::SPEC_BF16_128X256X64_S4,
    crate::k22_wgmma_tma_store::SPEC_F16_128X256X64_S4,
    crate::k22_wgmma_tma_store::SPEC_BF16_128X256X64_S4_C16,
    crate::k22_wgmma_tma_store::SPEC_F16_128X256X64_S4_C16,
    crate::k23_mma_3xtf32::SPEC_64X64X32_W32X32_S2,
    crate::k24_wgmma_3xtf32::SPEC_128X128X32_S3,
    crate::k25_wgmma_fp8::SPEC_E4M3_128X256X128_S4,
    crate::k25_wgmma_fp8::SPEC_E4M3_128X256X128_S4_F16,
    crate::k25_wgmma_fp8::SPEC_E4M3_128X256X128_S4_F32,
    crate::k25_wgmma_fp8::SPEC_E5M2_E4M3_128X256X128_S4,
    crate::k25_wgmma_fp8::SPEC_E4M3_E5M2_128X256X128_S4,
    crate::k26_wgmma_fp8_blocks::SPEC_E4M3_BLOCKS_128X128X128_S5,
    crate::k26_wgmma_fp8_blocks::SPEC_E4M3_BLOCKS_128X128X128_S5_F32,
    crate::k26_wgmma_fp8_blocks::SPEC_E4M3_BLOCKS_128X192X128_S4,
    crate::k26_wgmma_fp8_blocks::SPEC_E4M3_BLOCKS_128X192X128_S4_F32,
    crate::k26_wgmma_fp8_blocks::SPEC_E4M3_PROMOTED_128X128X128_S6,
    crate::k26_wgmma_fp8_blocks::SPEC_E4M3_PROMOTED_128X128X128_S6_F32,
    crate::k27_mma_fp8::SPEC_E4M3_64X128X128_W32X32_S3,
    crate::k27_mma_fp8::SPEC_E4M3_64X128X128_W32X32_S3_F16,
    crate::k27_mma_fp8::SPEC_E4M3_64X128X128_W32X32_S3_F32,
    crate::k27_mma_fp8::SPEC_E5M2_E4M3_64X128X128_W32X32_S3,
    crate::k27_mma_fp8::SPEC_E4M3_E5M2_64X128X128_W32X32_S3,
    crate::k27_mma_fp8::SPEC_E4M3_BLOCKS_64X128X128_W32X32_S3,
    crate::k27_mma_fp8::SPEC_E4M3_BLOCKS_64X128X128_W32X32_S3_F32,
    crate::k29_small_k::SPEC,
];

/// Kernels that read A or B transposed (`KernelSpec::ops`): the library's
/// transposed calls (also as `k10_tuned::TRANSPOSED`, `k17_wgmma_ss::TRANSPOSED`, `k20_wgmma_persistent::TRANSPOSED`, `k21_mma_16bit::TRANSPOSED`, `k29_small_k::TRANSPOSED`). Not in [`KERNELS`], whose users (host, bench, the
/// emulator tests) give every kernel A and B as they are.
pub const TRANSPOSED: &[KernelSpec] = &[
    crate::k28_decode_nt::SPEC,
    crate::k30_decode_staged::SPEC_8X32,
    crate::k30_decode_staged::SPEC_16X32,
    crate::k29_small_k::SPEC_TN,
    crate::k29_small_k::SPEC_NT,
    crate::k29_small_k::SPEC_TT,
    crate::k10_tuned::SPEC_128X128X16_W32X64_TN,
    crate::k10_tuned::SPEC_128X128X16_W32X64_NT,
    crate::k10_tuned::SPEC_128X128X16_W32X64_TT,
    crate::k10_tuned::SPEC_64X64X16_W32X32_TN,
    crate::k10_tuned::SPEC_64X64X16_W32X32_NT,
    crate::k10_tuned::SPEC_64X64X16_W32X32_TT,
    crate::k10_tuned::SPEC_32X64X16_W16X32_TN,
    crate::k10_tuned::SPEC_32X64X16_W16X32_NT,
    crate::k10_tuned::SPEC_32X64X16_W16X32_TT,
    crate::k10_tuned::SPEC_32X32X16_W16X32_TN,
    crate::k10_tuned::SPEC_32X32X16_W16X32_NT,
    crate::k10_tuned::SPEC_32X32X16_W16X32_TT,
    crate::k10_tuned::SPEC_64X128X8_W32X64_TN,
    crate::k10_tuned::SPEC_64X128X8_W32X64_NT,
    crate::k10_tuned::SPEC_64X128X8_W32X64_TT,
    crate::k17_wgmma_ss::SPEC_256X128X32_S4_TN,
    crate::k17_wgmma_ss::SPEC_256X128X32_S4_NT,
    crate::k17_wgmma_ss::SPEC_256X128X32_S4_TT,
    crate::k17_wgmma_ss::SPEC_128X128X32_S6_TN,
    crate::k17_wgmma_ss::SPEC_128X128X32_S6_NT,
    crate::k17_wgmma_ss::SPEC_128X128X32_S6_TT,
    crate::k21_mma_16bit::SPEC_BF16_128X128X64_W64X32_S4_TN,
    crate::k21_mma_16bit::SPEC_BF16_128X128X64_W64X32_S4_TN_C16,
    crate::k21_mma_16bit::SPEC_F16_128X128X64_W64X32_S4_TN,
    crate::k21_mma_16bit::SPEC_F16_128X128X64_W64X32_S4_TN_C16,
    crate::k21_mma_16bit::SPEC_BF16_128X128X64_W64X32_S4_NT,
    crate::k21_mma_16bit::SPEC_BF16_128X128X64_W64X32_S4_NT_C16,
    crate::k21_mma_16bit::SPEC_F16_128X128X64_W64X32_S4_NT,
    crate::k21_mma_16bit::SPEC_F16_128X128X64_W64X32_S4_NT_C16,
    crate::k21_mma_16bit::SPEC_BF16_128X128X64_W64X32_S4_TT,
    crate::k21_mma_16bit::SPEC_BF16_128X128X64_W64X32_S4_TT_C16,
    crate::k21_mma_16bit::SPEC_F16_128X128X64_W64X32_S4_TT,
    crate::k21_mma_16bit::SPEC_F16_128X128X64_W64X32_S4_TT_C16,
    crate::k20_wgmma_persistent::SPEC_BF16_128X256X64_S4_TN,
    crate::k20_wgmma_persistent::SPEC_F16_128X256X64_S4_TN,
    crate::k20_wgmma_persistent::SPEC_BF16_128X256X64_S4_TN_C16,
    crate::k20_wgmma_persistent::SPEC_F16_128X256X64_S4_TN_C16,
    crate::k20_wgmma_persistent::SPEC_BF16_128X256X64_S4_NT,
    crate::k20_wgmma_persistent::SPEC_F16_128X256X64_S4_NT,
    crate::k20_wgmma_persistent::SPEC_BF16_128X256X64_S4_NT_C16,
    crate::k20_wgmma_persistent::SPEC_F16_128X256X64_S4_NT_C16,
    crate::k20_wgmma_persistent::SPEC_BF16_128X256X64_S4_TT,
    crate::k20_wgmma_persistent::SPEC_F16_128X256X64_S4_TT,
    crate::k20_wgmma_persistent::SPEC_BF16_128X256X64_S4_TT_C16,
    crate::k20_wgmma_persistent::SPEC_F16_128X256X64_S4_TT_C16,
];

/// Instances kept to reproduce a measurement (docs/measurements.md), run
/// only when named: step 24 with its three products summed in one
/// accumulator, and in two (big * big apart), the forms its promoted
/// partial sums are measured against. Both miss the FP32 tolerance that
/// 3xTF32 is held to (the tensor cores truncate their running sums), so
/// they are neither in [`KERNELS`] nor `Auto`'s candidates.
pub const EXPERIMENTS: &[KernelSpec] = &[
    crate::k24_wgmma_3xtf32::SPEC_ONE_128X128X32_S3,
    crate::k24_wgmma_3xtf32::SPEC_TWO_128X128X32_S3,
    crate::k24_wgmma_3xtf32::SPEC_P2_128X128X32_S3,
];

/// Entries that are not GEMM kernels but take the GEMM parameters
/// (launched through the same path): split-K's reduction.
pub const HELPERS: &[KernelSpec] = &[crate::k14_split_k::REDUCE];

/// Every entry the host launches as a GEMM (`KERNELS`, `TRANSPOSED`,
/// `EXPERIMENTS`, `HELPERS`).
pub fn all() -> impl Iterator<Item = &'static KernelSpec> {
    KERNELS
        .iter()
        .chain(TRANSPOSED)
        .chain(EXPERIMENTS)
        .chain(HELPERS)
}

/// The entry called `name`, if there is one (any of [`all`]).
pub fn find(name: &str) -> Option<&'static KernelSpec> {
    all().find(|k| k.name == name)
}

/// Kernels with a second entry that splits K inside one launch
/// (`crate::split`, `gemm_kernel!(name, split ENTRY, SPEC)`): the kernel
/// and that entry's name. The library runs their split-K calls through
/// it, one launch instead of two.
pub const SPLIT_IN_LAUNCH: &[(&KernelSpec, &str)] =
    &[(&crate::k16_gemv::SPEC, crate::k16_gemv::SPLIT_ENTRY)];

/// The in-launch split entry of `spec`, if it has one.
pub fn split_entry(spec: &KernelSpec) -> Option<&'static str> {
    SPLIT_IN_LAUNCH
        .iter()
        .find(|(k, _)| k.name == spec.name)
        .map(|&(_, entry)| entry)
}
