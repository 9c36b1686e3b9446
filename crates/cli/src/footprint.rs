//! `fraglab footprint`: the model's host memory per simulated page.

/// Boots a machine of `memory` and prints the model's per-page state and the growth of this
/// process's peak RSS.
pub fn footprint(memory: String) -> Result<(), String> {
    let bytes = fraglab_spec::parse_size(&memory).map_err(|e| format!("--memory: {e}"))?;
    let before = peak_rss_kib();
    let machine = fraglab_mm::MachineConfig::x86_64(bytes, true, 2).map_err(|e| e.to_string())?;
    let mm = fraglab_mm::Mm::new(&machine, fraglab_mm::Tunables::default()).map_err(|e| e.to_string())?;
    let pages = mm.end_pfn() as f64;
    println!("simulated machine: {memory} ({} pfns spanned)", mm.end_pfn());
    println!(
        "model state (per-page arrays + pageblock bits): {} bytes = {:.2} bytes per page",
        mm.host_bytes(),
        mm.host_bytes() as f64 / pages
    );
    if let (Some(b), Some(a)) = (before, peak_rss_kib()) {
        println!(
            "process peak RSS grew by {} KiB = {:.2} bytes per page (VmHWM)",
            a - b,
            (a - b) as f64 * 1024.0 / pages
        );
    }
    Ok(())
}

/// VmHWM of this process from /proc/self/status, in KiB (Linux only).
fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
