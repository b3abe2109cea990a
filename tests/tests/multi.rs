//! A product cut over devices (`rust_gemm::multi`) without a GPU: every
//! split's parts run on the CPU emulator, each on the buffers its device
//! would hold (cut from the whole operands by `Part::a_of`, `b_of`,
//! `c_of`), and the assembled C is checked against the f64 reference of
//! the whole call. The parts on GPUs (one H200, two streams as two
//! devices): tests/tests/gpu.rs.

use harness::reference::check_gemm;
use kernels_gpu::elem::{Elems, Storage};
use rust_gemm::blas::{self, Candidate, Compute, GemmConfig, GemmError, Layout, Op};
use rust_gemm::multi::{
    Gather, MultiGemm, Part, Reduction, SHARD_ALIGN, Split, fitting, footprint, split, sum_partials,
};
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
                    Split::Grid { .. } => unreachable!("panels: their own test"),
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

/// [`blas::PlaneSum`] on the emulator.
fn summed(sum: &blas::PlaneSum, w: &[f32], c: &[f32]) -> Vec<f32> {
    match blas::emulate_sum(sum, w, c) {
        Ok(Ok(c)) => c,
        Ok(Err(report)) => panic!("{sum:?}: the emulator found\n{report}"),
        Err(e) => panic!("{sum:?}: {e}"),
    }
}

/// A K split reduced on the devices, as `MultiGemm::gemm_reduced` runs it
/// (its plan, `Reduction`, step by step), each device's partial product
/// and sums on the emulator and NCCL's moves as copies: every device's C.
fn reduce_on_emulator(cfg: &GemmConfig, devices: usize, seed: u64) -> (Vec<f32>, Vec<Vec<f32>>) {
    let (la, lb, lc) = cfg.buffer_lens();
    let (a, b, before) = (values(la, seed), values(lb, seed + 1), values(lc, seed + 2));
    let plan = Reduction::of(cfg, devices);
    let mut planes = vec![vec![0.0f32; plan.plane()]; devices];
    for part in split(cfg, devices, Split::K).unwrap() {
        let call = plan.partial(&part);
        let (pa, pb) = (part.a_of(&a).unwrap(), part.b_of(&b).unwrap());
        // The partial's C is written, not read (beta 0): NaN stays out.
        let nan = vec![f32::NAN; plan.plane()];
        planes[part.device] = emulated(&call, &pa, &pb, &nan);
    }
    // 1: each owner's rows of every plane into its slots.
    let mut slots: Vec<Vec<f32>> = (0..devices)
        .map(|d| vec![f32::NAN; plan.slots(d)])
        .collect();
    for t in plan.transfers() {
        let src = planes[t.from][t.src].to_vec();
        slots[t.to][t.dst].copy_from_slice(&src);
    }
    // 2: each owner's sum, over its rows of its plane.
    for d in 0..devices {
        if let Some(sum) = plan.owned_sum(d) {
            let span = plan.span(&plan.owned[d]);
            let rows = summed(&sum, &slots[d], &planes[d][span.clone()]);
            planes[d][span].copy_from_slice(&rows);
        }
    }
    // 3: each owner's rows to every device.
    for (root, rows) in plan.owned.iter().enumerate() {
        let span = plan.span(rows);
        let sent = planes[root][span.clone()].to_vec();
        planes
            .iter_mut()
            .for_each(|p| p[span.clone()].copy_from_slice(&sent));
    }
    // 4: C on every device, from the same C.
    let cs = (0..devices)
        .map(|d| summed(&plan.final_sum(), &planes[d], &before))
        .collect::<Vec<_>>();
    for (d, c) in cs.iter().enumerate() {
        let v = check_gemm(cfg, (&a, &b), (&before, c), Elems::FP32, usize::MAX, 0);
        assert!(v.passed, "{cfg:?} over {devices}, device {d}: {v:?}");
    }
    (before, cs)
}

