//! `fraglab report`: the page holds every plot with content, escapes text, is deterministic,
//! and renders in headless Chromium (skipped, with the reason printed, where no Chromium is
//! installed; `.ci/run` installs Debian's `chromium`).

use fraglab_report::render_html;
use fraglab_spec::result::{CompareReport, CompareRow, RunResult};

const SPEC: &str = r#"name = "report-test"
[machine]
memory = "256MiB"
cpus = 2
[knobs]
"transparent_hugepage/enabled" = "madvise"
[run]
seed = 3
[workload]
duration = "6s"
[[workload.thp_burst]]
interval = "1s"
size = "32MiB"
hold = "500ms"
bursts = 5
[[workload.task]]
name = "frag"
steps = [{ mmap = "a", size = "96MiB" }, { touch = "a", pattern = "random" }, { dontneed = "a", offset = "0", length = "48MiB" }, { slab = 3000 }, { sleep = "4s" }]
"#;

fn result() -> RunResult {
    let spec = fraglab_spec::parse_spec(SPEC, "report-test.toml").unwrap();
    fraglab_sim::timed::run_workload(&spec).unwrap()
}

fn compare() -> CompareReport {
    CompareReport {
        configs: vec!["base".into(), "new <x>".into()],
        runs: 3,
        rows: vec![CompareRow {
            metric: "THP fault alloc".into(),
            stat: "Amean".into(),
            values: vec![100.0, 150.0],
            change_pct: vec![None, Some(50.0)],
            significant: vec![false, true],
            per_run: vec![],
            unmeasured: vec![],
        }],
    }
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn every_plot_is_present_and_not_empty() {
    let r = result();
    let html = render_html(&[("run <1> & co".into(), r.clone())], Some(&compare()));
    assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
    // Self-contained: no scripts, no external resources (the only URL is SVG's namespace).
    assert!(!html.contains("<script") && !html.contains(" src=") && !html.contains("href="));
    // The pageblock map: a rect per run of equal cells, at least one per snapshot.
    let map = &html[html.find("class=\"map\"").unwrap()..];
    let map = &map[..map.find("</svg>").unwrap()];
    assert!(
        count(map, "<rect") >= r.pageblock_maps.len() + 6,
        "map cells and legend"
    );
    // Line charts with drawn paths: free memory by order (11 orders), THP so far (2), per burst
    // (2 charts), latencies (one line per order and path seen).
    for title in [
        "Free memory by order",
        "THP faults so far",
        "THP success per burst",
        "Hugealloc time per burst",
        "Fault latency distribution per order and path",
    ] {
        let at = html.find(title).unwrap_or_else(|| panic!("{title} missing"));
        let chart = &html[at..at + html[at..].find("</svg>").unwrap()];
        assert!(count(chart, "<path d=\"M") >= 1, "{title}: no line drawn");
    }
    // Escaping: the label and the config name are text, not markup.
    assert!(html.contains("run &lt;1&gt; &amp; co") && html.contains("new &lt;x&gt;"));
    assert!(!html.contains("<1>"));
    // The compare table marks the significant cell.
    assert!(html.contains("<td class=\"sig\">150.00 *+50.00%*</td>"));
    // Deterministic.
    assert_eq!(html, render_html(&[("run <1> & co".into(), r)], Some(&compare())));
}

fn chromium() -> Option<String> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            std::process::Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(str::to_string)
}

#[test]
fn renders_in_headless_chromium() {
    let Some(bin) = chromium() else {
        eprintln!("SKIPPED renders_in_headless_chromium: no chromium binary (apt-get install chromium)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("fraglab-report-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("report.html");
    std::fs::write(&page, render_html(&[("run".into(), result())], Some(&compare()))).unwrap();
    let url = format!("file://{}", page.display());
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
    ];
    let dom = std::process::Command::new(&bin)
        .args(common)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    assert!(dom.status.success(), "{}", String::from_utf8_lossy(&dom.stderr));
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(count(&dom, "<svg") >= 6, "the browser's DOM holds the plots");
    assert!(dom.contains("Pageblock map over time"));
    let png = dir.join("report.png");
    let shot = std::process::Command::new(&bin)
        .args(common)
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,2400")
        .arg(&url)
        .output()
        .unwrap();
    assert!(shot.status.success(), "{}", String::from_utf8_lossy(&shot.stderr));
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    // A blank 1200x2400 page compresses to a few KB; the plots make it much larger.
    assert!(
        bytes.len() > 50_000,
        "screenshot of {} bytes looks blank",
        bytes.len()
    );
    std::fs::remove_dir_all(&dir).ok();
}
