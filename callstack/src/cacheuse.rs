//! Cache use in the collector: who owns a cache line (the loading
//! instruction's cost centre and the back-dating node of the running call),
//! and settling what the cache-use model reports: self costs for the loading
//! instructions, costs and references for the back-dating tree.

use std::collections::BTreeMap;

use cgx_backdate::{Forest, NodeId};
use cgx_sim::{Charge, LineChange, Owner, UseEvent};
use indexmap::IndexSet;
use rustc_hash::{FxBuildHasher, FxHashSet};

use crate::context::Centre;
use crate::costs::{ArcKey, Costs};
use crate::events::EventSet;

/// Where a loaded line's costs go: a cost table, a centre and an
/// instruction address.
type Site = (u32, Centre, u64);

/// The owners of cache lines: by the ticket the cache-use model holds
/// (see `Tickets` in [`crate::simulation`]), a site and a back-dating node
/// packed in a [`cgx_sim::Owner`].
#[derive(Clone, Debug, Default)]
pub(crate) struct Owners {
    /// The owner of each ticket's line.
    by_ticket: Vec<Owner>,
    sites: IndexSet<Site, FxBuildHasher>,
    /// A direct-mapped cache of `sites` ([`RECENT`] slots, empty until the
    /// first owner): an instruction runs again soon, and its data accesses
    /// ask right after its fetch.
    recent: Vec<Option<(Site, usize)>>,
}

/// The node bits of an owner when there is no node.
const NO_NODE: u64 = u32::MAX as u64;

/// The slots of the cache of recent sites (a power of two).
const RECENT: usize = 4096;

impl Owners {
    /// The line of `ticket` is loaded now in cost table `key` by the
    /// instruction at `running` (its centre, address and call node;
    /// `None`: charges to the line are dropped).
    #[inline]
    pub fn load(
        &mut self,
        ticket: Owner,
        key: u32,
        running: Option<(Centre, u64, Option<NodeId>)>,
    ) {
        let owner = match running {
            Some((centre, addr, node)) => {
                let index = self.index((key, centre, addr));
                let node = node.map_or(NO_NODE, |node| node.index() as u64 & NO_NODE);
                ((index as u64) << 32) | node
            }
            None => cgx_sim::NO_OWNER,
        };
        let Ok(slot) = usize::try_from(ticket) else {
            return;
        };
        if self.by_ticket.len() <= slot {
            self.by_ticket.resize(slot + 1, cgx_sim::NO_OWNER);
        }
        self.by_ticket[slot] = owner;
    }

    /// The number of `site` (numbered when first seen).
    #[inline]
    fn index(&mut self, site: Site) -> usize {
        let addr = site.2;
        let slot = (addr ^ (addr >> 12)) as usize & (RECENT - 1);
        if let Some(Some((known, index))) = self.recent.get(slot) {
            if *known == site {
                return *index;
            }
        }
        let (index, _) = self.sites.insert_full(site);
        if self.recent.is_empty() {
            self.recent = vec![None; RECENT];
        }
        self.recent[slot] = Some((site, index));
        index
    }

    fn decode(&self, ticket: Owner) -> Option<(Site, Option<NodeId>)> {
        let owner = *self.by_ticket.get(usize::try_from(ticket).ok()?)?;
        let site = *self.sites.get_index((owner >> 32) as usize)?;
        let node = owner & NO_NODE;
        Some((
            site,
            (node != NO_NODE).then(|| NodeId::from_index(node as usize)),
        ))
    }

    /// Books what the cache-use model reported: each charge to its loading
    /// instruction's self cost and to its node; each line change as a
    /// reference of its node (pruned nodes give their costs to their arcs).
    ///
    /// With `only_executed` (the flush at the end), charges to instructions
    /// never charged themselves are dropped: Callgrind keeps them in the
    /// cost centre of a block that never completed (a thread's last block),
    /// which it never writes.
    pub fn settle(
        &self,
        only_executed: bool,
        charges: &[Charge],
        changes: &[LineChange],
        events: &EventSet,
        costs: &mut BTreeMap<u32, Costs>,
        forest: Option<&mut Forest<ArcKey>>,
    ) {
        let Some(columns) = events.cacheuse else {
            return;
        };
        let width = events.len();
        let mut forest = forest;
        let in_blocks: BTreeMap<u32, FxHashSet<(Centre, u64)>> = match only_executed {
            true => (costs.iter())
                .map(|(&key, table)| (key, table.charged_in_blocks()))
                .collect(),
            false => BTreeMap::new(),
        };
        for charge in charges {
            let Some(((key, centre, addr), node)) = self.decode(charge.owner) else {
                continue;
            };
            let executed = |costs: &BTreeMap<u32, Costs>| {
                let (Some(table), Some(in_blocks)) = (costs.get(&key), in_blocks.get(&key)) else {
                    return false;
                };
                table.executed(in_blocks, centre, addr)
            };
            if only_executed && !executed(costs) {
                continue;
            }
            let column = columns.of(charge.event);
            costs
                .entry(key)
                .or_default()
                .charge_column(centre, addr, column, charge.amount, width);
            if let (Some(node), Some(forest)) = (node, forest.as_deref_mut()) {
                let mut metrics = [0u64; 4];
                metrics[use_index(charge.event)] = charge.amount;
                forest.charge(node, &metrics);
            }
        }
        let Some(forest) = forest else {
            return;
        };
        let mut sink = |(key, arc): ArcKey, cost: &[u64]| {
            costs
                .entry(key)
                .or_default()
                .add_to_inclusive(arc, &columns.columns, cost);
        };
        for change in changes {
            let Some((_, Some(node))) = self.decode(change.owner) else {
                continue;
            };
            if change.loaded {
                forest.load(node);
            } else {
                forest.release(node, &mut sink);
            }
        }
    }
}

/// The position of `event` in the forest's cost vectors.
fn use_index(event: UseEvent) -> usize {
    match event {
        UseEvent::AcCost1 => 0,
        UseEvent::SpLoss1 => 1,
        UseEvent::AcCost2 => 2,
        UseEvent::SpLoss2 => 3,
    }
}