/// A K split reduced on the devices (`Reduction`): every device ends with
/// the whole product, every device the same bits, the same bits on every
/// run; C's padding is left alone. Both layouts, padded C, more devices
/// than rows' units and than K's.
#[test]
fn a_reduced_k_split_gives_every_device_the_same_c() {
    let long = 2 * SHARD_ALIGN + 21;
    for layout in [Layout::RowMajor, Layout::ColMajor] {
        for (m, n, k, devices) in [(150, 37, long, 2), (40, 300, long, 4), (29, 31, 100, 3)] {
            let cfg = GemmConfig::new(m, n, k)
                .layout(layout)
                .op_b(Op::T)
                .scalars(0.75, -0.5);
            let cfg = cfg.clone().lds(cfg.lda, cfg.ldb, cfg.ldc + 3);
            let (before, cs) = reduce_on_emulator(&cfg, devices, 10);
            let bits = |c: &Vec<f32>| c.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(cs.iter().all(|c| bits(c) == bits(&cs[0])), "{cfg:?}");
            let (_, again) = reduce_on_emulator(&cfg, devices, 10);
            assert_eq!(bits(&again[0]), bits(&cs[0]), "{cfg:?}");
            // The padding after each row (or column) of C is untouched.
            let (lines, len) = match layout {
                Layout::RowMajor => (m, n),
                Layout::ColMajor => (n, m),
            };
            for line in 0..lines - 1 {
                let pad = line * cfg.ldc + len..(line + 1) * cfg.ldc;
                assert_eq!(
                    bits(&cs[0][pad.clone()].to_vec()),
                    bits(&before[pad].to_vec())
                );
            }
        }
    }
}

/// The reduction's plan: each owner receives every device's rows once,
/// slot `from` for device `from`; owners cover C's rows.
#[test]
fn a_reduction_moves_every_row_to_its_owner_once() {
    let cfg = GemmConfig::new(300, 50, 1000);
    let plan = Reduction::of(&cfg, 4);
    assert_eq!(plan.owned, [0..128, 128..256, 256..300, 300..300]);
    let moves = plan.transfers();
    assert_eq!(moves.len(), 3 * 4);
    for t in &moves {
        let rows = &plan.owned[t.to];
        assert_eq!(t.src, rows.start * 50..rows.end * 50);
        assert_eq!(t.dst.start, t.from * t.src.len());
        assert_eq!(t.dst.len(), t.src.len());
    }
    assert!(plan.owned_sum(3).is_none());
    assert_eq!(plan.owned_sum(2).unwrap().rows, 44);
    assert_eq!(plan.slots(2), 4 * 44 * 50);
    let col = Reduction::of(&cfg.clone().layout(Layout::ColMajor), 2);
    assert_eq!((col.rows, col.len), (50, 300));
}

