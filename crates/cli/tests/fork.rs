//! Warm starts (issue 37). Warm forks (`fraglab compare --fork-at`): a configuration forked
//! from the first one's run with the same settings gives the uninterrupted run's result byte
//! for byte, for every workload generator; one with other settings goes its own way from the
//! fork on. Checkpoints (`[run] checkpoint_at`, `[machine] checkpoint`): the same, through a
//! file.

use std::path::PathBuf;
use std::process::{Command, Output};

fn fraglab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fraglab"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args(args)
        .output()
        .unwrap()
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fraglab-fork-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A result file as a JSON value without its wall time and fork time.
fn result(path: &std::path::Path) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let m = v.as_object_mut().unwrap();
    m.remove("wall_ns");
    m.remove("fork_at_ns");
    v
}

/// Every generator: kbuild and thp_burst, pgbench, thpchallenge and fio small files,
/// vm-scalability, task programs (with DAMON in one, from a snapshot in the last).
const SPECS: &[(&str, &str, &str)] = &[
    ("kbuild", "example:kbuild-thp-burst@workload.duration=12s", "6s"),
    (
        "pgbench",
        "example:pgbench-checkpoints@workload.duration=8s",
        "4s",
    ),
    (
        "thpchallenge",
        "experiments/defrag-mode/thpchallenge-fio.toml@workload.duration=12s",
        "6s",
    ),
    (
        "vmscal",
        "experiments/folio-compaction/vmscal-thp.toml@workload.duration=6s",
        "3s",
    ),
    ("task", "experiments/host/frag-thp.toml", "4s"),
    (
        "damon",
        "experiments/damon-reclaim/idle-cache.toml@workload.duration=20s",
        "10s",
    ),
    // A machine booted from a snapshot (its knobs merged as at boot).
    ("snapshot", "experiments/validation/snapshot-compact.toml", "1s"),
];

