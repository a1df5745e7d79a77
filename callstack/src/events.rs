//! The events a profile holds, and the column of each in a cost vector:
//! Callgrind's order (`Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw ILdmr DLdmr
//! DLdmw Bc Bcm Bi Bim AcCost1 SpLoss1 AcCost2 SpLoss2 Ge`, the dirty misses
//! only with write-back and never with cache use, `Ge` with
//! `--collect-bus=yes`) or Cachegrind's (`Ir I1mr ILmr Dr D1mr DLmr Dw D1mw
//! DLmw Bc Bcm Bi Bim`), the subsets the options ask for.

use crate::Options;

/// Columns of the cache simulation's events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CacheColumns {
    pub dr: usize,
    pub dw: usize,
    pub i1mr: usize,
    pub d1mr: usize,
    pub d1mw: usize,
    pub ilmr: usize,
    pub dlmr: usize,
    pub dlmw: usize,
    /// The dirty misses, with a write-back LL.
    pub dirty: Option<DirtyColumns>,
}

/// Columns of the write-back simulation's dirty misses: LL misses that
/// evicted a dirty line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DirtyColumns {
    pub ildmr: usize,
    pub dldmr: usize,
    pub dldmw: usize,
}

/// Columns of the branch simulation's events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BranchColumns {
    pub bc: usize,
    pub bcm: usize,
    pub bi: usize,
    pub bim: usize,
}

/// Columns of the cache-use events, in the order of [`cgx_sim::UseEvent`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UseColumns {
    /// `AcCost1 SpLoss1 AcCost2 SpLoss2`.
    pub columns: [usize; 4],
}

impl UseColumns {
    /// The column of `event`.
    pub fn of(&self, event: cgx_sim::UseEvent) -> usize {
        self.columns[match event {
            cgx_sim::UseEvent::AcCost1 => 0,
            cgx_sim::UseEvent::SpLoss1 => 1,
            cgx_sim::UseEvent::AcCost2 => 2,
            cgx_sim::UseEvent::SpLoss2 => 3,
        }]
    }
}

/// Columns of the system calls' events (`--collect-systime`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SystemColumns {
    pub count: usize,
    pub time: usize,
    /// `sysCpuTime`, with `nsec`.
    pub cpu: Option<usize>,
}

/// The most events a profile holds (`Ir`, the cache simulation's 8, the
/// branch simulation's 4, cache use's 4, `Ge` and the system calls' 3;
/// with write-back the cache simulation's 11, without cache use).
pub(crate) const MAX_EVENTS: usize = 21;

/// One instruction's event counts in a fixed-width array (the columns
/// past a profile's events stay 0): made and added without a call.
pub(crate) type CostArray = [u64; MAX_EVENTS];

/// The events of a profile and their columns. `Ir` is always column 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EventSet {
    /// The names, in column order.
    pub names: Vec<&'static str>,
    pub cache: Option<CacheColumns>,
    pub branch: Option<BranchColumns>,
    pub cacheuse: Option<UseColumns>,
    /// The column of `Ge` (`--collect-bus=yes`).
    pub bus: Option<usize>,
    /// The columns of `sysCount sysTime [sysCpuTime]`
    /// (`--collect-systime`).
    pub system: Option<SystemColumns>,
}

