//! NUMA words shared by the spec and the model: a task's memory policy (`set_mempolicy(2)`,
//! `numactl`) and where a workload's tasks run.

/// The most nodes a machine may have (a nodemask is one 64-bit word).
pub const MAX_NODES: u32 = 64;

/// A task's memory policy with its nodemask as a bit per node (bit n = node n).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemPolicy {
    /// MPOL_DEFAULT / MPOL_LOCAL: the node of the CPU the task runs on, falling back to the
    /// other nodes in distance order.
    #[default]
    Local,
    /// MPOL_PREFERRED: the first node of the mask, then fallback as for local.
    Preferred(u64),
    /// MPOL_BIND: only the mask's nodes; the nearest of them to the task's CPU first.
    Bind(u64),
    /// MPOL_INTERLEAVE: the mask's nodes in turn, each allocation falling back like local.
    Interleave(u64),
}

impl MemPolicy {
    /// Parses `local`, `preferred:N`, `bind:N[,M...]`, `interleave:N[,M...]` or
    /// `interleave:all` (nodes as numactl writes them, ranges `A-B` allowed), for a machine of
    /// `nr_nodes` nodes. The error says what was expected.
    pub fn parse(s: &str, nr_nodes: u32) -> Result<MemPolicy, String> {
        let (kind, nodes) = match s.split_once(':') {
            Some((k, n)) => (k.trim(), Some(n.trim())),
            None => (s.trim(), None),
        };
        let mask = |n: Option<&str>| -> Result<u64, String> {
            let n = n.ok_or_else(|| format!("\"{kind}\" needs its nodes, e.g. \"{kind}:0,1\""))?;
            if n == "all" {
                return Ok(if nr_nodes >= 64 {
                    u64::MAX
                } else {
                    (1u64 << nr_nodes) - 1
                });
            }
            let mut m = 0u64;
            for part in n.split(',') {
                let (a, b) = match part.split_once('-') {
                    Some((a, b)) => (a.trim(), b.trim()),
                    None => (part.trim(), part.trim()),
                };
                let (a, b): (u32, u32) = match (a.parse(), b.parse()) {
                    (Ok(a), Ok(b)) if a <= b => (a, b),
                    _ => return Err(format!("\"{part}\" is not a node or a range of nodes (A-B)")),
                };
                if b >= nr_nodes {
                    return Err(format!(
                        "node {b}: the machine has {nr_nodes} node(s), 0..={}",
                        nr_nodes - 1
                    ));
                }
                for x in a..=b {
                    m |= 1 << x;
                }
            }
            Ok(m)
        };
        match kind {
            "local" | "default" if nodes.is_none() => Ok(MemPolicy::Local),
            "preferred" => {
                let m = mask(nodes)?;
                if m.count_ones() != 1 {
                    return Err("\"preferred\" takes one node".into());
                }
                Ok(MemPolicy::Preferred(m))
            }
            "bind" => Ok(MemPolicy::Bind(mask(nodes)?)),
            "interleave" => Ok(MemPolicy::Interleave(mask(nodes)?)),
            _ => Err(format!(
                "\"{s}\": expected local, preferred:N, bind:NODES or interleave:NODES (NODES like 0,1 or 0-3 or all)"
            )),
        }
    }
}

/// Where a workload's tasks run and allocate: `numa_node` (its CPUs, and memory bound there
/// unless a policy is given) and `mempolicy`.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NumaBind {
    pub node: Option<u32>,
    pub mempolicy: MemPolicy,
}

impl NumaBind {
    /// Whether the binding names only nodes of a machine of `nr_nodes` nodes; the error says
    /// which node is missing. A mask of every bit (`interleave:all` read before the machine's
    /// node count was known, as for a snapshot) names every node the machine has.
    pub fn check(&self, nr_nodes: u32) -> Result<(), String> {
        if let Some(n) = self.node.filter(|&n| n >= nr_nodes) {
            return Err(format!(
                "node {n}: the machine has {nr_nodes} node(s), 0..={}",
                nr_nodes - 1
            ));
        }
        let mask = match self.mempolicy {
            MemPolicy::Local => return Ok(()),
            MemPolicy::Preferred(m) | MemPolicy::Bind(m) | MemPolicy::Interleave(m) => m,
        };
        let have = if nr_nodes >= 64 {
            u64::MAX
        } else {
            (1u64 << nr_nodes) - 1
        };
        if mask != u64::MAX && mask & !have != 0 {
            let n = (mask & !have).trailing_zeros();
            return Err(format!(
                "mempolicy names node {n}: the machine has {nr_nodes} node(s), 0..={}",
                nr_nodes - 1
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_bad_ones_are_refused() {
        assert_eq!(MemPolicy::parse("local", 2), Ok(MemPolicy::Local));
        assert_eq!(MemPolicy::parse("bind:1", 2), Ok(MemPolicy::Bind(2)));
        assert_eq!(
            MemPolicy::parse("interleave:all", 3),
            Ok(MemPolicy::Interleave(7))
        );
        assert_eq!(
            MemPolicy::parse("interleave:0-2", 4),
            Ok(MemPolicy::Interleave(7))
        );
        assert_eq!(MemPolicy::parse("preferred:1", 2), Ok(MemPolicy::Preferred(2)));
        assert!(MemPolicy::parse("bind:2", 2).unwrap_err().contains("2 node(s)"));
        assert!(MemPolicy::parse("bind", 2)
            .unwrap_err()
            .contains("needs its nodes"));
        assert!(MemPolicy::parse("preferred:0,1", 2).is_err());
        assert!(MemPolicy::parse("spread", 2)
            .unwrap_err()
            .contains("expected local"));
    }
}
