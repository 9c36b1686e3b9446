//! `fraglab host snapshot --pages -o STATE` and `fraglab snapshot info STATE` (issue 21 item 1,
//! docs/model §30).

use std::path::PathBuf;
use std::time::Instant;

use clap::Subcommand;
use fraglab_state::page::PageClass;
use fraglab_state::reconstruct::{reconstruct, ReconstructOptions};
use fraglab_state::snapshot::Snapshot;

#[derive(Subcommand)]
pub enum SnapshotCmd {
    /// What a snapshot file holds (machine, zones, pages by class, knobs, confounders) and, unless
    /// `--no-fit`, how its reconstruction matches the captured tables (blocks per type, free
    /// chunks per order and type, mixed blocks, the block-type fit).
    Info {
        state: PathBuf,
        /// Only the header and the pages by class.
        #[arg(long)]
        no_fit: bool,
        /// Local-search swaps of the block-type fit.
        #[arg(long, default_value_t = ReconstructOptions::default().max_swaps)]
        max_swaps: u64,
        #[arg(long, default_value_t = ReconstructOptions::default().seed)]
        seed: u64,
    },
}

pub fn snapshot(cmd: SnapshotCmd) -> Result<(), String> {
    match cmd {
        SnapshotCmd::Info {
            state,
            no_fit,
            max_swaps,
            seed,
        } => info(state, no_fit, max_swaps, seed),
    }
}

/// Pages by class, "anon 1.2 GiB, file ..." (classes with pages only).
fn by_class(pages: &[u8]) -> String {
    let mut n = [0u64; 12];
    for &b in pages {
        n[(b & 0x0f) as usize] += 1;
    }
    PageClass::ALL
        .iter()
        .filter(|c| n[**c as usize] > 0)
        .map(|c| format!("{} {}", c.name(), n[*c as usize]))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `host snapshot --pages -o STATE`.
pub fn capture(output: Option<PathBuf>) -> Result<(), String> {
    let Some(out) = output else {
        return Err("host snapshot --pages needs -o STATE: the snapshot file to write".into());
    };
    use std::io::IsTerminal;
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} pfns")
                .expect("valid template")
                .progress_chars("=> "),
        );
        b
    });
    let t0 = Instant::now();
    let snap = fraglab_host::snapshot::capture(&Default::default(), &mut |done, total| {
        if let Some(b) = &bar {
            b.set_length(total);
            b.set_position(done);
        }
    })
    .unwrap_or_else(|e| crate::host::fail(e));
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let took = t0.elapsed();
    snap.write(&out).map_err(|e| e.to_string())?;
    let size = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
    println!(
        "{}: {} pfns of {} ({}), zones {}",
        out.display(),
        snap.header.end_pfn,
        snap.header.hostname,
        snap.header.kernel,
        snap.header
            .zones
            .iter()
            .filter(|z| z.spanned > 0)
            .map(|z| z.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("pages: {}", by_class(&snap.pages));
    println!(
        "captured in {:.2} s (kpageflags read {:.2} s), file {:.2} MB",
        took.as_secs_f64(),
        snap.header.read_ns as f64 / 1e9,
        size as f64 / 1e6
    );
    Ok(())
}

/// `snapshot info STATE`.
fn info(state: PathBuf, no_fit: bool, max_swaps: u64, seed: u64) -> Result<(), String> {
    let snap = Snapshot::read(&state).map_err(|e| e.to_string())?;
    let h = &snap.header;
    println!(
        "{}: {} ({}), {} CPUs, {} pfns, taken at {} (unix s), kpageflags read in {:.2} s",
        state.display(),
        h.hostname,
        h.kernel,
        h.nr_cpus,
        h.end_pfn,
        h.taken_at_unix_s,
        h.read_ns as f64 / 1e9
    );
    for z in h.zones.iter().filter(|z| z.spanned > 0) {
        println!(
            "  zone {:<7} start_pfn {:>8} spanned {:>8} present {:>8} managed {:>8} min/low/high {}/{}/{} pcp {}",
            z.name, z.start_pfn, z.spanned, z.present, z.managed, z.min, z.low, z.high, z.pcp_count
        );
    }
    println!("  pages: {}", by_class(&snap.pages));
    println!(
        "  knobs: {}; page_owner: {}",
        h.knobs.len(),
        match &h.page_owner_blocks {
            Some(b) => format!("{} blocks", b.len()),
            None => "absent".into(),
        }
    );
    let pr = &h.confounders["page_reporting"];
    if !pr.is_null() {
        println!("  page reporting: {pr}");
    }
    if no_fit {
        return Ok(());
    }
    let t0 = Instant::now();
    let r = reconstruct(
        &snap,
        &ReconstructOptions {
            max_swaps,
            seed,
            ..Default::default()
        },
    )?;
    println!("  reconstructed in {:.2} s", t0.elapsed().as_secs_f64());
    print!("{}", r.report.render());
    Ok(())
}
