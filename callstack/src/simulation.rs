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
            events: events.clone(),
            caches,
            branches: events.branch.map(|_| BranchPredictors::default()),
            modify_is_read: options.cachegrind,
        })
    }

    /// Whether instruction fetches are simulated (else they only count Ir).
    pub fn simulates_fetches(&self) -> bool {
        self.caches.is_some()
    }

    /// Adds the costs of fetching the instruction of `len` bytes at `addr`
    /// (its `Ir` included) to `cost`; `owner` gives the owner of a line it
    /// loads (cache use only).
    #[inline]
    pub fn fetch(
        &mut self,
        addr: u64,
        len: u8,
        owner: &mut dyn FnMut() -> Owner,
        cost: &mut [u64],
    ) {
        cost[0] += 1;
        let outcome = match &mut self.caches {
            Some(Caches::Plain(caches)) => caches.fetch(addr, u32::from(len)),
            Some(Caches::Use(caches)) => caches.fetch_for(addr, u32::from(len), owner),
            None => return,
        };
        if let Some(columns) = self.events.cache {
            count_misses(outcome, columns.i1mr, columns.ilmr, cost);
        }
    }

    /// Adds the costs of a data access to `cost` (`owner` as for
    /// [`Simulation::fetch`]).
    #[inline]
    pub fn data(&mut self, access: DataAccess, owner: &mut dyn FnMut() -> Owner, cost: &mut [u64]) {
        let Some(columns) = self.events.cache else {
            return;
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
            None => return,
        };
        if read {
            cost[columns.dr] += 1;
            count_misses(outcome, columns.d1mr, columns.dlmr, cost);
        } else {
            cost[columns.dw] += 1;
            count_misses(outcome, columns.d1mw, columns.dlmw, cost);
        }
    }

    /// Adds the costs of a conditional branch to `cost`.
    pub fn conditional_branch(&mut self, addr: u64, taken: bool, cost: &mut [u64]) {
        if let (Some(columns), Some(branches)) = (self.events.branch, &mut self.branches) {
            cost[columns.bc] += 1;
            if branches.cond.predict(addr, taken) {
                cost[columns.bcm] += 1;
            }
        }
    }

    /// Adds the costs of an indirect branch to `cost`.
    pub fn indirect_branch(&mut self, addr: u64, target: u64, cost: &mut [u64]) {
        if let (Some(columns), Some(branches)) = (self.events.branch, &mut self.branches) {
            cost[columns.bi] += 1;
            if branches.indirect.predict(addr, target) {
                cost[columns.bim] += 1;
            }
        }
    }

    /// Tells the cache-use model whether evictions are charged now (the
    /// running thread's collection state).
    pub fn set_collect(&mut self, collect: bool) {
        if let Some(Caches::Use(caches)) = &mut self.caches {
            caches.set_collect(collect);
        }
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

/// Counts an L1 miss in `l1` and an LL miss in `ll`.
fn count_misses(outcome: Outcome, l1: usize, ll: usize, cost: &mut [u64]) {
    if outcome.l1_miss() {
        cost[l1] += 1;
    }
    if outcome.ll_miss() {
        cost[ll] += 1;
    }
}
