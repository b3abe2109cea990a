//! The FP8 quantizer (`kernels_gpu::quant`) on the CPU emulator: every
//! way of scaling (per tensor in three launches, A's 1 x 128 blocks, B's
//! 128 x 128), from f32 and BF16 sources to E4M3 and E5M2, at odd shapes
//! and a padded leading dimension, against a reference written here from
//! the definition (block amax over the type's largest value, values
//! divided and rounded to nearest even, saturating), bit for bit; the
//! launches' race, barrier and bounds checks clean. The rounding itself
//! is the host's `Fp8Format::from_f32` on both sides here (the kernels'
//! host backend): `elem`'s tests check it on every encoding against the
//! OCP table and a search, and the GPU tests check `cvt.rn.satfinite`
//! against it; what this file checks independently is the blocks, their
//! maxima, the scales and their layouts. The same launches run
//! on the GPU in tests/tests/gpu.rs.

use kernels_gpu::device::GlobalOut;
use kernels_gpu::elem::{Bf16, E4m3, E5m2, Elem, Element, Elems, Fp8};
use kernels_gpu::emu;
use kernels_gpu::gemm::{Gemm, GemmParams};
use kernels_gpu::launch::{Body, KernelSpec, Launch, Operands, Ops};
use kernels_gpu::modules;
use kernels_gpu::quant::{
    self, QuantParams, QuantStep, Quantize, quantize_blocks, quantize_tensor, scale_of_partials,
};
use tests::values;

/// Where the scales start in the emulator's C: after the `rows x cols`
/// FP8 values; the per-tensor partials after the one scale.
fn scales_at(g: &Gemm) -> usize {
    g.m * g.n
}

/// The quantizer's parameters for the emulated problem: the source is A
/// (`m x k`, rows `lda` apart), the output C's first `m * n` slots (`n =
/// k`), scales at `how`'s strides.
fn params(g: &Gemm, how: Quantize) -> QuantParams {
    let (row_stride, col_stride) = how.strides(g.m, g.k);
    QuantParams {
        rows: g.m as u32,
        cols: g.k as u32,
        ld: g.lda as u32,
        ld_out: g.n as u32,
        row_stride: row_stride as u32,
        col_stride: col_stride as u32,
    }
}

fn scales(g: &Gemm) -> GlobalOut<f32> {
    g.c.offset(scales_at(g))
}

fn q_rows<T: Element, Q: Fp8>(g: Gemm) {
    let p = params(&g, Quantize::Rows);
    quantize_blocks::<T, Q, 1, true>(g.a.retyped(), g.c.retyped(), scales(&g), &p);
}

fn q_tiles<T: Element, Q: Fp8>(g: Gemm) {
    let p = params(&g, Quantize::Tiles);
    quantize_blocks::<T, Q, 128, true>(g.a.retyped(), g.c.retyped(), scales(&g), &p);
}

fn q_amax<T: Element>(g: Gemm) {
    let gx = QuantStep::Amax.grid(g.m, g.k).0;
    let p = QuantParams {
        row_stride: gx as u32,
        col_stride: 1,
        ..params(&g, Quantize::Tensor)
    };
    let partials = scales(&g).offset(1);
    quantize_blocks::<T, E4m3, 128, false>(g.a.retyped(), g.c.retyped(), partials, &p);
}

fn q_scale<Q: Fp8>(g: Gemm) {
    let p = QuantParams {
        rows: QuantStep::partials(g.m, g.k) as u32,
        ..QuantParams::default()
    };
    scale_of_partials::<Q>(scales(&g).offset(1).as_in(), scales(&g), &p);
}

fn q_tensor<T: Element, Q: Fp8>(g: Gemm) {
    let p = params(&g, Quantize::Tensor);
    quantize_tensor::<T, Q>(g.a.retyped(), g.c.retyped(), scales(&g).as_in(), &p);
}

