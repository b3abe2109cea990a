//! Step 27 (FP8 `mma.sync`) on the CPU emulator, no GPU needed: the
//! emulated `m16n8k32` against the PTX ISA's fragment table, and every
//! instance with its scales (per tensor, and per block: A 1 x 128, B 128
//! x 128, each K block's sums promoted) at aligned, guarded and
//! unaligned shapes, against the f64 product of the values the scales
//! stand for. Scales that differ per row and per K block catch a kernel
//! that skips one, applies one to the wrong rows or block, or promotes
//! the wrong sum.

use kernels_gpu::device::mma::mma_m16n8k32;
use kernels_gpu::device::thread_idx_x;
use kernels_gpu::elem::{Bf16, E4m3, E5m2, Elem, Element, F16, Fp8, SCALE_BLOCK, Scaling};
use kernels_gpu::emu::{self, EmuScales};
use kernels_gpu::gemm::{Gemm, GemmParams};
use kernels_gpu::k27_mma_fp8::{self, SPECS};
use kernels_gpu::launch::{Body, KernelSpec, Launch, Operands, Ops};
use kernels_gpu::modules;

/// Small integers (exact in E4M3 and E5M2: at most 8 in magnitude),
/// different for most positions.
fn small(i: usize, mul: usize, modulus: usize) -> f32 {
    (i * mul % modulus) as f32 - (modulus / 2) as f32
}

/// Every lane's `mma.m16n8k32` of a known product, its fragments built
/// from the PTX ISA's table (independently of the kernels): A[m][k] =
/// small(32m + k), B[k][n] = small(8k + n), C[m][n] = 8m + n; lane l
/// writes its four results to C[4l .. 4l + 4].
fn mma_k32_of_a_known_product<A: Fp8, B: Fp8>(g: Gemm) {
    let lane = thread_idx_x();
    let (gr, t) = (lane / 4, lane % 4);
    let a = |m: usize, k: usize| small(32 * m + k, 7, 13);
    let b = |k: usize, n: usize| small(8 * k + n, 5, 11);
    // One register: four neighbours along K, the lowest in the lowest byte.
    fn word<T: Element>(v: [f32; 4]) -> u32 {
        (0..4).map(|i| T::from_f32(v[i]).bits() << (8 * i)).sum()
    }
    let row = |m: usize, k: usize| word::<A>([0, 1, 2, 3].map(|i| a(m, k + i)));
    let col = |k: usize, n: usize| word::<B>([0, 1, 2, 3].map(|i| b(k + i, n)));
    let af = [
        row(gr, 4 * t),
        row(gr + 8, 4 * t),
        row(gr, 4 * t + 16),
        row(gr + 8, 4 * t + 16),
    ];
    let bf = [col(4 * t, gr), col(4 * t + 16, gr)];
    let cell = |m: usize, n: usize| (8 * m + n) as f32;
    let mut c = [
        cell(gr, 2 * t),
        cell(gr, 2 * t + 1),
        cell(gr + 8, 2 * t),
        cell(gr + 8, 2 * t + 1),
    ];
    mma_m16n8k32::<A, B>(&mut c, af, bf);
    for (i, v) in c.into_iter().enumerate() {
        // SAFETY: 4 distinct elements per lane of a 1 x 128 C.
        unsafe { g.c.write(4 * lane + i, v) };
    }
}

