//! The PTX modules: which kernels are compiled for which GPU architecture.
//!
//! The kernels are not one PTX file but several. Each module is a separate
//! device build of this crate (`host/gemm/build.rs`: `--cfg gemm_module="NAME"`
//! selects the module's files, `-C target-cpu` its architecture), so that
//!
//! - kernels that need newer instructions (`mma.sync` and `cp.async` from
//!   sm_80, `wgmma` and TMA from sm_90a) do not raise the bar for the
//!   others: the ladder stays sm_70 PTX, which loads on every GPU from
//!   Volta on, and the host loads only the modules the GPU can run;
//! - an edit of one ladder file rebuilds only its module: the modules are
//!   built in their own target folders and cargo skips the fresh ones.
//!
//! This file is plain data with no dependencies, because `host/gemm/build.rs`
//! includes it as well: the one list both the build and the host read.

/// A GPU architecture a module is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arch {
    /// rustc's `-C target-cpu` and the PTX `.target`, e.g. `sm_80`.
    pub target_cpu: &'static str,
    /// Extra `-C target-feature` for rustc (a newer PTX ISA), or "".
    pub target_features: &'static str,
    /// The oldest compute capability that can load the module.
    pub capability: (u32, u32),
    /// Architecture-specific PTX (`sm_90a`): the driver loads it on
    /// exactly `capability` and JIT-compiles it for nothing newer.
    pub exact: bool,
    /// What the architecture adds that the module's kernels use.
    pub adds: &'static str,
    /// The GPU architectures the library ships SASS for, for the modules
    /// of this architecture (`ptxas -arch=...` of the PTX, as cubins in
    /// `host/gemm/sass/`): loading SASS costs no JIT compilation. Other
    /// GPUs JIT-compile the PTX.
    pub sass: &'static [&'static str],
}

impl Arch {
    /// Volta: the ladder's FP32 kernels (the driver JIT-compiles sm_70 PTX
    /// for every newer GPU).
    pub const SM70: Arch = Arch {
        target_cpu: "sm_70",
        target_features: "",
        capability: (7, 0),
        exact: false,
        adds: "FP32 FMA, shared memory, bar.sync",
        sass: &["sm_80", "sm_90"],
    };
    /// Ampere: TF32, BF16 and FP16 tensor cores through `mma.sync`, `cp.async`.
    pub const SM80: Arch = Arch {
        target_cpu: "sm_80",
        target_features: "",
        capability: (8, 0),
        exact: false,
        adds: "mma.sync tensor cores (TF32, BF16, FP16), cp.async",
        sass: &["sm_80", "sm_90"],
    };
    /// Ada and newer: FP8 conversions (`cvt.rn.satfinite.e4m3x2.f32`,
    /// `e5m2x2`), which need PTX ISA 8.4 for `sm_89` (ptxas refuses them
    /// in older PTX: `../shared/notes/tensor-cores.md`).
    pub const SM89: Arch = Arch {
        target_cpu: "sm_89",
        target_features: "+ptx84",
        capability: (8, 9),
        exact: false,
        adds: "FP8 conversions (cvt.rn.satfinite to E4M3 and E5M2), FP8 mma.sync (m16n8k32)",
        sass: &["sm_89", "sm_90"],
    };
    /// Hopper only: `wgmma`, TMA (`cp.async.bulk.tensor`), `setmaxnreg`.
    pub const SM90A: Arch = Arch {
        target_cpu: "sm_90a",
        target_features: "+ptx80",
        capability: (9, 0),
        exact: true,
        adds: "wgmma, TMA, mbarrier",
        sass: &["sm_90a"],
    };

    /// Whether a GPU of compute capability `(major, minor)` runs SASS
    /// assembled for `sass` (`sm_90a`: exactly 9.0; `sm_80`: 8.0 and
    /// every later 8.x, as SASS runs on the minor versions after its own).
    pub fn sass_runs_on(sass: &str, (major, minor): (u32, u32)) -> bool {
        let Some(digits) = sass.strip_prefix("sm_") else {
            return false;
        };
        let (digits, exact) = match digits.strip_suffix('a') {
            Some(d) => (d, true),
            None => (digits, false),
        };
        let Ok(number) = digits.parse::<u32>() else {
            return false;
        };
        let (want_major, want_minor) = (number / 10, number % 10);
        major == want_major && (minor == want_minor || (!exact && minor > want_minor))
    }

    /// Whether a GPU of compute capability `(major, minor)` can load PTX
    /// built for this architecture.
    pub const fn runs_on(&self, (major, minor): (u32, u32)) -> bool {
        let (want_major, want_minor) = self.capability;
        if self.exact {
            major == want_major && minor == want_minor
        } else {
            major > want_major || (major == want_major && minor >= want_minor)
        }
    }

