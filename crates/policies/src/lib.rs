//! fraglab's policy plug-ins and the registry `[model] policy` names them by.
//!
//! A policy is an implementation of [`fraglab_mm::policy::Policy`]: the model's decision points
//! (fallback, compaction, page-cache gfp, kswapd/kcompactd assistance), each with Linux 6.18's
//! behaviour as its default. The kernel's own variants — the three seed series — are layers in
//! `fraglab_mm::policy` that the model switches build; this crate holds the policies that are
//! not in the kernel, one file each, and the registry.
//!
//! **Adding a policy**: copy `src/template.rs` to `src/NAME.rs`, override the hooks it changes,
//! give its `INFO` a name and a one-line summary, and add `NAME` to the [`policies!`] list
//! below. `fraglab policy list` then shows it and `[model] policy = "NAME"` runs it.
//!
//! Policies can also be registered at run time ([`register`]): the Python package registers
//! policies whose hooks are Python callables this way.

use std::sync::{Arc, Mutex};

use fraglab_mm::policy::{with_switches, Kernel, Policy, PolicyFactory, KERNEL_POLICY};
use fraglab_types::switches::{CostlyOrderPolicy, DefragStage, FolioMode, V4Position};

/// What the registry knows of a policy.
#[derive(Clone)]
pub struct PolicyInfo {
    /// The name `[model] policy` takes.
    pub name: String,
    /// One line on what it does.
    pub summary: String,
    /// Where it comes from: `kernel`, `plug-in` (this crate) or `runtime` (registered by a
    /// program, e.g. from Python).
    pub origin: &'static str,
    make: Arc<dyn Fn() -> Box<dyn Policy> + Send + Sync>,
}

impl std::fmt::Debug for PolicyInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyInfo")
            .field("name", &self.name)
            .field("origin", &self.origin)
            .finish()
    }
}

impl PolicyInfo {
    /// A new instance of the policy.
    pub fn build(&self) -> Box<dyn Policy> {
        (self.make)()
    }
}

/// A plug-in's static description (each plug-in file's `INFO`).
pub struct PluginInfo {
    pub name: &'static str,
    pub summary: &'static str,
    pub make: fn() -> Box<dyn Policy>,
}

/// Declares the plug-in modules, each with a `pub const INFO: PluginInfo`.
macro_rules! policies {
    ($($m:ident),* $(,)?) => {
        $(pub mod $m;)*
        /// Every plug-in of this crate, in the order `fraglab policy list` shows them.
        pub const PLUGINS: &[&PluginInfo] = &[$(&$m::INFO),*];
    };
}

policies! {
    contiguitas,
}

pub mod template;

static RUNTIME: Mutex<Vec<PolicyInfo>> = Mutex::new(Vec::new());

/// Registers a policy at run time under `name` (the form of a spec's policy name: lower-case
/// letters, digits, `_`, `-`, `.`). A name already registered at run time is replaced; a
/// built-in name is refused.
pub fn register(
    name: &str,
    summary: &str,
    make: impl Fn() -> Box<dyn Policy> + Send + Sync + 'static,
) -> Result<(), String> {
    if !fraglab_types::policy_name_ok(name) {
        return Err(format!(
            "{name:?} is not a policy name (lower-case letters, digits, `_`, `-`, `.`; at most 64)"
        ));
    }
    if builtin().iter().any(|p| p.name == name) {
        return Err(format!("{name:?} is a built-in policy's name"));
    }
    let info = PolicyInfo {
        name: name.to_string(),
        summary: summary.to_string(),
        origin: "runtime",
        make: Arc::new(make),
    };
    let mut r = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    r.retain(|p| p.name != name);
    r.push(info);
    Ok(())
}

/// Removes a policy registered at run time; false if there was none of that name.
pub fn unregister(name: &str) -> bool {
    let mut r = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    let before = r.len();
    r.retain(|p| p.name != name);
    r.len() != before
}

fn builtin() -> Vec<PolicyInfo> {
    let mut v = vec![PolicyInfo {
        name: KERNEL_POLICY.to_string(),
        summary: "Linux 6.18 as it ships (the default); the model switches folio_mode, \
                  defrag_stage, costly_order_policy and v4_position stack the seed series' \
                  variants on any policy"
            .to_string(),
        origin: "kernel",
        make: Arc::new(|| Box::new(Kernel)),
    }];
    for p in PLUGINS {
        v.push(PolicyInfo {
            name: p.name.to_string(),
            summary: p.summary.to_string(),
            origin: "plug-in",
            make: Arc::new(p.make),
        });
    }
    v
}

/// Every policy a spec may name: the kernel's, the plug-ins, then those registered at run
/// time.
pub fn list() -> Vec<PolicyInfo> {
    let mut v = builtin();
    v.extend(RUNTIME.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned());
    v
}

/// The policy called `name`, if any.
pub fn find(name: &str) -> Option<PolicyInfo> {
    list().into_iter().find(|p| p.name == name)
}

/// The factory of `[model] policy = name` with the model switches stacked on it
/// (`fraglab_mm::policy::with_switches`); `Err` names the policies there are.
pub fn factory(
    name: &str,
    folio_mode: FolioMode,
    defrag_stage: DefragStage,
    costly: CostlyOrderPolicy,
    v4_position: V4Position,
) -> Result<PolicyFactory, String> {
    let Some(info) = find(name) else {
        let names: Vec<String> = list().into_iter().map(|p| p.name).collect();
        return Err(format!(
            "unknown policy {name:?}: one of {} (`fraglab policy list`)",
            names.join(", ")
        ));
    };
    let make = move || with_switches(info.build(), folio_mode, defrag_stage, costly, v4_position);
    let full = make().name();
    Ok(PolicyFactory::new(full, make))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_valid() {
        let l = builtin();
        for (i, p) in l.iter().enumerate() {
            assert!(fraglab_types::policy_name_ok(&p.name), "{}", p.name);
            assert!(l[..i].iter().all(|o| o.name != p.name), "{} twice", p.name);
            assert_eq!(p.build().name(), p.name, "INFO.name is the policy's own name");
        }
    }

    #[test]
    fn runtime_registration() {
        assert!(register("linux-6.18", "", || Box::new(Kernel)).is_err());
        assert!(register("Bad Name", "", || Box::new(Kernel)).is_err());
        register("test-runtime-a", "a test", || Box::new(Kernel)).unwrap();
        assert_eq!(find("test-runtime-a").unwrap().origin, "runtime");
        assert!(unregister("test-runtime-a"));
        assert!(!unregister("test-runtime-a"));
        let e = factory(
            "nope",
            FolioMode::default(),
            DefragStage::default(),
            CostlyOrderPolicy::default(),
            V4Position::default(),
        )
        .unwrap_err();
        assert!(e.contains("contiguitas"), "{e}");
    }
}
