//! A product cut over devices (`rust_gemm::multi`) without a GPU: every
//! split's parts run on the CPU emulator, each on the buffers its device
//! would hold (cut from the whole operands by `Part::a_of`, `b_of`,
//! `c_of`), and the assembled C is checked against the f64 reference of
//! the whole call. The parts on GPUs (one H200, two streams as two
//! devices): tests/tests/gpu.rs.

use harness::reference::check_gemm;
use kernels_gpu::elem::{Elems, Storage};
use rust_gemm::blas::{self, Candidate, Compute, GemmConfig, GemmError, Layout, Op};
use rust_gemm::multi::{MultiGemm, Part, SHARD_ALIGN, Split, split, sum_partials};
use tests::values;

/// `cfg` on the emulator with the kernel `Auto`'s model takes for it.
fn emulated(cfg: &GemmConfig, a: &[f32], b: &[f32], c: &[f32]) -> Vec<f32> {
    let plan = blas::plan(cfg, (a.len(), b.len(), c.len())).expect("a valid part");
    let candidates: Vec<Candidate> = blas::auto_candidates(plan.ops, Storage::F32, Compute::Fp32)
        .map(|spec| Candidate {
            spec,
            blocks_per_sm: 1,
        })
        .collect();
    let choice = blas::choose(&plan, &candidates, 132, 4800.0).expect("a kernel");
    match blas::emulate(cfg, choice, a, b, c) {
        Ok(Ok(c)) => c,
        Ok(Err(report)) => panic!("{choice} on {cfg:?}: the emulator found\n{report}"),
        Err(e) => panic!("{choice} on {cfg:?}: {e}"),
    }
}

/// `cfg` cut `how` over `devices`, each part emulated on its own buffers,
/// C assembled as the caller would (each shard placed; a K split's
/// partials summed in device order).
fn split_and_emulate(cfg: &GemmConfig, devices: usize, how: Split) -> (Vec<Part>, Vec<f32>) {
    let (la, lb, lc) = cfg.buffer_lens();
    let (a, b, before) = (values(la, 1), values(lb, 2), values(lc, 3));
    let parts = split(cfg, devices, how).expect("a plan");
    let mut after = before.clone();
    let mut partials = Vec::new();
    for part in &parts {
        let (pa, pb) = (part.a_of(&a).unwrap(), part.b_of(&b).unwrap());
        let pc = part.c_of(&before, 0.0).unwrap();
        assert_eq!(
            (pa.len(), pb.len(), pc.len()),
            part.cfg.buffer_lens(),
            "{part:?}"
        );
        let out = emulated(&part.cfg, &pa, &pb, &pc);
        match how {
            Split::K => partials.push(out),
            _ => part.place(&out, &mut after).unwrap(),
        }
    }
    if how == Split::K {
        after = sum_partials(&partials).unwrap();
    }
    let v = check_gemm(cfg, (&a, &b), (&before, &after), Elems::FP32, usize::MAX, 0);
    assert!(v.passed, "{cfg:?} over {devices} by {how:?}: {v:?}");
    (parts, after)
}

/// Every split, over two and four devices, of calls in both layouts, every
/// op pair, with scalars and padded leading dimensions: the assembled C
/// is the whole call's. The dimension cut is three units long (the last
/// ragged), the others small, so the emulator's work stays small.
#[test]
fn every_split_assembles_the_whole_product_on_the_emulator() {
    let long = 2 * SHARD_ALIGN + 21;
    for layout in [Layout::RowMajor, Layout::ColMajor] {
        for (op_a, op_b) in [
            (Op::N, Op::N),
            (Op::T, Op::N),
            (Op::N, Op::T),
            (Op::T, Op::T),
        ] {
            for how in [Split::Columns, Split::Rows, Split::K] {
                let (m, n, k) = match how {
                    Split::Columns => (37, long, 29),
                    Split::Rows => (long, 29, 37),
                    Split::K => (29, 37, long),
                };
                let cfg = GemmConfig::new(m, n, k)
                    .layout(layout)
                    .op_a(op_a)
                    .op_b(op_b)
                    .scalars(0.75, -0.5);
                // Padded leading dimensions: the whole operands' stay the
                // caller's, the shards are packed.
                let (lda, ldb, ldc) = (cfg.lda + 3, cfg.ldb + 5, cfg.ldc + 2);
                let cfg = cfg.lds(lda, ldb, ldc);
                // Two devices (two units and the ragged rest), and four:
                // more devices than units (three parts).
                for devices in [2, 4] {
                    let (parts, _) = split_and_emulate(&cfg, devices, how);
                    assert_eq!(parts.len(), devices.min(3), "{cfg:?} by {how:?}");
                }
            }
        }
    }
}