/// The all-gather of A overlapped with the product (`Gather`), as
/// `MultiGemm::gather_gemm` runs it: each device starts with its rows of
/// A alone (the rest NaN), the broadcasts are copies of each chunk's
/// span, each device multiplies the chunks in its order on the emulator,
/// and the columns of C assembled are the whole call's.
#[test]
fn a_gathered_a_gives_the_whole_product_on_the_emulator() {
    let long = 2 * SHARD_ALIGN + 21;
    for (layout, op_a) in [(Layout::RowMajor, Op::N), (Layout::ColMajor, Op::T)] {
        for devices in [1, 2, 4] {
            let cfg = GemmConfig::new(long, 150, 33)
                .layout(layout)
                .op_a(op_a)
                .scalars(1.5, 0.25);
            let cfg = cfg.clone().lds(cfg.lda + 2, cfg.ldb, cfg.ldc);
            let (la, lb, lc) = cfg.buffer_lens();
            let (a, b, before) = (values(la, 20), values(lb, 21), values(lc, 22));
            let plan = Gather::of(&cfg, devices).unwrap();
            assert_eq!(plan.chunks.len(), devices.min(3));
            let mut held: Vec<Vec<f32>> = (0..devices)
                .map(|d| {
                    let mut mine = vec![f32::NAN; la];
                    if d < plan.chunks.len() {
                        let span = plan.a_span(d);
                        mine[span.clone()].copy_from_slice(&a[span]);
                    }
                    mine
                })
                .collect();
            for root in 0..plan.chunks.len() {
                let span = plan.a_span(root);
                let sent = held[root][span.clone()].to_vec();
                held.iter_mut()
                    .for_each(|h| h[span.clone()].copy_from_slice(&sent));
            }
            let mut after = before.clone();
            for part in &plan.parts {
                let d = part.device;
                let pb = part.b_of(&b).unwrap();
                let mut pc = part.c_of(&before, 0.0).unwrap();
                let order = plan.order(d);
                assert_eq!(order.len(), plan.chunks.len());
                if d < plan.chunks.len() {
                    assert_eq!(order[0], d, "own chunk first");
                }
                for j in order {
                    let (call, a_at, c_at) = plan.chunk_call(part, j);
                    let out = emulated(&call, &held[d][a_at..], &pb, &pc[c_at..]);
                    pc[c_at..].copy_from_slice(&out);
                }
                part.place(&pc, &mut after).unwrap();
            }
            let v = check_gemm(
                &cfg,
                (&a, &b),
                (&before, &after),
                Elems::FP32,
                usize::MAX,
                0,
            );
            assert!(v.passed, "{cfg:?} over {devices}: {v:?}");
        }
    }
    for (layout, op_a) in [(Layout::RowMajor, Op::T), (Layout::ColMajor, Op::N)] {
        let cfg = GemmConfig::new(300, 100, 20).layout(layout).op_a(op_a);
        let e = Gather::of(&cfg, 2).unwrap_err();
        assert!(matches!(e, GemmError::GatherLayout { .. }), "{e}");
        assert!(e.to_string().contains("row-major with op_a = N"), "{e}");
    }
}

/// Panels (`Split::Grid`): every device a shard of A, of B and of C;
/// the assembled C is the whole call's, both layouts, with fewer panels
/// than devices where a side has fewer units; a grid that is not the
/// device count is refused.
#[test]
fn a_grid_of_panels_assembles_the_whole_product_on_the_emulator() {
    let long = 2 * SHARD_ALIGN + 21;
    for layout in [Layout::RowMajor, Layout::ColMajor] {
        for (op_a, op_b) in [(Op::N, Op::N), (Op::T, Op::T)] {
            let cfg = GemmConfig::new(long, long - 40, 29)
                .layout(layout)
                .op_a(op_a)
                .op_b(op_b)
                .scalars(0.75, -0.5);
            let cfg = cfg.clone().lds(cfg.lda + 1, cfg.ldb + 2, cfg.ldc + 3);
            let (parts, _) = split_and_emulate(&cfg, 4, Split::Grid { rows: 2, cols: 2 });
            assert_eq!(parts.len(), 4);
            for p in &parts {
                assert_eq!(
                    p.cfg.buffer_lens(),
                    (
                        p.rows.len() * 29,
                        29 * p.cols.len(),
                        p.rows.len() * p.cols.len()
                    )
                );
            }
            // Four rows of panels over three units of m: three panels.
            let (parts, _) = split_and_emulate(&cfg, 4, Split::Grid { rows: 4, cols: 1 });
            assert_eq!(
                parts.iter().map(|p| p.device).collect::<Vec<_>>(),
                [0, 1, 2]
            );
        }
    }
    let cfg = GemmConfig::new(300, 300, 30);
    let e = split(&cfg, 4, Split::Grid { rows: 3, cols: 2 }).unwrap_err();
    assert!(
        matches!(
            e,
            GemmError::GridShape {
                rows: 3,
                cols: 2,
                devices: 4
            }
        ),
        "{e}"
    );
    assert_eq!(
        Split::all_for(8),
        [
            Split::Columns,
            Split::Rows,
            Split::K,
            Split::Grid { rows: 2, cols: 4 },
            Split::Grid { rows: 4, cols: 2 }
        ]
    );
    assert_eq!(Split::all_for(1), [Split::Columns, Split::Rows, Split::K]);
}

