//! NUMA nodes (docs/model §1.1 with the node-aware paths of Linux 6.18): the node
//! distances, each node's fallback zonelist (`build_zonelists`, `find_next_best_node`), memory
//! policies (`mm/mempolicy.c`: local, preferred, bind, interleave), the per-zone `numa_*`
//! events (`zone_statistics`), and `vm.zone_reclaim_mode`'s test of whether a zone may be
//! reclaimed before going off-node (`zone_allows_reclaim`).
//!
//! A machine with one node takes none of the multi-node branches: its zonelist is the node's
//! zones from the highest down, as before nodes were modelled, and every result is unchanged.
//!
//! Simplified, and said so: the distance table is the ACPI SLIT default (10 to itself, 20 to
//! every other node; no spec key changes it); automatic NUMA balancing (task and page
//! migration between nodes, `numa_pte_updates`/`numa_hint_faults`/`numa_pages_migrated`) is not
//! modelled, so `numa_*` balancing counters stay 0; cpusets are not modelled (a task's
//! nodemask comes from its memory policy only); an interleave policy takes nodes round-robin
//! per task for every allocation (`interleave_nodes`), where the kernel picks a fault's node
//! from the faulting address (`interleave_nid`) — the same spread over a task's memory, not
//! the same node for a given address.

use crate::mmzone::MachineConfig;
use crate::types::*;

/// `REMOTE_DISTANCE` and `LOCAL_DISTANCE` of the ACPI SLIT default.
pub const LOCAL_DISTANCE: u32 = 10;
pub const REMOTE_DISTANCE: u32 = 20;
/// `RECLAIM_DISTANCE` (include/linux/topology.h): node reclaim considers zones at most this far.
pub const RECLAIM_DISTANCE: u32 = 30;
/// `PENALTY_FOR_NODE_WITH_CPUS` in `find_next_best_node`.
const PENALTY_FOR_NODE_WITH_CPUS: u32 = 1;

/// The node topology of a booted machine.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct Numa {
    pub nr_nodes: u32,
    /// `cpu_to_node` for every CPU.
    pub cpu_node: Vec<u32>,
    /// `node_distance(a, b)` as `distance[a][b]`.
    pub distance: Vec<Vec<u32>>,
    /// Each node's `ZONELIST_FALLBACK`: zone indices into `Mm::zones`, node by node in
    /// fallback order, each node's populated zones from the highest down.
    pub zonelists: Vec<Vec<usize>>,
    /// Each node's fallback order of nodes (the first is the node itself).
    pub node_order: Vec<Vec<u32>>,
    /// `vm.zone_reclaim_mode` (bits: 1 RECLAIM_ZONE, 2 RECLAIM_WRITE, 4 RECLAIM_UNMAP).
    pub zone_reclaim_mode: u32,
    /// `vm.min_unmapped_ratio` (percent, default 1) and `vm.min_slab_ratio` (default 5): the
    /// per-node floors below which node reclaim does not scan (`pgdat->min_unmapped_pages`,
    /// `min_slab_pages`, recomputed from the node's managed pages).
    pub min_unmapped_ratio: u32,
    pub min_slab_ratio: u32,
    /// Each interleaving task's last node (`current->il_prev`), by pid.
    pub il_prev: std::collections::BTreeMap<u32, u32>,
}

impl Default for Numa {
    fn default() -> Self {
        Numa {
            nr_nodes: 1,
            cpu_node: Vec::new(),
            distance: vec![vec![LOCAL_DISTANCE]],
            zonelists: vec![Vec::new()],
            node_order: vec![vec![0]],
            zone_reclaim_mode: 0,
            min_unmapped_ratio: 1,
            min_slab_ratio: 5,
            il_prev: Default::default(),
        }
    }
}

