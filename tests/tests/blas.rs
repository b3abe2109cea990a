//! The library (`rust_gemm::blas`) without a GPU: one test per typed
//! error of `plan`, `Auto`'s rule, and every API path (op x layout x
//! scalars x batch x leading dimensions x split-K) run on the CPU
//! emulator through the same launches the GPU gets, checked against the
//! f64 reference; property tests over random calls. The same paths on
//! the GPU: tests/tests/gpu.rs.

use harness::matrix::round_to;
use harness::reference::{check_gemm, check_gemm_fused};
use kernels_gpu::elem::{Elem, Scaling, Storage};
use kernels_gpu::launch::Ops;
use kernels_gpu::registry;
use proptest::prelude::*;
use rust_gemm::blas::{
    self, Activation, Algorithm, Candidate, Choice, Compute, EmuEpilogue, GemmConfig, GemmError,
    Layout, Op, Per, Plan, QuantConfig, Quantize, choose, choose_by, choose_with,
};
use tests::values;

/// Floats each buffer needs for `cfg`.
fn lens(cfg: &GemmConfig) -> (usize, usize, usize) {
    cfg.buffer_lens()
}

/// Every f32 candidate at one block per SM.
fn candidates() -> Vec<Candidate> {
    candidates_of(Storage::F32)
}

/// Every candidate for `storage` at one block per SM.
fn candidates_of(storage: Storage) -> Vec<Candidate> {
    candidates_in(storage, Compute::Fp32)
}

/// Every candidate for `storage` in mode `compute` at one block per SM.
fn candidates_in(storage: Storage, compute: Compute) -> Vec<Candidate> {
    [Ops::NN, Ops::TN, Ops::NT, Ops::TT]
        .into_iter()
        .flat_map(|ops| blas::auto_candidates(ops, storage, compute))
        .map(|spec| Candidate {
            spec,
            blocks_per_sm: 1,
        })
        .collect()
}

/// What `Auto` runs for `cfg` on an H200 (132 SMs, its measured table).
fn auto(cfg: &GemmConfig) -> Choice {
    let plan = blas::plan(cfg, lens(cfg)).expect("a valid call");
    let table = blas::table_for("NVIDIA H200");
    choose_with(&plan, &candidates(), 132, 4800.0, table.as_deref())
        .expect("a candidate for every layout")
}

/// Runs `cfg` as `choice` on the emulator on random A, B and C of the
/// choice's stored types (NaN in C when beta is 0, so a read of C would
/// show) and checks it against the f64 reference with the tolerance of
/// the choice's types.
fn emulate_and_check(cfg: &GemmConfig, choice: Choice) {
    let storage = choice.kernel.elems.storage();
    let (la, lb, lc) = lens(cfg);
    let stored = |elem, mut v: Vec<f32>| {
        round_to(elem, &mut v);
        v
    };
    let a = stored(storage.a, values(la, 1));
    let b = stored(storage.b, values(lb, 2));
    let c = if cfg.beta == 0.0 {
        vec![f32::NAN; lc]
    } else {
        stored(storage.c, values(lc, 3))
    };
    let after = match blas::emulate(cfg, choice, &a, &b, &c) {
        Ok(Ok(after)) => after,
        Ok(Err(report)) => panic!("{choice} on {cfg:?}: the emulator found\n{report}"),
        Err(e) => panic!("{choice} on {cfg:?}: {e}"),
    };
    let v = check_gemm(
        cfg,
        (&a, &b),
        (&c, &after),
        choice.kernel.elems,
        usize::MAX,
        0,
    );
    assert!(v.passed, "{choice} on {cfg:?}: {v:?}");
}

/// [`emulate_and_check`] with the fused epilogue `epilogue`
/// ([`blas::emulate_fused`], checked by `check_gemm_fused`).
fn emulate_and_check_fused(cfg: &GemmConfig, choice: Choice, epilogue: &EmuEpilogue) {
    let storage = choice.kernel.elems.storage();
    let (la, lb, lc) = lens(cfg);
    let stored = |elem, mut v: Vec<f32>| {
        round_to(elem, &mut v);
        v
    };
    let a = stored(storage.a, values(la, 1));
    let b = stored(storage.b, values(lb, 2));
    let c = if cfg.beta == 0.0 {
        vec![f32::NAN; lc]
    } else {
        stored(storage.c, values(lc, 3))
    };
    let after = match blas::emulate_fused(cfg, choice, (&a, &b, &c), epilogue) {
        Ok(Ok(after)) => after,
        Ok(Err(report)) => panic!("{choice} on {cfg:?}: the emulator found\n{report}"),
        Err(e) => panic!("{choice} on {cfg:?}: {e}"),
    };
    let elems = choice.kernel.elems;
    let v = check_gemm_fused(
        cfg,
        (&a, &b),
        (&c, &after),
        elems,
        (usize::MAX, 0),
        epilogue,
    );
    assert!(v.passed, "{choice} on {cfg:?} with {epilogue:?}: {v:?}");
}

/// An epilogue of `activation` for `cfg`'s C: a bias along `bias` and,
/// where `scale` names one, scales along it, each from `seed` (values
/// in ±[0.5, 1.5): never zero).
fn epilogue(
    cfg: &GemmConfig,
    activation: Activation,
    bias: Option<Per>,
    scale: Option<Per>,
    seed: u64,
) -> EmuEpilogue {
    let vector = |per: Per, seed| (values(per.len(cfg.m, cfg.n), seed), per);
    EmuEpilogue {
        activation,
        bias: bias.map(|per| vector(per, seed)),
        scale: scale.map(|per| vector(per, seed + 1)),
    }
}

/// The epilogue number `i` of a rotation through every activation, bias
/// per row and per column, with and without scales.
fn rotated(cfg: &GemmConfig, i: usize) -> EmuEpilogue {
    let activation = Activation::ALL[i % Activation::ALL.len()];
    let bias = [Some(Per::Column), Some(Per::Row), None][i % 3];
    let scale = [None, Some(Per::Row), Some(Per::Column)][i / 2 % 3];
    epilogue(cfg, activation, bias, scale, 40 + i as u64)
}

/// The 16-bit mixes the library takes: BF16 or FP16 A and B, C f32 or
/// of their type.
const STORAGES_16: [Storage; 4] = [
    Storage::new(Elem::Bf16, Elem::Bf16, Elem::F32),
    Storage::new(Elem::Bf16, Elem::Bf16, Elem::Bf16),
    Storage::new(Elem::F16, Elem::F16, Elem::F32),
    Storage::new(Elem::F16, Elem::F16, Elem::F16),
];

/// What `Auto` runs for a call of `storage` on a GPU without `wgmma`
/// (an A100: 108 SMs, no table): step 21's kernels alone, which the
/// emulator runs.
fn auto_ampere(cfg: &GemmConfig, storage: Storage) -> Choice {
    let plan = blas::plan_for(cfg, lens(cfg), storage).expect("a valid call");
    let ampere: Vec<Candidate> = (candidates_of(storage).into_iter())
        .filter(|c| c.spec.module.arch.runs_on((8, 0)))
        .collect();
    choose_with(&plan, &ampere, 108, 2000.0, None).expect("a candidate for every layout")
}

fn kernel(name: &str, split_k: usize) -> Choice {
    Choice {
        kernel: registry::find(name).expect("registered"),
        split_k,
    }
}

// ---- One test per typed error ----

fn refused(cfg: &GemmConfig, lens: (usize, usize, usize)) -> GemmError {
    blas::plan(cfg, lens).expect_err("refused")
}

/// The f32 API takes a named kernel only if it stores f32 A, B and C: a
/// 16-bit kernel is refused with its types named, before any launch; an
/// f32 kernel computing in TF32 is taken.
#[test]
fn a_named_kernel_of_other_stored_types_is_refused_with_them() {
    let cfg = GemmConfig::new(256, 256, 256);
    let plan = blas::plan(&cfg, lens(&cfg)).unwrap();
    for spec in registry::KERNELS
        .iter()
        .filter(|k| k.elems.storage() != Storage::F32)
    {
        let err = blas::choose_named(&plan, spec.name, 1).expect_err(spec.name);
        let text = err.to_string();
        assert!(
            matches!(err, GemmError::KernelUnsupported { .. }),
            "{}: {text}",
            spec.name
        );
        assert!(text.contains(&spec.elems.storage().to_string()), "{text}");
    }
    let tf32 = kernels_gpu::k18_wgmma_tr::SPEC_256X128X32_S4.name;
    assert_eq!(
        blas::choose_named(&plan, tf32, 1).unwrap().kernel.name,
        tf32
    );
}

/// A mix of element types no kernel multiplies is refused before
/// anything else, with the types named; the mixes the library takes pass.
#[test]
fn a_mix_of_types_no_kernel_multiplies_is_a_typed_error_that_names_them() {
    let cfg = GemmConfig::new(8, 8, 8);
    let (bf, f16, f32) = (Elem::Bf16, Elem::F16, Elem::F32);
    for (a, b, c) in [
        (bf, f16, f32),
        (f32, f32, bf),
        (bf, bf, f16),
        (f32, bf, f32),
        (f16, f16, bf),
        // FP8 mixes no kernel takes: E5M2 x E5M2, an FP8 C, FP8 x BF16.
        (Elem::E5m2, Elem::E5m2, bf),
        (Elem::E4m3, Elem::E4m3, Elem::E4m3),
        (Elem::E4m3, bf, bf),
    ] {
        let storage = Storage::new(a, b, c);
        let e = blas::plan_for(&cfg, lens(&cfg), storage).expect_err("refused");
        assert!(matches!(e, GemmError::Types { .. }), "{e}");
        let text = e.to_string();
        assert!(text.contains(&storage.to_string()), "{text}");
        assert!(text.starts_with("no kernel multiplies"), "{text}");
    }
    for storage in STORAGES_16.into_iter().chain([Storage::F32]) {
        assert!(
            blas::plan_for(&cfg, lens(&cfg), storage).is_ok(),
            "{storage}"
        );
    }
}

