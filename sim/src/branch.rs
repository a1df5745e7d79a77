//! Cachegrind's branch predictors (`cg_branchpred.c`), also used by Callgrind's
//! `--branch-sim=yes`.
//!
//! - Conditional branches: 16384 two-bit saturating counters, all starting at 0
//!   (strongly not-taken), indexed by 7 bits of global history above 7 bits of the
//!   branch address: `((history & 0x7f) << 7) | (addr & 0x7f)`. Taken is predicted
//!   when the counter is at least 2.
//! - Indirect branches: 512 last-target entries indexed by `addr & 0x1ff`, all
//!   starting at 0.
//!
//! Returns are not predicted. On x86-64 no low address bits are dropped.

const HIST_BITS: u32 = 7;
const ADDR_BITS: u32 = 7;
const COUNTERS: usize = 1 << (HIST_BITS + ADDR_BITS);
const BTAC_BITS: u32 = 9;
const BTAC: usize = 1 << BTAC_BITS;

/// The taken/not-taken predictor for conditional branches.
#[derive(Clone, Debug)]
pub struct CondPredictor {
    history: u64,
    counters: Box<[u8; COUNTERS]>,
}

impl Default for CondPredictor {
    fn default() -> Self {
        CondPredictor::new()
    }
}

impl CondPredictor {
    /// All counters 0, empty history.
    pub fn new() -> CondPredictor {
        CondPredictor {
            history: 0,
            counters: Box::new([0; COUNTERS]),
        }
    }

    /// Predicts the conditional branch at `addr`, then learns that it was `taken`
    /// or not. Returns true on a misprediction (counts toward `Bcm`).
    #[inline]
    pub fn predict(&mut self, addr: u64, taken: bool) -> bool {
        let hist = self.history & ((1 << HIST_BITS) - 1);
        let index = ((hist << ADDR_BITS) | (addr & ((1 << ADDR_BITS) - 1))) as usize;
        let counter = &mut self.counters[index % COUNTERS];
        let mispredict = (*counter >= 2) != taken;
        self.history = (self.history << 1) | u64::from(taken);
        if taken {
            *counter = (*counter + 1).min(3);
        } else {
            *counter = counter.saturating_sub(1);
        }
        mispredict
    }

    /// The global history register (the last outcomes, newest in bit 0).
    pub fn history(&self) -> u64 {
        self.history
    }

    /// The counter the next prediction at `addr` would use.
    pub fn counter(&self, addr: u64) -> u8 {
        let hist = self.history & ((1 << HIST_BITS) - 1);
        let index = ((hist << ADDR_BITS) | (addr & ((1 << ADDR_BITS) - 1))) as usize;
        self.counters[index % COUNTERS]
    }
}

/// The target predictor for indirect branches (calls and jumps through a register
/// or memory).
#[derive(Clone, Debug)]
pub struct IndirectPredictor {
    targets: Box<[u64; BTAC]>,
}

impl Default for IndirectPredictor {
    fn default() -> Self {
        IndirectPredictor::new()
    }
}

impl IndirectPredictor {
    /// All stored targets 0.
    pub fn new() -> IndirectPredictor {
        IndirectPredictor {
            targets: Box::new([0; BTAC]),
        }
    }

    /// Predicts the indirect branch at `addr` going to `target`: a miss when the
    /// stored target differs. Stores `target`. Returns true on a misprediction
    /// (counts toward `Bim`).
    #[inline]
    pub fn predict(&mut self, addr: u64, target: u64) -> bool {
        let slot = &mut self.targets[(addr as usize) % BTAC];
        let mispredict = *slot != target;
        *slot = target;
        mispredict
    }
}

/// Both predictors, as one process has them.
#[derive(Clone, Debug, Default)]
pub struct BranchPredictors {
    /// Conditional branches.
    pub cond: CondPredictor,
    /// Indirect branches.
    pub indirect: IndirectPredictor,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_start_not_taken_and_saturate() {
        let mut p = CondPredictor::new();
        // History stays 0 while the branch is not taken: one counter.
        assert!(!p.predict(0x1000, false));
        assert_eq!(p.counter(0x1000), 0);
        // Taken at history 0: mispredicted, counter 0 → 1, history becomes 1.
        assert!(p.predict(0x1000, true));
        assert_eq!(p.history(), 1);
        // Drive one counter with a fixed history by interleaving: use history 0x7f
        // (seven taken branches) at address 0x5.
        let mut q = CondPredictor::new();
        for _ in 0..7 {
            q.predict(0x40, true); // index (hist << 7) | 0x40
        }
        assert_eq!(q.history() & 0x7f, 0x7f);
        // From now on the history stays 0x7f while everything is taken.
        assert!(q.predict(0x5, true)); // counter 0 → 1, mispredict
        assert!(q.predict(0x5, true)); // 1 → 2, still mispredicted (1 < 2)
        assert!(!q.predict(0x5, true)); // 2 → 3
        assert!(!q.predict(0x5, true)); // stays 3
        assert_eq!(q.counter(0x5), 3);
        assert!(q.predict(0x5 | 0x80, false)); // same index (only 7 address bits): 3 → 2
                                               // History is now 0x7e; switch back by one taken branch elsewhere.
        assert_eq!(q.history() & 0x7f, 0x7e);
    }

    #[test]
    fn index_uses_history_and_low_address_bits() {
        let mut p = CondPredictor::new();
        p.predict(0x0, true); // counter[0] = 1, history = 1
                              // Address 0x80 aliases 0x0 in the address bits, but history 1 selects
                              // counter (1 << 7) | 0 = 128, which is untouched.
        assert_eq!(p.counter(0x80), 0);
        p.predict(0x3, false); // counter[128 | 3] stays 0, history = 0b10
        p.predict(0x3, false); // history = 0b100
        p.history = 0; // back to history 0
        assert_eq!(p.counter(0x80), 1);
        // History bits above 7 are ignored.
        p.history = 0x80;
        assert_eq!(p.counter(0x0), 1);
    }

    #[test]
    fn indirect_predictor_remembers_last_target() {
        let mut p = IndirectPredictor::new();
        assert!(!p.predict(0x400, 0)); // stored target starts at 0
        assert!(p.predict(0x400, 0x1234));
        assert!(!p.predict(0x400, 0x1234));
        // 0x600 aliases 0x400 (same low 9 bits).
        assert!(p.predict(0x600, 0x9999));
        assert!(p.predict(0x400, 0x1234));
        assert!(!p.predict(0x401, 0)); // a different entry
    }
}
