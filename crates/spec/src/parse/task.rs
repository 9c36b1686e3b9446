//! `[[workload.task]]`: a program of steps, each with exactly one action.

use super::*;
use crate::{Fadvice, FilesOp, MappingKind, TaskParams, TaskStep, MAX_PIPE_LANES};

/// A file or file set task steps name (see `Cx::task_files`).
#[derive(Clone, Debug, Default)]
pub(super) struct NamedFile {
    name: String,
    set: bool,
    /// The kind and the line of the step that set it.
    kind: Option<(MappingKind, usize)>,
}

impl Cx<'_> {
    /// One `[[workload.task]]`: its program of steps, each with exactly one action.
    pub(super) fn task(&self, k: &Tbl) -> R<TaskParams> {
        self.check_keys(k)?;
        let name = self.opt_str(k, "name")?.unwrap_or_else(|| "task".into());
        let count = self.int_key(k, "count")? as u32;
        let start_ns = self.duration_key(k, "start")?;
        let loops = self.int_key(k, "loops")? as u32;
        let se = self.need_key(k, "steps")?;
        let mut steps = Vec::new();
        // The line of each step, for messages naming an earlier one.
        let mut lines: Vec<usize> = Vec::new();
        let mut vmas: Vec<String> = Vec::new();
        let actions = keys::actions(keys::STEPS);
        for (j, (pos, entries)) in self.tables(&se.node, &k.key("steps"))?.into_iter().enumerate() {
            let mut s = Tbl {
                path: format!("{}.steps[{j}]", k.path),
                pos,
                entries,
                keys: &[],
            };
            let a = self.step_action(&s, &actions)?;
            s.keys = keys::STEPS
                .iter()
                .find(|t| t[0].name == a.key)
                .expect("an action");
            // compute and sleep name each other in an unknown key's hint.
            let allowed = match a.key.as_str() {
                "compute" | "sleep" => vec!["compute", "sleep"],
                _ => keys::names(s.keys),
            };
            self.check_keys_in(&s, &allowed)?;
            let step = self.step(&s, a, &mut vmas, &steps)?;
            self.pipe_free_rule(&s, &step, &steps, &lines)?;
            lines.push(self.lines.line(pos));
            steps.push(step);
        }
        if steps.is_empty() {
            return Err(self.err(se.key_pos, &k.key("steps"), "no steps (expected at least one)"));
        }
        Ok(TaskParams {
            line: self.lines.line(k.pos),
            name,
            count,
            start_ns,
            loops,
            steps,
            after: self.opt_str(k, "after")?,
            background: self.bool_key(k, "background")?,
            numa: self.numa_bind(k)?,
        })
    }

    /// The `after` keys of the `[[workload.task]]` tables `items` (parsed as `tasks`): each
    /// names another task, and following them never comes back to where it started.
    pub(super) fn task_order(&self, items: &[Tbl], tasks: &[TaskParams]) -> R<()> {
        let err = |i: usize, msg: String| {
            let e = items[i].get("after").expect("a task with after");
            self.err(e.node.pos, &items[i].key("after"), msg)
        };
        for (i, t) in tasks.iter().enumerate() {
            let Some(a) = &t.after else { continue };
            if *a == t.name {
                return Err(err(i, format!("task {} cannot start after itself", quote(a))));
            }
            if !tasks.iter().any(|u| u.name == *a) {
                let dym = did_you_mean(a, tasks.iter().map(|u| u.name.as_str()))
                    .map(|c| format!("; did you mean {}?", quote(c)))
                    .unwrap_or_default();
                return Err(err(i, format!("no [[workload.task]] is named {}{dym}", quote(a))));
            }
        }
        // A cycle: from task i, following `after` through every task of that name comes
        // back to i's name.
        for (i, t) in tasks.iter().enumerate() {
            let Some(a) = &t.after else { continue };
            let mut seen = vec![t.name.as_str()];
            let mut todo = vec![a.as_str()];
            while let Some(n) = todo.pop() {
                if n == t.name {
                    return Err(err(
                        i,
                        format!(
                            "a cycle: task {} starts after {}, which waits for it",
                            quote(&t.name),
                            quote(a)
                        ),
                    ));
                }
                if seen.contains(&n) {
                    continue;
                }
                seen.push(n);
                todo.extend(
                    tasks
                        .iter()
                        .filter(|u| u.name == n)
                        .filter_map(|u| u.after.as_deref()),
                );
            }
        }
        Ok(())
    }

    /// The one action of step `s`.
    fn step_action<'n>(&self, s: &Tbl<'n>, actions: &[&str]) -> R<&'n Entry> {
        let mut found = s.entries.iter().filter(|e| actions.contains(&e.key.as_str()));
        let Some(a) = found.next() else {
            return Err(self.err(
                s.pos,
                &s.path,
                format!("no action (expected one of the keys {})", actions.join(", ")),
            ));
        };
        if let Some(b) = found.next() {
            return Err(self.err(
                b.key_pos,
                &s.key(&b.key),
                format!(
                    "a step has exactly one action, and this one already has {}",
                    a.key
                ),
            ));
        }
        Ok(a)
    }

    /// The mapping step `s`'s action `a` names, created by an earlier mmap step.
    fn step_vma(&self, s: &Tbl, a: &Entry, vmas: &[String]) -> R<String> {
        let v = self.str(&a.node, &s.key(&a.key))?;
        if !vmas.iter().any(|x| x == v) {
            let dym = did_you_mean(v, vmas.iter().map(String::as_str))
                .map(|c| format!("; did you mean {}?", quote(c)))
                .unwrap_or_default();
            return Err(self.err(
                a.node.pos,
                &s.key(&a.key),
                format!("mapping {} is not created by an earlier mmap step{dym}", quote(v)),
            ));
        }
        Ok(v.to_string())
    }

    /// The `pattern` key of step `s`: random (true) or sequential (false, the default).
    fn step_random(&self, s: &Tbl) -> R<bool> {
        // Declared in keys::STEPS (a word choice).
        let _ = s.def("pattern");
        match s.get("pattern") {
            None => Ok(false),
            Some(e) => match self.str(&e.node, &s.key("pattern"))? {
                "sequential" => Ok(false),
                "random" => Ok(true),
                v => Err(self.err(
                    e.node.pos,
                    &s.key("pattern"),
                    format!("{} is not one of sequential, random", quote(v)),
                )),
            },
        }
    }

    /// The `stride` key of step `s` (its default if it has one, else None when absent): a
    /// multiple of 4 KiB, and at least `length` when given (repeated ranges do not overlap).
    fn step_stride(&self, s: &Tbl, length: Option<u64>) -> R<Option<u64>> {
        let v = match self.opt_size_key(s, "stride")? {
            Some(v) => v,
            None if length.is_some() => return Ok(None),
            None => return self.size_key(s, "stride").map(Some),
        };
        let e = s.get("stride").expect("given");
        if v % 4096 != 0 {
            return Err(self.err(
                e.node.pos,
                &s.key("stride"),
                format!("{v} bytes is not a multiple of 4096 (a whole number of pages)"),
            ));
        }
        if let Some(len) = length {
            if v < len {
                return Err(self.err(
                    e.node.pos,
                    &s.key("stride"),
                    format!(
                        "{} is shorter than the length {} (the ranges would overlap)",
                        show_bytes(v),
                        show_bytes(len)
                    ),
                ));
            }
        }
        Ok(Some(v))
    }

    /// The non-empty file name of step `s`'s action `a`.
    fn step_file(&self, s: &Tbl, a: &Entry) -> R<String> {
        let file = self.str(&a.node, &s.key(&a.key))?.to_string();
        if file.is_empty() {
            return Err(self.err(a.node.pos, &s.key(&a.key), "empty file name"));
        }
        Ok(file)
    }

    /// A `dontneed` step reaching past the end of its mapping (the last `mmap` of it in `steps`):
    /// the kernel's madvise(MADV_DONTNEED) zaps the mapped part, ignores the unmapped rest and
    /// returns ENOMEM (mm/madvise.c `madvise_walk_vmas`; docs/model has no madvise
    /// section); the model frees the mapped part (`AnonVma::dontneed` clamps to the mapping) —
    /// the step does less than it says.
    fn dontneed_warning(&self, s: &Tbl, vma: &str, offset: u64, length: u64, steps: &[TaskStep]) {
        let size = steps.iter().rev().find_map(|st| match st {
            TaskStep::Mmap {
                vma: v, size_bytes, ..
            } if v == vma => Some(*size_bytes),
            _ => None,
        });
        let Some(size) = size else { return };
        let end = offset.saturating_add(length);
        if end > size {
            let (pos, key) = match s.get("length") {
                Some(e) => (e.node.pos, s.key("length")),
                None => (s.pos, s.path.clone()),
            };
            self.warn(
                pos,
                &key,
                format!(
                    "offset + length = {} is past the end of mapping {} ({}): madvise would fail \
                     with ENOMEM for the part past the end; {} freed",
                    show_bytes(end),
                    quote(vma),
                    show_bytes(size),
                    if offset >= size {
                        "nothing is".to_string()
                    } else {
                        format!("at most {} (the mapped part) is", show_bytes(size - offset))
                    },
                ),
            );
        }
    }

    /// Step `s` with action `a`; `vmas` are the mappings the steps before it left mapped.
    fn step(&self, s: &Tbl, a: &Entry, vmas: &mut Vec<String>, steps: &[TaskStep]) -> R<TaskStep> {
        Ok(match a.key.as_str() {
            "mmap" => {
                let v = self.str(&a.node, &s.key("mmap"))?.to_string();
                if v.is_empty() {
                    return Err(self.err(a.node.pos, &s.key("mmap"), "empty mapping name"));
                }
                let size_bytes = self.size_key(s, "size")?;
                vmas.push(v.clone());
                TaskStep::Mmap {
                    vma: v,
                    size_bytes,
                    madvise: self.bool_key(s, "madvise")?,
                    locked: self.bool_key(s, "locked")?,
                }
            }
            "touch" => TaskStep::Touch {
                vma: self.step_vma(s, a, vmas)?,
                random: self.step_random(s)?,
                stride: self.step_stride(s, None)?.expect("a default"),
            },
            "dontneed" => {
                let v = self.step_vma(s, a, vmas)?;
                self.need_key(s, "length")?;
                let (offset, length) = (self.size_key(s, "offset")?, self.size_key(s, "length")?);
                let stride = self.step_stride(s, Some(length))?;
                if stride.is_none() {
                    self.dontneed_warning(s, &v, offset, length, steps);
                }
                TaskStep::Dontneed {
                    vma: v,
                    offset,
                    length,
                    stride,
                }
            }
            "munmap" => {
                let v = self.step_vma(s, a, vmas)?;
                vmas.retain(|x| *x != v);
                TaskStep::Munmap { vma: v }
            }
            "compute" => TaskStep::Compute {
                ns: self.duration_key(s, "compute")?,
            },
            "sleep" => TaskStep::Sleep {
                ns: self.duration_key(s, "sleep")?,
            },
            "read" | "write" => self.step_io(s, a)?,
            "delete" => {
                let file = self.step_file(s, a)?;
                self.step_names(s, a, &file, false)?;
                TaskStep::Delete { file }
            }
            "free" => {
                let kinds = [("slab", true), ("pipes", false)];
                let reclaimable = self
                    .opt_word(s, "free", "object kind", &kinds)?
                    .expect("the action");
                match s.get("every_page") {
                    None => TaskStep::Free {
                        reclaimable,
                        every: self.int_key(s, "every")? as u64,
                    },
                    // Issue 33: single pipe pages.
                    Some(e) => {
                        if reclaimable {
                            return Err(self.err(
                                e.key_pos,
                                &s.key("every_page"),
                                "every_page applies to free = \"pipes\" only (a slab object is one page already: use every)",
                            ));
                        }
                        if let Some(ev) = s.get("every") {
                            return Err(self.err(
                                ev.key_pos,
                                &s.key("every"),
                                "give every (whole pipes of 256 pages) or every_page (single pipe pages), not both",
                            ));
                        }
                        TaskStep::FreePipePages {
                            every: self.int_key(s, "every_page")? as u64,
                        }
                    }
                }
            }
            "files" => {
                let set = self.step_file(s, a)?;
                self.need_key(s, "count")?;
                self.need_key(s, "op")?;
                let ops: Vec<(&str, FilesOp)> = FilesOp::ALL.iter().map(|o| (o.name(), *o)).collect();
                let count = self.int_key(s, "count")? as u64;
                let op = self.opt_word(s, "op", "files op", &ops)?.expect("required");
                let every = self.step_files_every(s, op, count)?;
                TaskStep::Files {
                    count,
                    size_bytes: self.size_key(s, "size")?,
                    op,
                    random: self.step_random(s)?,
                    mapping: self.step_mapping(s, a, &set, true)?,
                    set,
                    every,
                }
            }
            // Issue 33: named sample points.
            "sample" => TaskStep::Sample {
                name: self.step_sample_name(s, a)?,
            },
            "fadvise" => {
                let file = self.step_file(s, a)?;
                self.step_names(s, a, &file, false)?;
                self.need_key(s, "advice")?;
                let advice: Vec<(&str, Fadvice)> = Fadvice::ALL.iter().map(|o| (o.name(), *o)).collect();
                TaskStep::Fadvise {
                    file,
                    advice: self.opt_word(s, "advice", "advice", &advice)?.expect("required"),
                    offset: self.size_key(s, "offset")?,
                    length: self.opt_size_key(s, "length")?,
                }
            }
            "slab" | "pipes" => TaskStep::Slab {
                count: self.int_key(s, &a.key)? as u64,
                reclaimable: a.key == "slab",
            },
            "nr_hugepages" => TaskStep::NrHugepages {
                count: self.int_key(s, "nr_hugepages")? as u64,
            },
            "compact_memory" | "drop_caches" | "measure" => {
                match a.node.val {
                    Val::Bool(true) => {}
                    _ => return Err(self.type_err(&a.node, &s.key(&a.key), "true")),
                }
                match a.key.as_str() {
                    "compact_memory" => TaskStep::CompactMemory,
                    "drop_caches" => TaskStep::DropCaches,
                    _ => TaskStep::Measure,
                }
            }
            // mlock (H2, docs/model §29).
            "mlock" => TaskStep::Mlock {
                vma: self.step_vma(s, a, vmas)?,
            },
            "munlock" => TaskStep::Munlock {
                vma: self.step_vma(s, a, vmas)?,
            },
            // H5: the page-cache census.
            "census" => TaskStep::Census {
                file: self.step_census_file(s, a, steps)?,
            },
            _ => unreachable!("keys::STEPS"),
        })
    }

    /// The `every` of a `files` step with `op` on a set of `count` files (issue 33): given for
    /// `op = "delete"` only; more than `count` deletes nothing, which is warned about.
    fn step_files_every(&self, s: &Tbl, op: FilesOp, count: u64) -> R<u64> {
        let every = self.int_key(s, "every")? as u64;
        let Some(e) = s.get("every") else {
            return Ok(every);
        };
        if op != FilesOp::Delete {
            return Err(self.err(
                e.key_pos,
                &s.key("every"),
                format!(
                    "every applies to op = \"delete\" only (this step's op is {})",
                    quote(op.name())
                ),
            ));
        }
        if every > count {
            self.warn(
                e.node.pos,
                &s.key("every"),
                format!("every = {every} is more than count = {count}: no file of the set is deleted"),
            );
        }
        Ok(every)
    }

    /// The name of a `sample` step: letters, digits, `_` and `-` (it is a part of the rows'
    /// names, `census.NAME.ZONE.CLASS`, whose parts dots separate).
    fn step_sample_name(&self, s: &Tbl, a: &Entry) -> R<String> {
        let name = self.str(&a.node, &s.key(&a.key))?;
        if name.is_empty() {
            return Err(self.err(a.node.pos, &s.key(&a.key), "empty sample name"));
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        {
            return Err(self.err(
                a.node.pos,
                &s.key(&a.key),
                format!(
                    "sample name {} has {c:?}: a name is letters, digits, _ and - (it names rows census.NAME.ZONE.CLASS)",
                    quote(name)
                ),
            ));
        }
        Ok(name.to_string())
    }

    /// Issue 33: a task frees its pipes either whole (`every`) or by page (`every_page`), and
    /// its `every_page` values have a least common multiple of at most [`MAX_PIPE_LANES`]
    /// (`TaskParams::pipe_lanes`: the pipes the host fills side by side). `step` is step `s`,
    /// `steps` the steps before it and `lines` their lines.
    fn pipe_free_rule(&self, s: &Tbl, step: &TaskStep, steps: &[TaskStep], lines: &[usize]) -> R<()> {
        let earlier = |f: fn(&TaskStep) -> bool| steps.iter().position(f).map(|i| lines[i]);
        match step {
            TaskStep::FreePipePages { every } => {
                let e = s.get("every_page").expect("given");
                if let Some(line) = earlier(|x| {
                    matches!(
                        x,
                        TaskStep::Free {
                            reclaimable: false,
                            ..
                        }
                    )
                }) {
                    return Err(self.err(
                        e.key_pos,
                        &s.key("every_page"),
                        format!(
                            "this task frees whole pipes (every) on line {line}: a task frees its pipes whole or page by page (every_page), not both (the host fills its pipes for one or the other)"
                        ),
                    ));
                }
                let lanes = steps
                    .iter()
                    .filter_map(|x| match x {
                        TaskStep::FreePipePages { every } => Some(*every),
                        _ => None,
                    })
                    .fold(*every, crate::workload::lcm);
                if lanes > MAX_PIPE_LANES {
                    return Err(self.err(
                        e.node.pos,
                        &s.key("every_page"),
                        format!(
                            "the every_page values of this task's free steps have a least common multiple of {lanes}, over {MAX_PIPE_LANES}: the host fills that many pipes side by side (one per residue) to free every Nth page"
                        ),
                    ));
                }
            }
            TaskStep::Free {
                reclaimable: false, ..
            } => {
                if let Some(line) = earlier(|x| matches!(x, TaskStep::FreePipePages { .. })) {
                    let e = s.get("free").expect("the action");
                    return Err(self.err(
                        e.key_pos,
                        &s.key("free"),
                        format!(
                            "this task frees single pipe pages (every_page) on line {line}: a task frees its pipes whole or page by page, not both (the host fills its pipes for one or the other)"
                        ),
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The file a `census` step names: one an earlier read or write step of the task names
    /// (the run creates only those files).
    fn step_census_file(&self, s: &Tbl, a: &Entry, steps: &[TaskStep]) -> R<String> {
        let file = self.step_file(s, a)?;
        let named: Vec<&str> = steps
            .iter()
            .filter_map(|x| match x {
                TaskStep::Read { file, .. } | TaskStep::Write { file, .. } => Some(file.as_str()),
                _ => None,
            })
            .collect();
        if !named.contains(&file.as_str()) {
            let dym = did_you_mean(&file, named.iter().copied())
                .map(|c| format!("; did you mean {}?", quote(c)))
                .unwrap_or_default();
            return Err(self.err(
                a.node.pos,
                &s.key(&a.key),
                format!(
                    "file {} is not read or written by an earlier step of this task{dym}",
                    quote(&file)
                ),
            ));
        }
        Ok(file)
    }

    /// A `read` or `write` step.
    fn step_io(&self, s: &Tbl, a: &Entry) -> R<TaskStep> {
        let file = self.step_file(s, a)?;
        self.need_key(s, "length")?;
        let offset = self.size_key(s, "offset")?;
        let length = self.size_key(s, "length")?;
        self.file_range(s, &a.key, offset, length)?;
        let mapping = self.step_mapping(s, a, &file, false)?;
        Ok(if a.key == "read" {
            let file_size = self.opt_size_key(s, "file_size")?;
            if let Some(size) = file_size {
                self.max_file_size(s, size)?;
            }
            TaskStep::Read {
                file,
                offset,
                length,
                file_size: file_size.unwrap_or(offset + length).max(offset + length),
                random: self.step_random(s)?,
                mapping,
            }
        } else {
            TaskStep::Write {
                file,
                offset,
                length,
                chunk: self.size_key(s, "chunk")?,
                mapping,
            }
        })
    }

    /// Records that step `s` (action `a`) names `name`, a file set if `set`: a name is either a
    /// file or a file set throughout the workload.
    fn step_names(&self, s: &Tbl, a: &Entry, name: &str, set: bool) -> R<usize> {
        let mut named = self.task_files.borrow_mut();
        match named.iter().position(|f| f.name == name) {
            Some(i) if named[i].set != set => {
                let (is, was) = if set {
                    ("file set", "file")
                } else {
                    ("file", "file set")
                };
                Err(self.err(
                    a.node.pos,
                    &s.key(&a.key),
                    format!(
                        "{} names a {is} here but a {was} in an earlier step (a name is one or the other)",
                        quote(name)
                    ),
                ))
            }
            Some(i) => Ok(i),
            None => {
                named.push(NamedFile {
                    name: name.to_string(),
                    set,
                    kind: None,
                });
                Ok(named.len() - 1)
            }
        }
    }

    /// The mapping kind of the file (or set) `name` step `s` names: the first read, write or
    /// files step naming it sets it (its `mapping`, default xfs), as the first `[[op]]` naming
    /// a file does; a later step giving another kind is an error naming both lines.
    fn step_mapping(&self, s: &Tbl, a: &Entry, name: &str, set: bool) -> R<MappingKind> {
        let i = self.step_names(s, a, name, set)?;
        let given = self.opt_mapping(s)?;
        let mut named = self.task_files.borrow_mut();
        match (named[i].kind, given) {
            (None, g) => {
                let line = self.lines.line(g.map_or(s.pos, |(_, e)| e.key_pos));
                let kind = g.map_or(MappingKind::Xfs, |(m, _)| m);
                named[i].kind = Some((kind, line));
                Ok(kind)
            }
            (Some((have, line)), Some((m, e))) if have != m => Err(self.err(
                e.node.pos,
                &s.key("mapping"),
                format!(
                    "{} already has mapping {} from the step on line {line} (the first step that names a file sets its mapping)",
                    quote(name),
                    quote(have.name())
                ),
            )),
            (Some((have, _)), _) => Ok(have),
        }
    }
}
