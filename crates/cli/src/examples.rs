//! `fraglab examples`: the built-in example specs.

pub use fraglab_spec::examples::{example, EXAMPLES};

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
