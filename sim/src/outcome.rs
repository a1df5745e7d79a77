//! [`Outcome`]: where an access was satisfied in the I1/D1 + LL hierarchy.

/// Where one access (instruction fetch, read or write) was satisfied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Hit in I1 or D1.
    L1Hit,
    /// Missed in L1, hit in LL.
    LlHit,
    /// Missed in L1 and in LL.
    LlMiss,
    /// Missed in L1 and in LL, and the line LL evicted was dirty (only with
    /// a write-back LL, see [`crate::ExtendedHierarchy`]).
    LlMissDirty,
}

impl Outcome {
    /// True when L1 missed (counts toward `I1mr`, `D1mr` or `D1mw`).
    #[inline]
    pub fn l1_miss(self) -> bool {
        self != Outcome::L1Hit
    }

    /// True when LL missed too (counts toward `ILmr`, `DLmr` or `DLmw`).
    #[inline]
    pub fn ll_miss(self) -> bool {
        matches!(self, Outcome::LlMiss | Outcome::LlMissDirty)
    }

    /// True when LL missed and evicted a dirty line (counts toward
    /// `ILdmr`, `DLdmr` or `DLdmw`).
    #[inline]
    pub fn dirty_miss(self) -> bool {
        self == Outcome::LlMissDirty
    }
}
