//! `[workload]` and its generators' `[[workload.*]]` tables (task programs in `task.rs`).

use super::*;
use crate::{
    FioSmallFilesParams, KbuildParams, MappingKind, PgbenchParams, ThpBurstParams, ThpChallengeParams,
    VmScalabilityCase, VmScalabilityParams, WorkloadSpec,
};

impl Cx<'_> {
    pub(super) fn workload(&self, t: &Tbl) -> R<WorkloadSpec> {
        self.check_keys(t)?;
        let duration_ns = self.duration_key(t, "duration")?;
        let w = WorkloadSpec {
            duration_ns,
            kbuild: self.generator(t, "kbuild", keys::KBUILD, Self::kbuild)?,
            thp_burst: self.generator(t, "thp_burst", keys::THP_BURST, Self::thp_burst)?,
            thpchallenge: self.generator(t, "thpchallenge", keys::THPCHALLENGE, Self::thpchallenge)?,
            pgbench: self.generator(t, "pgbench", keys::PGBENCH, Self::pgbench)?,
            vm_scalability: self.generator(
                t,
                "vm_scalability",
                keys::VM_SCALABILITY,
                Self::vm_scalability,
            )?,
            fio_smallfiles: self.generator(
                t,
                "fio_smallfiles",
                keys::FIO_SMALLFILES,
                Self::fio_smallfiles,
            )?,
            task: self.generator(t, "task", keys::TASK, Self::task)?,
        };
        let items = self.items(t, "task", keys::TASK)?;
        self.task_order(&items, &w.task)?;
        let other_generators = !(w.kbuild.is_empty()
            && w.thp_burst.is_empty()
            && w.thpchallenge.is_empty()
            && w.pgbench.is_empty()
            && w.vm_scalability.is_empty()
            && w.fio_smallfiles.is_empty());
        if !other_generators && !w.task.is_empty() && w.task.iter().all(|x| x.background) {
            let e = items[0].get("background").expect("a background task");
            return Err(self.err(
                e.node.pos,
                &items[0].key("background"),
                "every task is background load: nothing would end the run but its duration (leave `background` off the task whose end ends the run)",
            ));
        }
        if w.kbuild.is_empty()
            && w.thp_burst.is_empty()
            && w.thpchallenge.is_empty()
            && w.pgbench.is_empty()
            && w.vm_scalability.is_empty()
            && w.fio_smallfiles.is_empty()
            && w.task.is_empty()
        {
            return Err(self.err(
                t.pos,
                "workload",
                "no generator (expected [[workload.kbuild]], [[workload.thp_burst]], [[workload.thpchallenge]], [[workload.pgbench]], [[workload.vm_scalability]], [[workload.fio_smallfiles]] or [[workload.task]] tables)",
            ));
        }
        Ok(w)
    }

    /// The `[[workload.<k>]]` tables of generator `k`, each parsed by `parse`.
    fn generator<T>(
        &self,
        t: &Tbl,
        k: &str,
        keys: &'static [KeyDef],
        parse: fn(&Self, &Tbl) -> R<T>,
    ) -> R<Vec<T>> {
        self.items(t, k, keys)?.iter().map(|g| parse(self, g)).collect()
    }

    /// A size key that must be a multiple of 2 MiB (`why` says so in the error).
    fn pmd_size(&self, t: &Tbl, k: &str, why: &str) -> R<u64> {
        let size = self.size_key(t, k)?;
        if size % (2 << 20) != 0 {
            let e = t.get(k).expect("a size other than the default");
            return Err(self.err(
                e.node.pos,
                &t.key(k),
                format!("{size} bytes is not a multiple of 2 MiB ({why})"),
            ));
        }
        Ok(size)
    }

    /// `numa_node` and `mempolicy` of a workload table: the node must be one of the
    /// machine's; with a node and no policy the memory is bound to the node (numactl -N n -m n).
    pub(super) fn numa_bind(&self, t: &Tbl) -> R<fraglab_types::numa::NumaBind> {
        let nodes = self.nodes.get();
        let node = match t.get("numa_node") {
            None => None,
            Some(e) => {
                let n = self.int_key(t, "numa_node")? as u32;
                if n >= nodes {
                    return Err(self.err(
                        e.node.pos,
                        &t.key("numa_node"),
                        format!("node {n}: the machine has {nodes} node(s), 0..={}", nodes - 1),
                    ));
                }
                Some(n)
            }
        };
        let mempolicy = match t.get("mempolicy") {
            Some(e) => {
                let s = self.str(&e.node, &t.key("mempolicy"))?;
                fraglab_types::numa::MemPolicy::parse(s, nodes)
                    .map_err(|m| self.err(e.node.pos, &t.key("mempolicy"), m))?
            }
            None => match node {
                Some(n) => fraglab_types::numa::MemPolicy::Bind(1 << n),
                None => fraglab_types::numa::MemPolicy::Local,
            },
        };
        Ok(fraglab_types::numa::NumaBind { node, mempolicy })
    }

    fn kbuild(&self, k: &Tbl) -> R<KbuildParams> {
        self.check_keys(k)?;
        let n = |key: &str| self.int_key(k, key).map(|v| v as u32);
        let source_bytes = self.size_key(k, "source")?;
        // The default file size is 64 KiB, or the whole tree if it is smaller.
        let source_file_bytes = self
            .opt_size_key(k, "source_file")?
            .unwrap_or(source_bytes.min(64 << 10));
        if let Some(e) = k.get("source_file").filter(|_| source_file_bytes > source_bytes) {
            return Err(self.err(
                e.node.pos,
                &k.key("source_file"),
                format!("{source_file_bytes} bytes is larger than the tree (source = {source_bytes} bytes)"),
            ));
        }
        Ok(KbuildParams {
            line: self.lines.line(k.pos),
            jobs_parallel: n("jobs_parallel")?,
            jobs: n("jobs")?,
            iterations: n("iterations")?,
            job_anon_bytes: self.size_key(k, "job_anon")?,
            job_cpu_ns: self.duration_key(k, "job_cpu")?,
            source_bytes,
            job_read_bytes: self.size_key(k, "job_read")?,
            job_slab_bytes: self.size_key(k, "job_slab")?,
            job_obj_bytes: self.size_key(k, "job_obj")?,
            source_file_bytes,
            untar: self.bool_key(k, "untar")?,
            trees: n("trees")?,
            numa: self.numa_bind(k)?,
        })
    }

    fn thp_burst(&self, b: &Tbl) -> R<ThpBurstParams> {
        self.check_keys(b)?;
        let size_bytes = self.pmd_size(b, "size", "a burst faults whole PMD ranges")?;
        if let (Some((mem, swap)), Some(e)) = (self.memory.get(), b.get("size")) {
            if size_bytes > mem.saturating_add(swap) {
                self.warn(
                    e.node.pos,
                    &b.key("size"),
                    format!(
                        "{} is larger than the machine's memory ({}){}: each burst faults more than \
                         can be held, so the OOM killer ends it (the run's \"OOM kills\" row)",
                        show_bytes(size_bytes),
                        show_bytes(mem),
                        if swap > 0 {
                            format!(" and swap ({})", show_bytes(swap))
                        } else {
                            String::new()
                        }
                    ),
                );
            }
        }
        Ok(ThpBurstParams {
            line: self.lines.line(b.pos),
            interval_ns: self.duration_key(b, "interval")?,
            size_bytes,
            hold_ns: self.duration_key(b, "hold")?,
            bursts: self.int_key(b, "bursts")? as u32,
            start_ns: self.duration_key(b, "start")?,
            madvised: self.bool_key(b, "madvised")?,
            numa: self.numa_bind(b)?,
        })
    }

    fn thpchallenge(&self, c: &Tbl) -> R<ThpChallengeParams> {
        self.check_keys(c)?;
        let size_bytes = self.pmd_size(c, "size", "thpchallenge steps in whole PMD ranges")?;
        Ok(ThpChallengeParams {
            line: self.lines.line(c.pos),
            threads: self.int_key(c, "threads")? as u32,
            size_bytes,
            madvised: self.bool_key(c, "madvised")?,
            hold_ns: self.duration_key(c, "hold")?,
            start_ns: self.duration_key(c, "start")?,
        })
    }

    fn pgbench(&self, p: &Tbl) -> R<PgbenchParams> {
        self.check_keys(p)?;
        Ok(PgbenchParams {
            line: self.lines.line(p.pos),
            clients: self.int_key(p, "clients")? as u32,
            client_private_bytes: self.size_key(p, "client_private")?,
            data_bytes: self.size_key(p, "data")?,
            wal_bytes: self.size_key(p, "wal")?,
            tx_cpu_ns: self.duration_key(p, "tx_cpu")?,
            tx_data_bytes: self.size_key(p, "tx_data_write")?,
            tx_wal_bytes: self.size_key(p, "tx_wal_write")?,
            fpw_wal_bytes: self.size_key(p, "fpw_wal_write")?,
            checkpoint_ns: self.duration_key(p, "checkpoint_interval")?,
            checkpoint_bytes: self.size_key(p, "checkpoint_size")?,
            checkpoint_write_bytes: self.size_key(p, "checkpoint_write")?,
            checkpoint_spread_ns: self.duration_key(p, "checkpoint_spread")?,
            duration_ns: self.duration_key(p, "duration")?,
        })
    }

    fn vm_scalability(&self, v: &Tbl) -> R<VmScalabilityParams> {
        self.check_keys(v)?;
        self.need_key(v, "case")?;
        let cases: Vec<(&str, VmScalabilityCase)> =
            VmScalabilityCase::ALL.iter().map(|c| (c.name(), *c)).collect();
        let case = self
            .opt_word(v, "case", "vm-scalability case", &cases)?
            .expect("a required key");
        let mapping = self.opt_mapping(v)?.map_or(MappingKind::LargeFolios, |(m, _)| m);
        Ok(VmScalabilityParams {
            line: self.lines.line(v.pos),
            case,
            tasks: self.opt_int_key(v, "tasks")?.map(|n| n as u32),
            size_bytes: self.opt_size_key(v, "size")?,
            unit_bytes: self.size_key(v, "unit")?,
            runtime_ns: self.duration_key(v, "runtime")?,
            start_ns: self.duration_key(v, "start")?,
            mapping,
        })
    }

    fn fio_smallfiles(&self, f: &Tbl) -> R<FioSmallFilesParams> {
        self.check_keys(f)?;
        Ok(FioSmallFilesParams {
            line: self.lines.line(f.pos),
            jobs: self.int_key(f, "jobs")? as u32,
            file_size_bytes: self.size_key(f, "file_size")?,
            working_set_bytes: self.opt_size_key(f, "working_set")?,
            start_ns: self.duration_key(f, "start")?,
            runtime_ns: self.opt_duration_key(f, "runtime")?,
        })
    }
}
