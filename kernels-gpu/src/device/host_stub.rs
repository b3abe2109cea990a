//! TEMPORARY: host side of the device helpers until the CPU emulator lands.
#![allow(clippy::missing_safety_doc)]
fn no_gpu() -> ! {
    unimplemented!("device code runs on the GPU only (CPU emulator pending)")
}
pub fn thread_idx_x() -> usize {
    no_gpu()
}
pub fn thread_idx_y() -> usize {
    no_gpu()
}
pub fn block_idx_x() -> usize {
    no_gpu()
}
pub fn block_idx_y() -> usize {
    no_gpu()
}
pub fn sync_threads() {
    no_gpu()
}
pub unsafe fn load(_: usize) -> f32 {
    no_gpu()
}
pub unsafe fn store(_: usize, _: f32) {
    no_gpu()
}
pub unsafe fn load4(_: usize) -> [f32; 4] {
    no_gpu()
}
pub unsafe fn store4(_: usize, _: [f32; 4]) {
    no_gpu()
}
