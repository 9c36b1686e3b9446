//! `fraglab knobs`: the kernel knobs a spec may set.

/// Prints every knob with its kind, default and description, marking the ones the model does
/// not read yet; with `markdown`, docs/knobs.md instead.
pub fn knobs(markdown: bool) -> Result<(), String> {
    if markdown {
        print!("{}", fraglab_spec::docs::knobs_markdown());
        return Ok(());
    }
    println!("{:<52} {:<40} {:<16} description", "knob", "values", "default");
    for k in fraglab_spec::KNOBS {
        let used = if k.read.is_read() {
            ""
        } else {
            " [not read by the model yet]"
        };
        println!(
            "{:<52} {:<40} {:<16} {}{used}",
            k.name,
            k.kind.expected(),
            k.default,
            k.doc
        );
    }
    Ok(())
}
