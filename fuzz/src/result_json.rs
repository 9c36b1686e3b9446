// The result-JSON fuzz target's work, shared (by `include!`) with the stable corpus test
// (crates/cli/tests/fuzz_corpora.rs): any bytes as a run result (what `compare --from` and
// `report` read) and as a compare report (`report --compare`), through the same code those
// commands run. Every error must be a message; a panic, an abort or a hang is a bug.

/// What [`result_json`] did with the bytes.
#[derive(Debug, PartialEq, Eq)]
#[allow(dead_code)]
enum JsonOutcome {
    /// Neither a result nor a compare report.
    Refused,
    /// A run result: merged (`compare --from`), compared, rendered.
    Result,
    /// A compare report: rendered.
    Compare,
}

fn result_json(data: &[u8]) -> JsonOutcome {
    let Ok(text) = std::str::from_utf8(data) else {
        return JsonOutcome::Refused;
    };
    if let Ok(r) = fraglab_sim::compare::parse_result(text, "fuzz.json") {
        // `compare --from`: two runs of one configuration (seeds differ) and one of another.
        let mut r2 = r.clone();
        r2.seed = r.seed.wrapping_add(1);
        let files = vec![
            fraglab_sim::compare::ResultSource { label: "a".into(), source: "a-run1.json".into(), result: r.clone() },
            fraglab_sim::compare::ResultSource { label: "a".into(), source: "a-run2.json".into(), result: r2 },
            fraglab_sim::compare::ResultSource { label: "b".into(), source: "b-run1.json".into(), result: r.clone() },
        ];
        if let Ok((labels, results)) = fraglab_sim::compare::merge_results(files, Some("b")) {
            let c = fraglab_sim::compare::compare(&labels, &results);
            let _ = fraglab_sim::compare::format_table(&c);
            let _ = fraglab_sim::compare::format_csv(&c);
            let _ = fraglab_sim::compare::format_markdown(&c);
            let _ = fraglab_report::render_html(&[("a-run1".into(), r)], Some(&c));
        }
        return JsonOutcome::Result;
    }
    match serde_json::from_str::<fraglab_spec::result::CompareReport>(text) {
        Ok(c) => {
            let _ = fraglab_sim::compare::format_table(&c);
            let _ = fraglab_report::render_html(&[], Some(&c));
            JsonOutcome::Compare
        }
        Err(_) => JsonOutcome::Refused,
    }
}