/// FP8 (issue 21): A and B with K contiguous only, each other layout a
/// typed error naming the fix; the FP8 mixes some kernel takes plan.
#[test]
fn fp8_calls_take_k_major_operands_and_refuse_other_layouts() {
    let storage = Storage::new(Elem::E4m3, Elem::E4m3, Elem::Bf16);
    let nt = GemmConfig::new(64, 48, 256).op_b(Op::T);
    let plan = blas::plan_for(&nt, lens(&nt), storage).expect("A m x k, B n x k");
    assert_eq!(plan.ops, Ops::NT);
    // cuBLASLt's layout: column-major, op_a = T: the same memory, swapped.
    let tn = GemmConfig::new(64, 48, 256)
        .layout(Layout::ColMajor)
        .op_a(Op::T);
    let plan = blas::plan_for(&tn, lens(&tn), storage).expect("column-major TN");
    assert!(plan.swapped && plan.ops == Ops::NT);
    for cfg in [
        GemmConfig::new(64, 48, 256),
        GemmConfig::new(64, 48, 256).op_a(Op::T).op_b(Op::T),
        GemmConfig::new(64, 48, 256).layout(Layout::ColMajor),
    ] {
        let e = blas::plan_for(&cfg, lens(&cfg), storage).expect_err("not K-major");
        assert!(matches!(e, GemmError::Fp8Layout { .. }), "{e}");
        assert!(e.to_string().contains("op_b = T"), "{e}");
    }
    for (a, b, c) in [
        (Elem::E4m3, Elem::E4m3, Elem::F32),
        (Elem::E4m3, Elem::E4m3, Elem::F16),
        (Elem::E5m2, Elem::E4m3, Elem::Bf16),
        (Elem::E4m3, Elem::E5m2, Elem::Bf16),
    ] {
        assert!(blas::plan_for(&nt, lens(&nt), Storage::new(a, b, c)).is_ok());
    }
    // A column-major call's kernel reads the caller's B as its A: with
    // A and B of different types the plan's types swap too, and so does
    // the kernel Auto takes.
    let mixed = Storage::new(Elem::E5m2, Elem::E4m3, Elem::Bf16);
    let tn = tn.fast_accumulation(true);
    let plan = blas::plan_for(&tn, lens(&tn), mixed).expect("column-major TN");
    assert_eq!((plan.storage.a, plan.storage.b), (Elem::E4m3, Elem::E5m2));
    let swapped = Storage::new(Elem::E4m3, Elem::E5m2, Elem::Bf16);
    let choice = choose(&plan, &candidates_of(swapped), 132, 4800.0).expect("a kernel");
    assert_eq!(choice.kernel.name, "wgmma_e4m3_e5m2_128x256x128_s4");
    let row = blas::plan_for(&nt.clone().fast_accumulation(true), lens(&nt), mixed).unwrap();
    assert_eq!((row.storage.a, row.storage.b), (Elem::E5m2, Elem::E4m3));
}

