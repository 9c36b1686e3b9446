//! GFP flags under their kernel names, and what the allocator derives from them
//! (docs/model §4.1, §1.3, §1.1.5). Bit numbers are those of the S2 build
//! (KASAN_HW_TAGS and LOCKDEP off, so `__GFP_NO_OBJ_EXT` is bit 24): include/linux/gfp_types.h.

use crate::page::{MigrateType, ZoneType};

/// A gfp mask. The bit values are the kernel's, so a mask prints the same in traces.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Gfp(pub u32);

impl Gfp {
    pub const DMA: Gfp = Gfp(1 << 0);
    pub const HIGHMEM: Gfp = Gfp(1 << 1);
    pub const DMA32: Gfp = Gfp(1 << 2);
    pub const MOVABLE: Gfp = Gfp(1 << 3);
    pub const RECLAIMABLE: Gfp = Gfp(1 << 4);
    pub const HIGH: Gfp = Gfp(1 << 5);
    pub const IO: Gfp = Gfp(1 << 6);
    pub const FS: Gfp = Gfp(1 << 7);
    pub const ZERO: Gfp = Gfp(1 << 8);
    pub const DIRECT_RECLAIM: Gfp = Gfp(1 << 10);
    pub const KSWAPD_RECLAIM: Gfp = Gfp(1 << 11);
    pub const WRITE: Gfp = Gfp(1 << 12);
    pub const NOWARN: Gfp = Gfp(1 << 13);
    pub const RETRY_MAYFAIL: Gfp = Gfp(1 << 14);
    pub const NOFAIL: Gfp = Gfp(1 << 15);
    pub const NORETRY: Gfp = Gfp(1 << 16);
    pub const MEMALLOC: Gfp = Gfp(1 << 17);
    pub const COMP: Gfp = Gfp(1 << 18);
    pub const NOMEMALLOC: Gfp = Gfp(1 << 19);
    pub const HARDWALL: Gfp = Gfp(1 << 20);
    pub const THISNODE: Gfp = Gfp(1 << 21);
    pub const ACCOUNT: Gfp = Gfp(1 << 22);
    pub const ZEROTAGS: Gfp = Gfp(1 << 23);
    pub const NO_OBJ_EXT: Gfp = Gfp(1 << 24);

    /// `__GFP_RECLAIM` = direct | kswapd.
    pub const RECLAIM: Gfp = Gfp(Self::DIRECT_RECLAIM.0 | Self::KSWAPD_RECLAIM.0);
    pub const GFP_ATOMIC: Gfp = Gfp(Self::HIGH.0 | Self::KSWAPD_RECLAIM.0);
    pub const GFP_KERNEL: Gfp = Gfp(Self::RECLAIM.0 | Self::IO.0 | Self::FS.0);
    pub const GFP_KERNEL_ACCOUNT: Gfp = Gfp(Self::GFP_KERNEL.0 | Self::ACCOUNT.0);
    pub const GFP_NOWAIT: Gfp = Gfp(Self::KSWAPD_RECLAIM.0 | Self::NOWARN.0);
    pub const GFP_NOIO: Gfp = Self::RECLAIM;
    pub const GFP_NOFS: Gfp = Gfp(Self::RECLAIM.0 | Self::IO.0);
    pub const GFP_USER: Gfp = Gfp(Self::RECLAIM.0 | Self::IO.0 | Self::FS.0 | Self::HARDWALL.0);
    pub const GFP_DMA: Gfp = Self::DMA;
    pub const GFP_DMA32: Gfp = Self::DMA32;
    pub const GFP_HIGHUSER: Gfp = Gfp(Self::GFP_USER.0 | Self::HIGHMEM.0);
    /// GFP_HIGHUSER | __GFP_MOVABLE (| __GFP_SKIP_KASAN, which is 0 on S2).
    pub const GFP_HIGHUSER_MOVABLE: Gfp = Gfp(Self::GFP_HIGHUSER.0 | Self::MOVABLE.0);
    /// (GFP_HIGHUSER_MOVABLE | COMP | NOMEMALLOC | NOWARN) minus both reclaim bits (§4.1).
    pub const GFP_TRANSHUGE_LIGHT: Gfp = Gfp((Self::GFP_HIGHUSER_MOVABLE.0
        | Self::COMP.0
        | Self::NOMEMALLOC.0
        | Self::NOWARN.0)
        & !Self::RECLAIM.0);
    /// GFP_TRANSHUGE_LIGHT | __GFP_DIRECT_RECLAIM (no kswapd reclaim, §4.1).
    pub const GFP_TRANSHUGE: Gfp = Gfp(Self::GFP_TRANSHUGE_LIGHT.0 | Self::DIRECT_RECLAIM.0);