/// A probe's name and body.
type NamedBody = (&'static str, fn(Gemm));

#[test]
fn the_emulated_fp8_mma_follows_the_ptx_fragment_layout() {
    let bodies: [NamedBody; 3] = [
        ("e4m3 x e4m3", mma_k32_of_a_known_product::<E4m3, E4m3>),
        ("e5m2 x e4m3", mma_k32_of_a_known_product::<E5m2, E4m3>),
        ("e4m3 x e5m2", mma_k32_of_a_known_product::<E4m3, E5m2>),
    ];
    for (name, body) in bodies {
        let spec = KernelSpec {
            name: "mma_k32_layout",
            step: 0,
            module: &modules::MMA_FP8,
            elems: kernels_gpu::elem::Elems::FP32,
            summary: "test probe",
            launch: Launch {
                block_threads: (32, 1),
                block_tile: (1, 128),
                shared_bytes: 0,
                register_cap: false,
                persistent: false,
            },
            model_reuse: (1, 1),
            body: Body::Emulated(body),
            operands: Operands::Pointers,
            ops: Ops::NN,
            batches: false,
        };
        let report = emu::run_gemm(&spec, body, &[0.0], &vec![0.0; 128], 1, 128, 1);
        assert!(report.is_clean(), "{report}");
        for lane in 0..32 {
            let (gr, t) = (lane / 4, lane % 4);
            let d = |m: usize, n: usize| -> f32 {
                let dot: f32 = (0..32)
                    .map(|k| small(32 * m + k, 7, 13) * small(8 * k + n, 5, 11))
                    .sum();
                dot + (8 * m + n) as f32
            };
            let want = [
                d(gr, 2 * t),
                d(gr, 2 * t + 1),
                d(gr + 8, 2 * t),
                d(gr + 8, 2 * t + 1),
            ];
            assert_eq!(
                report.c[4 * lane..4 * lane + 4],
                want,
                "{name}, lane {lane}"
            );
        }
    }
}

/// A deterministic value in ±[0.5, 1.5) (`tests::values`) as stored by
/// `T` (the FP8 value it rounds to).
fn stored(elem: Elem, x: f32) -> f32 {
    match elem {
        Elem::E4m3 => E4m3::from_f32(x).to_f32(),
        Elem::E5m2 => E5m2::from_f32(x).to_f32(),
        other => panic!("step 27 takes FP8, not {other:?}"),
    }
}

/// Scales none alike: per tensor the harness's (`20`, `1/16`, `3`); per
/// block A's by row and K block, B's by column block and K block, powers
/// of two from 1/8 to 8 (exact products).
fn scales(spec: &KernelSpec, (m, n, k): (usize, usize, usize)) -> EmuScales {
    match spec.elems.scaling {
        Scaling::Blocks => {
            let pow = |i: usize| 2f32.powi((i % 7) as i32 - 3);
            let a = (0..Scaling::a_scales(m, k))
                .map(|i| pow(i * 5 + i / 3))
                .collect();
            let b = (0..Scaling::b_scales(k, n))
                .map(|i| pow(i * 3 + 1))
                .collect();
            EmuScales {
                a: Some(a),
                b: Some(b),
                d: Some(vec![3.0]),
            }
        }
        _ => EmuScales {
            a: Some(vec![20.0]),
            b: Some(vec![0.0625]),
            d: Some(vec![3.0]),
        },
    }
}

/// Runs `spec` on the emulator for `m x n x k` (A m x k and B^T n x k,
/// each with rows `k + pad` apart, the padding NaN; C with `beta` times
/// its values added) and checks every element of C against the f64
/// product of the values the scales stand for. Tolerance: f32 sums of
/// the K blocks' exact f64-per-step products (4 k 2^-24 of the sum of
/// magnitudes) and one rounding of a 16-bit C.
fn check(spec: &KernelSpec, (m, n, k): (usize, usize, usize), beta: f32, pad: usize) {
    let seed = (m * 1_000_003 + n * 1009 + k) as u64;
    let ld = k + pad;
    let padded = |rows: usize, seed: u64, elem: Elem| -> Vec<f32> {
        let v = tests::values(rows * ld, seed);
        (0..rows * ld)
            .map(|i| {
                if i % ld < k {
                    stored(elem, v[i])
                } else {
                    f32::NAN
                }
            })
            .collect()
    };
    let a = padded(m, seed, spec.elems.a);
    let bt = padded(n, !seed, spec.elems.b);
    let c0: Vec<f32> = tests::values(m * n, seed ^ 7)
        .iter()
        .map(|&x| match spec.elems.c {
            Elem::Bf16 => Bf16::from_f32(x).to_f32(),
            Elem::F16 => F16::from_f32(x).to_f32(),
            _ => x,
        })
        .collect();
    let s = scales(spec, (m, n, k));
    let params = GemmParams {
        beta,
        lda: ld as u32,
        ldb: ld as u32,
        ..GemmParams::dense_in(m as u32, n as u32, k as u32, spec.ops)
    };
    let body = spec.emulated().expect("step 27 runs on the emulator");
    let report = emu::run_scaled(spec, body, &params, 1, &a, &bt, &c0, &s);
    assert!(report.is_clean(), "{} at {m}x{n}x{k}: {report}", spec.name);
    let (sa, sb) = (
        s.a.as_ref().expect("A's scales"),
        s.b.as_ref().expect("B's scales"),
    );
    let sd = f64::from(s.d.as_ref().expect("D's scale")[0]);
    let scale_of = |r: usize, j: usize, kk: usize| -> f64 {
        match spec.elems.scaling {
            Scaling::Blocks => {
                let a = sa[kk / SCALE_BLOCK * Scaling::a_scales_stride(m) + r];
                let b = sb[j / SCALE_BLOCK * Scaling::b_scales_stride(k) + kk / SCALE_BLOCK];
                f64::from(a) * f64::from(b)
            }
            _ => f64::from(sa[0]) * f64::from(sb[0]),
        }
    };
    let c_rounding = if spec.elems.c == Elem::F32 {
        0.0
    } else {
        spec.elems.c.unit_roundoff()
    };
    for r in 0..m {
        for j in 0..n {
            let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
            for kk in 0..k {
                let p = f64::from(a[r * ld + kk]) * f64::from(bt[j * ld + kk]) * scale_of(r, j, kk);
                sum += p;
                magnitude += p.abs();
            }
            let old = f64::from(beta) * f64::from(c0[r * n + j]);
            let want = sd * (sum + old);
            let got = f64::from(report.c[r * n + j]);
            let tolerance = sd
                * (4.0 * k as f64 * f64::from(f32::EPSILON) * magnitude + 1e-6 * old.abs())
                + c_rounding * want.abs();
            assert!(
                (got - want).abs() <= tolerance,
                "{} at {m}x{n}x{k} (beta {beta}): C[{r}][{j}] = {got}, expected {want} (tolerance {tolerance:e})",
                spec.name
            );
        }
    }
}

/// Shapes: one interior tile with K a whole number of blocks (the copies
/// unchecked), edge tiles with a partial last K block (16-byte copies,
/// checked), and rows not 16-byte aligned (one value at a time).
const SHAPES: &[(usize, usize, usize)] = &[(128, 128, 256), (130, 136, 272), (33, 17, 300)];

#[test]
fn every_instance_matches_the_dequantized_product_with_its_scales() {
    for spec in SPECS {
        for &shape in SHAPES {
            check(spec, shape, 0.0, 0);
        }
    }
}

/// Rows 16-byte aligned but longer than K (lda = ldb = K + 8, the
/// padding NaN), K not a multiple of 16: the 16-byte copies with a
/// partial last chunk, which must read none of the padding.
#[test]
fn padded_rows_take_the_checked_copies_and_read_no_padding() {
    for spec in SPECS {
        check(spec, (70, 130, 200), 0.0, 8);
    }
}

#[test]
fn beta_adds_the_old_c_before_d_scale() {
    for spec in [
        &k27_mma_fp8::SPEC_E4M3_64X128X128_W32X32_S3_F32,
        &k27_mma_fp8::SPEC_E4M3_BLOCKS_64X128X128_W32X32_S3,
    ] {
        check(spec, (65, 40, 160), 0.5, 0);
    }
}

/// Scales read from the wrong place are caught: with A's block scales
/// shifted by one row, the block-scaled kernel's C is wrong (the check
/// above would accept nothing else).
#[test]
fn a_block_scale_of_the_wrong_row_is_caught() {
    let spec = &k27_mma_fp8::SPEC_E4M3_BLOCKS_64X128X128_W32X32_S3_F32;
    let (m, n, k) = (16, 8, 256);
    let a: Vec<f32> = vec![1.0; m * k];
    let bt: Vec<f32> = vec![1.0; n * k];
    let run = |s: &EmuScales| {
        let params = GemmParams::dense_in(m as u32, n as u32, k as u32, spec.ops);
        let body = spec.emulated().unwrap();
        emu::run_scaled(spec, body, &params, 1, &a, &bt, &vec![f32::NAN; m * n], s)
    };
    let mut s = scales(spec, (m, n, k));
    let right = run(&s);
    s.a.as_mut().unwrap().rotate_left(1);
    let shifted = run(&s);
    assert!(right.is_clean() && shifted.is_clean());
    assert_ne!(
        right.c, shifted.c,
        "the kernel must read each row's own scale"
    );
}
