//! Compile-time unrolling for register-tiled kernels, and closures the
//! device build must inline.

/// `unroll!(n; MAX, |i| { body })` repeats `body` for `i = 0, 1, .., n - 1`,
/// where `n` is a constant expression (a const generic parameter is fine)
/// and `MAX` a literal (1, 2, 4, 8, 16 or 32) with `n <= MAX`. Every copy sees
/// `i` as a literal, so register arrays indexed by it are promoted to
/// registers. LLVM fully unrolls small constant-trip loops by itself, but
/// not one whose body is large (the guarded epilogue: 64 stores, each
/// behind a branch), and a register array indexed by a loop counter lands
/// in local memory (ptxas reported a 256-byte stack frame). `MAX` bounds
/// the copies the compiler has to type-check before the `i < n` tests
/// fold away (nesting multiplies them). Every register-tiled step (05 on) uses it.
macro_rules! unroll {
    (@copies $n:expr, $i:ident, $body:block, $($k:literal)*) => {{
        $(
            if $k < $n {
                let $i: usize = $k;
                $body
            }
        )*
    }};
    ($n:expr; 1, |$i:ident| $body:block) => {{
        const { assert!($n <= 1) };
        $crate::unroll::unroll!(@copies $n, $i, $body, 0)
    }};
    ($n:expr; 2, |$i:ident| $body:block) => {{
        const { assert!($n <= 2) };
        $crate::unroll::unroll!(@copies $n, $i, $body, 0 1)
    }};
    ($n:expr; 4, |$i:ident| $body:block) => {{
        const { assert!($n <= 4) };
        $crate::unroll::unroll!(@copies $n, $i, $body, 0 1 2 3)
    }};
    ($n:expr; 8, |$i:ident| $body:block) => {{
        const { assert!($n <= 8) };
        $crate::unroll::unroll!(@copies $n, $i, $body, 0 1 2 3 4 5 6 7)
    }};
    ($n:expr; 16, |$i:ident| $body:block) => {{
        const { assert!($n <= 16) };
        $crate::unroll::unroll!(
            @copies $n, $i, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15
        )
    }};
    ($n:expr; 32, |$i:ident| $body:block) => {{
        const { assert!($n <= 32) };
        $crate::unroll::unroll!(
            @copies $n, $i, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15
            16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
        )
    }};
}
pub(crate) use unroll;

/// `rounds` rounds of a loop whose loads run a round ahead of the work
/// that uses them: round `r + 1`'s `load` is issued before round `r`'s
/// `work`, its result held in a second set of registers across the loop's
/// back edge. Written as one straight line (load, then work, per round),
/// ptxas interleaves each load with the FMAs that use it and keeps only a
/// few loads in flight; across the back edge it cannot (steps 15-16
/// measured the difference, docs/measurements.md).
#[inline(always)]
pub fn pipelined<R>(rounds: u32, load: impl Fn(u32) -> R, mut work: impl FnMut(&R)) {
    if rounds == 0 {
        return;
    }
    let mut cur = load(0);
    for r in 1..rounds {
        let next = load(r);
        work(&cur);
        cur = next;
    }
    work(&cur);
}

/// `inline_always!(|args| body)`: the closure `#[inline(always)] |args|
/// body` in the device build, where steps 11-13 and 17-27 hand their
/// blocks closures that must not become calls (a call keeps its arguments
/// in local memory, and `wgmma`'s accumulators must stay in registers),
/// and the plain closure on the host. An attribute on a closure needs the
/// nightly feature `stmt_expr_attributes`; without it there the host build
/// of this crate (the specs, the registry, the emulator, which the
/// library depends on) is stable Rust.
#[cfg(target_arch = "nvptx64")]
macro_rules! inline_always {
    ($($closure:tt)*) => {
        #[inline(always)]
        $($closure)*
    };
}
#[cfg(not(target_arch = "nvptx64"))]
macro_rules! inline_always {
    ($($closure:tt)*) => {
        $($closure)*
    };
}
pub(crate) use inline_always;
