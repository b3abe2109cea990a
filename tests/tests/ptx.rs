//! The PTX modules that `host/gemm/build.rs` builds from `kernels-gpu`, checked
//! without a GPU: each exists, targets its architecture, is self-contained
//! and exports exactly the kernels the registry assigns to it; the lesson's
//! kernel has its two barriers; the tensor-core kernels use `mma.sync` with
//! TF32, `ldmatrix`, `cp.async` and `cvt.rna`, with every `mma` where the
//! whole warp reaches it, and the Hopper kernels `wgmma`, TMA and
//! `mbarrier`; no entry can reach a `trap`; and NVIDIA's `ptxas` assembles every module for two
//! architectures (the sm_90a module for sm_90a alone) with no spills, no
//! stack, registers that fit an SM at the kernel's block size, and no
//! serialised `wgmma` pipeline. (ptxas 13, the one on
//! PyPI, no longer accepts `-arch=sm_70`, so the oldest architecture it
//! checks for the sm_70 modules is Turing.)

use std::process::Command;

use kernels_gpu::k11_mma;
use kernels_gpu::launch::KernelSpec;
use kernels_gpu::modules::{MODULES, PtxModule};
use kernels_gpu::registry;
use tests::{find_ptxas, parse_ptxas, ptx_entry};

/// Every entry of `module` that takes the GEMM parameters: ladder
/// kernels, transposed instances, split-K's reduction.
fn kernels_of(module: &PtxModule) -> Vec<&'static KernelSpec> {
    registry::all().filter(|k| k.module == module).collect()
}

/// The split entries (`registry::SPLIT_IN_LAUNCH`) of `module`'s kernels.
fn split_entries(module: &PtxModule) -> Vec<&'static str> {
    kernels_of(module)
        .into_iter()
        .filter_map(registry::split_entry)
        .collect()
}

/// The PTX the library ships (`host/gemm/ptx/<module>.ptx.lzma`, what a
/// program outside this repository builds with) is the PTX the kernels'
/// source makes now (`rust_gemm::ptx`: inside the repository the build
/// compiles it from source). `UPDATE_PTX=1` rewrites the shipped files
/// that differ instead of failing.
#[test]
fn shipped_ptx_is_the_kernels_ptx() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/gemm/ptx");
    let update = std::env::var("UPDATE_PTX").is_ok_and(|v| v == "1");
    let mut stale = Vec::new();
    for module in MODULES {
        let built = rust_gemm::ptx(module);
        let path = dir.join(format!("{}.ptx.lzma", module.name));
        if unpacked(&path).is_some_and(|shipped| shipped == built.as_bytes()) {
            continue;
        }
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            pack(&path, built.as_bytes());
        } else {
            stale.push(module.name);
        }
    }
    assert!(
        stale.is_empty(),
        "the shipped PTX of {stale:?} (host/gemm/ptx/) differs from what the kernels' source builds: \
         run `UPDATE_PTX=1 cargo test -p tests --test ptx shipped` and commit host/gemm/ptx/"
    );
}

/// Which GPUs load which shipped SASS (`Arch::sass_runs_on`, SASS's own
/// rule: the same major version, the same or a later minor one, and an
/// `a` architecture exactly its own), and that the library has SASS for
/// every module on an H100/H200 and for the sm_70 and sm_80 modules on
/// Ampere and Ada (the shipped PTX is the source's: the test above).
#[test]
fn shipped_sass_is_chosen_by_compute_capability() {
    use kernels_gpu::modules::Arch;
    assert!(Arch::sass_runs_on("sm_80", (8, 0)));
    assert!(Arch::sass_runs_on("sm_80", (8, 6)));
    assert!(Arch::sass_runs_on("sm_80", (8, 9)));
    assert!(!Arch::sass_runs_on("sm_80", (9, 0)));
    assert!(!Arch::sass_runs_on("sm_89", (8, 6)));
    assert!(Arch::sass_runs_on("sm_90", (9, 0)));
    assert!(Arch::sass_runs_on("sm_90a", (9, 0)));
    assert!(!Arch::sass_runs_on("sm_90a", (10, 0)));
    assert!(!Arch::sass_runs_on("sm_90", (10, 0)));
    assert!(!Arch::sass_runs_on("sm_9x", (9, 0)));
    for module in MODULES {
        let hopper = rust_gemm::sass(module, (9, 0));
        let want = if module.arch.exact { "sm_90a" } else { "sm_90" };
        assert_eq!(hopper.map(|(arch, _)| arch), Some(want), "{}", module.name);
        let ampere = rust_gemm::sass(module, (8, 6)).map(|(arch, _)| arch);
        let want = (module.arch.target_cpu == "sm_70" || module.arch.target_cpu == "sm_80")
            .then_some("sm_80");
        assert_eq!(ampere, want, "{}", module.name);
        assert_eq!(rust_gemm::sass(module, (7, 5)), None, "{}", module.name);
        assert_eq!(rust_gemm::sass(module, (12, 0)), None, "{}", module.name);
    }
}

