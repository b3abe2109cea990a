//! The CUDA C++ twins (`harness::baselines::TWINS`), checked without a GPU:
//! each twins a registered Rust kernel with the same launch parameters, and
//! each file compiles (nvcc's front end, the one NVRTC uses) and assembles
//! with no spills, like the Rust kernels (tests/tests/ptx.rs).

use std::path::PathBuf;
use std::process::Command;

use harness::baselines::TWINS;
use kernels_gpu::registry;
use tests::{find_ptxas, parse_ptxas, ptx_entry};

#[test]
fn every_twin_mirrors_a_registered_kernel_and_is_defined_in_its_file() {
    for src in TWINS {
        assert!(!src.kernels.is_empty(), "{} twins nothing", src.path);
        for name in src.kernels {
            assert!(
                registry::find(name).is_some(),
                "{}: {name} is not a registered Rust kernel",
                src.path
            );
            let defined = src
                .source
                .contains(&format!("extern \"C\" __global__ void {name}("))
                || src.source.contains(&format!(", {name})"));
            assert!(defined, "{}: no entry {name}", src.path);
        }
        // One twin per kernel: the bench pairs them by name.
        for name in src.kernels {
            let files = TWINS.iter().filter(|t| t.kernels.contains(name)).count();
            assert_eq!(files, 1, "{name} has {files} twins");
        }
    }
}

/// `INSTANCE(BM, BN, BK, WM_ITERS, WN_ITERS, NAME)` in tuned.cu: the
/// parameters the C++ instance is built with must give the Rust spec's
/// launch (threads, tile, shared memory) and name.
#[test]
fn tuned_twins_have_their_rust_kernels_parameters() {
    let src = TWINS
        .iter()
        .find(|t| t.path.ends_with("tuned.cu"))
        .expect("tuned.cu is a twin file");
    let mut seen = 0;
    for line in src.source.lines().filter(|l| l.starts_with("INSTANCE(")) {
        let args: Vec<&str> = line["INSTANCE(".len()..line.len() - 1]
            .split(',')
            .map(str::trim)
            .collect();
        let p: Vec<usize> = args[..5].iter().map(|a| a.parse().unwrap()).collect();
        let (bm, bn, bk, wmi, wni) = (p[0], p[1], p[2], p[3], p[4]);
        let name = args[5];
        let (wm, wn) = (16 * wmi, 32 * wni);
        assert_eq!(name, format!("tuned_{bm}x{bn}x{bk}_w{wm}x{wn}"));
        let spec = registry::find(name).expect("a registered kernel");
        let threads = (bm / wm) * (bn / wn) * 32;
        assert_eq!(spec.launch.block_threads, (threads as u32, 1), "{name}");
        assert_eq!(spec.launch.block_tile, (bm, bn), "{name}");
        // Two stages of A's transposed tile (rows of BM + 4) and B's.
        assert_eq!(
            spec.launch.shared_bytes,
            2 * (bm + 4 + bn) * bk * 4,
            "{name}"
        );
        assert!(src.kernels.contains(&name), "{name} is not listed in TWINS");
        seen += 1;
    }
    assert_eq!(seen, src.kernels.len(), "an instance per listed kernel");
}

/// The `#define NAME VALUE` lines of a twin whose value is an integer
/// literal.
fn integer_defines(source: &str) -> Vec<(&str, usize)> {
    source
        .lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|l| {
            let (name, value) = l.split_once(' ')?;
            Some((name, value.trim().parse().ok()?))
        })
        .collect()
}

