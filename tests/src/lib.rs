//! Helpers shared by the workspace's tests (see `tests/tests/`).

use std::path::PathBuf;
use std::process::Command;

/// The PTX entry `name`'s body: from its `.entry` line to the next entry.
pub fn ptx_entry<'a>(ptx: &'a str, name: &str) -> Option<&'a str> {
    let start = ptx.find(&format!(".entry {name}("))?;
    let rest = &ptx[start..];
    let end = rest[1..].find(".entry ").map_or(rest.len(), |i| i + 1);
    Some(&rest[..end])
}

/// NVIDIA's `ptxas`: on PATH, or where `pip install nvidia-cuda-nvcc` puts it.
pub fn find_ptxas() -> Option<PathBuf> {
    if Command::new("ptxas")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Some(PathBuf::from("ptxas"));
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))",
        ])
        .output()
        .ok()?;
    let site = String::from_utf8(out.stdout).ok()?;
    let path = PathBuf::from(site.trim()).join("nvidia/cu13/bin/ptxas");
    path.exists().then_some(path)
}

/// What `ptxas -v` reports for one entry.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PtxasEntry {
    pub name: String,
    pub registers: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
    pub stack_bytes: u32,
}

/// Parses `ptxas -v` output into one record per entry function.
pub fn parse_ptxas(verbose: &str) -> Vec<PtxasEntry> {
    let mut entries: Vec<PtxasEntry> = Vec::new();
    let number_before = |line: &str, unit: &str| -> Option<u32> {
        let idx = line.find(unit)?;
        line[..idx].split_whitespace().last()?.parse().ok()
    };
    let mut current: Option<usize> = None;
    for line in verbose.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            entries.push(PtxasEntry {
                name,
                ..Default::default()
            });
            current = Some(entries.len() - 1);
        } else if let Some(rest) = line.split("Function properties for ").nth(1) {
            // Properties of a non-entry function (core's panic paths, a
            // body left out of line, whose mangled name ends with the
            // entry's) follow.
            let is_entry = current.is_some_and(|i| rest.trim() == entries[i].name);
            if !is_entry {
                current = None;
            }
        } else if let Some(e) = current.map(|i| &mut entries[i]) {
            if let Some(v) = number_before(line, "bytes stack frame") {
                e.stack_bytes = v;
                e.spill_stores = number_before(line, "bytes spill stores").unwrap_or(0);
                e.spill_loads = number_before(line, "bytes spill loads").unwrap_or(0);
            }
            if let Some(v) = number_before(line, "registers") {
                e.registers = v;
            }
        }
    }
    entries
}

/// `len` deterministic test inputs in ±[0.5, 1.5) (xorshift64* from
/// `seed`): never zero, so every product counts.
pub fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ seed.wrapping_mul(0x1000_0000_01b3);
    (0..len)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let bits = state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
            let x = 0.5 + bits as f32 / (1u64 << 24) as f32;
            if bits & 1 == 0 { x } else { -x }
        })
        .collect()
}
