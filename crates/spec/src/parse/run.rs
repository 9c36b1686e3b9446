//! `[run]` and `[cost]`.

use super::*;
use crate::TRACE_EVENTS;

impl Cx<'_> {
    /// `[run]`, and its `scale` (K and the key's line) if given: the caller scales the
    /// finished spec ([`crate::scale::scale_spec`]).
    pub(super) fn run(&self, t: &Tbl) -> R<(RunSpec, Option<(u32, usize)>)> {
        self.check_keys(t)?;
        let seed = self.int_key(t, "seed")? as u64;
        let debug_vm = self.bool_key(t, "debug_vm")?;
        let debug_vm_every = self.int_key(t, "debug_vm_every")? as u64;
        let blame = self.bool_key(t, "blame")?;
        let checkpoint = self.checkpoint_out(t)?;
        let mut on = [false; TRACE_EVENTS.len()];
        if let Some(e) = t.get("trace") {
            let key = t.key("trace");
            let Val::Array { items, tables: false } = &e.node.val else {
                return Err(self.type_err(&e.node, &key, "an array of event names"));
            };
            let mut groups: Vec<String> = Vec::new();
            for ev in TRACE_EVENTS {
                let g = format!("{}*", &ev[..=ev.find(':').expect("group:event")]);
                if !groups.contains(&g) {
                    groups.push(g);
                }
            }
            let mut choices: Vec<&str> = TRACE_EVENTS.to_vec();
            choices.extend(groups.iter().map(String::as_str));
            for (i, n) in items.iter().enumerate() {
                let k = format!("{key}[{i}]");
                let name = self.str(n, &k)?;
                if let Some(group) = name
                    .strip_suffix('*')
                    .filter(|_| groups.iter().any(|g| g == name))
                {
                    for (j, ev) in TRACE_EVENTS.iter().enumerate() {
                        if ev.starts_with(group) {
                            on[j] = true;
                        }
                    }
                } else if let Some(j) = TRACE_EVENTS.iter().position(|&ev| ev == name) {
                    on[j] = true;
                } else {
                    return Err(self.err(
                        n.pos,
                        &k,
                        format!("unknown trace event {}{}", quote(name), hint(name, &choices)),
                    ));
                }
            }
        }
        let trace = TRACE_EVENTS
            .iter()
            .zip(on)
            .filter(|(_, on)| *on)
            .map(|(ev, _)| ev.split_once(':').map_or(*ev, |(_, n)| n).to_string())
            .collect();
        let scale = match t.get("scale") {
            None => None,
            Some(e) => {
                let s = self.str(&e.node, &t.key("scale"))?;
                let k = crate::scale::parse_scale(s).map_err(|m| self.err(e.node.pos, &t.key("scale"), m))?;
                Some((k, self.lines.line(e.key_pos)))
            }
        };
        Ok((
            RunSpec {
                seed,
                debug_vm,
                debug_vm_every,
                blame,
                trace,
                scale: None,
                checkpoint,
            },
            scale,
        ))
    }

    /// `checkpoint_at` and `checkpoint_file` of `[run]`.
    fn checkpoint_out(&self, t: &Tbl) -> R<Option<crate::CheckpointOut>> {
        let at = self.opt_duration_key(t, "checkpoint_at")?;
        let file = match t.get("checkpoint_file") {
            None => None,
            Some(e) => {
                let (_, resolved) =
                    self.path_value(e, &t.key("checkpoint_file"), "the checkpoint to write")?;
                if at.is_none() {
                    return Err(self.err(
                        e.key_pos,
                        &t.key("checkpoint_file"),
                        "without run.checkpoint_at there is no checkpoint to write",
                    ));
                }
                Some(resolved)
            }
        };
        Ok(at.map(|at_ns| {
            let e = t.get("checkpoint_at").expect("given");
            let file = file.unwrap_or_else(|| crate::default_checkpoint_file(self.file));
            crate::CheckpointOut {
                at_ns,
                file,
                line: self.lines.line(e.key_pos),
            }
        }))
    }

    /// `[host]`: `damon = "keep"` (default) or `"off"`; `loop_images` (default false).
    pub(super) fn host(&self, t: &Tbl) -> R<HostSpec> {
        self.check_keys(t)?;
        let damon_off = match t.get("damon") {
            None => false,
            Some(e) => match self.str(&e.node, &t.key("damon"))? {
                "keep" => false,
                "off" => true,
                other => {
                    return Err(self.err(
                        e.node.pos,
                        &t.key("damon"),
                        format!("{} is not keep or off", quote(other)),
                    ))
                }
            },
        };
        Ok(HostSpec {
            damon_off,
            loop_images: self.bool_key(t, "loop_images")?,
        })
    }

    pub(super) fn cost(&self, t: &Tbl) -> R<BTreeMap<String, u64>> {
        self.check_keys_in(t, crate::COST_KEYS)?;
        let KeyKind::Int { lo, hi, range } = keys::cost_kind() else {
            unreachable!("[cost] values are integers")
        };
        let mut out = BTreeMap::new();
        for e in t.entries {
            let v = self.int_in(&e.node, &t.key(&e.key), lo, hi, range)?;
            out.insert(e.key.clone(), v as u64);
        }
        Ok(out)
    }
}

/// Where a checkpoint goes when `checkpoint_file` is not given: the spec file's name with
/// `.ckpt` for its extension, beside it (`fraglab run --checkpoint-at` too).
pub fn default_checkpoint_file(spec_file: &str) -> std::path::PathBuf {
    let own = std::path::Path::new(spec_file);
    let stem = own
        .file_stem()
        .map_or("fraglab".into(), |s| s.to_string_lossy().into_owned());
    own.with_file_name(format!("{stem}.ckpt"))
}