    /// Every name accepted in a spec, composites first (the order trace output uses).
    pub const NAMES: &'static [(&'static str, Gfp)] = &[
        ("GFP_TRANSHUGE", Self::GFP_TRANSHUGE),
        ("GFP_TRANSHUGE_LIGHT", Self::GFP_TRANSHUGE_LIGHT),
        ("GFP_HIGHUSER_MOVABLE", Self::GFP_HIGHUSER_MOVABLE),
        ("GFP_HIGHUSER", Self::GFP_HIGHUSER),
        ("GFP_USER", Self::GFP_USER),
        ("GFP_KERNEL_ACCOUNT", Self::GFP_KERNEL_ACCOUNT),
        ("GFP_KERNEL", Self::GFP_KERNEL),
        ("GFP_NOFS", Self::GFP_NOFS),
        ("GFP_ATOMIC", Self::GFP_ATOMIC),
        ("GFP_NOIO", Self::GFP_NOIO),
        ("GFP_NOWAIT", Self::GFP_NOWAIT),
        ("GFP_DMA", Self::GFP_DMA),
        ("GFP_DMA32", Self::GFP_DMA32),
        ("__GFP_DMA", Self::DMA),
        ("__GFP_HIGHMEM", Self::HIGHMEM),
        ("__GFP_DMA32", Self::DMA32),
        ("__GFP_MOVABLE", Self::MOVABLE),
        ("__GFP_RECLAIMABLE", Self::RECLAIMABLE),
        ("__GFP_HIGH", Self::HIGH),
        ("__GFP_IO", Self::IO),
        ("__GFP_FS", Self::FS),
        ("__GFP_ZERO", Self::ZERO),
        ("__GFP_RECLAIM", Self::RECLAIM),
        ("__GFP_DIRECT_RECLAIM", Self::DIRECT_RECLAIM),
        ("__GFP_KSWAPD_RECLAIM", Self::KSWAPD_RECLAIM),
        ("__GFP_WRITE", Self::WRITE),
        ("__GFP_NOWARN", Self::NOWARN),
        ("__GFP_RETRY_MAYFAIL", Self::RETRY_MAYFAIL),
        ("__GFP_NOFAIL", Self::NOFAIL),
        ("__GFP_NORETRY", Self::NORETRY),
        ("__GFP_MEMALLOC", Self::MEMALLOC),
        ("__GFP_COMP", Self::COMP),
        ("__GFP_NOMEMALLOC", Self::NOMEMALLOC),
        ("__GFP_HARDWALL", Self::HARDWALL),
        ("__GFP_THISNODE", Self::THISNODE),
        ("__GFP_ACCOUNT", Self::ACCOUNT),
        ("__GFP_ZEROTAGS", Self::ZEROTAGS),
        ("__GFP_NO_OBJ_EXT", Self::NO_OBJ_EXT),
    ];

    #[inline]
    pub const fn contains(self, other: Gfp) -> bool {
        self.0 & other.0 == other.0
    }

    #[inline]
    pub const fn intersects(self, other: Gfp) -> bool {
        self.0 & other.0 != 0
    }

    #[inline]
    pub const fn union(self, other: Gfp) -> Gfp {
        Gfp(self.0 | other.0)
    }

    #[inline]
    pub const fn without(self, other: Gfp) -> Gfp {
        Gfp(self.0 & !other.0)
    }

    /// Looks up one kernel name (exact, case-sensitive as in the kernel).
    pub fn from_name(name: &str) -> Option<Gfp> {
        Self::NAMES.iter().find(|(n, _)| *n == name).map(|&(_, g)| g)
    }

    /// Parses `NAME|NAME|...` (spaces around `|` allowed). Returns the unknown name on error.
    pub fn parse(s: &str) -> Result<Gfp, String> {
        let mut g = Gfp(0);
        for part in s.split('|') {
            let part = part.trim();
            if part.is_empty() {
                return Err(s.to_string());
            }
            match Self::from_name(part) {
                Some(f) => g = g.union(f),
                None => return Err(part.to_string()),
            }
        }
        Ok(g)
    }

    /// `gfp_migratetype()`: MOVABLE bit → 1, RECLAIMABLE bit → 2, neither → 0 (§1.3).
    #[inline]
    pub fn migratetype(self) -> MigrateType {
        MigrateType::from_index(((self.0 & (Self::MOVABLE.0 | Self::RECLAIMABLE.0)) >> 3) as usize)
    }

    /// `gfp_zone()`: the highest zone the request may use (§1.1.5). __GFP_DMA → DMA,
    /// __GFP_DMA32 → DMA32, __GFP_HIGHMEM|__GFP_MOVABLE → Movable, __GFP_HIGHMEM alone → Normal
    /// (no ZONE_HIGHMEM on x86-64), __GFP_MOVABLE alone → Normal, otherwise Normal.
    pub fn zone(self) -> ZoneType {
        if self.intersects(Self::DMA) {
            ZoneType::Dma
        } else if self.intersects(Self::DMA32) {
            ZoneType::Dma32
        } else if self.contains(Gfp(Self::HIGHMEM.0 | Self::MOVABLE.0)) {
            ZoneType::Movable
        } else {
            ZoneType::Normal
        }
    }

    /// `gfp_compaction_allowed`: compaction needs __GFP_IO (§4.1).
    #[inline]
    pub fn compaction_allowed(self) -> bool {
        self.intersects(Self::IO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s4_1_composites_match_the_kernel_values() {
        // Values as the kernel prints them in mm_page_alloc's raw gfp_flags on S2.
        assert_eq!(Gfp::GFP_KERNEL.0, 0xcc0);
        assert_eq!(Gfp::GFP_ATOMIC.0, 0x820);
        assert_eq!(Gfp::GFP_NOWAIT.0, 0x2800);
        assert_eq!(Gfp::GFP_HIGHUSER_MOVABLE.0, 0x100cca);
        assert_eq!(Gfp::GFP_TRANSHUGE_LIGHT.0, 0x1c20ca);
        assert_eq!(Gfp::GFP_TRANSHUGE.0, 0x1c24ca);
    }

    #[test]
    fn s1_3_gfp_migratetype() {
        assert_eq!(Gfp::GFP_KERNEL.migratetype(), MigrateType::Unmovable);
        assert_eq!(Gfp::GFP_HIGHUSER_MOVABLE.migratetype(), MigrateType::Movable);
        assert_eq!(
            Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE).migratetype(),
            MigrateType::Reclaimable
        );
    }

    #[test]
    fn s1_1_gfp_zone() {
        assert_eq!(Gfp::GFP_HIGHUSER_MOVABLE.zone(), ZoneType::Movable);
        assert_eq!(Gfp::GFP_KERNEL.zone(), ZoneType::Normal);
        assert_eq!(Gfp::GFP_KERNEL.union(Gfp::DMA32).zone(), ZoneType::Dma32);
        assert_eq!(Gfp::GFP_DMA.zone(), ZoneType::Dma);
    }

    #[test]
    fn parse_names_and_reject_unknown() {
        assert_eq!(
            Gfp::parse("GFP_KERNEL | __GFP_NORETRY").unwrap(),
            Gfp::GFP_KERNEL.union(Gfp::NORETRY)
        );
        assert_eq!(Gfp::parse("GFP_KERNAL").unwrap_err(), "GFP_KERNAL");
    }
}
