//! SGEMM kernels in pure Rust, for `nvptx64-nvidia-cuda`.
//!
//! Every kernel computes `C = A * B` for row-major `A` (M x K), `B` (K x N)
//! and `C` (M x N), for any M, N, K >= 1, in the element types its spec
//! states ([`elem`]: f32 in and out for steps 1-18, 28 and 29, of which 11-13, 17
//! and 18 multiply in TF32; steps 19-22 take BF16 or FP16 A and B, steps 25-27 FP8). One file per step of the ladder, each built
//! into one of the PTX [`modules`]:
//!
//! | step | file | what it changes |
//! |---|---|---|
//! | 01 | [`k01_naive`] | one thread per element of C, straight from global memory |
//! | 02 | [`k02_tiled16`] | the lesson: 16x16 tiles of A and B staged in shared memory |
//! | 03 | [`k03_tiled32`] | the lesson's bigger tiles: 32x32 (1024 threads) |
//! | 04 | [`k04_blocktile_1d`] | 64x64 block tile, BK = 8, each thread a column of 8 outputs |
//! | 05 | [`k05_blocktile_2d`] | 128x128 block tile, each thread an 8x8 square (register outer products) |
//! | 06 | [`k06_vectorized`] | 128-bit global and shared loads, A transposed in shared memory |
//! | 07 | [`k07_double_buffer`] | two shared stages, next tile in flight during compute, one barrier per step |
//! | 08 | [`k08_warptile`] | warp tiles (32x64 per warp, lanes 2x2 pieces of 4x4): conflict-free shared reads |
//! | 09 | [`k09_prefetch`] | fragments double-buffered in registers: row kk+1's shared loads in flight during row kk's FMAs |
//! | 10 | [`k10_tuned`] | step 09 as a const-generic body, one PTX entry per parameter set |
//! | 11 | [`k11_mma`] | TF32 tensor cores (`mma.sync`), a multi-stage `cp.async` pipeline, swizzled tiles |
//! | 12 | [`k12_wgmma`] | Hopper: warpgroup `wgmma` from shared memory, tiles copied by TMA, `mbarrier` stages |
//! | 13 | [`k13_wgmma_ws`] | a TMA producer warpgroup; consumer warpgroups hand stages back through `mbarrier`s |
//! | 14 | [`k14_split_k`] | split-K: K cut into slices over the grid's z, partial sums added in order by a second launch |
//! | 15 | [`k15_skinny`] | one row of 256 threads per block, for C with one row (with split-K) |
//! | 16 | [`k16_gemv`] | a warp per row of C, for C with one column: 128-bit loads along A's rows, a shuffle sum |
//! | 17 | [`k17_wgmma_ss`] | Hopper: B transposed before the kernel, both `wgmma` operands from shared memory, one group in flight |
//! | 18 | [`k18_wgmma_tr`] | Hopper: B transposed in shared memory by the consumers while their last group runs; no copy kernel |
//! | 19 | [`k19_wgmma_16bit`] | Hopper, BF16 and FP16 A and B: `wgmma` k16 from shared memory, B read N-major as it is stored |
//! | 20 | [`k20_wgmma_persistent`] | step 19 on a persistent grid: one block per SM walks tiles in grouped order, the producer a tile ahead |
//! | 21 | [`k21_mma_16bit`] | BF16 and FP16 on any GPU since Ampere: `mma.sync` m16n8k16, A and B through `ldmatrix` (`.trans`) as stored |
//! | 22 | [`k22_wgmma_tma_store`] | step 20 with C written by TMA: each warp stages its rows in shared memory, the copy engine stores them while the next tile runs |
//! | 23 | [`k23_mma_3xtf32`] | 3xTF32: step 11 with each f32 factor split into two TF32 parts in registers, three `mma.sync` per pair: FP32 accuracy on the tensor cores |
//! | 24 | [`k24_wgmma_3xtf32`] | Hopper 3xTF32: A and B^T split into TF32 parts by the copies, three `wgmma` per k-step on step 17's pipeline, each K tile's sum promoted to f32 |
//! | 25 | [`k25_wgmma_fp8`] | FP8 A and B^T (E4M3, E5M2): step 22 with `wgmma` m64n256k32, 128 of K per stage, per-tensor scales in the epilogue |
//! | 26 | [`k26_wgmma_fp8_blocks`] | FP8 with each K block's sums promoted to f32 registers, and block scales (A 1 x 128, B 128 x 128) applied there: a 128 x 128 tile |
//! | 27 | [`k27_mma_fp8`] | FP8 on Ada and Hopper: step 21's block with `mma.sync` m16n8k32 on A and B^T, step 26's promotion and block scales; the FP8 kernel the emulator runs |
//! | 28 | [`k28_decode_nt`] | decode: few rows of A times B transposed (a weight stored n x k), a warp per 4 rows of B and all of the block's 8 rows of A, a shuffle sum per element |
//! | 29 | [`k29_small_k`] | small K: all of K staged in one pass, no pipeline, a 64 x 128 tile whose warps store whole 512-byte rows of C; every layout |
//! | 30 | [`k30_decode_staged`] | decode: the weight and the block's rows of A (8 or 16) streamed through a 4-stage `cp.async` ring in shared memory, so its bytes in flight are set by the stages, not by registers |
//!
//! The same crate builds for the host, where it exports the kernels'
//! constants ([`registry`]) so that launch shapes are never retyped, and
//! runs the very same kernel bodies on the CPU ([`emu`], a SIMT emulator
//! with race, barrier and bank-conflict checks).
//! Only [`device`] touches `core::arch::nvptx` and shared memory.
#![cfg_attr(target_arch = "nvptx64", no_std)]
// `#[inline(always)]` on the closures of step 11's body and of the
// Hopper steps' blocks (`unroll::inline_always`; the modules without them
// would call the feature unused). The device build only: the host build
// is stable Rust.
#![cfg_attr(
    all(
        target_arch = "nvptx64",
        any(
            gemm_module = "mma",
            gemm_module = "mma16",
            gemm_module = "mma16_tn",
            gemm_module = "mma16_nt",
            gemm_module = "mma16_tt",
            gemm_module = "wgmma",
            gemm_module = "wgmma_tn",
            gemm_module = "wgmma_nt",
            gemm_module = "wgmma_tt",
            gemm_module = "wgmma_fp8",
            gemm_module = "mma_fp8"
        )
    ),
    feature(stmt_expr_attributes)
)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(
        abi_ptx,
        stdarch_nvptx,
        core_intrinsics,
        gpu_intrinsics,
        gpu_launch_sized_workgroup_mem
    )
)]
#![cfg_attr(target_arch = "nvptx64", feature(asm_experimental_arch))]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

