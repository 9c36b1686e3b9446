//! The README's report pictures: renders a report page in headless Chromium and writes
//! OUT/report-summary.png (the page down to the first plot: the summary and compare tables),
//! OUT/report-KIND.png for the README's kinds of figure ([`README_KINDS`]; every kind with
//! `--all`; consecutive figures of a kind, as the pageblock maps of every configuration, in one
//! picture) and OUT/report-thp-faults-per-run.png (the THP faults with the page's toggle on: a
//! line per run).
//!
//! OUT is a new directory under the system's temporary directory unless `--out DIR` names one:
//! the committed pictures in docs/ are only replaced when asked for, with `--out docs/`.
//!
//!     cargo run --release -p fraglab-report --example screenshots -- report.html              # to /tmp/...
//!     cargo run --release -p fraglab-report --example screenshots -- report.html --out docs/  # the README's

#[path = "../tests/browser/mod.rs"]
mod browser;

use std::path::PathBuf;

/// Window width of the pictures (the page fills it).
const WIDTH: usize = 1280;

/// The kinds of figure the README shows.
const README_KINDS: [&str; 6] = [
    "free-by-order",
    "thp-faults",
    "latency",
    "pageblocks",
    "hugealloc-time",
    "thp-success-per-burst",
];

fn usage() -> ! {
    eprintln!("usage: screenshots REPORT.html [--out DIR] [--width PIXELS] [--all]  (without --out: a new directory under the temporary directory)");
    std::process::exit(2);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut page, mut out, mut width, mut all) = (None, None, WIDTH, false);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--all" => all = true,
            "--out" => out = Some(PathBuf::from(args.next().unwrap_or_else(|| usage()))),
            "--width" => {
                width = args
                    .next()
                    .and_then(|w| w.parse().ok())
                    .filter(|w| (400..=4000).contains(w))
                    .unwrap_or_else(|| usage())
            }
            _ if a.starts_with('-') || page.is_some() => {
                // A second path (the old `screenshots report.html docs/`) is refused rather than
                // taken as the output directory.
                eprintln!(
                    "screenshots: unexpected argument {a:?}: the output directory is given with --out DIR"
                );
                usage();
            }
            _ => page = Some(a),
        }
    }
    let Some(page) = page else { usage() };
    let Some(bin) = browser::chromium() else {
        eprintln!("screenshots: no chromium binary (apt-get install chromium)");
        std::process::exit(1);
    };
    let page = std::fs::canonicalize(&page).unwrap_or_else(|e| panic!("{page}: {e}"));
    let out = out.unwrap_or_else(|| {
        let mut i = 0;
        loop {
            let d = std::env::temp_dir().join(format!("fraglab-screenshots-{}-{i}", std::process::id()));
            if !d.exists() {
                break d;
            }
            i += 1;
        }
    });
    std::fs::create_dir_all(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    let (_, drawn, shot) = browser::render(&bin, &page, width);
    let plots = &drawn.plots;
    let first = plots.first().map_or(shot.height, |p| p.div.y);
    // The summary: from the top to the section heading before the first plot.
    let summary = out.join("report-summary.png");
    shot.crop(0, 0, width, first.saturating_sub(60), &summary);
    println!("{}", summary.display());
    let crop = |shot: &browser::Shot, i: usize, j: usize, name: &str| {
        let (top, last) = (plots[i].div.y, &plots[j - 1].div);
        // The pageblock maps' colour key sits below each map.
        let bottom = last.y + last.h + if plots[i].kind == "pageblocks" { 24 } else { 4 };
        let path = out.join(name);
        shot.crop(0, top.saturating_sub(4), width, bottom - top + 4, &path);
        println!("{}", path.display());
    };
    let mut i = 0;
    while i < plots.len() {
        let mut j = i + 1;
        while j < plots.len() && plots[j].kind == plots[i].kind {
            j += 1;
        }
        if all || README_KINDS.contains(&plots[i].kind.as_str()) {
            crop(&shot, i, j, &format!("report-{}.png", plots[i].kind));
        }
        i = j;
    }
    // The toggle on: the same page opened as report.html#per-run.
    if let Some(i) = plots.iter().position(|p| p.kind == "thp-faults") {
        let per_run = browser::screenshot(&bin, &page, width, drawn.height, "per-run");
        crop(&per_run, i, i + 1, "report-thp-faults-per-run.png");
    }
}
