//! Issue 23 item 5: inputs that are valid but will not do what they seem to are accepted with a
//! warning (`Spec::warnings`), one `file:line: key K: message` each; valid specs get none.

use fraglab_spec::parse_spec;

fn warnings(text: &str) -> Vec<String> {
    parse_spec(text, "spec.toml")
        .unwrap()
        .warnings
        .iter()
        .map(|w| w.to_string())
        .collect()
}

const MACHINE: &str = "[machine]\nmemory = \"64MiB\"\ndma = false\n";

#[test]
fn thp_burst_larger_than_memory_and_swap() {
    let burst = |size: &str, swap: &str| {
        format!(
            "[machine]\nmemory = \"64MiB\"\ndma = false\nswap = \"{swap}\"\n[workload]\nduration = \"1s\"\n\
             [[workload.thp_burst]]\ninterval = \"1s\"\nsize = \"{size}\"\nhold = \"1s\"\nbursts = 1\n"
        )
    };
    let w = warnings(&burst("64GiB", "0"));
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("spec.toml:9: key workload.thp_burst[0].size: 64 GiB is larger than the machine's memory (64 MiB): "),
        "{}",
        w[0]
    );
    // What memory and swap can hold is no warning; past both is.
    assert!(warnings(&burst("64MiB", "0")).is_empty());
    assert!(warnings(&burst("96MiB", "32MiB")).is_empty());
    let w = warnings(&burst("98MiB", "32MiB"));
    assert!(w.len() == 1 && w[0].contains("and swap (32 MiB)"), "{w:?}");
}

#[test]
fn dontneed_past_the_end_of_its_mapping() {
    let task = |offset: &str, length: &str| {
        format!(
            "{MACHINE}[workload]\nduration = \"1s\"\n[[workload.task]]\nname = \"t\"\nsteps = [\n  \
             {{ mmap = \"a\", size = \"8MiB\" }},\n  {{ mmap = \"b\", size = \"1MiB\" }},\n  \
             {{ dontneed = \"a\", offset = \"{offset}\", length = \"{length}\" }},\n]\n"
        )
    };
    assert!(
        warnings(&task("4MiB", "4MiB")).is_empty(),
        "up to the end is fine"
    );
    let w = warnings(&task("4MiB", "8MiB"));
    assert_eq!(
        w,
        vec![
            "spec.toml:11: key workload.task[0].steps[2].length: offset + length = 12 MiB is past \
              the end of mapping \"a\" (8 MiB): madvise would fail with ENOMEM for the part past \
              the end; at most 4 MiB (the mapped part) is freed"
                .to_string()
        ]
    );
    let w = warnings(&task("16MiB", "4KiB"));
    assert!(w.len() == 1 && w[0].ends_with("nothing is freed"), "{w:?}");
}

#[test]
fn min_free_kbytes_at_or_above_memory() {
    let knob = |kib: u64| {
        format!("{MACHINE}[knobs]\n\"vm.min_free_kbytes\" = {kib}\n[[op]]\nprint = \"buddyinfo\"\n")
    };
    assert!(warnings(&knob(8192)).is_empty());
    let w = warnings(&knob(65536));
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("spec.toml:5: key knobs.\"vm.min_free_kbytes\": 65536 KiB is at or above the machine's memory (64 MiB)"),
        "{}",
        w[0]
    );
    // With explicit zones, the memory is what they manage.
    let zones = "[machine]\ncpus = 1\n[[machine.zone]]\nname = \"DMA32\"\nstart_pfn = 4096\nspanned = 4096\n\
                 [knobs]\n\"vm.min_free_kbytes\" = 16384\n[[op]]\nprint = \"buddyinfo\"\n";
    let w = warnings(zones);
    assert!(w.len() == 1 && w[0].contains("(16 MiB)"), "{w:?}");
}

/// The examples and the experiments' specs ask for nothing that warns.
#[test]
fn shipped_specs_have_no_warnings() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut n = 0;
    for dir in [
        "examples",
        "experiments/defrag-mode",
        "experiments/costly-pagecache",
        "experiments/folio-compaction",
    ] {
        for e in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                if let Ok(spec) = fraglab_spec::load_spec(&p) {
                    assert!(spec.warnings.is_empty(), "{}: {:?}", p.display(), spec.warnings);
                    n += 1;
                }
            }
        }
    }
    assert!(n >= 6, "{n} specs read");
}

/// Issue 33: a files delete taking every Nth file with N over the set's count deletes nothing.
#[test]
fn files_every_over_count() {
    let text = format!(
        "{MACHINE}[[workload.task]]\nsteps = [\n{{ files = \"s\", count = 4, op = \"create\" }},\n{{ files = \"s\", count = 4, op = \"delete\", every = 5 }},\n]\n"
    );
    assert_eq!(
        warnings(&text),
        ["spec.toml:7: key workload.task[0].steps[1].every: every = 5 is more than count = 4: no file of the set is deleted"]
    );
    let ok = format!(
        "{MACHINE}[[workload.task]]\nsteps = [{{ files = \"s\", count = 4, op = \"delete\", every = 4 }}]\n"
    );
    assert!(warnings(&ok).is_empty());
}