#[test]
fn every_module_exports_its_kernels_and_nothing_unresolved() {
    for module in MODULES {
        let ptx = rust_gemm::ptx(module);
        let target = format!(".target {}", module.arch.target_cpu);
        assert!(
            ptx.lines().any(|l| l.trim() == target),
            "module {} must say `{target}`",
            module.name
        );
        assert!(
            !ptx.contains(".extern .func"),
            "module {} calls a function it does not define",
            module.name
        );
        let kernels = kernels_of(module);
        assert!(
            !kernels.is_empty() || !module.utility_entries.is_empty(),
            "module {} has no entry",
            module.name
        );
        for k in &kernels {
            assert!(
                ptx_entry(ptx, k.name).is_some(),
                "no .entry {} in module {}",
                k.name,
                module.name
            );
        }
        for entry in module.utility_entries.iter().chain(&split_entries(module)) {
            assert!(
                ptx_entry(ptx, entry).is_some(),
                "no .entry {entry} in module {}",
                module.name
            );
        }
        assert_eq!(
            ptx.matches(".visible .entry").count(),
            kernels.len() + module.utility_entries.len() + split_entries(module).len(),
            "module {}: PTX entries and registry (plus utility and split entries) disagree",
            module.name
        );
    }
    assert_eq!(
        MODULES.iter().map(|m| kernels_of(m).len()).sum::<usize>(),
        registry::all().count(),
        "a registered kernel belongs to no module"
    );
}

/// No kernel can reach a `trap`: every access goes through an `unsafe`
/// accessor with a written contract instead of a bounds check (a checked
/// index stops LLVM unrolling the naive kernel's loop; docs/rust-vs-cuda.md).
#[test]
fn no_kernel_contains_a_trap() {
    for module in MODULES {
        let ptx = rust_gemm::ptx(module);
        for k in kernels_of(module) {
            let body = ptx_entry(ptx, k.name).expect("entry exists");
            assert!(
                !body.contains("trap;") && !body.contains("panicking"),
                "{} (module {}) has a trap or calls a panic: a bounds check, a \
                 division by zero or another panic path",
                k.name,
                module.name
            );
        }
    }
}

#[test]
fn tiled16_has_two_barriers_and_uses_shared_memory() {
    let ladder = rust_gemm::ptx(&kernels_gpu::modules::LADDER);
    let body = ptx_entry(ladder, "tiled16").unwrap();
    // Two copies of the body (gemm_kernel!: one product, a batch).
    assert_eq!(
        body.matches("bar.sync").count(),
        4,
        "the lesson's kernel has exactly two barriers in each of its two paths"
    );
    assert!(
        body.contains("st.shared"),
        "tiles are staged in shared memory"
    );
    assert!(
        body.contains("ld.shared"),
        "the inner loop reads shared memory"
    );
    assert!(body.contains("fma.rn.f32"), "the inner loop uses FMA");
    let naive = ptx_entry(ladder, "naive").unwrap();
    assert!(!naive.contains("bar.sync") && !naive.contains(".shared"));
}

/// Step 16 sums across a warp with `shfl.sync` alone: five butterfly
/// rounds per row of C (two rows per warp, in both paths of
/// `gemm_kernel!`), no shared memory, no barrier.
#[test]
fn the_gemv_kernel_sums_with_warp_shuffles_only() {
    use kernels_gpu::k16_gemv::WARP_ROWS;
    let ladder = rust_gemm::ptx(&kernels_gpu::modules::LADDER);
    let body = ptx_entry(ladder, "gemv_warp_8x1").unwrap();
    assert_eq!(
        body.matches("shfl.sync.bfly.b32").count(),
        2 * 5 * WARP_ROWS,
        "butterfly rounds"
    );
    assert!(!body.contains("bar.sync") && !body.contains(".shared"));
    assert!(body.contains("ld.global.v4."), "128-bit loads of A and B");
}

/// A split entry (`kernels_gpu::split`): the kernel's loop, then one
/// fence before the count and one after it, one `atom.add` on the tile's
/// counter, the block's vote (`bar.red.or`), the planes read from L2
/// (`ld.global.cg`), the counter put back, and no shared memory.
#[test]
fn split_entries_count_their_tiles_and_read_the_planes_from_l2() {
    for (spec, entry) in registry::SPLIT_IN_LAUNCH {
        let ptx = rust_gemm::ptx(spec.module);
        let body = ptx_entry(ptx, entry).unwrap_or_else(|| panic!("no .entry {entry}"));
        let count = |what: &str| body.matches(what).count();
        assert_eq!(count("fence.acq_rel.gpu;"), 2, "{entry}: fences");
        assert_eq!(
            count("atom.acq_rel.gpu.global.add.u32"),
            1,
            "{entry}: arrivals"
        );
        assert_eq!(count("bar.red.or.pred"), 1, "{entry}: votes");
        assert_eq!(count("st.relaxed.gpu.global.u32"), 1, "{entry}: resets");
        assert!(count("ld.global.cg.f32") >= 1, "{entry}: reads from L2");
        assert!(!body.contains(".shared"), "{entry}: shared memory");
        // The kernel's own loop is there, its 128-bit loads with it.
        assert!(
            count("ld.global.v4.") > 0,
            "{entry}: the body of {}",
            spec.name
        );
    }
}

/// Step 11's entries: TF32 `mma.sync`, `ldmatrix`, `cp.async` with groups,
/// `cvt.rna`. rustc marks no `asm!` as convergent, so LLVM could copy a
/// warp-collective instruction into a branch only some lanes take (tail
/// duplication); the count of `mma` shows it did not: each entry has
/// exactly its three bodies (aligned, aligned with checks, 4-byte copies),
/// each with BK / 8 k-steps of MI x NI tiles, where MI x NI = BM BN / (4
/// threads) (a warp's WM WN / 128 outputs).
/// Step 11's TF32 `mma.sync`, as its PTX spells it.
const MMA_TF32: &str = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32";

/// The `mma.sync` a warp of step 11's block `k` issues per tile of K (its
/// m16n8k8 tiles times the tile's k-steps), summed over the entry's three
/// bodies (aligned, aligned with checks, one value at a time). Step 23
/// issues three per tile.
fn tf32_warp_tiles(k: &KernelSpec) -> usize {
    let (bm, bn) = k.launch.block_tile;
    3 * (k11_mma::BK / 8) * (bm * bn / (4 * k.launch.threads() as usize))
}