/// The largest square f32 product (A, B and C f32, dense) that `fitting`
/// finds a cut for on `devices` devices of `memory` bytes each.
fn largest_square(devices: usize, memory: usize, bytes: (usize, usize, usize)) -> usize {
    let (mut lo, mut hi) = (1usize, 1 << 20);
    while lo + 1 < hi {
        let n = (lo + hi) / 2;
        match fitting(&GemmConfig::new(n, n, n), devices, memory, bytes) {
            Ok(_) => lo = n,
            Err(_) => hi = n,
        }
    }
    lo
}

/// What `fitting` picks, and the sizes the README states: the largest
/// square product N H200s (139 GiB each, as the device tool reports)
/// hold, in f32 and in BF16 with an f32 C.
#[test]
fn fitting_cuts_what_one_device_cannot_hold() {
    let f32s = (4, 4, 4);
    let cfg = GemmConfig::new(4096, 4096, 4096);
    let one = footprint(&cfg, 1, Split::Columns, f32s).unwrap();
    assert_eq!(one, 3 * 4096 * 4096 * 4);
    assert_eq!(fitting(&cfg, 1, one, f32s).unwrap(), (Split::Columns, one));
    let e = fitting(&cfg, 1, one - 1, f32s).unwrap_err();
    assert!(
        matches!(e, GemmError::TooLargeForDevices { devices: 1, .. }),
        "{e}"
    );
    // Four devices: panels 2 x 2 hold a quarter of C and half of A and B.
    let (how, held) = fitting(&cfg, 4, one, f32s).unwrap();
    assert_eq!(how, Split::Grid { rows: 2, cols: 2 });
    assert_eq!(held, (2048 * 4096 * 2 + 2048 * 2048) * 4);
    // A tall-skinny call: B whole on every device is small, so rows.
    let tall = GemmConfig::new(1 << 20, 256, 256);
    assert_eq!(fitting(&tall, 4, usize::MAX, f32s).unwrap().0, Split::Rows);
    let h200 = 139usize << 30;
    let thousands = |bytes| -> Vec<usize> {
        [1, 2, 4, 8]
            .iter()
            .map(|&d| largest_square(d, h200, bytes) / 1000)
            .collect()
    };
    // README ("Several GPUs"): the numbers there.
    assert_eq!(thousands(f32s), [111, 136, 172, 206]);
    assert_eq!(thousands((2, 2, 4)), [136, 172, 222, 273]);
}

/// The multi-device errors are one line each and say what to do.
#[test]
fn multi_device_errors_name_the_fix() {
    let errors = [
        (
            GemmError::GridShape {
                rows: 3,
                cols: 2,
                devices: 4,
            },
            "rows x cols equal",
        ),
        (
            GemmError::TooLargeForDevices {
                needs: 10,
                memory: 5,
                devices: 2,
            },
            "more devices",
        ),
        (
            GemmError::SameGpu {
                first: 0,
                second: 1,
                ordinal: 0,
            },
            "one stream per GPU",
        ),
        (
            GemmError::NoSuchRoot {
                root: 3,
                devices: 2,
            },
            "below 2",
        ),
        (GemmError::NcclBroken, "make a new MultiGemm"),
        (
            GemmError::WrongDevice {
                arg: "a",
                on: 1,
                expected: 0,
            },
            "allocated on",
        ),
        (
            GemmError::NoNccl {
                what: "a reduced K split",
            },
            "MultiGemm::with_nccl",
        ),
        (GemmError::NcclMissing, "LD_LIBRARY_PATH"),
        (
            GemmError::GatherLayout {
                layout: Layout::RowMajor,
                op_a: Op::T,
            },
            "op_a = N",
        ),
        (
            GemmError::Nccl {
                doing: "sending".into(),
                error: "NcclError(5)".into(),
            },
            "sending",
        ),
    ];
    for (e, fix) in errors {
        let text = e.to_string();
        assert!(!text.contains('\n') && text.contains(fix), "{text}");
    }
}
