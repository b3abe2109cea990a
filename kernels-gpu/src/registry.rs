//! Every kernel the PTX module exports, in ladder order (host side only).

use crate::launch::KernelSpec;

/// The kernels, in ladder order. `name` is also the PTX entry's name.
pub const KERNELS: &[KernelSpec] = &[crate::k01_naive::SPEC, crate::k02_tiled16::SPEC];

/// The kernel called `name`, if there is one.
pub fn find(name: &str) -> Option<&'static KernelSpec> {
    KERNELS.iter().find(|k| k.name == name)
}