#[test]
fn tensor_core_kernels_use_mma_sync_tf32_once_per_warp_tile() {
    let mma = rust_gemm::ptx(&kernels_gpu::modules::MMA);
    for k in k11_mma::SPECS {
        let body = ptx_entry(mma, k.name).unwrap();
        assert_eq!(
            body.matches(MMA_TF32).count(),
            tf32_warp_tiles(k),
            "{}: mma.sync count",
            k.name
        );
        for needed in [
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
            "cp.async.cg.shared.global",
            "cp.async.ca.shared.global",
            "cp.async.commit_group",
            "cp.async.wait_group",
            "cvt.rna.tf32.f32",
            "bar.sync",
        ] {
            assert!(body.contains(needed), "{}: no {needed}", k.name);
        }
    }
}

/// Step 23 (3xTF32): three `mma.sync` per warp tile and k-step where
/// step 11 has one (in each of its three bodies), each value split by two
/// `cvt.rna`, and each k-step's partial added by the FMA pipe (`add.f32`).
#[test]
fn three_tf32_kernels_use_three_mma_sync_per_warp_tile() {
    let mma = rust_gemm::ptx(&kernels_gpu::modules::MMA);
    for k in kernels_gpu::k23_mma_3xtf32::SPECS {
        let body = ptx_entry(mma, k.name).unwrap();
        let (bm, bn) = k.launch.block_tile;
        assert_eq!(
            body.matches(MMA_TF32).count(),
            3 * tf32_warp_tiles(k),
            "{}: mma.sync count",
            k.name
        );
        let cvts = body.matches("cvt.rna.tf32.f32").count();
        // At least the block's share per thread of A's and B's values
        // of a k-step (a warp reads more: its rows and its columns), two
        // conversions each, in each of the three bodies.
        let values = (bm * 8 + 8 * bn) / k.launch.threads() as usize;
        assert!(
            cvts >= 3 * 2 * values * (k11_mma::BK / 8),
            "{}: {cvts} cvt.rna",
            k.name
        );
        assert!(
            body.contains("add.f32") || body.contains("add.rn.f32"),
            "{}: no add.f32",
            k.name
        );
    }
}

/// Step 21's entries: 16-bit `mma.sync` of their own type, once per warp
/// tile and k-step in each of the three bodies (aligned, aligned with
/// checks, one value at a time: one product or a batch, never both), as
/// for step 11; `ldmatrix.trans` exactly where a tile is M- or N-major
/// (A transposed, B as it is), plain `ldmatrix` where one is K-major.
#[test]
fn sixteen_bit_mma_kernels_use_mma_sync_k16_once_per_warp_tile() {
    use kernels_gpu::elem::Elem;
    use kernels_gpu::k21_mma_16bit;
    use kernels_gpu::launch::Op;
    for k in k21_mma_16bit::SPECS.iter().chain(k21_mma_16bit::TRANSPOSED) {
        let body = ptx_entry(rust_gemm::ptx(k.module), k.name).unwrap();
        let (bm, bn) = k.launch.block_tile;
        let per_step = bm * bn / (4 * k.launch.threads() as usize);
        let ty = match k.elems.a {
            Elem::Bf16 => "bf16",
            _ => "f16",
        };
        let mma = format!("mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32");
        assert_eq!(
            body.matches(&mma).count(),
            3 * (k21_mma_16bit::BK / 16) * per_step,
            "{}: {mma} count",
            k.name
        );
        assert_eq!(body.matches("mma.sync").count(), body.matches(&mma).count());
        let trans = "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16";
        let plain = "ldmatrix.sync.aligned.m8n8.x4.shared.b16";
        let (k_major_a, k_major_b) = (k.ops.a == Op::N, k.ops.b == Op::T);
        assert_eq!(
            body.contains(trans),
            !(k_major_a && k_major_b),
            "{}: {trans}",
            k.name
        );
        assert_eq!(
            body.contains(plain),
            k_major_a || k_major_b,
            "{}: {plain}",
            k.name
        );
        for needed in [
            "cp.async.cg.shared.global",
            "cp.async.commit_group",
            "cp.async.wait_group",
            "bar.sync",
        ] {
            assert!(body.contains(needed), "{}: no {needed}", k.name);
        }
    }
}