    /// "compute capability 8.0 or newer" (or "exactly 9.0").
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn needs(&self) -> String {
        let (major, minor) = self.capability;
        if self.exact {
            format!("compute capability exactly {major}.{minor}")
        } else {
            format!("compute capability {major}.{minor} or newer")
        }
    }
}

/// One PTX module: a device build of some of this crate's kernel files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PtxModule {
    /// The `gemm_module` cfg value, and the module's name on the host.
    pub name: &'static str,
    pub arch: Arch,
    /// The ladder files it holds.
    pub files: &'static str,
    /// Entries that do not take the GEMM parameters (not in the registry).
    pub utility_entries: &'static [&'static str],
}

/// Steps 01-09: the lesson and the FP32 ladder up to register prefetching;
/// step 14's reduction, which every FP32 kernel's split-K launch needs;
/// the FP32 kernels for one-row, one-column and few-row calls (15, 16, 28)
/// and for small K (29).
pub const LADDER: PtxModule = PtxModule {
    name: "ladder",
    arch: Arch::SM70,
    files: "k01_naive .. k09_prefetch, k14_split_k, k15_skinny, k16_gemv, k28_decode_nt, k29_small_k",
    utility_entries: &[],
};
/// Step 10: twelve fully unrolled parameter sets, the slowest file to
/// compile, so modules of their own, two, which build in parallel.
pub const TUNED_A: PtxModule = PtxModule {
    name: "tuned_a",
    arch: Arch::SM70,
    files: "k10_tuned (six of its instances)",
    utility_entries: &[],
};
pub const TUNED_B: PtxModule = PtxModule {
    name: "tuned_b",
    arch: Arch::SM70,
    files: "k10_tuned (the other six)",
    utility_entries: &[],
};
/// Step 10's instances with A or B transposed (the library's transposed
/// calls: the 128 x 128 tile and the three small ones), a module of
/// their own for the same reason.
pub const TUNED_T: PtxModule = PtxModule {
    name: "tuned_t",
    arch: Arch::SM70,
    files: "k10_tuned (the transposed instances)",
    utility_entries: &[],
};
/// Steps 11 and 23: TF32 tensor cores through `mma.sync` (23: 3xTF32);
/// and step 30, an FP32 kernel that needs sm_80 for its `cp.async` ring.
pub const MMA: PtxModule = PtxModule {
    name: "mma",
    arch: Arch::SM80,
    files: "k11_mma, k23_mma_3xtf32, k30_decode_staged",
    utility_entries: &[],
};
/// Step 21: 16-bit tensor cores through `mma.sync` (modules of their
/// own, so step 11's PTX is untouched by them): A and B as they are here,
/// each transposed layout in a module of its own, so that the driver
/// compiles a layout's entries only when a program first loads them.
pub const MMA16: PtxModule = PtxModule {
    name: "mma16",
    arch: Arch::SM80,
    files: "k21_mma_16bit (A and B as they are)",
    utility_entries: &[],
};
pub const MMA16_TN: PtxModule = PtxModule {
    name: "mma16_tn",
    arch: Arch::SM80,
    files: "k21_mma_16bit (A transposed)",
    utility_entries: &[],
};
pub const MMA16_NT: PtxModule = PtxModule {
    name: "mma16_nt",
    arch: Arch::SM80,
    files: "k21_mma_16bit (B transposed)",
    utility_entries: &[],
};
pub const MMA16_TT: PtxModule = PtxModule {
    name: "mma16_tt",
    arch: Arch::SM80,
    files: "k21_mma_16bit (both transposed)",
    utility_entries: &[],
};

/// Steps 12-13, 17-20, 22 and 24: Hopper's `wgmma` fed by TMA (architecture-specific PTX).
pub const WGMMA: PtxModule = PtxModule {
    name: "wgmma",
    arch: Arch::SM90A,
    files: "k12_wgmma, k13_wgmma_ws, k17_wgmma_ss, k18_wgmma_tr, k19_wgmma_16bit, k20_wgmma_persistent, k22_wgmma_tma_store, k24_wgmma_3xtf32",
    // `pad::ENTRY`, `pad::ENTRY_16`: the copies that pad A and B for TMA
    // (host/gemm/src/tma.rs), 4- and 2-byte elements, and
    // `pad::PAIR_ENTRY_16`: two 2-byte copies in one launch;
    // `pad::TRANSPOSE_ENTRY`: B's transposed copy for step 17;
    // `pad::SPLIT_ENTRY`, `pad::TRANSPOSE_SPLIT_ENTRY`: A's and B^T's
    // 3xTF32 parts for step 24.
    utility_entries: &[
        "pad_rows",
        "pad_rows_16",
        "pad_rows_16_pair",
        "transpose_tf32",
        "split_rows_tf32",
        "transpose_split_tf32",
    ],
};