/// An FP8 call's scales: per tensor one f32 each, block scales at the
/// sizes of cuBLASLt's layouts and row-major calls only, D's one f32.
#[test]
fn fp8_scales_are_checked_against_the_call() {
    use kernels_gpu::elem::Scaling;
    let cfg = GemmConfig::new(300, 200, 1000).op_b(Op::T);
    assert!(blas::check_scales(&cfg, Scaling::Tensor, (1, 1, Some(1))).is_ok());
    let e = blas::check_scales(&cfg, Scaling::Tensor, (1, 0, None)).expect_err("empty");
    assert!(
        matches!(
            e,
            GemmError::ScalesTooSmall {
                arg: "scales.b",
                ..
            }
        ),
        "{e}"
    );
    let e = blas::check_scales(&cfg, Scaling::None, (1, 1, None)).expect_err("no kind");
    assert!(matches!(e, GemmError::ScalingNone), "{e}");
    let e = blas::check_scales(&cfg, Scaling::Tensor, (1, 1, Some(0))).expect_err("empty d");
    assert!(
        matches!(
            e,
            GemmError::ScalesTooSmall {
                arg: "scales.d",
                ..
            }
        ),
        "{e}"
    );
    // A: 8 K blocks of 300 rows (a multiple of 4); B: 2 column blocks of
    // 8 K blocks.
    let (a, b) = (Scaling::a_scales(300, 1000), Scaling::b_scales(1000, 200));
    assert_eq!((a, b), (8 * 300, 2 * 8));
    assert!(blas::check_scales(&cfg, Scaling::Blocks, (a, b, None)).is_ok());
    let e = blas::check_scales(&cfg, Scaling::Blocks, (a - 1, b, None)).expect_err("short");
    assert!(matches!(e, GemmError::ScalesTooSmall { arg: "scales.a", needs, .. } if needs == a));
    assert!(e.to_string().contains("m = 300, n = 200, k = 1000"), "{e}");
    let col = GemmConfig::new(300, 200, 1000)
        .layout(Layout::ColMajor)
        .op_a(Op::T);
    let e = blas::check_scales(&col, Scaling::Blocks, (a, b, None)).expect_err("column-major");
    assert!(matches!(e, GemmError::BlockScalesLayout), "{e}");
    assert!(blas::check_scales(&col, Scaling::Tensor, (1, 1, None)).is_ok());
    // Block scales start on 16 bytes (step 26 copies them in 16-byte
    // rows); per-tensor scales may start anywhere an f32 may.
    assert!(blas::check_scale_alignment(Scaling::Blocks, 0x7000_0100, 0x7000_0210).is_ok());
    assert!(blas::check_scale_alignment(Scaling::Tensor, 0x7000_0104, 0x7000_0208).is_ok());
    let e = blas::check_scale_alignment(Scaling::Blocks, 0x7000_0100, 0x7000_0204).expect_err("b");
    assert!(
        matches!(
            e,
            GemmError::ScalesMisaligned {
                arg: "scales.b",
                address: 0x7000_0204
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("16 bytes"), "{e}");
}

/// `Auto` on FP8: a kernel that promotes its sums (step 26) unless the
/// call allows fast accumulation (then step 25 is a candidate too, and
/// faster); block scales take step 26's block-scaled kernel; a mix step
/// 26 does not take goes to step 27 (`mma.sync`), which promotes too; on
/// a GPU without Hopper's `wgmma` (Ada: only modules of compute
/// capability 8.9 load) every FP8 call goes to step 27.
#[test]
fn auto_promotes_fp8_sums_unless_fast_accumulation_is_allowed() {
    use kernels_gpu::elem::Scaling;
    let tensor = Storage::new(Elem::E4m3, Elem::E4m3, Elem::Bf16);
    let cfg = GemmConfig::new(4096, 4096, 4096).op_b(Op::T);
    let pick = |cfg: &GemmConfig, storage: Storage| {
        let plan = blas::plan_for(cfg, lens(cfg), storage).expect("valid");
        choose(&plan, &candidates_of(storage), 132, 4800.0)
    };
    let promoted = pick(&cfg, tensor).expect("a promoting kernel");
    assert_eq!(promoted.kernel.step, 26);
    assert!(promoted.kernel.elems.promote_every > 0);
    let fast = pick(&cfg.clone().fast_accumulation(true), tensor).expect("a kernel");
    assert_eq!(fast.kernel.step, 25, "{}", fast.kernel.name);
    let blocks = pick(&cfg, tensor.with_scaling(Scaling::Blocks)).expect("block-scaled");
    assert_eq!(blocks.kernel.elems.scaling, Scaling::Blocks);
    let e5m2 = Storage::new(Elem::E5m2, Elem::E4m3, Elem::Bf16);
    assert_eq!(pick(&cfg, e5m2).map(|c| c.kernel.step), Some(27));
    assert_eq!(
        pick(&cfg.clone().fast_accumulation(true), e5m2).map(|c| c.kernel.step),
        Some(25)
    );
    let e5m2_e5m2 = Storage::new(Elem::E5m2, Elem::E5m2, Elem::Bf16);
    let e = blas::plan_for(&cfg, lens(&cfg), e5m2_e5m2).expect_err("no kernel takes it");
    assert!(matches!(e, GemmError::Types { .. }), "{e}");
    // Ada (8.9): steps 25-26 are sm_90a PTX, which it cannot load.
    let ada = |cfg: &GemmConfig, storage: Storage| {
        let plan = blas::plan_for(cfg, lens(cfg), storage).expect("valid");
        let loadable: Vec<Candidate> = candidates_of(storage)
            .into_iter()
            .filter(|c| c.spec.module.arch.runs_on((8, 9)))
            .collect();
        choose(&plan, &loadable, 128, 1000.0).map(|c| c.kernel.name)
    };
    let fast = cfg.clone().fast_accumulation(true);
    assert_eq!(ada(&fast, tensor), Some("mma_e4m3_64x128x128_w32x32_s3"));
    assert_eq!(
        ada(&cfg, tensor.with_scaling(Scaling::Blocks)),
        Some("mma_e4m3_blocks_64x128x128_w32x32_s3")
    );
    let f16 = Storage::new(Elem::E4m3, Elem::E4m3, Elem::F16);
    assert_eq!(ada(&cfg, f16), Some("mma_e4m3_64x128x128_w32x32_s3_f16"));
}

/// The quantizer's arguments: zero sizes, a leading dimension below the
/// row, buffers too small for the source, the output or the scales.
#[test]
fn the_quantizers_arguments_are_checked() {
    let cfg = QuantConfig::new(300, 1000, Quantize::Rows);
    let lens = cfg.lens();
    assert_eq!(lens, (300 * 1000, 300 * 1000, 8 * 300));
    assert!(cfg.check(lens).is_ok());
    let e = QuantConfig::new(0, 10, Quantize::Tensor)
        .check((0, 0, 1))
        .expect_err("zero");
    assert!(matches!(e, GemmError::ZeroDimension { arg: "rows" }), "{e}");
    let e = cfg.ld(999).check(lens).expect_err("ld");
    assert!(
        matches!(e, GemmError::LeadingDimension { arg: "ld", .. }),
        "{e}"
    );
    let padded = cfg.ld(1024);
    assert_eq!(padded.lens().0, 299 * 1024 + 1000);
    for (i, arg) in ["src", "dst", "scales"].into_iter().enumerate() {
        let mut short = [lens.0, lens.1, lens.2];
        short[i] -= 1;
        let e = cfg
            .check((short[0], short[1], short[2]))
            .expect_err("short");
        assert!(
            matches!(e, GemmError::BufferTooSmall { arg: a, .. } if a == arg),
            "{e}"
        );
    }
    assert_eq!(Quantize::Tiles.scales(200, 1000), 2 * 8);
    assert_eq!(Quantize::Tensor.scales(200, 1000), 1);
    let e =
        QuantConfig::new(600_000, 16, Quantize::Rows).check((usize::MAX, usize::MAX, usize::MAX));
    assert!(
        matches!(e, Err(GemmError::TooLarge { arg: "rows", .. })),
        "{e:?}"
    );
}

/// A 16-bit call that names a kernel of other types is refused with both
/// named; one of its own types is taken; a split of K is refused (only
/// the FP32 pointer kernels and steps 17-18 split).
#[test]
fn a_16_bit_call_takes_named_kernels_of_its_types_only_and_no_split() {
    let cfg = GemmConfig::new(256, 256, 256);
    let storage = STORAGES_16[0];
    let plan = blas::plan_for(&cfg, lens(&cfg), storage).unwrap();
    let e = blas::choose_named(&plan, "tuned_128x128x16_w32x64", 1).expect_err("f32 kernel");
    let text = e.to_string();
    assert!(matches!(e, GemmError::KernelUnsupported { .. }), "{text}");
    assert!(
        text.contains("f32 x f32 -> f32") && text.contains("bf16 x bf16 -> f32"),
        "{text}"
    );
    let own = kernels_gpu::k21_mma_16bit::SPEC_BF16_128X128X64_W64X64_S4.name;
    assert_eq!(blas::choose_named(&plan, own, 1).unwrap().kernel.name, own);
    let e = blas::choose_named(&plan, own, 2).expect_err("split");
    assert!(matches!(e, GemmError::BadSplit { .. }), "{e}");
}

/// `Auto` on a Hopper GPU: every layout goes to the `wgmma` kernels at
/// large sizes (step 22, which stores C by TMA, for A and B as they are;
/// step 20, which reads A and B as stored, for the transposed layouts),
/// batches to step 21's, and every choice stores the call's types; on an
/// Ampere GPU step 21 alone.
#[test]
fn auto_chooses_among_the_kernels_of_the_calls_types() {
    for storage in STORAGES_16 {
        let plan = |cfg: &GemmConfig| blas::plan_for(cfg, lens(cfg), storage).unwrap();
        let hopper = candidates_of(storage);
        let large = GemmConfig::new(4096, 4096, 4096);
        let c = choose_with(&plan(&large), &hopper, 132, 4800.0, None).unwrap();
        assert_eq!((c.kernel.step, c.split_k), (22, 1), "{storage}: {c}");
        for (op_a, op_b) in [(Op::T, Op::N), (Op::N, Op::T), (Op::T, Op::T)] {
            let cfg = large.clone().op_a(op_a).op_b(op_b);
            let c = choose_with(&plan(&cfg), &hopper, 132, 4800.0, None).unwrap();
            assert_eq!(
                (c.kernel.step, c.kernel.ops.a, c.kernel.ops.b),
                (20, op_a, op_b),
                "{c}"
            );
            assert_eq!(c.kernel.elems.storage(), storage, "{c}");
        }
        // A batch: the TMA kernels take one product; step 21 takes batches.
        let batch = GemmConfig::new(512, 512, 512).batched(8, 512 * 512, 512 * 512, 512 * 512);
        let c = choose_with(&plan(&batch), &hopper, 132, 4800.0, None).unwrap();
        assert_eq!(c.kernel.step, 21, "{c}");
        let c = auto_ampere(&large, storage);
        assert_eq!(
            (c.kernel.step, c.kernel.elems.storage()),
            (21, storage),
            "{c}"
        );
    }
}

/// Compute modes: FP32 calls take FP32 kernels unless the caller allows
/// more; with 3xTF32 allowed, a large product takes step 24 (faster than
/// every FP32 kernel in the model) and a small one, where the split
/// copies' launches and traffic weigh most, or a layout step 24 does not
/// read, an FP32 kernel; with TF32 allowed, the TF32 kernels win. The
/// measured table (FP32 kernels only) answers FP32 calls only. Every
/// choice is of a math the mode allows, and its 3xTF32 choice runs on
/// the emulator within the FP32 tolerance.
#[test]
fn auto_uses_tensor_core_kernels_for_f32_calls_only_where_the_mode_allows() {
    use kernels_gpu::elem::Math;
    let table = blas::table_for("NVIDIA H200");
    let choose = |cfg: &GemmConfig, compute: Compute| {
        let cfg = cfg.clone().compute(compute);
        let plan = blas::plan(&cfg, lens(&cfg)).unwrap();
        let c = choose_with(
            &plan,
            &candidates_in(Storage::F32, compute),
            132,
            4800.0,
            table.as_deref(),
        )
        .unwrap();
        assert!(compute.allows(c.kernel.elems.math), "{compute:?}: {c}");
        c
    };
    let large = GemmConfig::new(4096, 4096, 4096);
    assert_eq!(
        GemmConfig::new(8, 8, 8).compute,
        Compute::Fp32,
        "the default"
    );
    assert_eq!(choose(&large, Compute::Fp32).kernel.elems.math, Math::Fp32);
    let three = choose(&large, Compute::Tf32x3);
    assert_eq!((three.kernel.step, three.split_k), (24, 1), "{three}");
    assert_eq!(choose(&large, Compute::Tf32).kernel.elems.math, Math::Tf32);
    let small = GemmConfig::new(64, 64, 64);
    assert_eq!(
        choose(&small, Compute::Tf32x3).kernel.elems.math,
        Math::Fp32
    );
    let transposed = large.clone().op_a(Op::T);
    assert_eq!(
        choose(&transposed, Compute::Tf32x3).kernel.elems.math,
        Math::Fp32
    );
    // TF32 has a tensor-core kernel in every layout (step 17's
    // transposed instances): the same kernel with other copies. A
    // column-major call with A transposed is the row-major NT call.
    for (cfg, kernel) in [
        (large.clone().op_a(Op::T), "wgmma_ss_256x128x32_s4_tn"),
        (large.clone().op_b(Op::T), "wgmma_ss_256x128x32_s4_nt"),
        (
            large.clone().op_a(Op::T).op_b(Op::T),
            "wgmma_ss_256x128x32_s4_tt",
        ),
        (
            large.clone().op_a(Op::T).layout(Layout::ColMajor),
            "wgmma_ss_256x128x32_s4_nt",
        ),
    ] {
        assert_eq!(choose(&cfg, Compute::Tf32).kernel.name, kernel, "{cfg:?}");
    }
    // At 1024 the 128 x 128 instances of steps 17-18: twice the blocks
    // of the 256 x 128 tile, in one launch, unsplit (a TMA kernel's
    // slice pays its block's fixed part again: `TMA_SLICE_S`); from
    // 2048 up the 256-row tile.
    let mid = GemmConfig::new(1024, 1024, 1024);
    for (cfg, kernel) in [
        (mid.clone(), "wgmma_tr_128x128x32_s6"),
        (mid.clone().op_a(Op::T), "wgmma_ss_128x128x32_s6_tn"),
        (mid.clone().op_b(Op::T), "wgmma_ss_128x128x32_s6_nt"),
        (
            mid.clone().op_a(Op::T).op_b(Op::T),
            "wgmma_ss_128x128x32_s6_tt",
        ),
        (GemmConfig::new(2048, 2048, 2048), "wgmma_tr_256x128x32_s4"),
    ] {
        let c = choose(&cfg, Compute::Tf32);
        assert_eq!((c.kernel.name, c.split_k), (kernel, 1), "{cfg:?}");
    }
    // A batch of small products runs on step 18's 128 x 128 tile (the
    // product the third coordinate of its maps), B transposed on `_nt`'s;
    // never split. Where A^T is copied (`_tn`), no TMA kernel takes it.
    let batch = |cfg: GemmConfig| {
        let (m, n, k) = (cfg.m, cfg.n, cfg.k);
        cfg.batched(256, m * k, k * n, m * n)
    };
    let small = GemmConfig::new(128, 128, 128);
    for (cfg, kernel) in [
        (batch(small.clone()), "wgmma_tr_128x128x32_s6"),
        (
            batch(small.clone().op_b(Op::T)),
            "wgmma_ss_128x128x32_s6_nt",
        ),
    ] {
        let c = choose(&cfg, Compute::Tf32);
        assert_eq!((c.kernel.name, c.split_k), (kernel, 1), "{cfg:?}");
    }
    let c = choose(&batch(small.clone().op_a(Op::T)), Compute::Tf32);
    assert!(!matches!(c.kernel.step, 17 | 18), "{c}");
    // A few tiles over a long K: the TF32 kernels of steps 17-18 split
    // K (their slices start in the maps), the partial sums in the
    // workspace, then `reduce_slices`.
    let deep_cfg = GemmConfig::new(512, 512, 16384);
    let deep = choose(&deep_cfg, Compute::Tf32);
    assert!(
        matches!(deep.kernel.step, 17 | 18) && deep.split_k > 1,
        "{deep}"
    );
    // The GPU test's call (tests/tests/gpu.rs), a quarter of the work.
    let small_deep = choose(&GemmConfig::new(256, 256, 16384), Compute::Tf32);
    assert!(
        matches!(small_deep.kernel.step, 17 | 18) && small_deep.split_k > 1,
        "{small_deep}"
    );
    let plan = blas::plan(&deep_cfg.clone().compute(Compute::Tf32), lens(&deep_cfg)).unwrap();
    let steps: Vec<_> = blas::steps(&plan, deep).list().collect();
    assert_eq!(steps.len(), 2, "partial sums, then their sum");
    assert_eq!(
        (
            steps[0].batch,
            steps[0].params.k_slice as usize,
            steps[1].spec.name
        ),
        (deep.split_k, 16384 / deep.split_k, "reduce_slices")
    );
    // Step 13 does not split, nor does a batch.
    let named = |cfg: &GemmConfig, name: &str, split| {
        let cfg = cfg.clone().compute(Compute::Tf32);
        blas::choose_named(&blas::plan(&cfg, lens(&cfg)).unwrap(), name, split)
    };
    for name in [
        "wgmma_ss_256x128x32_s4_tn",
        "wgmma_tr_256x128x32_s4",
        "wgmma_ss_128x128x32_s6_tn",
        "wgmma_tr_128x128x32_s6",
    ] {
        let cfg = if name.ends_with("_tn") {
            deep_cfg.clone().op_a(Op::T)
        } else {
            deep_cfg.clone()
        };
        assert_eq!(named(&cfg, name, 8).unwrap().split_k, 8, "{name}");
    }
    let e = named(&deep_cfg, "wgmma_ws_256x128x32_s4", 8).expect_err("step 13");
    assert!(e.to_string().contains("does not split K"), "{e}");
    let e = named(
        &deep_cfg
            .clone()
            .batched(2, 512 * 16384, 16384 * 512, 512 * 512),
        "wgmma_ss_256x128x32_s4",
        1,
    )
    .expect_err("batch");
    assert!(e.to_string().contains("one product per"), "{e}");
    // Step 23 (the 3xTF32 kernel the emulator runs), as a mode-allowed
    // named kernel: FP32's tolerance at an odd shape.
    let odd = GemmConfig::new(70, 45, 77).compute(Compute::Tf32x3);
    emulate_and_check(&odd, kernel("mma_3xtf32_64x64x32_w32x32_s2", 1));
    assert!(!Compute::Fp32.allows(Math::Tf32x3) && !Compute::Tf32x3.allows(Math::Tf32));
    assert!(Compute::Tf32.allows(Math::Tf32x3) && Compute::Fp32.allows(Math::Bf16));
}

/// A call of one row (one column) of C goes to step 15's row kernel
/// (step 16's one-column tiles) in every mode, split so that the SMs
/// hold enough of its blocks to stream the matrix: its listed rate
/// (measured at 4096^3) does not bound it, and the TF32 tiles of 128 or
/// 256 rows computed the vector slower (docs/measurements.md,
/// forty-seventh session). On both GPUs' constants.
#[test]
fn auto_streams_a_vector_call_through_the_vector_kernels() {
    for compute in [Compute::Fp32, Compute::Tf32] {
        let cands = candidates_in(Storage::F32, compute);
        for dram in [3350.0, 4800.0] {
            let choose = |cfg: GemmConfig| {
                let cfg = cfg.compute(compute);
                let plan = blas::plan(&cfg, lens(&cfg)).unwrap();
                choose_by(&blas::MODEL, &plan, &cands, 132, dram).unwrap()
            };
            let row = choose(GemmConfig::new(1, 4096, 4096));
            let tiles = 4096usize.div_ceil(row.kernel.launch.block_tile.1);
            assert_eq!(row.kernel.step, 15, "{compute:?} {dram}: {row}");
            assert!(
                tiles * row.split_k >= 3 * 132,
                "{compute:?} {dram}: {row}: too few blocks to stream B"
            );
            let column = choose(GemmConfig::new(4096, 1, 4096));
            assert_eq!(column.kernel.step, 16, "{compute:?} {dram}: {column}");
            // Two rows are no vector: a tile's model, as before.
            let two = choose(GemmConfig::new(2, 4096, 4096));
            assert_ne!(two.kernel.step, 15, "{compute:?} {dram}: {two}");
        }
    }
}

#[test]
fn a_zero_dimension_is_named() {
    let e = refused(&GemmConfig::new(4, 0, 4), (16, 0, 0));
    assert!(matches!(e, GemmError::ZeroDimension { arg: "n" }), "{e}");
    assert_eq!(e.to_string(), "n is 0: every dimension must be at least 1");
}

#[test]
fn an_empty_batch_is_refused() {
    let e = refused(
        &GemmConfig::new(4, 4, 4).batched(0, 16, 16, 16),
        (16, 16, 16),
    );
    assert!(matches!(e, GemmError::EmptyBatch), "{e}");
}

#[test]
fn a_leading_dimension_below_the_row_length_is_named() {
    let e = refused(&GemmConfig::new(4, 5, 6).lds(5, 5, 5), (100, 100, 100));
    assert!(
        matches!(
            e,
            GemmError::LeadingDimension {
                arg: "lda",
                ld: 5,
                min: 6,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "lda = 5 is less than 6, the length of A's rows as stored: a leading dimension is at \
         least that"
    );
    // Column-major, B transposed: B is stored n x k, its columns k long.
    let cfg = GemmConfig::new(4, 5, 6)
        .layout(Layout::ColMajor)
        .op_b(Op::T);
    let e = refused(&cfg.clone().lds(4, 3, 4), (100, 100, 100));
    assert!(
        matches!(
            e,
            GemmError::LeadingDimension {
                arg: "ldb",
                min: 5,
                lines: "columns",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_buffer_too_small_is_named_with_what_it_needs() {
    // C: 3 rows 10 apart, the last 7 long: 27 floats.
    let cfg = GemmConfig::new(3, 7, 2).lds(2, 7, 10);
    let e = refused(&cfg, (6, 14, 26));
    assert!(
        matches!(
            e,
            GemmError::BufferTooSmall {
                arg: "c",
                len: 26,
                needs: 27
            }
        ),
        "{e}"
    );
    assert!(blas::plan(&cfg, (6, 14, 27)).is_ok());
    // A batch needs every product's matrices.
    let cfg = GemmConfig::new(2, 2, 2).batched(3, 4, 0, 4);
    let e = refused(&cfg, (11, 4, 12));
    assert!(
        matches!(
            e,
            GemmError::BufferTooSmall {
                arg: "a",
                needs: 12,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn sizes_beyond_the_kernels_32_bits_are_too_large() {
    let e = refused(&GemmConfig::new(1 << 32, 1, 1), (1 << 32, 1, 1 << 32));
    assert!(matches!(e, GemmError::TooLarge { arg: "m", .. }), "{e}");
    let e = refused(&GemmConfig::new(1, 1, 1).lds(1 << 32, 1, 1), (1, 1, 1));
    assert!(matches!(e, GemmError::TooLarge { arg: "lda", .. }), "{e}");
    let e = refused(
        &GemmConfig::new(1, 1, 1).batched(3, usize::MAX, 0, 1),
        (1, 1, 3),
    );
    assert!(
        matches!(
            e,
            GemmError::TooLarge {
                arg: "stride_a",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn products_of_a_batch_may_not_share_c() {
    let cfg = GemmConfig::new(4, 4, 4).batched(2, 16, 16, 8);
    let e = refused(&cfg, (32, 32, 32));
    assert!(
        matches!(
            e,
            GemmError::OverlappingBatch {
                stride: 8,
                span: 16
            }
        ),
        "{e}"
    );
    // Sharing A or B is allowed (a stride of 0 broadcasts it).
    assert!(blas::plan(&GemmConfig::new(4, 4, 4).batched(2, 0, 0, 16), (16, 16, 32)).is_ok());
}

#[test]
fn a_column_major_call_is_the_row_major_transpose_with_a_and_b_swapped() {
    let cfg = GemmConfig::new(3, 5, 7)
        .layout(Layout::ColMajor)
        .op_a(Op::T)
        .scalars(2.0, 0.5);
    let Plan {
        params,
        ops,
        swapped,
        ..
    } = blas::plan(&cfg, lens(&cfg)).unwrap();
    assert!(swapped);
    assert_eq!((params.m, params.n, params.k), (5, 3, 7));
    // The kernel's A is the caller's B (op N, column-major k x n: ld k).
    assert_eq!((params.lda, params.ldb, params.ldc), (7, 7, 3));
    assert_eq!((ops.a, ops.b), (Op::N, Op::T));
    assert_eq!((params.alpha, params.beta), (2.0, 0.5));
}

#[test]
fn buffer_lens_are_what_plan_demands() {
    let cfg = GemmConfig::new(7, 5, 3)
        .layout(Layout::ColMajor)
        .op_a(Op::T)
        .lds(4, 9, 8)
        .batched(3, 20, 50, 45);
    let (la, lb, lc) = cfg.buffer_lens();
    // Column-major: A (op T, stored k x m) is m = 7 columns of k = 3 (ld
    // 4); B (op N, k x n) is n = 5 columns of 3 (ld 9); C 5 columns of 7
    // (ld 8); then the batch's strides.
    assert_eq!(
        (la, lb, lc),
        (2 * 20 + 6 * 4 + 3, 2 * 50 + 4 * 9 + 3, 2 * 45 + 4 * 8 + 7)
    );
    assert!(blas::plan(&cfg, (la, lb, lc)).is_ok());
    for short in [(la - 1, lb, lc), (la, lb - 1, lc), (la, lb, lc - 1)] {
        assert!(matches!(
            blas::plan(&cfg, short),
            Err(GemmError::BufferTooSmall { .. })
        ));
    }
}

// ---- Algorithm choice ----

#[test]
fn auto_splits_k_only_when_the_tiles_leave_sms_idle() {
    // 512 x 512: 16 tiles of 128 x 128 for 132 SMs, K long: split.
    let small = auto(&GemmConfig::new(512, 512, 16_384));
    assert!(small.split_k > 1, "{small}");
    // 4096 x 4096: 1024 tiles: the GPU is full without a split.
    let large = auto(&GemmConfig::new(4096, 4096, 4096));
    assert_eq!(large.split_k, 1, "{large}");
    // Batched calls fill the GPU with products instead.
    let batch = auto(&GemmConfig::new(128, 128, 4096).batched(256, 0, 0, 128 * 128));
    assert_eq!(batch.split_k, 1, "{batch}");
}

#[test]
fn auto_takes_the_measured_choice_near_a_measured_call_and_the_model_elsewhere() {
    let table = blas::table_for("NVIDIA H200").expect("the repository has the H200's table");
    assert!(!table.is_empty());
    for e in &table {
        let mut cfg = GemmConfig::new(e.m, e.n, e.k);
        if e.batch > 1 {
            cfg = cfg.batched(e.batch, e.m * e.k, e.k * e.n, e.m * e.n);
        }
        match e.ops.as_str() {
            "tn" => cfg = cfg.op_a(Op::T),
            "nt" => cfg = cfg.op_b(Op::T),
            "tt" => cfg = cfg.op_a(Op::T).op_b(Op::T),
            _ => {}
        }
        let c = auto(&cfg);
        assert_eq!(
            (c.kernel.name, c.split_k),
            (e.kernel.as_str(), e.split_k),
            "{e:?}"
        );
        // A call 10 % larger in m still takes it.
        let near = GemmConfig {
            m: e.m + e.m / 10,
            ..cfg.clone()
        };
        let near = if near.op_a == Op::N {
            near.clone().lds(near.k, near.ldb, near.ldc)
        } else {
            near
        };
        let lens = lens(&near);
        if let Ok(plan) = blas::plan(&near, lens) {
            let c = choose_with(&plan, &candidates(), 132, 4800.0, Some(&table)).unwrap();
            assert_eq!(c.kernel.name, e.kernel, "{e:?} at m = {}", near.m);
        }
    }
    // Far from every measured call (and on a GPU without a table): the model.
    let far = GemmConfig::new(40, 7000, 90);
    let plan = blas::plan(&far, lens(&far)).unwrap();
    assert_eq!(
        choose_with(&plan, &candidates(), 132, 4800.0, Some(&table)),
        choose(&plan, &candidates(), 132, 4800.0)
    );
    assert!(blas::table_for("a GPU nobody measured").is_none());
}

/// The f32 candidates at the occupancy the random suite's seed-1 run
/// recorded (an H100's: registers and shared memory allow 4-12 blocks of
/// the small tiles per SM, not the 32 their threads would).
fn recorded_occupancy() -> Vec<Candidate> {
    let path = format!(
        "{}/../docs/random-suite/seed1.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the recorded run")).unwrap();
    let per_sm = |name: &str| {
        run["model_inputs"]["blocks_per_sm"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|e| (e[0].as_str() == Some(name)).then(|| e[1].as_u64().unwrap() as usize))
    };
    candidates()
        .into_iter()
        .filter_map(|c| {
            Some(Candidate {
                blocks_per_sm: per_sm(c.spec.name)?,
                ..c
            })
        })
        .collect()
}

#[test]
fn auto_takes_the_matrix_vector_kernel_for_a_column_of_c_only() {
    let occupied = recorded_occupancy();
    let model = |cfg: &GemmConfig| {
        let plan = blas::plan(cfg, lens(cfg)).unwrap();
        choose(&plan, &occupied, 132, 4800.0).unwrap()
    };
    // One column of C: A read once by every kernel, and step 16 wastes
    // no tile.
    let column = model(&GemmConfig::new(30_000, 1, 3_000));
    assert_eq!(column.kernel.name, "gemv_warp_8x1", "{column}");
    // A few rows over a long K (the sgemm example's last f32 call): step
    // 16 with K split, inside its one launch.
    let cfg = GemmConfig::new(25, 1, 40_520);
    let deep = model(&cfg);
    assert_eq!(deep.kernel.name, "gemv_warp_8x1", "{deep}");
    assert!(deep.split_k > 1, "{deep}");
    let plan = blas::plan(&cfg, lens(&cfg)).unwrap();
    let launches: Vec<_> = blas::steps(&plan, deep).list().collect();
    assert!(launches.len() == 1 && launches[0].in_launch, "{deep}");
    // Many columns: step 16 would read A once per column. (A batch of 8
    // products of 64^3 fills 4 of 132 SMs with the smallest tiles; the
    // model once charged that partial wave as a full one, 32 blocks per
    // SM, and chose step 16.)
    for cfg in [
        GemmConfig::new(64, 64, 64).batched(8, 64 * 64, 64 * 64, 64 * 64),
        GemmConfig::new(3_000, 64, 3_000),
        GemmConfig::new(40, 7_000, 90),
    ] {
        let c = model(&cfg);
        assert_ne!(c.kernel.step, 16, "{cfg:?}: {c}");
    }
}

#[test]
fn auto_takes_the_decode_kernel_for_few_rows_of_a_times_b_transposed() {
    let model = |cfg: &GemmConfig| {
        let plan = blas::plan(cfg, lens(cfg)).unwrap();
        choose(&plan, &candidates(), 132, 4800.0).unwrap()
    };
    // A decode step (one token, four sequences, sixteen, 24) and an LM
    // head; a column-major call with A transposed is the same row-major
    // NT call. Up to STAGED_DECODE_ROWS rows step 30's instance of the
    // fewest rows that hold them, above step 28.
    let rows = blas::STAGED_DECODE_ROWS;
    for (cfg, kernel) in [
        (GemmConfig::new(1, 4096, 11008), "decode_staged_8x32"),
        (GemmConfig::new(4, 14336, 4096), "decode_staged_8x32"),
        (GemmConfig::new(8, 4096, 4096), "decode_staged_8x32"),
        (GemmConfig::new(9, 4096, 4096), "decode_staged_16x32"),
        (GemmConfig::new(13, 38964, 4096), "decode_staged_16x32"),
        (GemmConfig::new(rows, 4096, 4096), "decode_staged_16x32"),
        (GemmConfig::new(rows + 1, 4096, 4096), "decode_nt_8x16"),
        (
            GemmConfig::new(blas::DECODE_ROWS, 4096, 4096),
            "decode_nt_8x16",
        ),
    ] {
        let cfg = cfg.op_b(Op::T);
        let c = model(&cfg);
        assert_eq!(c.kernel.name, kernel, "{cfg:?}: {c}");
    }
    let col_major = GemmConfig::new(4096, 2, 4096)
        .op_a(Op::T)
        .layout(Layout::ColMajor);
    assert_eq!(model(&col_major).kernel.name, "decode_staged_8x32");
    // B as it is stored (the decode kernels read B^T), K too short for
    // step 28's vector loop, or more rows of A: no decode kernel.
    for cfg in [
        GemmConfig::new(4, 4096, 4096),
        GemmConfig::new(2, 7812, 72)
            .op_b(Op::T)
            .batched(7, 2 * 72, 7812 * 72, 2 * 7812),
        GemmConfig::new(blas::DECODE_ROWS + 1, 4096, 4096).op_b(Op::T),
    ] {
        let c = model(&cfg);
        assert!(!matches!(c.kernel.step, 28 | 30), "{cfg:?}: {c}");
    }
    // A narrow C: split until every SM has a block (367 columns are 12
    // blocks of 32: 11 slices, rounded up to the model's powers of two);
    // 4096 columns (128 blocks) take two slices, 14336 none.
    let narrow = model(&GemmConfig::new(1, 367, 3555).op_b(Op::T));
    assert_eq!((narrow.kernel.step, narrow.split_k), (30, 16), "{narrow}");
    let wide = model(&GemmConfig::new(1, 4096, 11008).op_b(Op::T));
    assert_eq!(wide.split_k, 2, "{wide}");
    let wider = model(&GemmConfig::new(1, 14336, 4096).op_b(Op::T));
    assert_eq!(wider.split_k, 1, "{wider}");
    // K allowing 15 slices of `Model::min_slice` (a cap that is no power
    // of two) where 100 columns (4 blocks of 32) want 64: the decode split
    // is capped at 8, one the model tries.
    assert_eq!(blas::MODEL.min_slice, 64);
    let capped = model(&GemmConfig::new(1, 100, 1000).op_b(Op::T));
    assert_eq!((capped.kernel.step, capped.split_k), (30, 8), "{capped}");
    // No SMs reported: still a choice, not a division by zero.
    let cfg = GemmConfig::new(1, 367, 1000).op_b(Op::T);
    let plan = blas::plan(&cfg, lens(&cfg)).unwrap();
    assert!(choose(&plan, &candidates(), 0, 4800.0).is_some());
}

#[test]
fn auto_takes_the_decode_kernel_for_a_batch_over_a_deep_k() {
    let model = |cfg: &GemmConfig| {
        let plan = blas::plan(cfg, lens(cfg)).unwrap();
        choose(&plan, &candidates(), 132, 4800.0).unwrap()
    };
    let batch = |m: usize, n: usize, k: usize, count: usize| {
        GemmConfig::new(m, n, k)
            .op_b(Op::T)
            .batched(count, m * k, n * k, m * n)
    };
    // The random suite's 28 products of 14 x 97 x 8283 (seed 6), and the
    // least K that takes step 28 in a batch.
    for cfg in [
        batch(14, 97, 8283, 28),
        batch(2, 4096, blas::DECODE_BATCH_MIN_K, 4),
    ] {
        let c = model(&cfg);
        assert_eq!((c.kernel.step, c.split_k), (28, 1), "{cfg:?}: {c}");
    }
    // Shallower, it does not (a single product does from DECODE_MIN_K).
    let shallow = batch(2, 4096, blas::DECODE_BATCH_MIN_K - 32, 4);
    assert_ne!(model(&shallow).kernel.step, 28, "{shallow:?}");
    let single = GemmConfig::new(2, 4096, blas::DECODE_BATCH_MIN_K - 32).op_b(Op::T);
    assert_eq!(model(&single).kernel.step, 30, "{single:?}");
}

#[test]
fn auto_counts_single_value_stores_of_c_rows_off_16_bytes() {
    // The random suite's 1764 x 3705 x 13 (seed 1): C's rows are 3705
    // floats apart, so step 10 stores one value at a time across rows,
    // and step 29 (whole lines) ran 2.3x faster. The model's
    // `scalar_store` is what sends it there.
    let occupied = recorded_occupancy();
    let cfg = GemmConfig::new(1764, 3705, 13);
    let plan = blas::plan(&cfg, lens(&cfg)).unwrap();
    let with = |model: &blas::Model| choose_by(model, &plan, &occupied, 132, 3352.0).unwrap();
    assert_eq!(with(&blas::MODEL).kernel.step, 29, "{}", with(&blas::MODEL));
    let without = blas::Model {
        scalar_store: 1.0,
        ..blas::MODEL
    };
    assert_eq!(with(&without).kernel.step, 10, "{}", with(&without));
}

#[test]
fn auto_reads_transposed_operands_with_a_transposed_kernel() {
    for (op_a, op_b) in [(Op::T, Op::N), (Op::N, Op::T), (Op::T, Op::T)] {
        let c = auto(&GemmConfig::new(256, 256, 256).op_a(op_a).op_b(op_b));
        assert_eq!((c.kernel.ops.a, c.kernel.ops.b), (op_a, op_b), "{c}");
    }
    // Column-major N x N is row-major N x N with A and B swapped.
    let c = auto(&GemmConfig::new(256, 256, 256).layout(Layout::ColMajor));
    assert_eq!((c.kernel.ops.a, c.kernel.ops.b), (Op::N, Op::N), "{c}");
}

// ---- Every API path on the emulator ----

/// Scalars: (1, 0) with NaN in C, a general pair, alpha 0 (A and B not
/// read), and both 0 (zeros, C not read).
const SCALARS: &[(f32, f32)] = &[(1.0, 0.0), (0.5, -2.0), (0.0, 0.5), (0.0, 0.0)];

#[test]
fn every_op_layout_and_scalar_pair_matches_the_reference_on_the_emulator() {
    let (m, n, k) = (19, 9, 13);
    for layout in [Layout::RowMajor, Layout::ColMajor] {
        for op_a in [Op::N, Op::T] {
            for op_b in [Op::N, Op::T] {
                for &(alpha, beta) in SCALARS {
                    let cfg = GemmConfig::new(m, n, k)
                        .layout(layout)
                        .op_a(op_a)
                        .op_b(op_b)
                        .scalars(alpha, beta);
                    emulate_and_check(&cfg, auto(&cfg));
                }
            }
        }
    }
}

#[test]
fn padded_leading_dimensions_and_strided_batches_match_the_reference_on_the_emulator() {
    let (m, n, k) = (17, 6, 11);
    for layout in [Layout::RowMajor, Layout::ColMajor] {
        for (op_a, op_b) in [(Op::N, Op::N), (Op::T, Op::T)] {
            let dense = GemmConfig::new(m, n, k)
                .layout(layout)
                .op_a(op_a)
                .op_b(op_b);
            // Leading dimensions 3 beyond the rows (not multiples of 4:
            // the kernels take their guarded paths), then a batch of 3
            // with gaps between the products.
            let padded = dense
                .clone()
                .lds(dense.lda + 3, dense.ldb + 3, dense.ldc + 3);
            let (la, lb, lc) = lens(&padded);
            let batch = padded
                .clone()
                .scalars(1.5, 0.25)
                .batched(3, la + 5, lb + 1, lc + 2);
            for cfg in [padded, batch] {
                emulate_and_check(&cfg, auto(&cfg));
            }
        }
    }
}

#[test]
fn aligned_leading_dimensions_take_the_vector_path_and_match() {
    // 128 x 128 blocks inside C, K a multiple of BK, leading dimensions
    // multiples of 4: the interior fast path runs.
    let cfg = GemmConfig::new(128, 128, 32)
        .lds(36, 132, 136)
        .scalars(1.0, 1.0);
    emulate_and_check(&cfg, kernel("tuned_128x128x16_w32x64", 1));
    // Every tile of the transposed instances, each block inside C.
    for tile in [
        "128x128x16_w32x64",
        "64x64x16_w32x32",
        "32x64x16_w16x32",
        "32x32x16_w16x32",
    ] {
        for (op_a, op_b, ops) in [
            (Op::T, Op::N, "tn"),
            (Op::N, Op::T, "nt"),
            (Op::T, Op::T, "tt"),
        ] {
            let cfg = GemmConfig::new(128, 128, 32).op_a(op_a).op_b(op_b);
            emulate_and_check(&cfg, kernel(&format!("tuned_{tile}_{ops}"), 1));
        }
    }
}

/// Step 29 by name in every layout, as the library runs it: leading
/// dimensions that are not multiples of 4 (scalar stores), then aligned
/// ones with C's tiles inside C (128-bit stores), a batch of 3 with gaps
/// between the products, beta not 0, K of one pass and of several.
#[test]
fn the_small_k_kernel_matches_in_every_layout_padded_and_batched_on_the_emulator() {
    for (op_a, op_b) in [
        (Op::N, Op::N),
        (Op::T, Op::N),
        (Op::N, Op::T),
        (Op::T, Op::T),
    ] {
        let suffix = match (op_a, op_b) {
            (Op::N, Op::N) => String::new(),
            _ => format!(
                "_{}{}",
                if op_a == Op::T { "t" } else { "n" },
                if op_b == Op::T { "t" } else { "n" }
            ),
        };
        let name = format!("small_k_64x128{suffix}");
        for (m, n, k) in [(70, 133, 5), (64, 256, 19)] {
            let dense = GemmConfig::new(m, n, k)
                .op_a(op_a)
                .op_b(op_b)
                .scalars(1.5, 0.25);
            let padded = dense
                .clone()
                .lds(dense.lda + 3, dense.ldb + 3, dense.ldc + 3);
            let up = |ld: usize| ld.next_multiple_of(4) + 4;
            let aligned = dense
                .clone()
                .lds(up(dense.lda), up(dense.ldb), up(dense.ldc));
            let (la, lb, lc) = lens(&padded);
            let batch = padded.clone().batched(3, la + 5, lb + 1, lc + 2);
            for cfg in [padded, aligned, batch] {
                emulate_and_check(&cfg, kernel(&name, 1));
            }
        }
    }
}

#[test]
fn split_k_matches_the_reference_on_the_emulator() {
    // K = 200 in 3 slices of 96, 96 and 8; and in more slices than fit
    // (7 asked, 4 of 64 ... take work).
    for (op_a, op_b) in [(Op::N, Op::N), (Op::T, Op::N), (Op::N, Op::T)] {
        let cfg = GemmConfig::new(9, 21, 200)
            .op_a(op_a)
            .op_b(op_b)
            .scalars(2.0, -1.0);
        let name = match (op_a, op_b) {
            (Op::N, Op::N) => "tuned_64x128x8_w32x64",
            (Op::T, Op::N) => "tuned_128x128x16_w32x64_tn",
            _ => "tuned_128x128x16_w32x64_nt",
        };
        for split in [3, 7] {
            emulate_and_check(&cfg, kernel(name, split));
        }
    }
}

/// Step 16's split entry (`kernels_gpu::split`): one launch, the same
/// product as the reference with beta, a batch of one, rows off the
/// 8-row tile, a leading dimension of A off 16 bytes (the scalar loop), a
/// column-major call (the kernels compute C^T), and every activation,
/// bias and scale of the fused epilogue; the same bits on every run.
#[test]
fn split_k_inside_one_launch_matches_the_reference_on_the_emulator() {
    let choice = |split| kernel("gemv_warp_8x1", split);
    let plain = GemmConfig::new(37, 1, 1000).scalars(2.0, -1.0);
    let plan = blas::plan(&plain, lens(&plain)).unwrap();
    let steps = blas::steps(&plan, choice(8));
    let launches: Vec<_> = steps.list().collect();
    assert_eq!(launches.len(), 1, "one launch");
    assert!(launches[0].in_launch && launches[0].batch == 8);
    assert_eq!(steps.workspace, 8 * 37, "a plane per slice");
    let padded = GemmConfig::new(21, 1, 700).lds(703, 1, 1).scalars(0.5, 0.0);
    let column = GemmConfig::new(1, 45, 333).layout(Layout::ColMajor);
    for cfg in [&plain, &padded, &column] {
        for split in [2, 5, 8, 64] {
            emulate_and_check(cfg, choice(split));
        }
    }
    for i in 0..6 {
        emulate_and_check_fused(&plain, choice(8), &rotated(&plain, i));
    }
    let (la, lb, lc) = lens(&plain);
    let (a, b, c) = (values(la, 4), values(lb, 5), values(lc, 6));
    let first = blas::emulate(&plain, choice(8), &a, &b, &c)
        .unwrap()
        .unwrap();
    let again = blas::emulate(&plain, choice(8), &a, &b, &c)
        .unwrap()
        .unwrap();
    assert!(
        first
            .iter()
            .zip(&again)
            .all(|(x, y)| x.to_bits() == y.to_bits())
    );
}

#[test]
fn split_k_gives_the_same_bits_on_every_run() {
    let cfg = GemmConfig::new(8, 8, 256);
    let (la, lb, lc) = lens(&cfg);
    let (a, b, c) = (values(la, 4), values(lb, 5), vec![0.0; lc]);
    let choice = kernel("tuned_64x128x8_w32x64", 4);
    let first = blas::emulate(&cfg, choice, &a, &b, &c).unwrap().unwrap();
    for _ in 0..3 {
        let again = blas::emulate(&cfg, choice, &a, &b, &c).unwrap().unwrap();
        assert!(
            first
                .iter()
                .zip(&again)
                .all(|(x, y)| x.to_bits() == y.to_bits())
        );
    }
}

#[test]
fn the_naive_kernel_runs_every_call_it_is_named_for() {
    let cfg = GemmConfig::new(5, 7, 3)
        .lds(4, 9, 8)
        .scalars(-1.0, 2.0)
        .batched(2, 40, 40, 40)
        .algorithm(Algorithm::Kernel {
            name: "naive".into(),
            split_k: 1,
        });
    emulate_and_check(&cfg, kernel("naive", 1));
}

/// Every op, layout and scalar pair of every 16-bit mix, as `Auto` runs
/// it on an Ampere GPU (step 21), on the emulator: odd sizes, so every
/// copy is guarded and rows are not 16-byte aligned.
#[test]
fn every_16_bit_op_layout_and_scalar_pair_matches_the_reference_on_the_emulator() {
    let (m, n, k) = (19, 9, 13);
    for storage in STORAGES_16 {
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            for op_a in [Op::N, Op::T] {
                for op_b in [Op::N, Op::T] {
                    for &(alpha, beta) in SCALARS {
                        let cfg = GemmConfig::new(m, n, k)
                            .layout(layout)
                            .op_a(op_a)
                            .op_b(op_b)
                            .scalars(alpha, beta);
                        emulate_and_check(&cfg, auto_ampere(&cfg, storage));
                    }
                }
            }
        }
    }
}

/// 16-bit calls with rows 16-byte aligned (the `cp.async` path, interior
/// blocks included), padded leading dimensions, and strided batches.
#[test]
fn aligned_padded_and_batched_16_bit_calls_match_the_reference_on_the_emulator() {
    for storage in [STORAGES_16[0], STORAGES_16[3]] {
        for (op_a, op_b) in [
            (Op::N, Op::N),
            (Op::T, Op::N),
            (Op::N, Op::T),
            (Op::T, Op::T),
        ] {
            let aligned = GemmConfig::new(128, 128, 128)
                .op_a(op_a)
                .op_b(op_b)
                .scalars(1.0, 1.0);
            emulate_and_check(&aligned, auto_ampere(&aligned, storage));
            let dense = GemmConfig::new(17, 24, 40).op_a(op_a).op_b(op_b);
            let padded = dense
                .clone()
                .lds(dense.lda + 8, dense.ldb + 3, dense.ldc + 1);
            let (la, lb, lc) = lens(&padded);
            let batch = padded
                .clone()
                .scalars(1.5, 0.25)
                .batched(3, la + 8, lb + 1, lc + 2);
            for cfg in [padded, batch] {
                emulate_and_check(&cfg, auto_ampere(&cfg, storage));
            }
        }
    }
}

// ---- Random calls ----

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![Just(Op::N), Just(Op::T)]
}

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::RowMajor), Just(Layout::ColMajor)]
}

prop_compose! {
    fn call()(
        (m, n, k) in (1usize..40, 1usize..40, 1usize..70),
        layout in layout(),
        (op_a, op_b) in (op(), op()),
        (pad_a, pad_b, pad_c) in (0usize..6, 0usize..6, 0usize..6),
        alpha in prop_oneof![Just(0.0f32), -2.0f32..2.0],
        beta in prop_oneof![Just(0.0f32), Just(1.0f32), -2.0f32..2.0],
        (batch, gap) in (1usize..4, 0usize..9),
    ) -> GemmConfig {
        let dense = GemmConfig::new(m, n, k).layout(layout).op_a(op_a).op_b(op_b);
        let cfg = dense
            .clone()
            .lds(dense.lda + pad_a, dense.ldb + pad_b, dense.ldc + pad_c)
            .scalars(alpha, beta);
        let (la, lb, lc) = lens(&cfg);
        cfg.batched(batch, la + gap, lb + gap, lc + gap)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_calls_match_the_reference_on_the_emulator(cfg in call(), split in 1usize..4) {
        let mut choice = auto(&cfg);
        if cfg.batch == 1 && split <= cfg.k {
            choice.split_k = split;
        }
        emulate_and_check(&cfg, choice);
    }

    #[test]
    fn random_16_bit_calls_match_the_reference_on_the_emulator(
        cfg in call(),
        storage in prop::sample::select(STORAGES_16.to_vec()),
    ) {
        emulate_and_check(&cfg, auto_ampere(&cfg, storage));
    }
}

/// The reference's allowance for results below C's smallest normal: each
/// format's subnormal spacing is its smallest positive value.
#[test]
fn subnormal_spacing_is_each_formats_smallest_positive_value() {
    let smallest = [
        (Elem::F32, f32::from_bits(1) as f64),
        (Elem::Bf16, half::bf16::from_bits(1).to_f64()),
        (Elem::F16, half::f16::from_bits(1).to_f64()),
        (Elem::E4m3, float8::F8E4M3::from_bits(1).to_f64()),
        (Elem::E5m2, float8::F8E5M2::from_bits(1).to_f64()),
    ];
    for (elem, want) in smallest {
        assert_eq!(elem.subnormal_spacing(), want, "{elem:?}");
    }
}

// ---- Fused epilogues ----

/// Every activation with a bias per row and per column and scales, on
/// every op and layout, with beta 0 (C unread) and not, as `Auto` runs
/// the call, on the emulator against the f64 reference.
#[test]
fn every_epilogue_op_and_layout_matches_the_reference_on_the_emulator() {
    let (m, n, k) = (19, 9, 13);
    let mut i = 0;
    for activation in Activation::ALL {
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            for (op_a, op_b) in [
                (Op::N, Op::N),
                (Op::T, Op::N),
                (Op::N, Op::T),
                (Op::T, Op::T),
            ] {
                let beta = if i % 2 == 0 { 0.0 } else { -0.5 };
                let cfg = GemmConfig::new(m, n, k)
                    .layout(layout)
                    .op_a(op_a)
                    .op_b(op_b)
                    .scalars(1.5, beta);
                let bias = [Per::Row, Per::Column][i % 2];
                let scale = [None, Some(Per::Row), Some(Per::Column)][i % 3];
                emulate_and_check_fused(
                    &cfg,
                    auto(&cfg),
                    &epilogue(&cfg, activation, Some(bias), scale, i as u64),
                );
                i += 1;
            }
        }
    }
}

/// A column-major call runs as the row-major transpose, where C's rows
/// are columns: a bias per row of the caller's C must be read per column
/// by the kernel. With a bias that differs along the rows only, reading
/// it along the other dimension fails the check (and a square C would
/// hide nothing: m and n differ).
#[test]
fn a_column_major_call_turns_a_bias_per_row_into_one_per_column() {
    let cfg = GemmConfig::new(23, 10, 7).layout(Layout::ColMajor);
    let plan = blas::plan(&cfg, lens(&cfg)).unwrap();
    assert!(plan.swapped, "a column-major call runs transposed");
    let bias: Vec<f32> = (0..cfg.m).map(|i| 100.0 * i as f32).collect();
    let ep = EmuEpilogue {
        activation: Activation::None,
        bias: Some((bias, Per::Row)),
        scale: None,
    };
    emulate_and_check_fused(&cfg, auto(&cfg), &ep);
    // The same vector read per column would be a different product.
    let (la, lb, lc) = lens(&cfg);
    let (a, b, c) = (values(la, 1), values(lb, 2), vec![0.0; lc]);
    let after = blas::emulate_fused(&cfg, auto(&cfg), (&a, &b, &c), &ep)
        .unwrap()
        .unwrap();
    let mut wrong = ep.clone();
    wrong.bias = Some(((0..cfg.m).map(|i| 100.0 * i as f32).collect(), Per::Column));
    let elems = auto(&cfg).kernel.elems;
    let v = check_gemm_fused(&cfg, (&a, &b), (&c, &after), elems, (usize::MAX, 0), &wrong);
    assert!(!v.passed, "a bias per row read per column should not match");
}

/// Split-K's partial sums carry no epilogue and the reduction applies it
/// once: with GELU (erf) and scales, applying it to each slice, or
/// twice, would not match.
#[test]
fn split_k_applies_the_epilogue_once_after_the_slices_are_added() {
    for (op_a, op_b, name) in [
        (Op::N, Op::N, "tuned_64x128x8_w32x64"),
        (Op::N, Op::T, "tuned_128x128x16_w32x64_nt"),
    ] {
        let cfg = GemmConfig::new(9, 21, 200)
            .op_a(op_a)
            .op_b(op_b)
            .scalars(0.5, 1.0);
        let ep = epilogue(
            &cfg,
            Activation::GeluErf,
            Some(Per::Column),
            Some(Per::Row),
            7,
        );
        for split in [1, 3] {
            emulate_and_check_fused(&cfg, kernel(name, split), &ep);
        }
    }
}

/// alpha = 0 runs the epilogue alone (`C = act(beta C + bias)`, A and B
/// unread), f32 and 16-bit C.
#[test]
fn alpha_zero_still_applies_the_epilogue() {
    let cfg = GemmConfig::new(17, 12, 5).scalars(0.0, 2.0);
    let ep = epilogue(&cfg, Activation::Silu, Some(Per::Row), None, 9);
    emulate_and_check_fused(&cfg, auto(&cfg), &ep);
    let storage = STORAGES_16[1];
    emulate_and_check_fused(&cfg, auto_ampere(&cfg, storage), &ep);
}

/// Every kernel the emulator runs, f32 and 16-bit, by name, with an
/// epilogue from the rotation (every activation, bias per row and per
/// column, scales), at a size with edge tiles in both dimensions.
#[test]
fn every_emulated_kernel_applies_the_epilogue() {
    let mut i = 0;
    for spec in registry::all() {
        if spec.emulated().is_err()
            || spec.elems.storage().scaled()
            || spec.name == kernels_gpu::k14_split_k::REDUCE.name
        {
            continue;
        }
        let cfg = GemmConfig::new(37, 41, 24)
            .op_a(spec.ops.a)
            .op_b(spec.ops.b)
            .scalars(1.0, 0.5);
        let choice = Choice {
            kernel: spec,
            split_k: 1,
        };
        emulate_and_check_fused(&cfg, choice, &rotated(&cfg, i));
        i += 1;
    }
    assert!(i > 20, "only {i} kernels emulated");
}

/// Every op and layout of every 16-bit mix with an epilogue, as `Auto`
/// runs it on an Ampere GPU (step 21), C rounded to its type after the
/// activation.
#[test]
fn every_16_bit_mix_applies_the_epilogue_on_the_emulator() {
    let (m, n, k) = (19, 9, 13);
    let mut i = 0;
    for storage in STORAGES_16 {
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            for (op_a, op_b) in [(Op::N, Op::N), (Op::T, Op::T)] {
                let cfg = GemmConfig::new(m, n, k)
                    .layout(layout)
                    .op_a(op_a)
                    .op_b(op_b)
                    .scalars(1.0, if i % 2 == 0 { 0.0 } else { 1.0 });
                emulate_and_check_fused(&cfg, auto_ampere(&cfg, storage), &rotated(&cfg, i));
                i += 1;
            }
        }
    }
}

/// An epilogue vector shorter than its dimension of C is a typed error
/// that names it, before any launch.
#[test]
fn a_short_epilogue_vector_is_named() {
    let cfg = GemmConfig::new(8, 6, 4);
    let (la, lb, lc) = lens(&cfg);
    let (a, b, c) = (values(la, 1), values(lb, 2), values(lc, 3));
    let short = EmuEpilogue {
        activation: Activation::Relu,
        bias: Some((vec![1.0; 7], Per::Row)),
        scale: None,
    };
    let err = blas::emulate_fused(&cfg, auto(&cfg), (&a, &b, &c), &short).unwrap_err();
    assert!(
        matches!(
            err,
            GemmError::EpilogueTooSmall {
                what: "bias",
                len: 7,
                needs: 8,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("pass one f32 per row of C"),
        "{err}"
    );
    let scale = EmuEpilogue {
        activation: Activation::None,
        bias: None,
        scale: Some((vec![1.0; 5], Per::Column)),
    };
    let err = blas::emulate_fused(&cfg, auto(&cfg), (&a, &b, &c), &scale).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("the epilogue's scale holds 5 f32s"),
        "{err}"
    );
}

/// A one-column B stored transposed is B as it is with `ldb = 1`, and a
/// one-row A stored transposed with `lda = 1` is A as it is
/// (`Plan::read_as`): a column-major `1 x n` call with A transposed is,
/// row-major, `n x 1` with B transposed, and `Auto` reads it as the GEMV
/// of step 16; a named kernel of either layout is taken, one that would
/// read a matrix the other way round is refused; and each runs right on
/// the emulator, padded, batched and with split-K.
#[test]
fn a_vector_operand_stored_transposed_is_read_as_it_is() {
    let gemv = GemmConfig::new(1, 187, 372)
        .layout(Layout::ColMajor)
        .op_a(Op::T)
        .scalars(1.5, 0.25);
    let plan = blas::plan(&gemv, lens(&gemv)).unwrap();
    assert_eq!(plan.ops, Ops::NT);
    assert_eq!(plan.layouts().collect::<Vec<_>>(), [Ops::NT, Ops::NN]);
    assert_eq!(auto(&gemv).kernel.name, "gemv_warp_8x1");
    let read = plan
        .read_as(registry::find("gemv_warp_8x1").unwrap())
        .unwrap();
    assert_eq!((read.ops, read.params.ldb), (Ops::NN, 1));
    for name in ["gemv_warp_8x1", "tuned_32x32x16_w16x32_nt"] {
        blas::choose_named(&plan, name, 1).expect(name);
    }
    let err = blas::choose_named(&plan, "tuned_32x32x16_w16x32_tn", 1).expect_err("A is 187 x 372");
    assert!(err.to_string().contains("reads A T and B N"), "{err}");

    let padded = gemv.clone().lds(372 + 3, 372 + 5, 1 + 2);
    let (la, lb, lc) = lens(&padded);
    let batch = padded.clone().batched(3, la + 1, lb + 7, lc);
    for cfg in [&gemv, &padded, &batch] {
        for name in [
            "gemv_warp_8x1",
            "tuned_32x32x16_w16x32_nt",
            "small_k_64x128",
        ] {
            emulate_and_check(cfg, kernel(name, 1));
        }
    }
    emulate_and_check(&padded, kernel("gemv_warp_8x1", 3));

    // One row of A stored transposed: A as it is only when its values
    // are consecutive (lda = 1); never the other way round.
    let t_one = GemmConfig::new(1, 70, 300)
        .op_a(Op::T)
        .lds(1, 70, 70)
        .scalars(-0.5, 0.0);
    let plan = blas::plan(&t_one, lens(&t_one)).unwrap();
    assert_eq!(plan.layouts().collect::<Vec<_>>(), [Ops::TN, Ops::NN]);
    emulate_and_check(&t_one, kernel("small_k_64x128", 1));
    emulate_and_check(&t_one, kernel("tuned_32x32x16_w16x32", 2));
    let t_strided = GemmConfig::new(1, 70, 300).op_a(Op::T).lds(3, 70, 70);
    let plan = blas::plan(&t_strided, lens(&t_strided)).unwrap();
    assert_eq!(plan.layouts().count(), 1);
    blas::choose_named(&plan, "small_k_64x128", 1).expect_err("A's values 3 apart");
    let row = GemmConfig::new(1, 70, 300);
    let plan = blas::plan(&row, lens(&row)).unwrap();
    assert_eq!(plan.layouts().count(), 1);
    blas::choose_named(&plan, "tuned_32x32x16_w16x32_tn", 1).expect_err("A as it is");
}

/// A batch that shares B, whose products' As and Cs follow each other
/// row after row, is one product of `batch * m` rows (`Plan::folded`);
/// so is a column-major batch that shares A with consecutive columns of
/// B and C. Anything else stays a batch: a gap between products, A read
/// transposed, B not shared, an epilogue vector along the rows, FP8
/// block scales, rows beyond 32 bits.
#[test]
fn a_batch_that_shares_b_folds_into_one_product() {
    let (m, n, k, batch) = (40, 96, 72, 6);
    // Rows of A and C padded: the products still follow each other.
    let row = GemmConfig::new(m, n, k)
        .lds(k + 3, n, n + 5)
        .scalars(1.5, -0.5)
        .batched(batch, m * (k + 3), 0, m * (n + 5));
    let plan = blas::plan(&row, lens(&row)).unwrap().folded(false);
    assert_eq!((plan.params.m, plan.batch), ((m * batch) as u32, 1));
    assert_eq!((plan.params.stride_a, plan.params.stride_c), (0, 0));
    // Column-major: the caller's A (m x k) is shared, B's (k x n) and C's
    // (m x n) products are consecutive columns.
    let col = GemmConfig::new(m, n, k)
        .layout(Layout::ColMajor)
        .batched(batch, 0, n * k, n * m);
    let plan = blas::plan(&col, lens(&col)).unwrap().folded(false);
    assert_eq!((plan.params.m, plan.batch), ((n * batch) as u32, 1));

    let stays = |cfg: &GemmConfig, rows_vector: bool| {
        let plan = blas::plan(cfg, lens(cfg)).unwrap();
        assert_eq!(plan.folded(rows_vector), plan, "{cfg:?}");
    };
    let plain = GemmConfig::new(m, n, k);
    stays(&plain.clone().batched(batch, m * k + 1, 0, m * n), false);
    stays(&plain.clone().batched(batch, m * k, 0, m * n + 4), false);
    stays(&plain.clone().batched(batch, m * k, k * n, m * n), false);
    stays(
        &plain.clone().op_a(Op::T).batched(batch, m * k, 0, m * n),
        false,
    );
    stays(&plain.clone().batched(batch, m * k, 0, m * n), true);
    stays(&col.clone().op_b(Op::T), false);
    // 2^20 rows in each of 2^13 products: 2^33 rows, beyond 32 bits.
    stays(
        &GemmConfig::new(1 << 20, 1, 1).batched(1 << 13, 1 << 20, 0, 1 << 20),
        false,
    );
    let fp8 = Storage::new(Elem::E4m3, Elem::E4m3, Elem::Bf16);
    let nt = GemmConfig::new(128, 128, 256)
        .op_b(Op::T)
        .batched(4, 128 * 256, 0, 128 * 128);
    let per_tensor = blas::plan_for(&nt, lens(&nt), fp8).unwrap();
    assert_eq!(per_tensor.folded(false).batch, 1);
    let blocks = blas::plan_for(&nt, lens(&nt), fp8.with_scaling(Scaling::Blocks)).unwrap();
    assert_eq!(
        blocks.folded(false),
        blocks,
        "A's block scales are one product's"
    );
}

/// A folded batch computes what the batch does, on a kernel that takes
/// one product at a time (split-K), in both layouts; with a bias per row
/// it stays a batch, and every product reads the bias from its first row.
#[test]
fn a_folded_batch_matches_the_reference_on_the_emulator() {
    let (m, n, k, batch) = (20, 33, 150, 5);
    let row = GemmConfig::new(m, n, k)
        .scalars(2.0, -1.0)
        .batched(batch, m * k, 0, m * n);
    let col = GemmConfig::new(m, n, k)
        .layout(Layout::ColMajor)
        .scalars(0.5, 0.25)
        .batched(batch, 0, n * k, n * m);
    for cfg in [&row, &col] {
        let batch_plan = blas::plan(cfg, lens(cfg)).unwrap();
        let name = "tuned_64x128x8_w32x64";
        let e = blas::choose_named(&batch_plan, name, 3).expect_err("split-K takes one product");
        assert!(e.to_string().contains("one product"), "{e}");
        let choice = blas::choose_named(&batch_plan.folded(false), name, 3).expect("folded");
        emulate_and_check(cfg, choice);
        emulate_and_check(cfg, kernel("tuned_32x32x16_w16x32", 1));
    }
    // A bias per row of each product (per column of the caller's C for
    // the column-major call, which the swap turns into the plan's rows).
    let ep = epilogue(&row, Activation::Relu, Some(Per::Row), None, 9);
    emulate_and_check_fused(&row, kernel("tuned_32x32x16_w16x32", 1), &ep);
    let ep = epilogue(
        &col,
        Activation::None,
        Some(Per::Column),
        Some(Per::Row),
        11,
    );
    emulate_and_check_fused(&col, kernel("tuned_32x32x16_w16x32", 1), &ep);
}