impl Numa {
    /// The topology of `machine` with the default distances; zonelists are built by
    /// [`Numa::build_zonelists`] once the zones are populated.
    pub fn new(machine: &MachineConfig) -> Numa {
        let n = machine.nr_nodes();
        let distance = (0..n)
            .map(|a| {
                (0..n)
                    .map(|b| if a == b { LOCAL_DISTANCE } else { REMOTE_DISTANCE })
                    .collect()
            })
            .collect();
        Numa {
            nr_nodes: n,
            cpu_node: (0..machine.nr_cpus).map(|c| machine.cpu_to_node(c)).collect(),
            distance,
            zonelists: vec![Vec::new(); n as usize],
            node_order: vec![Vec::new(); n as usize],
            ..Default::default()
        }
    }

    /// Whether more than one node is online (`nr_online_nodes > 1`).
    #[inline]
    pub fn multi(&self) -> bool {
        self.nr_nodes > 1
    }

    /// `cpu_to_node`.
    #[inline]
    pub fn cpu_to_node(&self, cpu: u32) -> u32 {
        self.cpu_node.get(cpu as usize).copied().unwrap_or(0)
    }

    /// The CPUs of a node (`nr_cpus_node`).
    pub fn nr_cpus_node(&self, nid: u32) -> u64 {
        if self.nr_nodes == 1 {
            return self.cpu_node.len() as u64;
        }
        self.cpu_node.iter().filter(|&&n| n == nid).count() as u64
    }

    /// `build_zonelists` for every node: nodes in the order `find_next_best_node` picks them
    /// (the nearest first; among equals the nodes above the local one before those below it,
    /// memory-only nodes before nodes with CPUs, and a `node_load` tie-break that spreads the
    /// first node of each distance group round-robin across the nodes building their lists),
    /// then each node's populated zones from the highest down (`build_zonerefs_node`).
    /// `zones` gives (nid, zone type, populated) for each index of `Mm::zones`.
    pub fn build_zonelists(&mut self, zones: &[(u32, ZoneType, bool)]) {
        let n = self.nr_nodes as usize;
        let has_memory: Vec<bool> = (0..n as u32)
            .map(|nid| zones.iter().any(|&(z, _, p)| z == nid && p))
            .collect();
        let has_cpus: Vec<bool> = (0..n as u32).map(|nid| self.nr_cpus_node(nid) > 0).collect();
        let mut node_load = vec![0u32; n];
        for local in 0..n {
            let mut used = vec![false; n];
            let mut order = Vec::with_capacity(n);
            let mut prev = local;
            loop {
                let next = if !used[local] && has_memory[local] {
                    Some(local)
                } else {
                    let mut best: Option<(u64, usize)> = None;
                    for cand in (0..n).filter(|&c| has_memory[c] && !used[c]) {
                        let mut val = self.distance[local][cand] + (cand < local) as u32;
                        if has_cpus[cand] {
                            val += PENALTY_FOR_NODE_WITH_CPUS;
                        }
                        let key = val as u64 * MAX_NUMNODES_U64 + node_load[cand] as u64;
                        if best.is_none_or(|(b, _)| key < b) {
                            best = Some((key, cand));
                        }
                    }
                    best.map(|(_, c)| c)
                };
                let Some(node) = next else { break };
                used[node] = true;
                if self.distance[local][node] != self.distance[local][prev] {
                    node_load[node] += 1;
                }
                order.push(node as u32);
                prev = node;
            }
            self.zonelists[local] = order
                .iter()
                .flat_map(|&nid| {
                    let mut zs: Vec<usize> = zones
                        .iter()
                        .enumerate()
                        .filter(|(_, &(z, _, p))| z == nid && p)
                        .map(|(i, _)| i)
                        .collect();
                    zs.reverse();
                    zs
                })
                .collect();
            self.node_order[local] = order;
        }
    }

    /// `zone_allows_reclaim`: node reclaim may reclaim `zone_nid` for an allocation preferring
    /// `local_nid` if the two are at most `RECLAIM_DISTANCE` apart.
    pub fn zone_allows_reclaim(&self, local_nid: u32, zone_nid: u32) -> bool {
        self.distance[local_nid as usize][zone_nid as usize] <= RECLAIM_DISTANCE
    }
}

const MAX_NUMNODES_U64: u64 = crate::mmzone::MAX_NUMNODES as u64;