/// Steps 12-13 and 17-18: `wgmma` (64 x BM x 8 for a tile of BM rows,
/// BK / 8 per tile, in one body: TMA handles every edge), TMA tile copies
/// completing on `mbarrier`s; steps 12-13 round B's register fragments to
/// TF32 in the loop, steps 17-18 read both operands from shared memory (B
/// rounded by the copy before the kernel, or by the transposition in
/// shared memory). The entries of the kernels that split K
/// (`KernelSpec::splits_k`: steps 17-18) read their slice, or their
/// product of a batch, from `%ctaid.z`, and copy three-dimensional boxes
/// (the product the third coordinate); the others never read it and copy
/// two-dimensional ones.
#[test]
fn hopper_kernels_use_wgmma_tma_and_mbarriers() {
    let wgmma = rust_gemm::ptx(&kernels_gpu::modules::WGMMA);
    for k in kernels_gpu::k12_wgmma::SPECS
        .iter()
        .chain(kernels_gpu::k13_wgmma_ws::SPECS)
        .chain(kernels_gpu::k17_wgmma_ss::SPECS)
        .chain(kernels_gpu::k17_wgmma_ss::TRANSPOSED)
        .chain(kernels_gpu::k18_wgmma_tr::SPECS)
    {
        let body = ptx_entry(wgmma, k.name).unwrap();
        let bm = k.launch.block_tile.0;
        assert_eq!(
            body.matches(&format!(
                "wgmma.mma_async.sync.aligned.m64n{bm}k8.f32.tf32.tf32"
            ))
            .count(),
            kernels_gpu::k12_wgmma::BK / 8,
            "{}: wgmma count",
            k.name
        );
        assert_eq!(
            body.contains("%ctaid.z"),
            k.splits_k(),
            "{}: reads its slice of K from the grid's z where it splits K, only there",
            k.name
        );
        let copy = |dims: u32| {
            format!(
                "cp.async.bulk.tensor.{dims}d.shared::cluster.global.mbarrier::complete_tx::bytes"
            )
        };
        let (dims, not) = if k.splits_k() { (3, 2) } else { (2, 3) };
        assert!(
            !body.contains(&copy(not)),
            "{}: {not}-d copies in a kernel whose maps have {dims}",
            k.name
        );
        for needed in [
            copy(dims).as_str(),
            "mbarrier.init.shared::cta.b64",
            "mbarrier.arrive.expect_tx.shared::cta.b64",
            "mbarrier.try_wait.parity.shared::cta.b64",
            "wgmma.fence.sync.aligned",
            "wgmma.commit_group.sync.aligned",
            "wgmma.wait_group.sync.aligned",
        ] {
            assert!(body.contains(needed), "{}: no {needed}", k.name);
        }
        // Steps 17-18 read both operands from shared memory; step 17's B
        // is rounded by the copy before the kernel, step 18's by the
        // threads that transpose it in shared memory.
        let smem_only = k.step >= 17;
        assert_eq!(
            body.contains("cvt.rna.tf32.f32"),
            k.step != 17,
            "{}: TF32 rounding in the loop",
            k.name
        );
        if smem_only {
            // One group in flight across tiles, none at the end.
            assert!(
                body.contains("wgmma.wait_group.sync.aligned 1;"),
                "{}",
                k.name
            );
        }
        if k.step == 18 {
            // The threads' writes reach the tensor cores through the proxy
            // fence and the warpgroup's named barrier; lanes swap blocks
            // across a warp barrier.
            for needed in [
                "fence.proxy.async.shared::cta",
                "bar.warp.sync",
                "ld.shared.v4.",
                "st.shared.v4.",
            ] {
                assert!(body.contains(needed), "{}: no {needed}", k.name);
            }
            assert!(
                body.lines()
                    .any(|l| l.trim_start().starts_with("bar.sync") && l.contains(", 128;")),
                "{}: no warpgroup barrier",
                k.name
            );
        }
        assert!(
            !body.contains(".maxntid"),
            "{}: the host adds launch bounds, not the build",
            k.name
        );
        let bounded = rust_gemm::with_launch_bounds(wgmma);
        let (x, y) = k.launch.block_threads;
        assert_eq!(
            ptx_entry(&bounded, k.name)
                .unwrap()
                .contains(&format!(".maxntid {x}, {y}, 1")),
            k.launch.register_cap,
            "{}: launch bounds where the spec asks for them, only there",
            k.name
        );
    }
}

/// Step 24 (3xTF32 on `wgmma`): 3 x BK / 8 `wgmma`s m64n128k8 per tile,
/// operands from shared memory only, four TMA boxes per stage; the
/// promoted form starts each tile's partial fresh (`scale-d` 0 on one
/// `wgmma` per tile, so its predicate is set from 0), waits for it and
/// adds it with the FMA pipe; no rounding in the loop (the copies store
/// exact TF32 parts).
#[test]
fn three_tf32_hopper_kernels_issue_three_wgmma_per_k_step() {
    use kernels_gpu::k24_wgmma_3xtf32::*;
    let wgmma = rust_gemm::ptx(&kernels_gpu::modules::WGMMA);
    let instances = [
        (SPEC_128X128X32_S3, PROMOTED),
        (SPEC_ONE_128X128X32_S3, ONE),
        (SPEC_TWO_128X128X32_S3, TWO),
        (SPEC_P2_128X128X32_S3, PROMOTED_2),
    ];
    assert_eq!(instances.len(), SPECS.len());
    for (k, acc) in instances {
        let body = ptx_entry(wgmma, k.name).unwrap();
        let issued = body
            .matches("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32")
            .count();
        // PROMOTED_2's loop body holds the two tiles of one partial.
        let tiles = if acc == PROMOTED_2 { 2 } else { 1 };
        assert_eq!(
            issued,
            3 * kernels_gpu::k12_wgmma::BK / 8 * tiles,
            "{}: wgmma count",
            k.name
        );
        assert_eq!(
            body.matches("wgmma.mma_async").count(),
            issued,
            "{}",
            k.name
        );
        assert_eq!(
            body.matches("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier")
                .count(),
            4,
            "{}: four boxes per stage",
            k.name
        );
        assert!(
            !body.contains("cvt.rna.tf32.f32"),
            "{}: rounding in the loop",
            k.name
        );
        let promoted = acc == PROMOTED || acc == PROMOTED_2;
        // The promoted form retires every group before adding its
        // partial; the others keep one in flight.
        assert_eq!(
            body.contains("wgmma.wait_group.sync.aligned 1;"),
            !promoted,
            "{}: groups in flight",
            k.name
        );
        // The partials (and TWO's two sums) are added by the FMA pipe:
        // more adds than ONE's, whose adds are the epilogue's alone (the
        // same store code in every instance).
        let adds =
            |body: &str| body.matches("add.f32").count() + body.matches("add.rn.f32").count();
        let one = adds(ptx_entry(wgmma, SPEC_ONE_128X128X32_S3.name).unwrap());
        assert_eq!(adds(body) > one, acc != ONE, "{}: add.f32", k.name);
    }
}

