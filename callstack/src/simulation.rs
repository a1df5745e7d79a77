//! The simulators of one process and how their outcomes become costs:
//! instruction fetches, data accesses and branches in, event counts out.

use cgx_engine::{AccessKind, DataAccess};
use cgx_sim::{
    BranchPredictors, CacheUseError, Charge, Hierarchy, LineChange, Outcome, Owner, UseHierarchy,
};

use crate::events::EventSet;

/// The cache model: plain, or with cache-use bookkeeping.
#[derive(Clone, Debug)]
enum Caches {
    Plain(Hierarchy),
    Use(Box<UseHierarchy>),
}

/// The simulators of one process (their state is per process, as in
/// Valgrind; a forked child starts with a copy).
#[derive(Clone, Debug)]
pub(crate) struct Simulation {
    events: EventSet,
    caches: Option<Caches>,
    branches: Option<BranchPredictors>,
    /// Cachegrind counts a read-modify-write as a read, Callgrind as a write.
    modify_is_read: bool,
}

impl Simulation {
    /// The simulators `events` need, with the caches of `options`.
    pub fn new(
        events: &EventSet,
        options: &crate::Options,
    ) -> Result<Simulation, cgx_sim::CacheUseError> {
        let caches = if events.cacheuse.is_some() && events.cache.is_some() {
            Some(Caches::Use(Box::new(UseHierarchy::new(&options.caches)?)))
        } else if events.cache.is_some() {
            let hierarchy = Hierarchy::new(&options.caches)
                .map_err(|(level, error)| CacheUseError::Geometry(level, error))?;
            Some(Caches::Plain(hierarchy))
        } else {
            None
        };
        Ok(Simulation {
            caches,
            ..Simulation::without_caches(events, options)
        })
    }

    /// [`Simulation::new`] without cache simulation (the one it makes when
    /// `events` have no cache events).
    pub fn without_caches(events: &EventSet, options: &crate::Options) -> Simulation {
        Simulation {
            events: events.clone(),
            caches: None,
            branches: events.branch.map(|_| BranchPredictors::default()),
            modify_is_read: options.cachegrind,
        }
    }

    /// Whether instruction fetches are simulated (else they only count Ir).
    pub fn simulates_fetches(&self) -> bool {
        self.caches.is_some()
    }

    /// Whether data accesses are simulated (else they count nothing).
    pub fn simulates_data(&self) -> bool {
        self.events.cache.is_some() && self.caches.is_some()
    }

    /// Whether branches are simulated (else they count nothing).
    pub fn simulates_branches(&self) -> bool {
        self.events.branch.is_some() && self.branches.is_some()
    }

    /// The events of fetching the instruction of `len` bytes at `addr` (its
    /// `Ir` included); `owner` gives the owner of a line it loads (cache use
    /// only).
    #[inline(always)]
    pub fn fetch(&mut self, addr: u64, len: u8, owner: &mut dyn FnMut() -> Owner) -> Counts {
        let ir = Counts::one(0);
        let outcome = match &mut self.caches {
            Some(Caches::Plain(caches)) => caches.fetch(addr, u32::from(len)),
            Some(Caches::Use(caches)) => caches.fetch_for(addr, u32::from(len), owner),
            None => return ir,
        };
        match self.events.cache {
            Some(columns) => ir.misses(outcome, columns.i1mr, columns.ilmr),
            None => ir,
        }
    }

    /// The events of a data access (`owner` as for [`Simulation::fetch`]).
    #[inline(always)]
    pub fn data(&mut self, access: DataAccess, owner: &mut dyn FnMut() -> Owner) -> Counts {
        let Some(columns) = self.events.cache else {
            return Counts::default();
        };
        let read = match access.kind {
            AccessKind::Read => true,
            AccessKind::Write => false,
            AccessKind::Modify => self.modify_is_read,
        };
        let outcome = match &mut self.caches {
            Some(Caches::Plain(caches)) if read => caches.read(access.addr, access.size),
            Some(Caches::Plain(caches)) => caches.write(access.addr, access.size),
            Some(Caches::Use(caches)) => caches.data_for(access.addr, access.size, owner),
            None => return Counts::default(),
        };
        if read {
            Counts::one(columns.dr).misses(outcome, columns.d1mr, columns.dlmr)
        } else {
            Counts::one(columns.dw).misses(outcome, columns.d1mw, columns.dlmw)
        }
    }

