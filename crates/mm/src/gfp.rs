//! The allocator's view of gfp flags: the ALLOC_* flags of mm/internal.h derived from them
//! (docs/model §4.1). [`Gfp`] itself lives in the vocabulary crate (`fraglab_types::gfp`)
//! so that specs can name gfp masks without linking the model.

pub use fraglab_types::gfp::Gfp;

/// ALLOC_* flags of mm/internal.h (§4.1 table), with the kernel's values.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct AllocFlags(pub u32);

impl AllocFlags {
    pub const WMARK_MIN: u32 = 0;
    pub const WMARK_LOW: u32 = 1;
    pub const WMARK_HIGH: u32 = 2;
    pub const WMARK_MASK: u32 = 3;
    pub const NO_WATERMARKS: u32 = 0x04;
    pub const OOM: u32 = 0x08;
    pub const NON_BLOCK: u32 = 0x10;
    pub const MIN_RESERVE: u32 = 0x20;
    pub const CPUSET: u32 = 0x40;
    pub const CMA: u32 = 0x80;
    pub const NOFRAGMENT: u32 = 0x100;
    pub const HIGHATOMIC: u32 = 0x200;
    pub const TRYLOCK: u32 = 0x400;
    pub const KSWAPD: u32 = 0x800;
    /// `ALLOC_RESERVES` = NON_BLOCK | MIN_RESERVE | HIGHATOMIC | OOM.
    pub const RESERVES: u32 = Self::NON_BLOCK | Self::MIN_RESERVE | Self::HIGHATOMIC | Self::OOM;

    #[inline]
    pub const fn has(self, f: u32) -> bool {
        self.0 & f != 0
    }

    #[inline]
    pub const fn wmark(self) -> u32 {
        self.0 & Self::WMARK_MASK
    }

    #[inline]
    pub fn set(&mut self, f: u32) {
        self.0 |= f;
    }

    #[inline]
    pub fn clear(&mut self, f: u32) {
        self.0 &= !f;
    }
}
