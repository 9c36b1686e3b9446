//! The binary's behaviour on good and bad input (issue "physical memory model", Done when:
//! bad input gets a one-line error naming file, line and key; nothing is half-written).

use std::path::PathBuf;
use std::process::Command;

fn fraglab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fraglab"))
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fraglab-cli-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

const GOOD: &str = r#"[machine]
memory = "64MiB"
dma = false

[[op]]
alloc = "a"
count = 10
gfp = "GFP_KERNEL"

[[op]]
print = "buddyinfo"
"#;

/// Runs the binary on `text` with `-o`; returns (exit ok, stderr, whether the output exists).
fn run_spec(name: &str, text: &str) -> (bool, String, bool) {
    let d = temp_dir(name);
    let spec = d.join("spec.toml");
    let out = d.join("out.txt");
    std::fs::write(&spec, text).unwrap();
    let o = fraglab()
        .arg("run")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let exists = out.exists();
    let stderr = String::from_utf8(o.stderr).unwrap();
    std::fs::remove_dir_all(&d).unwrap();
    (o.status.success(), stderr, exists)
}

fn assert_one_line_error(name: &str, text: &str, line: usize, key: &str) {
    let (ok, stderr, exists) = run_spec(name, text);
    assert!(!ok, "{name}: should fail");
    assert!(!exists, "{name}: output must not be written");
    assert_eq!(stderr.lines().count(), 1, "{name}: one line, got {stderr:?}");
    assert!(
        stderr.contains(&format!("spec.toml:{line}: key {key}:")),
        "{name}: {stderr}"
    );
}

#[test]
fn good_spec_runs_and_writes_output() {
    let (ok, stderr, exists) = run_spec("good", GOOD);
    assert!(ok, "{stderr}");
    assert!(exists);
}

#[test]
fn unknown_key_is_named() {
    assert_one_line_error(
        "unknown",
        &GOOD.replace("dma = false", "dma = false\nnuma = 2"),
        4,
        "machine.numa",
    );
}

#[test]
fn wrong_type_is_named() {
    assert_one_line_error(
        "type",
        &GOOD.replace("count = 10", "count = \"ten\""),
        7,
        "op[0].count",
    );
}

#[test]
fn order_11_is_rejected() {
    assert_one_line_error(
        "order",
        &GOOD.replace("count = 10", "count = 10\norder = 11"),
        8,
        "op[0].order",
    );
}

#[test]
fn unknown_gfp_flag_is_rejected() {
    assert_one_line_error(
        "gfp",
        &GOOD.replace("GFP_KERNEL", "GFP_KERNEL|__GFP_NORETRI"),
        8,
        "op[0].gfp",
    );
}

#[test]
fn machine_smaller_than_a_pageblock_is_rejected() {
    assert_one_line_error("small", &GOOD.replace("64MiB", "1MiB"), 2, "machine.memory");
}

#[test]
fn runtime_failure_writes_nothing() {
    // 64 MiB cannot hold 100000 pages; must_succeed turns the first failure into an error.
    let text = GOOD.replace("count = 10", "count = 100000\nmust_succeed = true");
    let (ok, stderr, exists) = run_spec("runtime", &text);
    assert!(!ok);
    assert!(!exists);
    assert!(stderr.contains("spec.toml:5: op[0]"), "{stderr}");
}