/// A K split's partial sums are added in device order, so the same call
/// gives the same bits every time; device 0 alone adds beta C.
#[test]
fn a_k_split_gives_the_same_bits_on_every_run() {
    let cfg = GemmConfig::new(40, 30, 3 * SHARD_ALIGN + 5).scalars(1.0, 2.0);
    let (parts, first) = split_and_emulate(&cfg, 3, Split::K);
    assert_eq!(
        parts.iter().map(|p| p.cfg.beta).collect::<Vec<_>>(),
        [2.0, 0.0, 0.0]
    );
    let (_, again) = split_and_emulate(&cfg, 3, Split::K);
    assert_eq!(
        first.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        again.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
}

/// What each device holds: shards packed, whole operands with the
/// caller's leading dimension, and fewer parts than devices when a
/// dimension has fewer units than there are devices.
#[test]
fn parts_hold_packed_shards() {
    let cfg = GemmConfig::new(300, 1000, 64).lds(70, 1010, 1020);
    let parts = split(&cfg, 3, Split::Columns).unwrap();
    let widths: Vec<usize> = parts.iter().map(|p| p.cfg.n).collect();
    assert_eq!(widths, [384, 384, 232]);
    for p in &parts {
        assert_eq!((p.cfg.lda, p.cfg.ldb, p.cfg.ldc), (70, p.cfg.n, p.cfg.n));
        assert_eq!((p.rows.clone(), p.depth.clone()), (0..300, 0..64));
    }
    let rows = split(&cfg, 8, Split::Rows).unwrap();
    assert_eq!(
        rows.iter().map(|p| p.cfg.m).collect::<Vec<_>>(),
        [128, 128, 44]
    );
    assert!(
        rows.iter()
            .all(|p| (p.cfg.lda, p.cfg.ldb, p.cfg.ldc) == (64, 1010, 1000))
    );
    let tn = GemmConfig::new(300, 1000, 500)
        .op_a(Op::T)
        .layout(Layout::ColMajor);
    for p in split(&tn, 2, Split::K).unwrap() {
        // op(A)[:, depth] of a transposed A is rows of the stored k x m
        // A; column-major, its leading dimension is its column length.
        assert_eq!(
            (p.cfg.lda, p.cfg.ldb, p.cfg.ldc),
            (p.depth.len(), p.depth.len(), 300)
        );
    }
}

/// A handle over no devices, a batch, a bad call: typed errors, no GPU
/// touched.
#[test]
fn split_calls_refuse_what_they_cannot_cut() {
    assert!(matches!(
        MultiGemm::new(Vec::new()),
        Err(GemmError::NoDevices)
    ));
    let e = split(&GemmConfig::new(8, 8, 8), 0, Split::K).unwrap_err();
    assert!(e.to_string().contains("at least one stream"), "{e}");
    let batched = GemmConfig::new(8, 8, 8).batched(3, 64, 64, 64);
    let e = split(&batched, 2, Split::Columns).unwrap_err();
    assert!(matches!(e, GemmError::SplitBatch { batch: 3 }), "{e}");
    let bad = GemmConfig::new(8, 8, 8).lds(4, 8, 8);
    assert!(matches!(
        split(&bad, 2, Split::Rows),
        Err(GemmError::LeadingDimension { .. })
    ));
    let wrapped = GemmError::NoDevices.on_device(3);
    assert_eq!(
        wrapped.to_string(),
        format!("device 3: {}", GemmError::NoDevices)
    );
}

/// The host helpers refuse what does not fit instead of panicking: a
/// whole operand too short, a shard too short, a K part placed, partials
/// of different lengths.
#[test]
fn the_host_helpers_refuse_short_buffers_and_partials() {
    let cfg = GemmConfig::new(200, 300, 100);
    let (la, lb, lc) = cfg.buffer_lens();
    let part = &split(&cfg, 2, Split::Columns).unwrap()[1];
    let e = part.a_of(&vec![0.0f32; la - 1]).unwrap_err();
    assert!(
        matches!(e, GemmError::BufferTooSmall { arg: "a", .. }),
        "{e}"
    );
    assert!(part.b_of(&vec![0.0f32; lb - 1]).is_err());
    assert!(part.c_of(&vec![0.0f32; lc - 1], 0.0).is_err());
    let mut c = vec![0.0f32; lc];
    let short = vec![0.0f32; part.cfg.buffer_lens().2 - 1];
    let e = part.place(&short, &mut c).unwrap_err();
    assert!(
        matches!(e, GemmError::BufferTooSmall { arg: "shard", .. }),
        "{e}"
    );
    let k_part = &split(&cfg, 2, Split::K).unwrap()[0];
    let whole = vec![0.0f32; lc];
    assert!(matches!(
        k_part.place(&whole, &mut c),
        Err(GemmError::PartialNotPlaced)
    ));
    let e = sum_partials(&[vec![1.0; 4], vec![1.0; 4], vec![1.0; 3]]).unwrap_err();
    assert!(
        matches!(
            e,
            GemmError::PartialLengths {
                device: 2,
                len: 3,
                first: 4
            }
        ),
        "{e}"
    );
    assert_eq!(
        sum_partials(&[vec![1.0, 2.0], vec![0.5, 0.25]]).unwrap(),
        [1.5, 2.25]
    );
}