pub use fraglab_types::numa::{MemPolicy, NumaBind};

/// The NUMA events of a zone (`enum numa_stat_item`), as /proc/zoneinfo and /proc/vmstat
/// print them.
pub const NUMA_HIT: usize = 0;
pub const NUMA_MISS: usize = 1;
pub const NUMA_FOREIGN: usize = 2;
pub const NUMA_INTERLEAVE_HIT: usize = 3;
pub const NUMA_LOCAL: usize = 4;
pub const NUMA_OTHER: usize = 5;

impl crate::node::Mm {
    /// The preferred node and nodemask of an allocation by the running task (`mm.cur`) on
    /// `cpu`, from its memory policy (`policy_node`, `policy_nodemask`): local — the CPU's
    /// node, all nodes; preferred — the policy's first node, all nodes; bind — the CPU's node's
    /// zonelist, only the mask's nodes (so the mask's nearest node first);
    /// interleave — the mask's next node after the task's last (`interleave_nodes`), all
    /// nodes.
    pub fn policy_node(&mut self, cpu: u32) -> (u32, u64) {
        let local = self.numa.cpu_to_node(cpu);
        let all = if self.numa.nr_nodes >= 64 {
            u64::MAX
        } else {
            (1u64 << self.numa.nr_nodes) - 1
        };
        match self.cur.mempolicy {
            MemPolicy::Local => (local, u64::MAX),
            MemPolicy::Preferred(m) => ((m & all).trailing_zeros().min(self.numa.nr_nodes - 1), u64::MAX),
            // `policy_node` keeps the local node for bind: the walk is the local node's
            // zonelist filtered by the mask, so the mask's nearest node comes first.
            MemPolicy::Bind(m) => (local, m),
            MemPolicy::Interleave(m) => {
                let m = m & all;
                let pid = self.cur.pid;
                let prev = self.numa.il_prev.get(&pid).copied().unwrap_or(u32::MAX);
                // next_node_in: the next set bit after prev, wrapping.
                let next = (1..=self.numa.nr_nodes)
                    .map(|d| prev.wrapping_add(d) % self.numa.nr_nodes)
                    .find(|&n| m & (1 << n) != 0)
                    .unwrap_or(local);
                self.numa.il_prev.insert(pid, next);
                (next, u64::MAX)
            }
        }
    }
}

impl crate::node::Mm {
    /// The node items of node `nid` as /proc/zoneinfo prints them under the node (stored
    /// units). Simplified: the model keeps node items for the whole machine, except the LRU
    /// list sizes, which it keeps per node; on several nodes each node shows its own LRU sizes
    /// and node 0 holds the rest of every item, so the nodes sum to /proc/vmstat's values.
    pub fn node_stats(&self, nid: u32) -> [u64; crate::vmstat::NR_STATS] {
        use crate::vmstat::Stat;
        let mut s = self.stats;
        if !self.numa.multi() {
            return s;
        }
        const LRU: [Stat; 5] = [
            Stat::nr_inactive_anon,
            Stat::nr_active_anon,
            Stat::nr_inactive_file,
            Stat::nr_active_file,
            Stat::nr_unevictable,
        ];
        if nid != 0 {
            s = [0; crate::vmstat::NR_STATS];
            for (l, st) in LRU.iter().enumerate() {
                s[*st as usize] = self.reclaim.lruvec[nid as usize].pages[l];
            }
            return s;
        }
        for (l, st) in LRU.iter().enumerate() {
            let others: u64 = self.reclaim.lruvec[1..].iter().map(|lv| lv.pages[l]).sum();
            s[*st as usize] = s[*st as usize].saturating_sub(others);
        }
        s
    }

    /// A per-node /proc file of every node, node after node, as the kernel's seq_file walks
    /// the online nodes: `render(nid, the node's zone views)`.
    pub fn render_per_node(&self, render: impl Fn(u32, &[crate::vmstat::ZoneView]) -> String) -> String {
        let views = self.zone_views();
        (0..self.numa.nr_nodes)
            .map(|nid| render(nid, &views[self.node_zones(nid)]))
            .collect()
    }
}