/// Steps 19-20 and 22: BF16 and FP16 `wgmma` (64 x 256 x 16, BK / 16 per tile,
/// of its entry's type and no other), each operand read as stored: A
/// K-major (`imm-trans-a` 0) or, transposed, M-major (1); B N-major
/// (`imm-trans-b` 1) or, transposed, K-major (0); both from shared memory
/// with one group in flight; no TF32 rounding anywhere (the inputs are
/// 16-bit already); launch bounds; step 20 strides through its tiles by
/// the grid's width.
#[test]
fn sixteen_bit_hopper_kernels_use_wgmma_k16_of_their_type() {
    use kernels_gpu::elem::Math;
    use kernels_gpu::launch::Op;
    for k in kernels_gpu::k19_wgmma_16bit::SPECS
        .iter()
        .chain(kernels_gpu::k20_wgmma_persistent::SPECS)
        .chain(kernels_gpu::k20_wgmma_persistent::TRANSPOSED)
        .chain(kernels_gpu::k22_wgmma_tma_store::SPECS)
    {
        let ptx = rust_gemm::ptx(k.module);
        let bounded = rust_gemm::with_launch_bounds(ptx);
        let body = ptx_entry(ptx, k.name).unwrap();
        let (ours, other) = match k.elems.math {
            Math::Bf16 => ("f32.bf16.bf16", "f32.f16.f16"),
            Math::F16 => ("f32.f16.f16", "f32.bf16.bf16"),
            m => panic!("{}: math {m:?}", k.name),
        };
        let mmas: Vec<&str> = body
            .lines()
            .filter(|l| l.contains("wgmma.mma_async"))
            .collect();
        assert_eq!(
            mmas.len(),
            kernels_gpu::k19_wgmma_16bit::BK / 16,
            "{}: wgmma count",
            k.name
        );
        for l in &mmas {
            assert!(
                l.contains(&format!("wgmma.mma_async.sync.aligned.m64n256k16.{ours}")),
                "{}: {l}",
                k.name
            );
            assert!(!l.contains(other), "{}: {l}", k.name);
            // scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b.
            let trans_a = u8::from(k.ops.a == Op::T);
            let trans_b = u8::from(k.ops.b == Op::N);
            let tail = format!("1, 1, 1, {trans_a}, {trans_b};");
            assert!(l.trim_end().ends_with(&tail), "{}: {l}", k.name);
        }
        for needed in [
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
            "mbarrier.arrive.expect_tx.shared::cta.b64",
            "wgmma.wait_group.sync.aligned 1;",
            "setmaxnreg.dec.sync.aligned.u32 40;",
            "setmaxnreg.inc.sync.aligned.u32 232;",
        ] {
            assert!(body.contains(needed), "{}: no {needed}", k.name);
        }
        assert!(
            !body.contains("cvt.rna.tf32.f32"),
            "{}: TF32 rounding",
            k.name
        );
        let (x, y) = k.launch.block_threads;
        assert!(
            ptx_entry(&bounded, k.name)
                .unwrap()
                .contains(&format!(".maxntid {x}, {y}, 1")),
            "{}: launch bounds",
            k.name
        );
    }
}

/// Step 25 issues `wgmma ... m64n256k32` of its own FP8 pair (A's type
/// first) four times per stage (128 bytes of K), with no transpose
/// operands (FP8 has none); keeps one group in flight, takes the
/// registers its warpgroups need, stores C by TMA, and reads its three
/// scales (its entry's last parameter, 24 bytes) from global memory.
#[test]
fn fp8_hopper_kernels_use_wgmma_k32_of_their_types() {
    use kernels_gpu::elem::Math;
    for k in kernels_gpu::k25_wgmma_fp8::SPECS {
        assert_eq!(k.elems.math, Math::Fp8, "{}", k.name);
        let body = ptx_entry(rust_gemm::ptx(k.module), k.name).unwrap();
        for l in fp8_mmas(k, body, 256) {
            // scale-d, imm-scale-a, imm-scale-b: no transpose operands.
            assert!(l.trim_end().ends_with("1, 1, 1;"), "{}: {l}", k.name);
        }
        for needed in [
            "wgmma.wait_group.sync.aligned 1;",
            "setmaxnreg.inc.sync.aligned.u32 232;",
            "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group",
            ".param .align 8 .b8",
            "ld.global.b32",
        ] {
            assert!(body.contains(needed), "{}: no {needed}", k.name);
        }
        let params = body.split(')').next().unwrap_or("");
        assert!(
            params.contains("[24]"),
            "{}: the scales parameter: {params}",
            k.name
        );
    }
}

/// The quantizer (`kernels_gpu::quant`): the entries that write FP8
/// values convert with `cvt.rn.satfinite` to their type (two values per
/// instruction's register pair, the second 0), once per column a lane
/// takes in a row (4; the loop over a warp's rows stays a loop); the
/// passes that only find amaxes convert nothing; the block-wide maxima
/// use one barrier and shuffles.
#[test]
fn the_quantizer_converts_with_cvt_rn_satfinite_to_its_type() {
    use kernels_gpu::quant::{ENTRIES, QuantStep};
    let ptx = rust_gemm::ptx(&kernels_gpu::modules::FP8);
    for e in ENTRIES {
        let body = ptx_entry(ptx, e.name).unwrap();
        let cvts = body.matches("cvt.rn.satfinite.").count();
        let want = format!("cvt.rn.satfinite.{}x2.f32", e.dst.name());
        let per_thread = match e.step {
            QuantStep::Rows | QuantStep::Tiles | QuantStep::Tensor => 4,
            QuantStep::Amax | QuantStep::Scale => 0,
        };
        assert_eq!(cvts, per_thread, "{}: conversions", e.name);
        if per_thread > 0 {
            assert_eq!(
                body.matches(&want).count(),
                per_thread,
                "{}: {want}",
                e.name
            );
            assert!(body.contains("div.rn.f32"), "{}: the IEEE division", e.name);
        }
        let barriers = body.matches("bar.sync").count();
        let shared = matches!(
            e.step,
            QuantStep::Tiles | QuantStep::Amax | QuantStep::Scale
        );
        assert_eq!(barriers, usize::from(shared), "{}: barriers", e.name);
        if e.step != QuantStep::Tensor {
            assert_eq!(
                body.matches("shfl.sync.bfly.b32").count(),
                5,
                "{}: shuffles",
                e.name
            );
        }
    }
}

