//! Policies as plug-ins (issue 37, docs/policies.md): `[model] policy` selects one; the seed
//! switches are layers; the Contiguitas plug-in confines non-movable memory to one region.

use fraglab_spec::parse_spec;
use fraglab_spec::result::RunResult;

/// The polluter of the blame tests: anon memory with every fourth page freed, then unmovable
/// pipe buffers that must fall back (steal) under the kernel's policy; beside it madvised THP
/// faults. `EXTRA` is a line of `[model]` keys.
fn spec(model: &str) -> fraglab_spec::Spec {
    let text = format!(
        "[machine]\nmemory = \"256MiB\"\ncpus = 2\n\
         [knobs]\n\"transparent_hugepage/enabled\" = \"madvise\"\n\"transparent_hugepage/defrag\" = \"madvise\"\n\
         [model]\n{model}\n\
         [run]\nseed = 3\ndebug_vm = true\ndebug_vm_every = 5000\ntrace = [\"kmem:mm_page_alloc_extfrag\"]\n\
         [workload]\nduration = \"8s\"\n\
         [[workload.task]]\nname = \"polluter\"\nloops = 3\n\
         steps = [{{ mmap = \"a\", size = \"180MiB\" }}, {{ touch = \"a\" }}, \
         {{ dontneed = \"a\", offset = 0, length = \"4KiB\", stride = \"16KiB\" }}, {{ pipes = 4000 }}, \
         {{ munmap = \"a\" }}, {{ sleep = \"50ms\" }}]\n\
         [[workload.task]]\nname = \"thp\"\nloops = 10\n\
         steps = [{{ mmap = \"h\", size = \"32MiB\", madvise = true }}, {{ touch = \"h\" }}, \
         {{ munmap = \"h\" }}, {{ sleep = \"100ms\" }}]\n"
    );
    parse_spec(&text, "policy.toml").unwrap()
}

fn run(model: &str) -> RunResult {
    fraglab_sim::timed::run_workload(&spec(model)).unwrap()
}

fn extfrag(r: &RunResult) -> u64 {
    r.trace_counts.get("mm_page_alloc_extfrag").copied().unwrap_or(0)
}

/// The block types of zone `name` in the run's last pageblock map.
fn zone_types(r: &RunResult, name: &str) -> String {
    let m = r.pageblock_maps.last().expect("a pageblock map");
    let i = m.zones.iter().position(|(z, _)| z == name).expect("the zone");
    let start = m.zones[i].1;
    let end = m.zones.get(i + 1).map_or(m.types.len(), |z| z.1);
    m.types[start..end].to_string()
}

#[test]
fn contiguitas_keeps_non_movable_blocks_in_one_region_at_the_zones_start() {
    let kernel = run("");
    assert!(kernel.policy.is_none(), "no policy section for the kernel's own");
    assert!(
        extfrag(&kernel) > 0,
        "the kernel's policy falls back here (else the test says nothing)"
    );

    let c = run("policy = \"contiguitas\"");
    let p = c.policy.as_ref().expect("a policy section");
    assert_eq!(p.name, "contiguitas");
    assert!(p.counters["blocks_grown"] > 0, "{p:?}");
    // No claim or steal across the boundary: the kernel's fallback never ran.
    assert_eq!(extfrag(&c), 0);
    // Every non-movable block of DMA32 (this machine's only large zone) is in one run at its
    // start, as long as the region's counter says.
    let t = zone_types(&c, "DMA32");
    let region = t.chars().take_while(|ch| !ch.eq_ignore_ascii_case(&'m')).count();
    assert!(
        t[region..].chars().all(|ch| ch.eq_ignore_ascii_case(&'m')),
        "a non-movable block outside the region: {t}"
    );
    assert_eq!(region as u64 * 512, p.counters["region_pages"], "{t}");
    // Deterministic.
    assert_eq!(
        serde_json::to_string(&c.policy).unwrap(),
        serde_json::to_string(&run("policy = \"contiguitas\"").policy).unwrap()
    );
}

#[test]
fn switches_are_layers_named_in_the_result() {
    let r = run("defrag_stage = \"vanilla\"");
    assert_eq!(r.policy.unwrap().name, "linux-6.18+defrag_stage=vanilla");
    let r = run("policy = \"contiguitas\"\nfolio_mode = \"skip_large\"");
    assert_eq!(r.policy.unwrap().name, "contiguitas+folio_mode=skip_large");
}

#[test]
fn an_unknown_policy_is_an_error_at_its_line() {
    let e = fraglab_sim::timed::run_workload(&spec("policy = \"contiguitus\"")).unwrap_err();
    let m = e.to_string();
    assert!(
        m.starts_with("policy.toml:8: key model.policy: unknown policy \"contiguitus\""),
        "{m}"
    );
    assert!(m.contains("contiguitas"), "{m}");
    let e = parse_spec(
        "[machine]\nmemory = \"1GiB\"\n[model]\npolicy = \"Not A Name\"\n",
        "p.toml",
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("p.toml:4: key model.policy: \"Not A Name\" is not a policy name"),
        "{e}"
    );
}