    /// The events of a conditional branch.
    pub fn conditional_branch(&mut self, addr: u64, taken: bool) -> Counts {
        match (self.events.branch, &mut self.branches) {
            (Some(columns), Some(branches)) => {
                let missed = branches.cond.predict(addr, taken);
                Counts::one(columns.bc).and(columns.bcm, missed)
            }
            _ => Counts::default(),
        }
    }

    /// The events of an indirect branch.
    pub fn indirect_branch(&mut self, addr: u64, target: u64) -> Counts {
        match (self.events.branch, &mut self.branches) {
            (Some(columns), Some(branches)) => {
                let missed = branches.indirect.predict(addr, target);
                Counts::one(columns.bi).and(columns.bim, missed)
            }
            _ => Counts::default(),
        }
    }

    /// Tells the cache-use model whether evictions are charged now (the
    /// running thread's collection state).
    pub fn set_collect(&mut self, collect: bool) {
        if let Some(Caches::Use(caches)) = &mut self.caches {
            caches.set_collect(collect);
        }
    }

    /// Whether the cache-use model has charges or line changes to take.
    #[inline]
    pub fn has_cache_use(&self) -> bool {
        matches!(&self.caches, Some(Caches::Use(caches)) if caches.has_reports())
    }

    /// The cache-use charges and line changes since the last call, `None`
    /// when there are none (most accesses, which allocates nothing).
    #[inline]
    pub fn take_cache_use(&mut self) -> Option<(Vec<Charge>, Vec<LineChange>)> {
        match &mut self.caches {
            Some(Caches::Use(caches)) if caches.has_reports() => Some((
                caches.drain_charges().collect(),
                caches.drain_line_changes().collect(),
            )),
            _ => None,
        }
    }

    /// Charges every resident line (the end of the run).
    pub fn flush(&mut self) {
        if let Some(Caches::Use(caches)) = &mut self.caches {
            caches.flush();
        }
    }

    /// Empties the caches (instrumentation switched on or off).
    pub fn clear(&mut self) {
        match &mut self.caches {
            Some(Caches::Plain(caches)) => caches.clear(),
            Some(Caches::Use(caches)) => caches.clear(),
            None => {}
        }
    }
}

/// The events one simulation step counts, once each: the columns of an
/// access and of its misses (at most three), one a byte, each plus 1 (0
/// ends them). Added where they go one column at a time, not through a
/// cost vector made for them: memory just written in parts is slow to
/// read back whole, so this is a word, in a register.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts(u32);

impl Counts {
    /// The event in `column`.
    fn one(column: usize) -> Counts {
        Counts::default().and(column, true)
    }

    /// These and, if `counted`, the event in `column` (below
    /// [`crate::events::MAX_EVENTS`]).
    #[inline]
    fn and(self, column: usize, counted: bool) -> Counts {
        if counted {
            Counts((self.0 << 8) | (column as u32 + 1))
        } else {
            self
        }
    }

    /// These and an L1 miss in `l1` and an LL miss in `ll`.
    #[inline]
    fn misses(self, outcome: Outcome, l1: usize, ll: usize) -> Counts {
        self.and(l1, outcome.l1_miss()).and(ll, outcome.ll_miss())
    }

    /// Calls `f` with each column counted (the last first).
    #[inline]
    pub fn for_each(self, mut f: impl FnMut(usize)) {
        let mut bytes = self.0;
        while bytes != 0 {
            f((bytes & 0xff) as usize - 1);
            bytes >>= 8;
        }
    }

    /// The first event counted (the step's own: `Ir`, `Dr`, `Dw`, `Bc` or
    /// `Bi`, which every run of its instruction counts) and the others
    /// (its misses).
    #[inline]
    pub fn split_first(self) -> (Option<usize>, Counts) {
        if self.0 == 0 {
            return (None, self);
        }
        let shift = (31 - self.0.leading_zeros()) / 8 * 8;
        let first = (self.0 >> shift) as usize - 1;
        (Some(first), Counts(self.0 & ((1 << shift) - 1)))
    }

    /// Adds the events to `cost`.
    #[inline]
    pub fn add_to(self, cost: &mut [u64]) {
        self.for_each(|column| {
            if let Some(sum) = cost.get_mut(column) {
                *sum += 1;
            }
        });
    }
}