/// Step 20 with A or B transposed (16-bit `wgmma` reads either operand
/// MN-major): each layout in a module of its own, as step 21's, so that
/// the driver compiles a layout's entries only when a program first loads
/// them, and so that the `wgmma` module's PTX is untouched by them.
pub const WGMMA_TN: PtxModule = PtxModule {
    name: "wgmma_tn",
    arch: Arch::SM90A,
    files: "k20_wgmma_persistent (A transposed)",
    utility_entries: &[],
};
pub const WGMMA_NT: PtxModule = PtxModule {
    name: "wgmma_nt",
    arch: Arch::SM90A,
    files: "k20_wgmma_persistent (B transposed)",
    utility_entries: &[],
};
pub const WGMMA_TT: PtxModule = PtxModule {
    name: "wgmma_tt",
    arch: Arch::SM90A,
    files: "k20_wgmma_persistent (both transposed)",
    utility_entries: &[],
};

/// Steps 25-26: FP8 `wgmma` (steps 12, 13, 19, 20 and 22 included for
/// their code, not their entries), a module of its own so that a program
/// that multiplies FP8 compiles only these entries, and the `wgmma`
/// module's PTX is untouched by them; with the padding copies of 1-byte A
/// and B (`pad::ENTRY_8`, `pad::PAIR_ENTRY_8`).
pub const WGMMA_FP8: PtxModule = PtxModule {
    name: "wgmma_fp8",
    arch: Arch::SM90A,
    files: "k25_wgmma_fp8, k26_wgmma_fp8_blocks",
    utility_entries: &["pad_rows_8", "pad_rows_8_pair"],
};
/// Step 27: FP8 through `mma.sync` (m16n8k32), for every GPU with FP8
/// tensor cores (Ada, Hopper and newer), a module of its own so that the
/// `mma16` modules' PTX is untouched by it (step 21's file is included
/// for its code, not its entries).
pub const MMA_FP8: PtxModule = PtxModule {
    name: "mma_fp8",
    arch: Arch::SM89,
    files: "k27_mma_fp8",
    utility_entries: &[],
};
/// FP8 quantization (`quant`, not a ladder step: f32, BF16 and FP16 to
/// E4M3 and E5M2 with per-tensor or block scales), for every GPU with
/// FP8 conversions (Ada, Hopper and newer), a module of its own so that
/// the `wgmma_fp8` module's PTX is untouched by it. The entries' list is
/// `quant::ENTRIES` (a test checks they agree).
pub const FP8: PtxModule = PtxModule {
    name: "fp8",
    arch: Arch::SM89,
    files: "quant",
    utility_entries: &[
        "quant_rows_f32_e4m3",
        "quant_rows_bf16_e4m3",
        "quant_rows_f16_e4m3",
        "quant_rows_f32_e5m2",
        "quant_rows_bf16_e5m2",
        "quant_rows_f16_e5m2",
        "quant_tiles_f32_e4m3",
        "quant_tiles_bf16_e4m3",
        "quant_tiles_f16_e4m3",
        "quant_tiles_f32_e5m2",
        "quant_tiles_bf16_e5m2",
        "quant_tiles_f16_e5m2",
        "quant_tensor_f32_e4m3",
        "quant_tensor_bf16_e4m3",
        "quant_tensor_f16_e4m3",
        "quant_tensor_f32_e5m2",
        "quant_tensor_bf16_e5m2",
        "quant_tensor_f16_e5m2",
        "quant_amax_f32",
        "quant_amax_bf16",
        "quant_amax_f16",
        "quant_scale_e4m3",
        "quant_scale_e5m2",
    ],
};

/// Every module, in ladder order.
pub const MODULES: &[PtxModule] = &[
    LADDER, TUNED_A, TUNED_B, TUNED_T, MMA, MMA16, MMA16_TN, MMA16_NT, MMA16_TT, WGMMA, WGMMA_TN,
    WGMMA_NT, WGMMA_TT, WGMMA_FP8, MMA_FP8, FP8,
];

/// The module whose utility entries include `entry`, if one does.
pub fn holding(entry: &str) -> Option<&'static PtxModule> {
    MODULES.iter().find(|m| m.utility_entries.contains(&entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_gpus_load_which_architecture() {
        assert!(Arch::SM70.runs_on((7, 0)) && Arch::SM70.runs_on((9, 0)));
        assert!(!Arch::SM80.runs_on((7, 5)) && Arch::SM80.runs_on((8, 0)));
        assert!(!Arch::SM89.runs_on((8, 6)) && Arch::SM89.runs_on((9, 0)));
        assert!(Arch::SM80.runs_on((8, 9)) && Arch::SM80.runs_on((10, 0)));
        // Architecture-specific PTX: that GPU only.
        assert!(Arch::SM90A.runs_on((9, 0)));
        assert!(!Arch::SM90A.runs_on((8, 9)) && !Arch::SM90A.runs_on((10, 0)));
        assert_eq!(Arch::SM90A.needs(), "compute capability exactly 9.0");
    }
}