/// The `wgmma`s of FP8 kernel `k` (PTX `body`): one `m64n{n}k32` of its
/// types per 32 of the stage's 128 values of K, no other.
fn fp8_mmas<'a>(k: &KernelSpec, body: &'a str, n: usize) -> Vec<&'a str> {
    let want = format!(
        "wgmma.mma_async.sync.aligned.m64n{n}k32.f32.{}.{}",
        k.elems.a.name(),
        k.elems.b.name()
    );
    let mmas: Vec<&str> = body
        .lines()
        .filter(|l| l.contains("wgmma.mma_async"))
        .collect();
    assert_eq!(mmas.len(), 128 / 32, "{}: wgmma count", k.name);
    for l in &mmas {
        assert!(l.contains(&want), "{}: {l}", k.name);
    }
    mmas
}

/// Step 26 promotes: per stage, four `m64nNk32` (N its tile's width) of its types into the
/// partial sum (the first from zero, the `scale-d` predicate), then a wait
/// that retires them all (`wait_group 0`, no group left in flight) before
/// the FMAs that add it into the promoted sums; the block-scaled
/// instances read their scales from global memory in the loop.
#[test]
fn step_26_promotes_each_k_block_of_its_wgmma_sums() {
    use kernels_gpu::elem::Math;
    for k in kernels_gpu::k26_wgmma_fp8_blocks::SPECS {
        assert_eq!(
            (k.elems.math, k.elems.promote_every),
            (Math::Fp8, 128),
            "{}",
            k.name
        );
        let body = ptx_entry(rust_gemm::ptx(k.module), k.name).unwrap();
        for l in fp8_mmas(k, body, k.launch.block_tile.1) {
            // scale-d from the predicate, imm-scale-a, imm-scale-b.
            assert!(l.trim_end().ends_with("p, 1, 1; }"), "{}: {l}", k.name);
        }
        assert!(
            body.contains("wgmma.wait_group.sync.aligned 0;"),
            "{}",
            k.name
        );
        assert!(
            !body.contains("wgmma.wait_group.sync.aligned 1;"),
            "{}",
            k.name
        );
        assert!(body.contains("ld.global"), "{}: the scales", k.name);
    }
    // Over the same epilogue, the block-scaled instance promotes with one
    // FMA per accumulator (times its row's scale), the per-tensor one
    // with one add.
    let count = |name: &str, op: &str| {
        let spec = kernels_gpu::registry::find(name).unwrap();
        ptx_entry(rust_gemm::ptx(spec.module), name)
            .unwrap()
            .matches(op)
            .count() as i64
    };
    for c in ["", "_f32"] {
        let (blocks, tensor) = (
            format!("wgmma_e4m3_blocks_128x128x128_s5{c}"),
            format!("wgmma_e4m3_promoted_128x128x128_s6{c}"),
        );
        let fmas = count(&blocks, "fma.rn.f32") - count(&tensor, "fma.rn.f32");
        let adds = count(&tensor, "add.rn.f32") - count(&blocks, "add.rn.f32");
        assert_eq!((fmas, adds), (64, 64), "{blocks} against {tensor}");
    }
}

/// Step 27's entries: FP8 `mma.sync.m16n8k32` of their own types, once
/// per warp tile and k-step (4 per K block of 128) in each of the three
/// bodies, as step 21; plain `ldmatrix` only (K-major tiles, no 8-bit
/// `.trans`); and promotion: over the same epilogue the block-scaled
/// instance adds each K block's sums with one FMA per accumulator (times
/// its row's and its block's scales), the per-tensor one with one add.
#[test]
fn fp8_mma_kernels_use_mma_sync_k32_and_promote_each_k_block() {
    use kernels_gpu::k27_mma_fp8::{self, BK, SPECS};
    for k in SPECS {
        let body = ptx_entry(rust_gemm::ptx(k.module), k.name).unwrap();
        let (bm, bn) = k.launch.block_tile;
        let per_step = bm * bn / (4 * k.launch.threads() as usize);
        let mma = format!(
            "mma.sync.aligned.m16n8k32.row.col.f32.{}.{}.f32",
            k.elems.a.name(),
            k.elems.b.name()
        );
        assert_eq!(
            body.matches(&mma).count(),
            3 * (BK / 32) * per_step,
            "{}: {mma} count",
            k.name
        );
        assert_eq!(body.matches("mma.sync").count(), body.matches(&mma).count());
        assert!(
            !body.contains("ldmatrix.sync.aligned.m8n8.x4.trans"),
            "{}",
            k.name
        );
        for needed in [
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
            "cp.async.cg.shared.global",
            "cp.async.commit_group",
            "cp.async.wait_group",
            "bar.sync",
            "ld.global",
        ] {
            assert!(body.contains(needed), "{}: no {needed}", k.name);
        }
    }
    let count = |spec: &KernelSpec, op: &str| {
        ptx_entry(rust_gemm::ptx(spec.module), spec.name)
            .unwrap()
            .matches(op)
            .count() as i64
    };
    let accumulators = (k27_mma_fp8::WM * k27_mma_fp8::WN / 32) as i64;
    for (blocks, tensor) in [
        (
            &k27_mma_fp8::SPEC_E4M3_BLOCKS_64X128X128_W32X32_S3,
            &k27_mma_fp8::SPEC_E4M3_64X128X128_W32X32_S3,
        ),
        (
            &k27_mma_fp8::SPEC_E4M3_BLOCKS_64X128X128_W32X32_S3_F32,
            &k27_mma_fp8::SPEC_E4M3_64X128X128_W32X32_S3_F32,
        ),
    ] {
        let fmas = count(blocks, "fma.rn.f32") - count(tensor, "fma.rn.f32");
        let adds = count(tensor, "add.rn.f32") - count(blocks, "add.rn.f32");
        assert_eq!(
            (fmas, adds),
            (3 * accumulators, 3 * accumulators),
            "{} against {}",
            blocks.name,
            tensor.name
        );
    }
}

