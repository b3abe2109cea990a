//! Compile-time unrolling for register-tiled kernels.

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