/// wgmma_bf16_persistent.cu writes steps 20 and 22's constants out
/// (`#define PT_...`): they must give their Rust kernels' specs (threads,
/// tile, shared memory, TMA boxes, C's boxes for step 22, persistent grid,
/// element types).
#[test]
fn persistent_twin_has_its_rust_kernels_parameters() {
    use kernels_gpu::elem::Elem;
    use kernels_gpu::launch::{Operands, Ops, TmaCopy};
    let src = TWINS
        .iter()
        .find(|t| t.path.ends_with("wgmma_bf16_persistent.cu"))
        .expect("wgmma_bf16_persistent.cu is a twin file");
    let defines = integer_defines(src.source);
    let get = |name: &str| {
        defines
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("{}: no #define {name}", src.path))
            .1
    };
    let (bm, bn, bk, box_cols) = (
        get("PT_BM"),
        get("PT_BN"),
        get("PT_BK"),
        get("PT_B_BOX_COLS"),
    );
    let (stages, align, consumers) = (get("PT_STAGES"), get("PT_ALIGN"), get("PT_CONSUMERS"));
    let elem_bytes = get("PT_ELEM_BYTES");
    assert_eq!(get("PT_GROUP"), kernels_gpu::k20_wgmma_persistent::GROUP);
    let (c_rows, c_cols) = (get("PT_C_BOX_ROWS"), get("PT_C_BOX_COLS"));
    assert_eq!(
        src.kernels,
        [
            format!("wgmma_bf16_persistent_{bm}x{bn}x{bk}_s{stages}"),
            format!("wgmma_bf16_tma_store_{bm}x{bn}x{bk}_s{stages}")
        ]
    );
    for (name, step) in src.kernels.iter().zip([20, 22]) {
        let spec = registry::find(name).expect("a registered kernel");
        assert_eq!(spec.step, step, "{name}");
        let tma_c = step == 22;
        assert_eq!(spec.launch.block_threads, ((consumers + 128) as u32, 1));
        assert_eq!(spec.launch.block_tile, (bm, bn));
        assert!(spec.launch.persistent && spec.launch.register_cap);
        // The twin reads A and B as they are (A K-major, B N-major).
        assert_eq!(spec.ops, Ops::NN);
        // Alignment room, the stages (A's tile and B's, 16-bit), then step
        // 20's two 8-byte barriers per stage and the epilogue's staging
        // tiles (8 warps, 16 rows each), or step 22's barriers in a 1024-byte
        // block and two boxes of C per consumer warp.
        let stage_bytes = stages * (bm * bk + bk * bn) * elem_bytes;
        let after = if tma_c {
            align + 8 * 2 * c_rows * c_cols * 4
        } else {
            16 * stages + 8 * 16 * get("PT_STAGING_PITCH") * 4
        };
        assert_eq!(
            spec.launch.shared_bytes,
            align + stage_bytes + after,
            "{name}"
        );
        let Operands::TensorMaps(boxes) = spec.operands else {
            panic!("{name} takes tensor maps");
        };
        assert_eq!(boxes.a, (bm as u32, bk as u32));
        assert_eq!(boxes.b, (bk as u32, box_cols as u32));
        assert!(boxes.a_swizzle_128 && boxes.b_swizzle_128 && boxes.copy == TmaCopy::AsStored);
        let c_box = tma_c.then_some((c_rows as u32, c_cols as u32));
        assert_eq!(boxes.c, c_box, "{name}");
        assert_eq!(
            (spec.elems.a, spec.elems.b, spec.elems.c),
            (Elem::Bf16, Elem::Bf16, Elem::F32)
        );
        assert_eq!(spec.elems.a.bytes(), elem_bytes);
    }
}

/// nvcc from the same wheel as ptxas.
fn find_nvcc() -> Option<PathBuf> {
    let ptxas = find_ptxas()?;
    let nvcc = ptxas.with_file_name("nvcc");
    if nvcc.parent().is_some_and(|p| !p.as_os_str().is_empty()) {
        return nvcc.exists().then_some(nvcc);
    }
    Command::new("nvcc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
        .then(|| PathBuf::from("nvcc"))
}

#[test]
fn twins_compile_and_assemble_without_spills() {
    let (Some(nvcc), Some(ptxas)) = (find_nvcc(), find_ptxas()) else {
        assert!(
            std::env::var_os("REQUIRE_PTXAS").is_none(),
            "REQUIRE_PTXAS is set but nvcc/ptxas were not found"
        );
        eprintln!("SKIPPED: nvcc or ptxas not found (pip install nvidia-cuda-nvcc)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("twins-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for src in TWINS {
        let specs: Vec<_> = src
            .kernels
            .iter()
            .map(|n| registry::find(n).unwrap())
            .collect();
        // sm_90a for twins of sm_90a kernels; else a current GPU (the bench
        // compiles for the GPU it runs on).
        let arch = if specs.iter().any(|s| s.module.arch.exact) {
            "sm_90a"
        } else {
            "sm_90"
        };
        let stem = src.path.rsplit('/').next().unwrap();
        let cu = dir.join(stem);
        let ptx = dir.join(format!("{stem}.ptx"));
        // What NVRTC compiles: the headers pasted in.
        std::fs::write(&cu, src.source_for_nvrtc()).unwrap();
        let out = Command::new(&nvcc)
            .args(["--ptx", &format!("-arch={arch}"), "-o"])
            .arg(&ptx)
            .args((src.options)())
            .arg(&cu)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "nvcc could not compile {}:\n{}",
            src.path,
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&ptx).unwrap();
        for name in src.kernels {
            assert!(
                ptx_entry(&text, name).is_some(),
                "{}: no entry {name}",
                src.path
            );
        }
        let out = Command::new(&ptxas)
            .args([&format!("-arch={arch}"), "-v", "-o"])
            .arg(dir.join(format!("{stem}.cubin")))
            .arg(&ptx)
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "ptxas failed on {}:\n{log}", src.path);
        assert!(
            !log.contains("serialized"),
            "{}: ptxas serialised a wgmma pipeline:\n{log}",
            src.path
        );
        for e in parse_ptxas(&log) {
            assert_eq!(
                (e.spill_stores, e.spill_loads),
                (0, 0),
                "{} spills in {}",
                e.name,
                src.path
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