#[test]
fn builtin_example_runs() {
    let o = fraglab()
        .args(["run", "--example", "claim-steal-merge"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("Number of blocks type"));
}

#[test]
fn every_builtin_example_parses_and_timed_examples_write_json() {
    let o = fraglab().args(["examples"]).output().unwrap();
    let list = String::from_utf8(o.stdout).unwrap();
    for name in ["claim-steal-merge", "kbuild-thp-burst", "pgbench-checkpoints"] {
        assert!(list.contains(name), "{list}");
        let text = fraglab().args(["examples", name]).output().unwrap().stdout;
        fraglab_spec::parse_spec(&String::from_utf8(text).unwrap(), name).unwrap();
    }
    // A timed run: the report on stdout, the result as JSON with -o.
    let d = temp_dir("timed");
    let out = d.join("r.json");
    let o = fraglab()
        .args(["run", "--example", "pgbench-checkpoints", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = String::from_utf8(o.stdout).unwrap();
    assert!(
        report.contains("x real time") && report.contains("pgbench TPS mean"),
        "{report}"
    );
    let r: fraglab_spec::result::RunResult =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(r.engine, "sim");
    assert!(r.pgbench.unwrap().mean_tps > 0.0);
    std::fs::remove_dir_all(&d).unwrap();
}

const TIMED: &str = r#"name = "tiny"
[machine]
memory = "256MiB"
cpus = 2
[knobs]
"transparent_hugepage/enabled" = "madvise"
[run]
seed = 5
[workload]
duration = "4s"
[[workload.thp_burst]]
interval = "1s"
size = "32MiB"
hold = "500ms"
bursts = 3
[[workload.task]]
name = "frag"
steps = [{ mmap = "a", size = "96MiB" }, { touch = "a", pattern = "random" }, { dontneed = "a", offset = "0", length = "32MiB" }, { sleep = "3s" }]
"#;

/// compare: the same output whatever the number of jobs (deterministic scheduling of runs),
/// knob overrides reach the runs, and a bad override names the configuration and the key.
#[test]
fn compare_is_deterministic_and_applies_overrides() {
    let d = temp_dir("compare");
    let spec = d.join("tiny.toml");
    std::fs::write(&spec, TIMED).unwrap();
    let s = spec.to_str().unwrap();
    let out = |jobs: &str| {
        let o = fraglab()
            .args(["compare", s])
            .arg(format!("never={s}@transparent_hugepage/enabled=never"))
            .args(["--runs", "2", "--format", "json", "--jobs", jobs])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let (a, b) = (out("1"), out("2"));
    assert_eq!(a, b, "jobs=1 and jobs=2 give the same report");
    let r: fraglab_spec::result::CompareReport = serde_json::from_str(&a).unwrap();
    assert_eq!(r.configs, vec!["tiny".to_string(), "never".to_string()]);
    let alloc = r
        .rows
        .iter()
        .find(|x| x.metric == "THP fault alloc" && x.stat == "Amean")
        .unwrap();
    assert!(
        alloc.values[0] > 0.0,
        "madvised bursts get THPs: {:?}",
        alloc.values
    );
    assert_eq!(alloc.values[1], 0.0, "THP disabled by the override");
    let o = fraglab()
        .args(["compare", &format!("{s}@vm.defrag_mode=7")])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("tiny.toml [vm.defrag_mode=7]") && err.contains("vm.defrag_mode"),
        "{err}"
    );
}

/// The newcomer's mistakes (issue 36 item 6): `run` without a spec shows both forms and the
/// examples; `compare` with one configuration runs it and says there is nothing to compare;
/// `report` takes the directory `compare --results-dir` wrote, and a directory without results
/// says what it expected.
#[test]
fn run_compare_and_report_explain_a_newcomers_mistakes() {
    let o = fraglab().arg("run").output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("fraglab run --example <NAME>") && err.contains("kbuild-thp-burst"),
        "{err}"
    );

    let d = temp_dir("newcomer");
    let spec = d.join("tiny.toml");
    std::fs::write(&spec, TIMED).unwrap();
    // `run` takes overrides as a configuration of `compare` does.
    let o = fraglab()
        .args(["run", &format!("{}@workload.duration=1s", spec.display())])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("[workload.duration=1s]: 1.0 s simulated"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let runs = d.join("runs");
    let o = fraglab()
        .args(["compare", spec.to_str().unwrap(), "--runs", "2", "--results-dir"])
        .arg(&runs)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // On a pipe (a script) compare stays quiet; on a terminal it says there is nothing to
    // compare (util-linux `script` gives the command a terminal).
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new("script")
        .args(["-qec"])
        .arg(format!(
            "{} compare {} --runs 1",
            env!("CARGO_BIN_EXE_fraglab"),
            spec.display()
        ))
        .arg("/dev/null")
        .output()
        .expect("util-linux script");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tty = String::from_utf8_lossy(&o.stdout);
    assert!(
        tty.contains("one configuration (tiny): nothing to compare it with"),
        "{tty}"
    );

    let html = d.join("r.html");
    let o = fraglab()
        .args(["report", "-o"])
        .arg(&html)
        .arg(&runs)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("tiny") && page.contains("2 runs"),
        "both runs in the report"
    );

    let empty = d.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = fraglab()
        .args(["report", "-o"])
        .arg(d.join("e.html"))
        .arg(&empty)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("a directory without result files") && err.contains("--results-dir"),
        "{err}"
    );
    assert!(!d.join("e.html").exists(), "nothing written");
    std::fs::remove_dir_all(&d).unwrap();
}

/// `fraglab blame` ranks a result's sources, and every bad input is an error naming the file
/// and what was expected: a result without blame, a file that is no result, a directory, an
/// unknown format.
#[test]
fn blame_ranks_sources_and_refuses_what_is_no_blamed_result() {
    let d = temp_dir("blame");
    let spec = d.join("tiny.toml");
    std::fs::write(&spec, TIMED).unwrap();
    let (with, without) = (d.join("with.json"), d.join("without.json"));
    for (out, extra) in [(&with, "@run.blame=true"), (&without, "")] {
        let o = fraglab()
            .args(["run", &format!("{}{extra}", spec.display()), "-o"])
            .arg(out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let blame = |path: &std::path::Path, format: &str| {
        fraglab()
            .args(["blame", "--format", format])
            .arg(path)
            .output()
            .unwrap()
    };
    let o = blame(&with, "csv");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = String::from_utf8(o.stdout).unwrap();
    assert!(
        csv.starts_with("rank,source,mixed_blocks,compact_blocked_blocks,steal,"),
        "{csv}"
    );
    assert!(csv.lines().count() > 1, "at least one source: {csv}");
    let err = |path: &std::path::Path, format: &str| {
        let o = blame(path, format);
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    assert!(err(&without, "table").contains("no blame section"));
    assert!(err(&spec, "table").contains("not a fraglab result"));
    assert!(err(&d, "table").contains("a directory, not a regular file"));
    assert!(err(&with, "xml").contains("--format xml: expected table, json or csv"));
    // The live side: a page_owner dump (two blocks of Movable, one with a dentry slab page),
    // and a snapshot taken without page_owner.
    let po = d.join("page_owner.txt");
    let rec = |pfn: u64, t: &str, frames: &str| {
        format!(
            "Page allocated via order 0, mask 0xcc0(GFP_KERNEL), pid 9, tgid 9 (cc1), ts 1 ns\n\
             PFN 0x{pfn:x} type {t} Block {} type Movable Flags 0x0()\n{frames}\n",
            pfn >> 9
        )
    };
    let slab =
        " post_alloc_hook+0x1/0x2\n allocate_slab+0x1/0x2\n __d_alloc+0x1/0x2\n d_alloc_parallel+0x1/0x2\n";
    let anon = " post_alloc_hook+0x1/0x2\n do_anonymous_page+0x1/0x2\n";
    std::fs::write(
        &po,
        rec(512, "Movable", anon) + &rec(513, "Unmovable", slab) + &rec(1024, "Movable", anon),
    )
    .unwrap();
    let o = blame(&po, "table");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = String::from_utf8(o.stdout).unwrap();
    assert!(
        t.contains("3 allocations in 2 pageblocks; mixed: 1 Movable")
            && t.contains("__d_alloc < d_alloc_parallel"),
        "{t}"
    );
    let snap = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../experiments/validation/snapshot-compact.fsnap"
    );
    assert!(err(std::path::Path::new(snap), "table").contains("a snapshot without page_owner"));
    std::fs::write(&po, "Page allocated via order 0, mask 0x0(), pid 1, tgid 1 (x), ts 1 ns\nPFN 0x1 type Nope Block 0 type Movable Flags 0\n").unwrap();
    let e = err(&po, "table");
    assert!(
        e.contains("page_owner.txt") && e.contains("line 2") && e.contains("unknown migratetype"),
        "{e}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// `fraglab host run --dry-run` says what it would change without changing it; a generator the
/// host engine does not run is refused with its own exit code (14), before any knob changes.
/// It reads the live kernel's knobs: opt in with `--features live`.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn host_dry_run_and_refusals() {
    let spec = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../experiments/host/frag-thp.toml"
    );
    let is_root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1).map(|u| u == "0"))
        .unwrap_or(false);
    let o = fraglab()
        .args(["host", "run", spec, "--dry-run"])
        .output()
        .unwrap();
    if !is_root {
        assert_eq!(
            o.status.code(),
            Some(11),
            "not root: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        return;
    }
    let before = std::fs::read_to_string("/proc/sys/vm/defrag_mode").unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("vm.defrag_mode") && out.contains("[/proc/sys/vm/defrag_mode]"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/defrag_mode").unwrap(),
        before,
        "dry run changed nothing"
    );
    let d = temp_dir("host-refuse");
    let kb = d.join("kb.toml");
    std::fs::write(&kb, include_str!("../../../examples/kbuild-thp-burst.toml")).unwrap();
    let o = fraglab().args(["host", "run"]).arg(&kb).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(14),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("[[workload.kbuild]]"));
}

/// `-o` onto a special file writes into it and leaves it in place; `-o` onto a symlink keeps
/// the link. (Renaming a temporary file over the path — right for regular files, so nothing is
/// half-written — once replaced the machine's /dev/null with a regular file when run as root.)
#[test]
fn output_to_fifo_or_symlink_keeps_the_special_file() {
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;
    let d = temp_dir("special-out");
    let spec = d.join("spec.toml");
    std::fs::write(&spec, GOOD).unwrap();

    let fifo = d.join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut s = String::new();
            std::fs::File::open(&fifo)
                .unwrap()
                .read_to_string(&mut s)
                .unwrap();
            s
        })
    };
    let o = fraglab()
        .arg("run")
        .arg(&spec)
        .arg("-o")
        .arg(&fifo)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = reader.join().unwrap();
    assert!(got.contains("Node 0"), "the FIFO's reader got {got:?}");
    let m = std::fs::symlink_metadata(&fifo).unwrap();
    assert!(m.file_type().is_fifo(), "the FIFO was replaced: {m:?}");
    assert!(!d.join("pipe.tmp-fraglab").exists());

    let file = d.join("real.txt");
    std::fs::write(&file, "old").unwrap();
    let link = d.join("link.txt");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let o = fraglab()
        .arg("run")
        .arg(&spec)
        .arg("-o")
        .arg(&link)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(&file).unwrap().contains("Node 0"));
    std::fs::remove_dir_all(&d).unwrap();
}
