//! `fraglab examples`: the built-in example specs.

/// Built-in example specs, shipped in the binary (the files live in `examples/`).
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "claim-steal-merge",
        include_str!("../../../examples/claim-steal-merge.toml"),
    ),
    (
        "kbuild-thp-burst",
        include_str!("../../../examples/kbuild-thp-burst.toml"),
    ),
    (
        "pgbench-checkpoints",
        include_str!("../../../examples/pgbench-checkpoints.toml"),
    ),
];

/// The text of the built-in example `name`.
pub fn example(name: &str) -> Result<&'static str, String> {
    EXAMPLES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            let names: Vec<&str> = EXAMPLES.iter().map(|(n, _)| *n).collect();
            format!("no built-in example {name:?} (there are: {})", names.join(", "))
        })
}

/// Prints the example `name`, or without a name the list of examples with their descriptions.
pub fn examples(name: Option<String>) -> Result<(), String> {
    match name {
        Some(name) => print!("{}", example(&name)?),
        None => {
            for (name, text) in EXAMPLES {
                let desc = text
                    .lines()
                    .find_map(|l| l.strip_prefix("description = "))
                    .unwrap_or("")
                    .trim_matches('"');
                println!("{name:24} {desc}");
            }
        }
    }
    Ok(())
}