/// Step 22 stores C by TMA (shared to global, in bulk groups it commits,
/// waits on before reusing a staging box, and waits out before the block
/// exits), after fencing the staged values for the async proxy; step 20,
/// whose threads store C, has none of it.
#[test]
fn step_22_stores_c_by_tma_and_step_20_does_not() {
    const STORE: &str = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group";
    for k in kernels_gpu::k22_wgmma_tma_store::SPECS {
        let body = ptx_entry(rust_gemm::ptx(k.module), k.name).unwrap();
        for needed in [
            STORE,
            "cp.async.bulk.commit_group;",
            "cp.async.bulk.wait_group.read 1;",
            "cp.async.bulk.wait_group 0;",
            "fence.proxy.async.shared::cta;",
        ] {
            assert!(body.contains(needed), "{}: no {needed}", k.name);
        }
        // The loop over the tile's four 64-column slices (two boxes of 32
        // f32 columns, one of 64 16-bit ones) stays rolled: one copy per
        // epilogue (plain, and fused with each of the five activations),
        // each with one slice's stores, where a copy per box made the code
        // 175-185 KB; LLVM may unroll the plain one, whose body is small
        // (the f32 kernels: 8 stores there).
        let per_slice = 64 * k.elems.c.bytes() / 128;
        let stores = body.matches(STORE).count();
        assert!(
            (6 * per_slice..=6 * per_slice + 4 * per_slice).contains(&stores),
            "{}: {stores} TMA stores",
            k.name
        );
    }
    for k in kernels_gpu::k20_wgmma_persistent::SPECS {
        let body = ptx_entry(rust_gemm::ptx(k.module), k.name).unwrap();
        assert!(!body.contains("cp.async.bulk.commit_group"), "{}", k.name);
    }
}

#[test]
fn launch_constants_are_consistent() {
    for k in registry::all() {
        let (bm, bn) = k.launch.block_tile;
        assert!(
            k.launch.threads() <= 1024,
            "{}: too many threads per block",
            k.name
        );
        assert!(bm > 0 && bn > 0 && k.launch.threads() > 0, "{}", k.name);
        assert!(
            k.launch.shared_bytes <= 227 * 1024,
            "{}: more shared memory than any GPU has",
            k.name
        );
        assert_eq!(k.launch.grid(1, 1), (1, 1), "{}", k.name);
        assert_eq!(k.launch.grid(bm + 1, bn + 1), (2, 2), "{}", k.name);
    }
}

/// The architectures each module is assembled for: its own target (or
/// Turing for sm_70, see the module docs), Hopper, and every architecture
/// the library ships SASS for (`Arch::sass`).
fn ptxas_archs(module: &PtxModule) -> &'static [&'static str] {
    match module.arch.target_cpu {
        "sm_70" => &["sm_75", "sm_80", "sm_90"],
        "sm_80" => &["sm_80", "sm_90"],
        "sm_89" => &["sm_89", "sm_90"],
        // Architecture-specific PTX assembles for its own target only.
        "sm_90a" => &["sm_90a"],
        other => panic!("no ptxas architectures chosen for {other}"),
    }
}