/// A launch of `body` with the step's geometry: [`quant::THREADS`]
/// threads, its shared bytes, a block per 128 columns and
/// `block_rows` rows (the whole problem for `Scale`).
fn spec(
    name: &'static str,
    step: QuantStep,
    body: fn(Gemm),
    (rows, cols): (usize, usize),
) -> KernelSpec {
    let block_tile = match step {
        QuantStep::Scale => (rows, cols),
        _ => (step.block_rows(), quant::COLS),
    };
    KernelSpec {
        name,
        step: 0,
        summary: "the FP8 quantizer on the emulator",
        launch: Launch {
            block_threads: (quant::THREADS as u32, 1),
            block_tile,
            shared_bytes: quant::SHARED_BYTES,
            register_cap: false,
            persistent: false,
        },
        model_reuse: (1, 1),
        module: &modules::FP8,
        elems: Elems::FP32,
        body: Body::Emulated(body),
        operands: Operands::Pointers,
        ops: Ops::NN,
        batches: false,
    }
}

/// The reference: `(values, scales)` for a `rows x cols` source `x`
/// (rows `ld` apart) quantized to `Q` as `how` says, scales at its
/// layout (NaN where no block has one).
fn reference<Q: Fp8>(
    x: &[f32],
    (rows, cols, ld): (usize, usize, usize),
    how: Quantize,
) -> (Vec<f32>, Vec<f32>) {
    let (block_rows, block_cols) = match how {
        Quantize::Tensor => (rows, cols),
        Quantize::Rows => (1, 128),
        Quantize::Tiles => (128, 128),
    };
    let (rs, cs) = how.strides(rows, cols);
    let mut scales = vec![f32::NAN; how.scales(rows, cols)];
    let mut q = vec![f32::NAN; rows * cols];
    for bi in 0..rows.div_ceil(block_rows) {
        for bj in 0..cols.div_ceil(block_cols) {
            let block = |f: &mut dyn FnMut(usize, usize)| {
                for r in bi * block_rows..((bi + 1) * block_rows).min(rows) {
                    for c in bj * block_cols..((bj + 1) * block_cols).min(cols) {
                        f(r, c);
                    }
                }
            };
            let mut amax = 0.0f32;
            block(&mut |r, c| {
                let v = x[r * ld + c].abs();
                if v.is_nan() || v > amax {
                    amax = if amax.is_nan() { amax } else { v };
                }
            });
            let scale = if amax / Q::MAX == 0.0 {
                1.0
            } else {
                amax / Q::MAX
            };
            scales[bi * rs + bj * cs] = scale;
            block(&mut |r, c| q[r * cols + c] = Q::from_f32(x[r * ld + c] / scale).to_f32());
        }
    }
    (q, scales)
}

