// The override fuzz target's work, shared (by `include!`) with the stable corpus test
// (crates/cli/tests/fuzz_corpora.rs): `[LABEL=]SPEC@KEY=VALUE,...` as compare, validate and
// replay take it, on a built-in example (never a file): the input's first line names the
// example, the rest is the override list. Through `fraglab_sim::compare::load_config`
// (`fraglab_spec::apply_overrides` then `parse_spec`). A refusal is a message; a panic, an
// abort or a hang is a bug.

/// Whether the overridden spec parsed.
fn overrides(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
    // Only example names: a path would read files.
    let names: Vec<&str> = fraglab_spec::examples::EXAMPLES.iter().map(|(n, _)| *n).collect();
    let name = names
        .iter()
        .find(|n| **n == first.trim())
        .copied()
        .unwrap_or(names[first.len() % names.len()]);
    let config = format!("fuzz=example:{name}@{}", rest.trim_end_matches('\n'));
    let direct: Vec<(String, String)> = rest
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    if let Ok(t) = fraglab_spec::apply_overrides(fraglab_spec::examples::example(name).unwrap(), &direct) {
        let _ = fraglab_spec::parse_spec(&t, "fuzz.toml");
    }
    fraglab_sim::compare::load_config(&config).is_ok()
}
