//! The NVIDIA driver and CUDA libraries, probed without panicking.
//!
//! cudarc loads every library at run time and panics on the first call
//! into one it cannot load, so each probe first asks whether the library
//! is present (`is_culib_present`) and only then calls into it.

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{DriverError, result as cu};

/// One GPU as the driver reports it.
#[derive(Debug, Clone)]
pub struct GpuInfo {
    pub ordinal: i32,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sms: i32,
    pub memory_bytes: usize,
}

/// What the driver says, from "not installed" to a list of GPUs.
#[derive(Debug)]
pub enum Driver {
    /// libcuda could not be loaded.
    Absent,
    /// libcuda loaded, but a call failed (cuInit, counting GPUs).
    Failed { doing: &'static str, error: String },
    /// `cuda_version` is e.g. 13000 for CUDA 13.0; `gpus` may be empty.
    Ready {
        cuda_version: i32,
        gpus: Vec<GpuInfo>,
    },
}

/// `CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)`.
pub fn error_text(e: &DriverError) -> String {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned());
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned());
    match (name, text) {
        (Ok(name), Ok(text)) => format!("{name} ({text})"),
        (Ok(name), Err(_)) => name,
        _ => format!("CUDA error {}", e.0 as i32),
    }
}

/// `13000` -> `13.0`.
pub fn version_text(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

pub fn probe_driver() -> Driver {
    // SAFETY: only tries to dlopen libcuda under its usual names.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Driver::Absent;
    }
    if let Err(e) = cu::init() {
        // No GPU is not a failure of the driver: report it as zero GPUs.
        if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_NO_DEVICE {
            return Driver::Ready {
                cuda_version: driver_version(),
                gpus: Vec::new(),
            };
        }
        return Driver::Failed {
            doing: "initialising the driver (cuInit)",
            error: error_text(&e),
        };
    }
    let cuda_version = driver_version();
    let count = match cu::device::get_count() {
        Ok(c) => c,
        Err(e) => {
            return Driver::Failed {
                doing: "counting GPUs",
                error: error_text(&e),
            };
        }
    };
    let gpus = (0..count).filter_map(|i| gpu_info(i).ok()).collect();
    Driver::Ready { cuda_version, gpus }
}

fn driver_version() -> i32 {
    let mut v = 0;
    // SAFETY: libcuda is loaded (checked by the caller); writes one int.
    // cuDriverGetVersion works before cuInit too.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    v
}

fn gpu_info(ordinal: i32) -> Result<GpuInfo, DriverError> {
    let dev = cu::device::get(ordinal)?;
    // SAFETY: `dev` was just returned by cuDeviceGet.
    let attr = |a| unsafe { cu::device::get_attribute(dev, a) };
    Ok(GpuInfo {
        ordinal,
        name: cu::device::get_name(dev)?,
        compute_capability: (
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        sms: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        // SAFETY: `dev` was just returned by cuDeviceGet.
        memory_bytes: unsafe { cu::device::total_mem(dev)? },
    })
}

/// NVRTC's version, None when libnvrtc cannot be loaded.
pub fn nvrtc_version() -> Option<(i32, i32)> {
    // SAFETY: only tries to dlopen libnvrtc under its usual names.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return None;
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library loads (checked above), and every NVRTC has
    // nvrtcVersion; it writes two ints.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    Some((major, minor))
}

/// cuBLAS's version, None when libcublas cannot be loaded.
pub fn cublas_version() -> Option<(i32, i32, i32)> {
    use cudarc::cublas::sys::{cublasGetProperty, libraryPropertyType};
    // SAFETY: only tries to dlopen libcublas under its usual names.
    if !unsafe { cudarc::cublas::sys::is_culib_present() } {
        return None;
    }
    let mut v = [0; 3];
    for (slot, prop) in v.iter_mut().zip([
        libraryPropertyType::MAJOR_VERSION,
        libraryPropertyType::MINOR_VERSION,
        libraryPropertyType::PATCH_LEVEL,
    ]) {
        // SAFETY: the library loads (checked above), cublasGetProperty
        // needs no handle and writes one int.
        unsafe { cublasGetProperty(prop, slot) };
    }
    Some((v[0], v[1], v[2]))
}
