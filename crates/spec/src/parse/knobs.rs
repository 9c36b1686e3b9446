//! `[knobs]` (the kernel tunables, by [`KNOBS`]) and `[model]` (by [`MODEL_SWITCHES`]).

use super::*;
use crate::knobs::{find_knob, KnobKind, KnobValue, KNOBS};
use crate::model::{find_model_switch, MODEL_SWITCHES};

impl Cx<'_> {
    /// `vm.min_free_kbytes` at or above the machine's memory: the kernel takes it (the sysctl's
    /// only bound is 0), and `__setup_per_zone_wmarks` (docs/model §3.1) gives every zone a
    /// min watermark of its share, so every zone's min watermark is at or above its managed
    /// pages: no allocation passes a watermark check and the machine OOM-kills from the start.
    fn min_free_warning(&self, pos: usize, key: &str, kib: i64) {
        let Some((mem, _)) = self.memory.get() else { return };
        let bytes = (kib as u64).saturating_mul(1024);
        if bytes >= mem {
            self.warn(
                pos,
                key,
                format!(
                    "{kib} KiB is at or above the machine's memory ({}): every zone's min watermark \
                     is above its managed pages, so allocations fail their watermark checks and \
                     the OOM killer runs from the start",
                    show_bytes(mem)
                ),
            );
        }
    }

    pub(super) fn knobs(&self, entries: &[Entry]) -> R<BTreeMap<String, KnobValue>> {
        let mut flat = Vec::new();
        flatten(entries, "", &mut flat);
        let mut out = BTreeMap::new();
        let mut first_line: BTreeMap<&str, usize> = BTreeMap::new();
        for (name, key_pos, node) in flat {
            let key = join("knobs", &name);
            let Some(def) = find_knob(&name) else {
                let msg = match did_you_mean(&name, KNOBS.iter().map(|k| k.name)) {
                    Some(c) => format!("unknown knob (did you mean {}?)", quote(c)),
                    None => "unknown knob (`fraglab knobs` lists them)".to_string(),
                };
                return Err(self.err(key_pos, &key, msg));
            };
            if let Some(line) = first_line.insert(def.name, self.lines.line(key_pos)) {
                return Err(self.err(
                    key_pos,
                    &key,
                    format!("knob {} is set twice (first at line {line})", def.name),
                ));
            }
            let value = match def.kind {
                KnobKind::Int { .. } | KnobKind::ZeroOrInt { .. } => {
                    let v = self.int(node, &key)?;
                    if !def.kind.int_ok(v) {
                        return Err(self.err(
                            node.pos,
                            &key,
                            format!("{v} is out of range (expected {})", def.kind.expected()),
                        ));
                    }
                    if def.name == "vm.min_free_kbytes" {
                        self.min_free_warning(node.pos, &key, v);
                    }
                    KnobValue::Int(v)
                }
                KnobKind::Choice(words) => {
                    let s = self.str(node, &key)?;
                    if !words.contains(&s) {
                        let dym = did_you_mean(s, words.iter().copied())
                            .map(|c| format!(" (did you mean {}?)", quote(c)))
                            .unwrap_or_default();
                        return Err(self.err(
                            node.pos,
                            &key,
                            format!("{} is not {}{dym}", quote(s), def.kind.expected()),
                        ));
                    }
                    KnobValue::Str(s.to_string())
                }
                KnobKind::IntList { len, .. } => {
                    let values: Vec<i64> = match &node.val {
                        Val::Array { items, tables: false } => items
                            .iter()
                            .enumerate()
                            .map(|(i, n)| {
                                let k = format!("{key}[{i}]");
                                let v = self.int(n, &k)?;
                                if def.kind.int_ok(v) {
                                    Ok(v)
                                } else {
                                    Err(self.err(
                                        n.pos,
                                        &k,
                                        format!("{v} is out of range (expected {})", def.kind.expected()),
                                    ))
                                }
                            })
                            .collect::<R<_>>()?,
                        Val::Str(s) => {
                            let parsed: Option<Vec<i64>> =
                                s.split_whitespace().map(|w| w.parse().ok()).collect();
                            match parsed {
                                Some(v) if v.iter().all(|&x| def.kind.int_ok(x)) => v,
                                _ => {
                                    return Err(self.err(
                                        node.pos,
                                        &key,
                                        format!(
                                            "{} is not a valid list (expected {}, e.g. {})",
                                            quote(s),
                                            def.kind.expected(),
                                            quote(def.default)
                                        ),
                                    ))
                                }
                            }
                        }
                        _ => {
                            return Err(self.type_err(node, &key, "an array of integers or a string of them"))
                        }
                    };
                    if values.len() != len {
                        return Err(self.err(
                            node.pos,
                            &key,
                            format!("{} values given (expected {})", values.len(), def.kind.expected()),
                        ));
                    }
                    KnobValue::List(values)
                }
            };
            out.insert(def.name.to_string(), value);
        }
        Ok(out)
    }

    pub(super) fn model(&self, t: &Tbl) -> R<ModelSpec> {
        let mut m = ModelSpec::default();
        for e in t.entries {
            let key = t.key(&e.key);
            if e.key == "policy" {
                let v = self.str(&e.node, &key)?;
                if !crate::model::valid_policy_name(v) {
                    return Err(self.err(
                        e.node.pos,
                        &key,
                        format!(
                            "{} is not a policy name (lower-case letters, digits, `_`, `-`, `.`; \
                             `fraglab policy list` shows them)",
                            quote(v)
                        ),
                    ));
                }
                m.policy = v.to_string();
                m.policy_line = self.lines.line(e.node.pos);
                continue;
            }
            let Some(def) = find_model_switch(&e.key) else {
                let mut names = vec!["policy"];
                names.extend(MODEL_SWITCHES.iter().map(|d| d.name));
                return Err(self.err(e.key_pos, &key, format!("unknown key{}", hint(&e.key, &names))));
            };
            // A switch whose choices are true and false takes a TOML boolean (or the word).
            let v = match e.node.val {
                Val::Bool(b) if def.choices == ["true", "false"] => {
                    if b {
                        "true"
                    } else {
                        "false"
                    }
                }
                _ => self.str(&e.node, &key)?,
            };
            if !def.choices.contains(&v) {
                let dym = did_you_mean(v, def.choices.iter().copied())
                    .map(|c| format!(" (did you mean {}?)", quote(c)))
                    .unwrap_or_default();
                return Err(self.err(
                    e.node.pos,
                    &key,
                    format!("{} is not {}{dym}", quote(v), def.expected()),
                ));
            }
            m.set(def.name, v)
                .expect("every choice in MODEL_SWITCHES is accepted by ModelSpec::set");
        }
        Ok(m)
    }
}

/// Knob names from nested tables: `vm = { swappiness = 1 }`, `vm.swappiness = 1` and
/// `[knobs.vm]` all become `vm.swappiness`.
fn flatten<'n>(entries: &'n [Entry], prefix: &str, out: &mut Vec<(String, usize, &'n Node)>) {
    for e in entries {
        let name = if prefix.is_empty() {
            e.key.clone()
        } else {
            format!("{prefix}.{}", e.key)
        };
        match &e.node.val {
            Val::Table(sub) => flatten(sub, &name, out),
            _ => out.push((name, e.key_pos, &e.node)),
        }
    }
}
