//! "did you mean" suggestions.

/// The candidate closest to `input`, if one is close enough to be a plausible typo: a
/// normalised Damerau-Levenshtein similarity of at least 0.6 (case-insensitive), or `input`
/// being the candidate without a `vm.`-style prefix, or a prefix of it of 3+ characters. On a tie,
/// a candidate that `input` is a prefix of wins (`prio` → `priority`, not `print`), then the first.
pub(crate) fn did_you_mean<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = input.to_ascii_lowercase();
    let mut best: Option<(f64, bool, &'a str)> = None;
    for cand in candidates {
        let c = cand.to_ascii_lowercase();
        let mut score = strsim::normalized_damerau_levenshtein(&lower, &c);
        let tail = c.rsplit(['.', '/']).next().unwrap_or(&c);
        let prefix = lower.len() >= 3 && c.starts_with(&lower);
        if lower.len() >= 3 && (prefix || lower.starts_with(&c) || (tail == lower && tail.len() < c.len())) {
            score = score.max(0.6);
        }
        let better = match best {
            Some((s, p, _)) => score > s || (score == s && prefix && !p),
            None => true,
        };
        if score >= 0.6 && better {
            best = Some((score, prefix, cand));
        }
    }
    best.map(|(_, _, c)| c)
}

/// " (did you mean \"x\"?)" or, without a close candidate, " (expected one of: a, b, c)".
pub(crate) fn hint(input: &str, candidates: &[&str]) -> String {
    match did_you_mean(input, candidates.iter().copied()) {
        Some(c) => format!(" (did you mean {}?)", crate::tree::quote(c)),
        None => format!(" (expected one of: {})", candidates.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_are_matched() {
        let c = ["alloc", "count", "order", "gfp", "cpu", "must_succeed"];
        assert_eq!(did_you_mean("ordr", c), Some("order"));
        assert_eq!(did_you_mean("Order", c), Some("order"));
        assert_eq!(did_you_mean("must-succeed", c), Some("must_succeed"));
        assert_eq!(did_you_mean("zzz", c), None);
        assert_eq!(did_you_mean("prio", ["print", "priority"]), Some("priority"));
        assert_eq!(did_you_mean("ops", ["op", "run"]), Some("op"));
        assert_eq!(did_you_mean("mem", ["memory", "cpus", "dma"]), Some("memory"));
        assert_eq!(
            did_you_mean("min_free_kbytes", ["vm.min_free_kbytes", "vm.swappiness"]),
            Some("vm.min_free_kbytes")
        );
    }
}