impl EventSet {
    /// The events `options` ask for.
    pub fn new(options: &Options) -> EventSet {
        let mut names = vec!["Ir"];
        let column = |names: &mut Vec<&'static str>, name| {
            names.push(name);
            names.len() - 1
        };
        let write_back = options
            .cache_extensions()
            .is_some_and(|extensions| extensions.write_back);
        let cache = options.cache_sim.then(|| {
            let order: [&'static str; 8] = if options.cachegrind {
                ["I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw"]
            } else {
                ["Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"]
            };
            let start = names.len();
            names.extend(order);
            let at = |name: &str| start + order.iter().position(|&n| n == name).unwrap_or(0);
            CacheColumns {
                dr: at("Dr"),
                dw: at("Dw"),
                i1mr: at("I1mr"),
                d1mr: at("D1mr"),
                d1mw: at("D1mw"),
                ilmr: at("ILmr"),
                dlmr: at("DLmr"),
                dlmw: at("DLmw"),
                dirty: write_back.then(|| DirtyColumns {
                    ildmr: column(&mut names, "ILdmr"),
                    dldmr: column(&mut names, "DLdmr"),
                    dldmw: column(&mut names, "DLdmw"),
                }),
            }
        });
        let branch = options.branch_sim.then(|| BranchColumns {
            bc: column(&mut names, "Bc"),
            bcm: column(&mut names, "Bcm"),
            bi: column(&mut names, "Bi"),
            bim: column(&mut names, "Bim"),
        });
        let cacheuse = (options.cacheuse && !options.cachegrind).then(|| UseColumns {
            columns: [
                column(&mut names, "AcCost1"),
                column(&mut names, "SpLoss1"),
                column(&mut names, "AcCost2"),
                column(&mut names, "SpLoss2"),
            ],
        });
        let bus = (options.collect_bus && !options.cachegrind).then(|| column(&mut names, "Ge"));
        let system_time = options.collect_systime;
        let system = (system_time.on() && !options.cachegrind).then(|| {
            let start = names.len();
            names.extend(system_time.events());
            SystemColumns {
                count: start,
                time: start + 1,
                cpu: (system_time.events().len() > 2).then_some(start + 2),
            }
        });
        EventSet {
            names,
            cache,
            branch,
            cacheuse,
            bus,
            system,
        }
    }

    /// How many events (the width of a cost vector).
    pub fn len(&self) -> usize {
        self.names.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_are_valgrinds() {
        let mut options = Options {
            cache_sim: true,
            branch_sim: true,
            cacheuse: true,
            ..Options::default()
        };
        assert_eq!(
            EventSet::new(&options).names.join(" "),
            "Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim AcCost1 SpLoss1 AcCost2 SpLoss2"
        );
        options.collect_bus = true;
        let set = EventSet::new(&options);
        assert_eq!(set.names.len(), 18);
        assert_eq!(set.names.last(), Some(&"Ge"));
        assert_eq!(set.bus, Some(17));
        options.collect_systime = crate::SystemTime::Nsec;
        let set = EventSet::new(&options);
        assert_eq!(set.names.len(), MAX_EVENTS);
        assert_eq!(
            set.names[17..].join(" "),
            "Ge sysCount sysTime sysCpuTime",
            "Callgrind's order"
        );
        assert_eq!(
            set.system,
            Some(SystemColumns {
                count: 18,
                time: 19,
                cpu: Some(20)
            })
        );
        options.collect_systime = crate::SystemTime::Usec;
        options.collect_bus = false;
        let set = EventSet::new(&options);
        assert_eq!(set.names.len(), 19);
        assert_eq!(set.system.and_then(|columns| columns.cpu), None);
        options.collect_systime = crate::SystemTime::No;
        options.collect_bus = false;
        options.cachegrind = true;
        options.cacheuse = false;
        assert_eq!(
            EventSet::new(&options).names.join(" "),
            "Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw Bc Bcm Bi Bim"
        );
        let branches_only = Options {
            branch_sim: true,
            ..Options::default()
        };
        assert_eq!(
            EventSet::new(&branches_only).names.join(" "),
            "Ir Bc Bcm Bi Bim"
        );
        let cacheuse_only = Options {
            cacheuse: true,
            ..Options::default()
        };
        assert_eq!(
            EventSet::new(&cacheuse_only).names.join(" "),
            "Ir AcCost1 SpLoss1 AcCost2 SpLoss2",
            "as Valgrind's --cacheuse=yes --cache-sim=no: zero columns"
        );
    }

    #[test]
    fn write_back_adds_the_dirty_misses_except_with_cache_use() {
        let mut options = Options {
            cache_sim: true,
            branch_sim: true,
            extensions: cgx_sim::Extensions {
                write_back: true,
                prefetch: true,
            },
            ..Options::default()
        };
        let events = EventSet::new(&options);
        assert_eq!(
            events.names.join(" "),
            "Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw ILdmr DLdmr DLdmw Bc Bcm Bi Bim"
        );
        let dirty = events.cache.and_then(|columns| columns.dirty);
        assert_eq!(
            dirty,
            Some(DirtyColumns {
                ildmr: 9,
                dldmr: 10,
                dldmw: 11
            })
        );
        assert!(events.len() <= MAX_EVENTS);
        // Prefetch alone adds no events.
        options.extensions.write_back = false;
        assert_eq!(EventSet::new(&options).len(), 13);
        // Valgrind turns write-back off with cache use.
        options.extensions.write_back = true;
        options.cacheuse = true;
        assert_eq!(
            EventSet::new(&options).names.join(" "),
            "Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim AcCost1 SpLoss1 AcCost2 SpLoss2"
        );
        // And it has nothing to write back without the cache simulation.
        options.cacheuse = false;
        options.cache_sim = false;
        assert_eq!(EventSet::new(&options).names.join(" "), "Ir Bc Bcm Bi Bim");
    }
}