/// One emulated launch: its name, its step's geometry, its body.
type Emulated = (&'static str, QuantStep, fn(Gemm));

/// Runs the quantization of `x` on the emulator, launch by launch, and
/// returns C's slots: the values, then the scales (then the partials).
fn emulate(
    x: &[f32],
    (rows, cols, ld): (usize, usize, usize),
    launches: &[Emulated],
    tail: usize,
) -> Vec<f32> {
    let params = GemmParams {
        lda: ld as u32,
        ldb: 0,
        ..GemmParams::dense(rows as u32, cols as u32, cols as u32)
    };
    let b = vec![0.0; cols];
    let mut c = vec![f32::NAN; rows * cols + tail];
    for &(name, step, body) in launches {
        let spec = spec(name, step, body, (rows, cols));
        let report = emu::run(&spec, body, &params, 1, x, &b, &c);
        assert!(report.is_clean(), "{name}: {report}");
        c = report.c;
    }
    c
}

/// Checks one way of scaling from `T` to `Q` at `(rows, cols, ld)`.
fn check<T: Element, Q: Fp8>(shape: (usize, usize, usize), how: Quantize, special: bool) {
    let (rows, cols, ld) = shape;
    // Rows of different magnitudes (2^-6 .. 2^6), values stored as T.
    let mut x: Vec<f32> = values(rows * ld, (rows * 31 + cols) as u64)
        .iter()
        .enumerate()
        .map(|(i, v)| T::from_f32(v * 2f32.powi((i / ld % 13) as i32 - 6)).to_f32())
        .collect();
    if special {
        // A zero block (the first 128 columns of row 1), values past the
        // type's range, a NaN and an infinity in the last row.
        for c in 0..cols.min(128) {
            x[ld + c] = 0.0;
        }
        x[2 * ld] = 1e30;
        x[(rows - 1) * ld] = f32::NAN;
        x[(rows - 1) * ld + cols - 1] = f32::NEG_INFINITY;
    }
    let n_scales = how.scales(rows, cols);
    let (launches, tail): (Vec<Emulated>, usize) = match how {
        Quantize::Rows => (vec![("rows", QuantStep::Rows, q_rows::<T, Q>)], n_scales),
        Quantize::Tiles => (vec![("tiles", QuantStep::Tiles, q_tiles::<T, Q>)], n_scales),
        Quantize::Tensor => (
            vec![
                ("amax", QuantStep::Amax, q_amax::<T>),
                ("scale", QuantStep::Scale, q_scale::<Q>),
                ("tensor", QuantStep::Tensor, q_tensor::<T, Q>),
            ],
            1 + QuantStep::partials(rows, cols),
        ),
    };
    let c = emulate(&x, shape, &launches, tail);
    let (want_q, want_scales) = reference::<Q>(&x, shape, how);
    let what = format!(
        "{:?} -> {:?}, {how:?}, {rows} x {cols} (ld {ld})",
        T::ELEM,
        Q::ELEM
    );
    for (i, (&got, &want)) in c[..rows * cols].iter().zip(&want_q).enumerate() {
        // NaN's sign is the hardware's choice; any NaN is a NaN.
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "{what}: value [{}][{}] = {got}, want {want}",
            i / cols,
            i % cols
        );
    }
    for (i, (&got, &want)) in c[rows * cols..rows * cols + n_scales]
        .iter()
        .zip(&want_scales)
        .enumerate()
    {
        // A slot no block has (the layouts' 16-byte padding) is NaN in
        // both: unwritten.
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "{what}: scale {i} = {got}, want {want}"
        );
    }
}

#[test]
fn block_scales_of_a_match_the_definition_at_odd_shapes() {
    check::<f32, E4m3>((37, 300, 300), Quantize::Rows, false);
    check::<Bf16, E4m3>((9, 129, 131), Quantize::Rows, false);
    check::<f32, E5m2>((8, 257, 257), Quantize::Rows, false);
}

#[test]
fn block_scales_of_b_match_the_definition_at_odd_shapes() {
    check::<f32, E4m3>((130, 200, 203), Quantize::Tiles, false);
    check::<Bf16, E5m2>((129, 129, 129), Quantize::Tiles, false);
}

#[test]
fn a_tensor_scale_is_the_largest_tile_amax_over_the_types_largest_value() {
    check::<f32, E4m3>((131, 260, 261), Quantize::Tensor, false);
    check::<Bf16, E5m2>((7, 33, 33), Quantize::Tensor, false);
}

/// A zero block (scale 1), a value far past FP8's range (it sets its
/// block's scale: the block's small values go to zero or subnormals),
/// a NaN and an infinity (their blocks' scales are not finite: the
/// products they enter are NaN, never a silent finite value), on the
/// emulator against the reference, bit for bit.
#[test]
fn zeros_get_scale_1_outliers_set_the_scale_and_nan_or_infinity_poisons_its_block() {
    for how in Quantize::ALL {
        check::<f32, E4m3>((5, 140, 140), how, true);
    }
}

#[test]
fn the_fp8_module_holds_every_entry_for_ada_and_newer() {
    assert_eq!(modules::FP8.arch.capability, (8, 9));
    assert!(
        quant::ENTRIES
            .iter()
            .all(|e| modules::holding(e.name) == Some(&modules::FP8))
    );
    assert!(quant::ENTRIES.iter().any(|e| e.src == Elem::F16));
}