pub mod device;
pub mod elem;
pub mod epilogue;
pub mod gemm;
pub mod launch;
pub mod modules;
pub mod split;
pub mod unroll;

/// Declares ladder files and the PTX module (see [`modules`]) their entries
/// are built into. The host build has every file; a device build, only the
/// files of the module `host/gemm/build.rs` asks for with `--cfg gemm_module`.
macro_rules! ladder_files {
    ($modules:tt: $($file:ident),+) => {
        $(ladder_files!(@file $modules $file);)+
    };
    (@file [$($module:literal)|+] $file:ident) => {
        #[cfg(any(not(target_arch = "nvptx64"), $(gemm_module = $module),+))]
        pub mod $file;
    };
}

ladder_files!(["ladder"]: k01_naive, k02_tiled16, k03_tiled32, k04_blocktile_1d, k05_blocktile_2d,
    k06_vectorized, k07_double_buffer, k08_warptile, k09_prefetch, k14_split_k, k15_skinny, k16_gemv,
    k28_decode_nt, k29_small_k);
ladder_files!(["tuned_a" | "tuned_b" | "tuned_t"]: k10_tuned);
ladder_files!(["mma"]: k11_mma, k23_mma_3xtf32, k30_decode_staged);
// Step 27 (`mma_fp8`) reads its tiles with step 21's helpers; step
// 21's entries go into the `mma16` modules alone.
ladder_files!(["mma16" | "mma16_tn" | "mma16_nt" | "mma16_tt" | "mma_fp8"]: k21_mma_16bit);
// Step 20's transposed layouts (modules `wgmma_tn`, `wgmma_nt`,
// `wgmma_tt`) and steps 25-26 (`wgmma_fp8`) build on steps 12, 13, 19, 20
// and 22; those files' entries go into the `wgmma` module alone (their
// `instance` macros say so).
ladder_files!(["wgmma" | "wgmma_tn" | "wgmma_nt" | "wgmma_tt" | "wgmma_fp8"]: k12_wgmma, k13_wgmma_ws);
ladder_files!(["wgmma"]: k17_wgmma_ss, k18_wgmma_tr, k24_wgmma_3xtf32);
ladder_files!(["wgmma" | "wgmma_tn" | "wgmma_nt" | "wgmma_tt" | "wgmma_fp8"]: k19_wgmma_16bit,
    k20_wgmma_persistent, k22_wgmma_tma_store);
ladder_files!(["wgmma_fp8"]: k25_wgmma_fp8, k26_wgmma_fp8_blocks);
ladder_files!(["mma_fp8"]: k27_mma_fp8);

/// Not a ladder step: the copy that pads A and B for the TMA kernels.
#[cfg(any(
    not(target_arch = "nvptx64"),
    gemm_module = "wgmma",
    gemm_module = "wgmma_fp8"
))]
pub mod pad;

/// Not a ladder step: FP8 quantization (the `fp8` module).
#[cfg(any(not(target_arch = "nvptx64"), gemm_module = "fp8"))]
pub mod quant;

#[cfg(not(target_arch = "nvptx64"))]
pub mod registry;

#[cfg(not(target_arch = "nvptx64"))]
pub mod emu;

/// A kernel that panics (an index out of bounds the optimiser could not
/// remove) stops its thread with `trap`, which the host sees as a launch
/// error (`CUDA_ERROR_LAUNCH_FAILED`), never as a wrong number.
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` takes no operands and aborts the kernel; it is always sound.
    unsafe { core::arch::nvptx::trap() }
}