/// `ptxas -v` for each module and architecture: every entry assembles with
/// no spills and no stack frame (a stack frame means a register array went
/// to local memory). Where the library ships SASS for the architecture
/// (`host/gemm/sass/<module>.<arch>.cubin.lzma`), the cubin ptxas makes is
/// the shipped one, byte for byte; `UPDATE_PTX=1` rewrites those that
/// differ instead of failing (with the shipped PTX: `shipped_ptx_is_the_kernels_ptx`).
#[test]
fn ptxas_assembles_every_module_without_spills() {
    let Some(ptxas) = find_ptxas() else {
        assert!(
            std::env::var_os("REQUIRE_PTXAS").is_none(),
            "REQUIRE_PTXAS is set but ptxas was not found (pip install nvidia-cuda-nvcc)"
        );
        // Loud on purpose: this check is skipped, not passed.
        eprintln!(
            "SKIPPED ptxas checks: ptxas not found (pip install nvidia-cuda-nvcc, or put ptxas on PATH)"
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("gemm-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sass_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/gemm/sass");
    let update = std::env::var("UPDATE_PTX").is_ok_and(|v| v == "1");
    let mut stale = Vec::new();
    let mut faults = Vec::new();
    for module in MODULES {
        let file = dir.join(format!("{}.ptx", module.name));
        // With each entry's launch bounds, as the host loads it.
        std::fs::write(&file, rust_gemm::with_launch_bounds(rust_gemm::ptx(module))).unwrap();
        for &arch in ptxas_archs(module) {
            let cubin = dir.join(format!("{}.{arch}.cubin", module.name));
            let out = Command::new(&ptxas)
                .args(["-v", &format!("-arch={arch}")])
                .arg(&file)
                .arg("-o")
                .arg(&cubin)
                .output()
                .expect("run ptxas");
            let log = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success(),
                "ptxas -arch={arch} failed on module {}:\n{log}",
                module.name
            );
            // ptxas's notes on wgmma pipelines that it had to serialise
            // (C7510-C7519: "Potential Performance Loss") are errors here.
            let serialised: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("wgmma") && l.contains("serialized"))
                .collect();
            assert!(
                serialised.is_empty(),
                "ptxas -arch={arch} serialised wgmma in module {}:\n{}",
                module.name,
                serialised.join("\n")
            );
            let entries = parse_ptxas(&log);
            // Utility entries (copies, the quantizer) and split entries:
            // no spill, no stack.
            for name in module.utility_entries.iter().chain(&split_entries(module)) {
                let e = entries.iter().find(|e| e.name == *name);
                let e = e.unwrap_or_else(|| panic!("ptxas did not report {name}:\n{log}"));
                assert_eq!(
                    (e.spill_stores, e.spill_loads, e.stack_bytes),
                    (0, 0, 0),
                    "{arch} {name}"
                );
            }
            for k in kernels_of(module) {
                let e = entries
                    .iter()
                    .find(|e| e.name == k.name)
                    .unwrap_or_else(|| panic!("ptxas did not report {}:\n{log}", k.name));
                println!(
                    "{arch} {:<26} {:>3} registers, {} B stack",
                    e.name, e.registers, e.stack_bytes
                );
                // Collected, so that one run names every kernel at fault.
                if (e.spill_stores, e.spill_loads) != (0, 0) {
                    faults.push(format!(
                        "{arch} {}: spills {} / {} bytes",
                        k.name, e.spill_stores, e.spill_loads
                    ));
                }
                if e.stack_bytes != 0 {
                    faults.push(format!(
                        "{arch} {}: stack frame (local memory) {} bytes",
                        k.name, e.stack_bytes
                    ));
                }
                assert!(e.registers > 0 && e.registers <= 255, "{arch} {}", k.name);
                // A block must fit in an SM's 65,536 registers (allocated
                // per warp in units of 256), or the launch is refused.
                let warps = (k.launch.threads() as usize).div_ceil(32);
                assert!(
                    warps * (e.registers as usize * 32).next_multiple_of(256) <= 65_536,
                    "{arch} {}: {} registers x {} threads do not fit in an SM",
                    k.name,
                    e.registers,
                    k.launch.threads()
                );
            }
            if module.arch.sass.contains(&arch)
                && let Some(name) = check_shipped_sass(&sass_dir, &cubin, update)
            {
                stale.push(name);
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(faults.is_empty(), "{}", faults.join("\n"));
    assert!(
        stale.is_empty(),
        "the shipped SASS {stale:?} (host/gemm/sass/) is not what ptxas makes of the PTX: \
         run `UPDATE_PTX=1 cargo test -p tests --test ptx` and commit host/gemm/"
    );
}

/// Compares `cubin` with its shipped copy (`<sass_dir>/<file name>.lzma`);
/// its name if they differ, after rewriting the copy when `update`.
fn check_shipped_sass(
    sass_dir: &std::path::Path,
    cubin: &std::path::Path,
    update: bool,
) -> Option<String> {
    let made = std::fs::read(cubin).unwrap();
    let name = cubin.file_name().unwrap().to_string_lossy().into_owned();
    let path = sass_dir.join(format!("{name}.lzma"));
    if unpacked(&path).is_some_and(|shipped| shipped == made) {
        return None;
    }
    if !update {
        return Some(name);
    }
    std::fs::create_dir_all(sass_dir).unwrap();
    pack(&path, &made);
    None
}

/// The bytes of a shipped LZMA file, if it reads.
fn unpacked(path: &std::path::Path) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let packed = std::fs::read(path).ok()?;
    let mut bytes = Vec::new();
    lzma_rust2::LzmaReader::new_mem_limit(&packed[..], u32::MAX, None)
        .and_then(|mut r| r.read_to_end(&mut bytes))
        .ok()?;
    Some(bytes)
}

/// Writes `bytes` to `path` as the library ships its modules: LZMA at
/// preset 9 (about a third of gzip's size for PTX), the size in the
/// header (`host/gemm/build.rs` checks it).
fn pack(path: &std::path::Path, bytes: &[u8]) {
    use std::io::Write as _;
    let options = lzma_rust2::LzmaOptions::with_preset(9);
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w =
        lzma_rust2::LzmaWriter::new_use_header(file, &options, Some(bytes.len() as u64)).unwrap();
    w.write_all(bytes).unwrap();
    w.finish().unwrap().into_inner().unwrap();
    eprintln!("rewrote {}", path.display());
}

#[test]
fn ptxas_report_parser() {
    // The entry's body left out of line has a mangled name ending with the
    // entry's: its properties (after the entry's) are not the entry's.
    let log = "ptxas info    : Compiling entry function 'tiled16' for 'sm_90'\n\
               ptxas info    : Function properties for tiled16\n\
               \x20   8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n\
               ptxas info    : Used 31 registers, used 1 barriers\n\
               ptxas info    : Function properties for _RNvNtCs_core9panicking\n\
               \x20   0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
               ptxas info    : Function properties for _RNvNtCs_kernels_gpu7tiled16\n\
               \x20   0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
    let e = parse_ptxas(log);
    assert_eq!(e.len(), 1);
    assert_eq!(
        e[0],
        tests::PtxasEntry {
            name: "tiled16".into(),
            registers: 31,
            spill_stores: 4,
            spill_loads: 4,
            stack_bytes: 8
        }
    );
}
