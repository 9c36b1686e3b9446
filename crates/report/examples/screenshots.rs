//! The README's report pictures: renders a report page in headless Chromium and writes
//! OUTDIR/report-summary.png (the page down to the first plot: the summary and compare tables)
//! and one OUTDIR/report-KIND.png per kind of figure (consecutive figures of a kind, as the
//! pageblock maps of every configuration, in one picture).
//!
//!     cargo run --release -p fraglab-report --example screenshots -- report.html docs/

#[path = "../tests/browser/mod.rs"]
mod browser;

use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [page, out] = &args[..] else {
        eprintln!("usage: screenshots REPORT.html OUTDIR");
        std::process::exit(2);
    };
    let Some(bin) = browser::chromium() else {
        eprintln!("screenshots: no chromium binary (apt-get install chromium)");
        std::process::exit(1);
    };
    let page = std::fs::canonicalize(page).unwrap_or_else(|e| panic!("{page}: {e}"));
    let out = PathBuf::from(out);
    let (_, plots, shot) = browser::render(&bin, &page);
    let width = browser::WINDOW_WIDTH;
    let first = plots.first().map_or(shot.height, |p| p.div.y);
    // The summary: from the top to the section heading before the first plot.
    let summary = out.join("report-summary.png");
    shot.crop(0, 0, width, first.saturating_sub(60), &summary);
    println!("{}", summary.display());
    let mut i = 0;
    while i < plots.len() {
        let mut j = i + 1;
        while j < plots.len() && plots[j].kind == plots[i].kind {
            j += 1;
        }
        let (top, last) = (plots[i].div.y, &plots[j - 1].div);
        // The pageblock maps' colour key sits below each map.
        let bottom = last.y + last.h + if plots[i].kind == "pageblocks" { 24 } else { 4 };
        let path = out.join(format!("report-{}.png", plots[i].kind));
        shot.crop(0, top.saturating_sub(4), width, bottom - top + 4, &path);
        println!("{}", path.display());
        i = j;
    }
}
