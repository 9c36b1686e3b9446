//! `[damon]` (docs/model §27).

use super::*;

/// The ops filter types `filters` accepts.
const FILTER_TYPES: &[&str] = &["anon", "unmapped", "young"];

impl Cx<'_> {
    pub(super) fn damon(&self, t: &Tbl) -> R<DamonSpec> {
        self.check_keys(t)?;
        let enabled = self.bool_key(t, "enabled")?;
        let preset = match t.get("preset") {
            None => "damon_reclaim".to_string(),
            Some(e) => match self.str(&e.node, &t.key("preset"))? {
                p @ ("damon_reclaim" | "s2") => p.to_string(),
                other => {
                    return Err(self.err(
                        e.node.pos,
                        &t.key("preset"),
                        format!("{} is not damon_reclaim or s2", quote(other)),
                    ))
                }
            },
        };
        let mut values = BTreeMap::new();
        for k in keys::DAMON {
            if let KeyKind::Int { .. } = k.kind {
                if let Some(v) = self.opt_int_key(t, k.name)? {
                    values.insert(k.name.to_string(), v as u64);
                }
            }
        }
        for k in ["quota_bytes", "sz_min", "sz_max"] {
            if let Some(v) = self.opt_size_key(t, k)? {
                values.insert(k.into(), v);
            }
        }
        for (lo, hi) in [
            ("min_nr_regions", "max_nr_regions"),
            ("nr_accesses_min", "nr_accesses_max"),
            ("age_min", "age_max"),
            ("sz_min", "sz_max"),
        ] {
            if let (Some(a), Some(b)) = (values.get(lo), values.get(hi)) {
                if a > b {
                    let e = t.get(lo).expect("given");
                    return Err(self.err(e.node.pos, &t.key(lo), format!("{a} is above {hi} = {b}")));
                }
            }
        }
        let wmarks_free_mem_rate = match t.get("wmarks_metric") {
            None => None,
            Some(e) => match self.str(&e.node, &t.key("wmarks_metric"))? {
                "none" => Some(false),
                "free_mem_rate" => Some(true),
                other => {
                    return Err(self.err(
                        e.node.pos,
                        &t.key("wmarks_metric"),
                        format!("{} is not none or free_mem_rate", quote(other)),
                    ))
                }
            },
        };
        let filters = match t.get("filters") {
            None => None,
            Some(e) => {
                let key = t.key("filters");
                let text = self.str(&e.node, &key)?;
                let mut out = Vec::new();
                for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    let bad = || {
                        self.err(
                            e.node.pos,
                            &key,
                            format!(
                                "{} is not type:allow or type:reject with type anon, unmapped or young{}",
                                quote(item),
                                hint(item.split(':').next().unwrap_or(""), FILTER_TYPES)
                            ),
                        )
                    };
                    let (ty, verdict) = item.split_once(':').ok_or_else(bad)?;
                    if !FILTER_TYPES.contains(&ty.trim()) {
                        return Err(bad());
                    }
                    let allow = match verdict.trim() {
                        "allow" => true,
                        "reject" => false,
                        _ => return Err(bad()),
                    };
                    out.push((ty.trim().to_string(), allow));
                }
                Some(out)
            }
        };
        let regions = match t.get("regions") {
            None => None,
            Some(e) => {
                let key = t.key("regions");
                let text = self.str(&e.node, &key)?;
                let mut out: Vec<(u64, u64)> = Vec::new();
                for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    let bad = |why: String| self.err(e.node.pos, &key, why);
                    let (a, b) = item
                        .split_once('-')
                        .ok_or_else(|| bad(format!("{} is not START-END (two sizes)", quote(item))))?;
                    let (start, end) = (parse_size(a).map_err(&bad)?, parse_size(b).map_err(&bad)?);
                    if end <= start || start % 4096 != 0 || end % 4096 != 0 {
                        return Err(bad(format!(
                            "{} is not a range of whole pages (START < END, both multiples of 4KiB)",
                            quote(item)
                        )));
                    }
                    if out.last().is_some_and(|&(_, e0)| start < e0) {
                        return Err(bad(format!(
                            "{} overlaps or precedes the range before it (ranges in address order)",
                            quote(item)
                        )));
                    }
                    out.push((start, end));
                }
                Some(out)
            }
        };
        Ok(DamonSpec {
            enabled,
            preset,
            values,
            wmarks_free_mem_rate,
            filters,
            regions,
        })
    }
}
