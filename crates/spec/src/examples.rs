//! The built-in example specs (the files live in `examples/`), shared by the `fraglab` binary
//! (`fraglab examples`, `--example`, `example:NAME`) and the Python package.

/// Built-in example specs: (name, text).
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