#[test]
fn a_fork_with_the_same_settings_is_the_uninterrupted_run_for_every_generator() {
    for (name, spec, at) in SPECS {
        let dir = temp_dir(name);
        let straight = dir.join("straight.json");
        ok(&fraglab(&["run", spec, "-o", straight.to_str().unwrap()]));
        let a = format!("a={spec}");
        let b = format!("b={spec}");
        let sep = if spec.contains('@') { ',' } else { '@' };
        let c = format!("c={spec}{sep}vm.defrag_mode=1,model.policy=contiguitas");
        let o = fraglab(&[
            "compare",
            &a,
            &b,
            &c,
            "--fork-at",
            at,
            "--results-dir",
            dir.to_str().unwrap(),
        ]);
        ok(&o);
        let header = String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap()
            .to_string();
        assert!(header.contains("forked from a's run"), "{header}");
        let want = result(&straight);
        // The parent (a) and a forked child (b) both went on with the same settings.
        assert_eq!(result(&dir.join("a-run1.json")), want, "{name}: the parent");
        assert_eq!(result(&dir.join("b-run1.json")), want, "{name}: a forked child");
        let raw: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("b-run1.json")).unwrap()).unwrap();
        assert!(raw["fork_at_ns"].as_u64().unwrap() > 0, "{name}");
        // Another policy from the fork on: the child took it.
        let c = result(&dir.join("c-run1.json"));
        assert_eq!(c["policy"]["name"], "contiguitas", "{name}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn what_a_fork_may_not_change_is_refused() {
    let o = fraglab(&[
        "compare",
        "a=example:kbuild-thp-burst@workload.duration=4s",
        "b=example:kbuild-thp-burst@workload.duration=5s",
        "--fork-at",
        "2s",
    ]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("only knobs and [model]") && e.contains("not [workload]"),
        "{e}"
    );
    let o = fraglab(&[
        "compare",
        "a=example:kbuild-thp-burst@workload.duration=4s",
        "b=example:kbuild-thp-burst@workload.duration=4s",
        "--fork-at",
        "9s",
    ]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("is not before the run's end"), "{e}");
    let o = fraglab(&[
        "compare",
        "a=example:kbuild-thp-burst@workload.duration=4s",
        "--fork-at",
        "2s",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("at least two configurations"));
}

/// `spec` with the overrides `extra` (`key=value,...`) added.
fn with(spec: &str, extra: &str) -> String {
    let sep = if spec.contains('@') { ',' } else { '@' };
    format!("{spec}{sep}{extra}")
}

#[test]
fn a_run_continued_from_its_checkpoint_is_the_uninterrupted_run_for_every_generator() {
    for (name, spec, at) in SPECS {
        let dir = temp_dir(&format!("ckpt-{name}"));
        let ckpt = dir.join("warm.ckpt");
        let ckpt = ckpt.to_str().unwrap();
        let path = |f: &str| dir.join(f).to_str().unwrap().to_string();
        ok(&fraglab(&["run", spec, "-o", &path("straight.json")]));
        // The run that writes the checkpoint is the same run, and says where it wrote.
        let writer = with(
            spec,
            &format!("run.checkpoint_at={at},run.checkpoint_file={ckpt}"),
        );
        ok(&fraglab(&["run", &writer, "-o", &path("writer.json")]));
        let mut w = result(&dir.join("writer.json"));
        let written = w
            .as_object_mut()
            .unwrap()
            .remove("checkpoint")
            .expect("the checkpoint is reported");
        assert_eq!(written["file"], ckpt, "{name}");
        assert!(
            written["t_ns"].as_u64().unwrap() >= written["at_ns"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(w, result(&dir.join("straight.json")), "{name}: the writing run");
        // Continued with the same settings: byte for byte the straight run's result file.
        ok(&fraglab(&[
            "run",
            &with(spec, &format!("machine.checkpoint={ckpt}")),
            "-o",
            &path("cont.json"),
        ]));
        assert!(
            std::fs::read(dir.join("cont.json")).unwrap()
                == std::fs::read(dir.join("straight.json")).unwrap(),
            "{name}: the continued run's result differs from the uninterrupted run's"
        );
        // Continued under another policy and knob: that policy runs from the checkpoint on.
        let other = with(
            spec,
            &format!("machine.checkpoint={ckpt},vm.defrag_mode=1,model.policy=contiguitas"),
        );
        ok(&fraglab(&["run", &other, "-o", &path("other.json")]));
        let o = result(&dir.join("other.json"));
        assert_eq!(o["policy"]["name"], "contiguitas", "{name}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_checkpoint_is_continued_only_by_its_spec_and_build() {
    let dir = temp_dir("ckpt-refusals");
    let ckpt = dir.join("warm.ckpt");
    let c = ckpt.to_str().unwrap();
    let spec = "example:kbuild-thp-burst@workload.duration=6s";
    ok(&fraglab(&[
        "run",
        &with(spec, &format!("run.checkpoint_at=3s,run.checkpoint_file={c}")),
    ]));
    // Another workload.
    let o = fraglab(&[
        "run",
        &format!("example:kbuild-thp-burst@workload.duration=7s,machine.checkpoint={c}"),
    ]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("key machine.checkpoint") && e.contains("[workload] differs"),
        "{e}"
    );
    // Another seed.
    let o = fraglab(&["run", &with(spec, &format!("run.seed=2,machine.checkpoint={c}"))]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("[run] differs"), "{e}");
    // Written by another build (its layout hash): refused with the reason.
    let bytes = std::fs::read(&ckpt).unwrap();
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]).to_string();
    let at = text.find("\"layout\":\"").unwrap() + 10;
    let mut other = bytes.clone();
    for b in &mut other[at..at + 16] {
        *b = b'0';
    }
    let foreign = dir.join("foreign.ckpt");
    std::fs::write(&foreign, &other).unwrap();
    let o = fraglab(&[
        "run",
        &with(spec, &format!("machine.checkpoint={}", foreign.display())),
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("from other model sources"),
        "{e}"
    );
    // Cut short: the reader names the file and where.
    let cut = dir.join("cut.ckpt");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let o = fraglab(&[
        "run",
        &with(spec, &format!("machine.checkpoint={}", cut.display())),
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("cut.ckpt"), "{e}");
    // Not a file that exists.
    let o = fraglab(&["run", &with(spec, "machine.checkpoint=/nonexistent/warm.ckpt")]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("/nonexistent/warm.ckpt"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
