//! The simulators of one process and how their outcomes become costs:
//! instruction fetches, data accesses and branches in, event counts out.

use cgx_engine::{AccessKind, BlockEvent, DataAccess, Repeats, SimulatedBlock};
use cgx_sim::{
    BranchPredictors, CacheUseError, Charge, ExtendedHierarchy, Hierarchy, LineChange, Outcome,
    Owner, UseHierarchy,
};

use crate::events::{CacheColumns, DirtyColumns, EventSet};

/// The cache model: plain, with write-back or prefetch (chosen once, so
/// that the plain model's accesses test no option), or with cache-use
/// bookkeeping.
#[derive(Clone, Debug)]
enum Caches {
    Plain(Hierarchy),
    Extended(Box<ExtendedHierarchy>),
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
    /// What it simulates (kept by [`Simulation::detached`]): with caches,
    /// the size of I1's lines; whether data accesses; whether with the
    /// cache-use model.
    i1_line_size: Option<u32>,
    data: bool,
    cache_use: bool,
    /// The owners the cache-use model holds: tickets, whose loaders the
    /// caller keeps ([`Simulation::fetch`]).
    tickets: Tickets,
}

impl Simulation {
    /// The simulators `events` need, with the caches of `options`.
    pub fn new(
        events: &EventSet,
        options: &crate::Options,
    ) -> Result<Simulation, cgx_sim::CacheUseError> {
        let extensions = options.cache_extensions();
        let caches = if events.cacheuse.is_some() && events.cache.is_some() {
            Some(Caches::Use(Box::new(UseHierarchy::new(&options.caches)?)))
        } else if let (Some(extensions), Some(_)) = (extensions, events.cache) {
            let hierarchy = ExtendedHierarchy::new(&options.caches, extensions)
                .map_err(|(level, error)| CacheUseError::Geometry(level, error))?;
            Some(Caches::Extended(Box::new(hierarchy)))
        } else if events.cache.is_some() {
            let hierarchy = Hierarchy::new(&options.caches)
                .map_err(|(level, error)| CacheUseError::Geometry(level, error))?;
            Some(Caches::Plain(hierarchy))
        } else {
            None
        };
        let i1_line_size = match &caches {
            Some(Caches::Plain(caches)) => Some(caches.config().i1.line_size),
            Some(Caches::Extended(caches)) => Some(caches.config().i1.line_size),
            Some(Caches::Use(caches)) => Some(caches.config().i1.line_size),
            None => None,
        };
        Ok(Simulation {
            cache_use: matches!(caches, Some(Caches::Use(_))),
            caches,
            i1_line_size,
            data: i1_line_size.is_some() && events.cache.is_some(),
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
            i1_line_size: None,
            data: false,
            cache_use: false,
            tickets: Tickets::default(),
        }
    }

    /// A stand-in while this simulation runs elsewhere
    /// ([`crate::ahead`]): it simulates nothing, but tells what this one
    /// simulates and the every-run events of its steps
    /// ([`Simulation::every_run`]).
    pub fn detached(&self) -> Simulation {
        Simulation {
            events: self.events.clone(),
            caches: None,
            branches: None,
            modify_is_read: self.modify_is_read,
            i1_line_size: self.i1_line_size,
            data: self.data,
            cache_use: self.cache_use,
            tickets: Tickets::default(),
        }
    }

    /// Whether instruction fetches are simulated (else they only count Ir).
    pub fn simulates_fetches(&self) -> bool {
        self.i1_line_size.is_some()
    }

    /// Whether data accesses are simulated (else they count nothing).
    pub fn simulates_data(&self) -> bool {
        self.data
    }

    /// Whether branches are simulated (else they count nothing).
    pub fn simulates_branches(&self) -> bool {
        self.events.branch.is_some()
    }

    /// Whether the cache-use model is on.
    pub fn uses_cache_use(&self) -> bool {
        self.cache_use
    }

    /// The events of `step`, simulated (`loaded` as for
    /// [`Simulation::fetch`]).
    #[inline(always)]
    pub fn step(&mut self, step: Step, loaded: &mut dyn FnMut(Owner)) -> Counts {
        match step {
            Step::Fetch(addr, len) => self.fetch(addr, len, loaded),
            Step::Data(access) => self.data(access, loaded),
            Step::Conditional(addr, taken) => self.conditional_branch(addr, taken),
            Step::Indirect(addr, target) => self.indirect_branch(addr, target),
        }
    }

    /// The events of `step`, a fetch or data access that missed its
    /// first-level cache, which the backend keeps (its filter): LL alone
    /// simulates it. Any other step, or other caches
    /// than Cachegrind's three, as [`Simulation::step`].
    #[inline]
    pub fn beyond_first_level(&mut self, step: Step) -> Counts {
        let (Some(Caches::Plain(caches)), Some(columns)) = (&mut self.caches, self.events.cache)
        else {
            return self.step(step, &mut |_| {});
        };
        match step {
            Step::Fetch(addr, len) => {
                let outcome = caches.beyond_first_level(addr, u32::from(len));
                Counts::one(0).misses(outcome, columns.i1mr, columns.ilmr)
            }
            Step::Data(access) => {
                let outcome = caches.beyond_first_level(access.addr, caches.clamp(access.size));
                match is_read(access.kind, self.modify_is_read) {
                    true => Counts::one(columns.dr).misses(outcome, columns.d1mr, columns.dlmr),
                    false => Counts::one(columns.dw).misses(outcome, columns.d1mw, columns.dlmw),
                }
            }
            _ => self.step(step, &mut |_| {}),
        }
    }

    /// The event every run of `step` counts, whatever the simulators say:
    /// `Ir`, `Dr`, `Dw`, `Bc` or `Bi` (nothing for a step not simulated).
    #[inline]
    pub fn every_run(&self, step: Step) -> Counts {
        match (step, self.events.cache, self.events.branch) {
            (Step::Fetch(..), ..) => Counts::one(0),
            (Step::Data(access), Some(columns), _) if self.data => {
                match is_read(access.kind, self.modify_is_read) {
                    true => Counts::one(columns.dr),
                    false => Counts::one(columns.dw),
                }
            }
            (Step::Conditional(..), _, Some(columns)) => Counts::one(columns.bc),
            (Step::Indirect(..), _, Some(columns)) => Counts::one(columns.bi),
            _ => Counts::default(),
        }
    }

    /// The events every run of a block of `instructions` counts (see
    /// [`Simulation::every_run`]) whose data accesses are `accesses`
    /// (each with its instruction's position, in order), as (position,
    /// column): each instruction's fetch, then its accesses.
    pub fn every_run_events(
        &self,
        instructions: &[(u64, u8)],
        accesses: impl IntoIterator<Item = (usize, DataAccess)>,
    ) -> Vec<(u32, u32)> {
        let mut accesses = accesses.into_iter().peekable();
        let mut events = Vec::with_capacity(instructions.len());
        for (position, &(addr, len)) in (0u32..).zip(instructions) {
            let data = std::iter::from_fn(|| {
                accesses
                    .next_if(|&(at, _)| at == position as usize)
                    .map(|(_, access)| Step::Data(access))
            });
            for step in std::iter::once(Step::Fetch(addr, len)).chain(data) {
                let (column, _) = self.every_run(step).split_first();
                events.extend(column.map(|column| (position, column as u32)));
            }
        }
        events
    }

    /// The events of fetching the instruction of `len` bytes at `addr` (its
    /// `Ir` included); `loaded` learns the ticket of a line it loads, to
    /// keep its loader (cache use only; see [`Tickets`]).
    #[inline(always)]
    pub fn fetch(&mut self, addr: u64, len: u8, loaded: &mut dyn FnMut(Owner)) -> Counts {
        let ir = Counts::one(0);
        let outcome = match &mut self.caches {
            Some(Caches::Plain(caches)) => caches.fetch(addr, u32::from(len)),
            Some(Caches::Extended(caches)) => {
                let outcome = caches.fetch(addr, u32::from(len));
                return match self.events.cache {
                    Some(columns) => {
                        let dirty = columns.dirty.map(|dirty| dirty.ildmr);
                        ir.misses(outcome, columns.i1mr, columns.ilmr)
                            .dirty(outcome, dirty)
                    }
                    None => ir,
                };
            }
            Some(Caches::Use(caches)) => {
                let owner = &mut || self.tickets.issue(loaded);
                caches.fetch_for(addr, u32::from(len), owner)
            }
            None => return ir,
        };
        match self.events.cache {
            Some(columns) => ir.misses(outcome, columns.i1mr, columns.ilmr),
            None => ir,
        }
    }

    /// The events of a data access (`loaded` as for [`Simulation::fetch`]).
    #[inline(always)]
    pub fn data(&mut self, access: DataAccess, loaded: &mut dyn FnMut(Owner)) -> Counts {
        let Some(columns) = self.events.cache else {
            return Counts::default();
        };
        let read = is_read(access.kind, self.modify_is_read);
        let outcome = match &mut self.caches {
            Some(Caches::Plain(caches)) if read => caches.read(access.addr, access.size),
            Some(Caches::Plain(caches)) => caches.write(access.addr, access.size),
            Some(Caches::Extended(caches)) => {
                let dirty = columns.dirty;
                return if read {
                    let outcome = caches.read(access.addr, access.size);
                    Counts::one(columns.dr)
                        .misses(outcome, columns.d1mr, columns.dlmr)
                        .dirty(outcome, dirty.map(|dirty| dirty.dldmr))
                } else {
                    let outcome = caches.write(access.addr, access.size);
                    Counts::one(columns.dw)
                        .misses(outcome, columns.d1mw, columns.dlmw)
                        .dirty(outcome, dirty.map(|dirty| dirty.dldmw))
                };
            }
            Some(Caches::Use(caches)) => {
                let owner = &mut || self.tickets.issue(loaded);
                caches.data_for(access.addr, access.size, owner)
            }
            None => return Counts::default(),
        };
        if read {
            Counts::one(columns.dr).misses(outcome, columns.d1mr, columns.dlmr)
        } else {
            Counts::one(columns.dw).misses(outcome, columns.d1mw, columns.dlmw)
        }
    }

    /// The fetches of a block of `instructions` the I1 simulation must see
    /// in [`Simulation::run_block`]: the first instruction's, and each that
    /// does not lie wholly in the line its predecessor ended in. The others
    /// hit the most recently used line of their set, which changes nothing
    /// in the plain model (only fetches touch I1) and adds their count and
    /// bytes to that line's use in the cache-use model. None without caches.
    /// A [`Simulation::detached`] stand-in gives the points of the model it
    /// stands for.
    pub fn fetch_points(&self, instructions: &[(u64, u8)]) -> Box<[FetchPoint]> {
        let Some(line_size) = self.i1_line_size else {
            return Box::default();
        };
        let cache_use = self.cache_use;
        let starts = cgx_engine::fetch_points(instructions, line_size);
        let mut points: Vec<FetchPoint> = Vec::new();
        for ((position, &(addr, len)), starts) in (0u32..).zip(instructions).zip(starts) {
            match (starts, points.last_mut()) {
                (false, Some(point)) => {
                    point.followers += 1;
                    if cache_use {
                        point.mask |= cgx_sim::fetch_mask_of(line_size, addr, len.into());
                    }
                }
                _ => points.push(FetchPoint {
                    position,
                    followers: 0,
                    mask: 0,
                }),
            }
        }
        points.into_boxed_slice()
    }

    /// Simulates a run of `block` whose every-run costs are known: the
    /// fetches `fetches` ([`Simulation::fetch_points`]) and the block's
    /// events, in order; each event beyond the every-run ones (a miss) goes
    /// to `sink`, which also names the owners of the lines loaded.
    #[inline]
    pub fn run_block(
        &mut self,
        block: &SimulatedBlock<'_>,
        fetches: &[FetchPoint],
        sink: &mut impl RunSink,
    ) {
        let (data, branches) = (self.simulates_data(), self.simulates_branches());
        let rules = self.events.cache.map(|columns| CacheRules {
            columns,
            modify_is_read: self.modify_is_read,
        });
        let tickets = &mut self.tickets;
        match (&mut self.caches, rules, branches) {
            (Some(Caches::Plain(caches)), Some(rules), false) => {
                run_caches(caches, tickets, rules, block, fetches, sink);
                return;
            }
            (Some(Caches::Extended(caches)), Some(rules), false) => {
                run_caches(&mut **caches, tickets, rules, block, fetches, sink);
                return;
            }
            (Some(Caches::Use(caches)), Some(rules), false) => {
                run_caches(&mut **caches, tickets, rules, block, fetches, sink);
                return;
            }
            _ => {}
        }
        let mut fetches = fetches.iter().peekable();
        let mut events = block.events().peekable();
        loop {
            // A position's fetch comes before its events.
            let next_event = events.peek().map(|&(position, _)| position);
            let (position, counts) = match (fetches.peek(), next_event) {
                (Some(&&point), next) if next.is_none_or(|event| point.at() <= event) => {
                    fetches.next();
                    let Some(&(addr, len)) = block.instructions.get(point.at()) else {
                        continue;
                    };
                    let counts =
                        self.fetch(addr, len, &mut |ticket| sink.loaded(point.at(), ticket));
                    if let Some(Caches::Use(caches)) = &mut self.caches {
                        caches.fetch_again(point.followers, point.mask);
                    }
                    (point.at(), counts)
                }
                (_, Some(_)) => {
                    let Some((position, event)) = events.next() else {
                        break;
                    };
                    let addr = block
                        .instructions
                        .get(position)
                        .map_or(0, |&(addr, _)| addr);
                    let counts = match event {
                        BlockEvent::Access(access) if data => {
                            self.data(access, &mut |ticket| sink.loaded(position, ticket))
                        }
                        BlockEvent::Conditional(taken) if branches => {
                            self.conditional_branch(addr, taken)
                        }
                        BlockEvent::Indirect(target) if branches => {
                            self.indirect_branch(addr, target)
                        }
                        _ => continue,
                    };
                    (position, counts)
                }
                (_, None) => break,
            };
            counts
                .split_first()
                .1
                .for_each(|column| sink.extra(position, column));
        }
    }

    /// [`Simulation::run_block`] for a run of `block` right after a run of
    /// it (a loop of one block): with the plain hierarchy its fetches then
    /// hit and change nothing when its lines fit in I1's sets
    /// ([`cgx_sim::CacheConfig::refetch_hits`]), so only its other events are
    /// simulated.
    #[inline]
    pub fn run_block_again(
        &mut self,
        block: &SimulatedBlock<'_>,
        fetches: &[FetchPoint],
        sink: &mut impl RunSink,
    ) {
        let fetches = match &self.caches {
            Some(Caches::Plain(caches))
                if refetches_hit(&caches.config().i1, block.instructions) =>
            {
                &[]
            }
            Some(Caches::Extended(caches))
                if refetches_hit(&caches.config().i1, block.instructions) =>
            {
                &[]
            }
            _ => fetches,
        };
        self.run_block(block, fetches, sink);
    }

    /// With caches and no branch simulation, [`Simulation::run_block_again`]
    /// for each of `runs` (runs of one block, each right after a run of
    /// it) in one loop, calling `ended` after each with the cache-use
    /// model's charges and line changes of the run (then forgotten, see
    /// [`Simulation::clear_cache_use`]); `false`, having done nothing,
    /// with other simulations.
    #[inline]
    pub fn run_again<S: RunSink>(
        &mut self,
        runs: &Repeats<'_>,
        fetches: &[FetchPoint],
        sink: &mut S,
        mut ended: impl FnMut(&mut S, &[Charge], &[LineChange]),
    ) -> bool {
        let (Some(columns), false) = (self.events.cache, self.simulates_branches()) else {
            return false;
        };
        let rules = CacheRules {
            columns,
            modify_is_read: self.modify_is_read,
        };
        let tickets = &mut self.tickets;
        match &mut self.caches {
            Some(Caches::Plain(caches)) => {
                let fetches = match refetches_hit(&caches.config().i1, runs.instructions()) {
                    true => &[],
                    false => fetches,
                };
                runs.for_each_run(|run| {
                    run_caches(caches, tickets, rules, run, fetches, sink);
                    ended(sink, &[], &[]);
                });
            }
            Some(Caches::Extended(caches)) => {
                let caches = &mut **caches;
                let fetches = match refetches_hit(&caches.config().i1, runs.instructions()) {
                    true => &[],
                    false => fetches,
                };
                runs.for_each_run(|run| {
                    run_caches(caches, tickets, rules, run, fetches, sink);
                    ended(sink, &[], &[]);
                });
            }
            Some(Caches::Use(caches)) => {
                let caches = &mut **caches;
                // The runs' fetches all hit when they hit now: their uses
                // of the I1 lines are added at once.
                let instructions = runs.instructions();
                let points = fetches.iter().filter_map(|point| {
                    let &(addr, len) = instructions.get(point.at())?;
                    Some((addr, u32::from(len), point.followers, point.mask))
                });
                let times = u32::try_from(runs.len());
                let fetches = match times.map(|times| caches.fetch_hits_again(points, times)) {
                    Ok(true) => &[],
                    _ => fetches,
                };
                runs.for_each_run(|run| {
                    run_caches(caches, tickets, rules, run, fetches, sink);
                    if caches.has_reports() {
                        ended(
                            sink,
                            caches.pending_charges(),
                            caches.pending_line_changes(),
                        );
                        forget_reports(caches, tickets);
                    } else {
                        ended(sink, &[], &[]);
                    }
                });
            }
            None => return false,
        }
        true
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

    /// The cache-use charges and line changes since they were last
    /// cleared ([`Simulation::clear_cache_use`]), `None` when there are
    /// none (most accesses).
    #[inline]
    pub fn cache_use(&self) -> Option<(&[Charge], &[LineChange])> {
        match &self.caches {
            Some(Caches::Use(caches)) if caches.has_reports() => {
                Some((caches.pending_charges(), caches.pending_line_changes()))
            }
            _ => None,
        }
    }

    /// Forgets the cache-use charges and line changes so far (settled):
    /// the tickets of lines that left the cache are free again.
    pub fn clear_cache_use(&mut self) {
        if let Some(Caches::Use(caches)) = &mut self.caches {
            forget_reports(caches, &mut self.tickets);
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
            Some(Caches::Extended(caches)) => caches.clear(),
            Some(Caches::Use(caches)) => caches.clear(),
            None => {}
        }
    }
}

/// The owners of the lines the cache-use model holds: tickets, numbers
/// that stand for the loading instruction in its call, which the caller
/// keeps by ticket when told of a load. A ticket is free again once its
/// line left the cache (a line change that unloads it). The model then
/// needs nothing of the caller while it runs, so it can run ahead of it
/// ([`crate::ahead`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct Tickets {
    free: Vec<u32>,
    next: u32,
}

impl Tickets {
    /// A free ticket, told to `loaded`.
    #[inline]
    fn issue(&mut self, loaded: &mut dyn FnMut(Owner)) -> Owner {
        let ticket = self.free.pop().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        });
        loaded(Owner::from(ticket));
        Owner::from(ticket)
    }

    /// `ticket`'s line left the cache.
    #[inline]
    fn release(&mut self, ticket: Owner) {
        if let Ok(ticket) = u32::try_from(ticket) {
            self.free.push(ticket);
        }
    }
}

/// Whether fetching the block of `instructions` again right after a run
/// of it hits in an I1 of geometry `i1` and changes nothing
/// ([`cgx_sim::CacheConfig::refetch_hits`]).
fn refetches_hit(i1: &cgx_sim::CacheConfig, instructions: &[(u64, u8)]) -> bool {
    match (instructions.first(), instructions.last()) {
        (Some(&(first, _)), Some(&(addr, len))) => {
            i1.refetch_hits(first, addr.wrapping_add(u64::from(len).max(1) - 1))
        }
        _ => false,
    }
}

/// Forgets the cache-use model's charges and line changes so far: the
/// tickets of lines that left the cache are free again.
fn forget_reports(caches: &mut UseHierarchy, tickets: &mut Tickets) {
    for change in caches.pending_line_changes() {
        if !change.loaded {
            tickets.release(change.owner);
        }
    }
    caches.clear_reports();
}

/// Whether an access of `kind` counts as a read (`Dr`, else `Dw`): a
/// read-modify-write does with `modify_is_read` (Cachegrind), not without
/// (Callgrind).
#[inline]
fn is_read(kind: AccessKind, modify_is_read: bool) -> bool {
    match kind {
        AccessKind::Read => true,
        AccessKind::Write => false,
        AccessKind::Modify => modify_is_read,
    }
}

/// One simulation step of an instruction.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    /// Fetching the instruction of `len` bytes at `addr`.
    Fetch(u64, u8),
    /// A data access.
    Data(DataAccess),
    /// A conditional branch at `addr`, taken or not.
    Conditional(u64, bool),
    /// An indirect branch at `addr` to a target.
    Indirect(u64, u64),
}

/// An instruction of a block whose fetch the I1 simulation sees in a
/// run ([`Simulation::fetch_points`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FetchPoint {
    /// Its position in the block.
    position: u32,
    /// How many instructions after it lie wholly in the line it ended in.
    followers: u32,
    /// The bytes of that line they touch (cache-use model).
    mask: u32,
}

impl FetchPoint {
    /// Its position in the block.
    #[inline]
    fn at(&self) -> usize {
        self.position as usize
    }
}

/// What a simulated run ([`Simulation::run_block`]) reports to.
pub(crate) trait RunSink {
    /// The instruction at `position` loads a line whose owner is `ticket`
    /// (cache-use model, see [`Tickets`]).
    fn loaded(&mut self, position: usize, ticket: Owner);
    /// One more event in `column` of the instruction at `position`.
    fn extra(&mut self, position: usize, column: usize);
}

/// A cache model as [`run_caches`] drives it.
trait RunCaches {
    /// Whether an access can miss LL evicting a dirty line
    /// ([`Outcome::LlMissDirty`]), which then counts in the dirty columns.
    const DIRTY: bool = false;

    /// Fetches `instruction` (address, length), the instruction of fetch
    /// point `point`, and the followers after it in its line, asking
    /// `owner` who loads a line.
    fn fetch_point(
        &mut self,
        instruction: (u64, u8),
        point: &FetchPoint,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Outcome;

    /// Reads (`read`) or writes `size` bytes at `addr`.
    fn access(
        &mut self,
        addr: u64,
        size: u32,
        read: bool,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Outcome;
}

impl RunCaches for Hierarchy {
    #[inline(always)]
    fn fetch_point(
        &mut self,
        instruction: (u64, u8),
        _: &FetchPoint,
        _: &mut dyn FnMut() -> Owner,
    ) -> Outcome {
        let (addr, len) = instruction;
        self.fetch(addr, u32::from(len))
    }

    /// A read and a write are simulated alike.
    #[inline(always)]
    fn access(&mut self, addr: u64, size: u32, _: bool, _: &mut dyn FnMut() -> Owner) -> Outcome {
        self.read(addr, size)
    }
}

impl RunCaches for ExtendedHierarchy {
    const DIRTY: bool = true;

    #[inline(always)]
    fn fetch_point(
        &mut self,
        instruction: (u64, u8),
        _: &FetchPoint,
        _: &mut dyn FnMut() -> Owner,
    ) -> Outcome {
        let (addr, len) = instruction;
        self.fetch(addr, u32::from(len))
    }

    #[inline(always)]
    fn access(
        &mut self,
        addr: u64,
        size: u32,
        read: bool,
        _: &mut dyn FnMut() -> Owner,
    ) -> Outcome {
        match read {
            true => self.read(addr, size),
            false => self.write(addr, size),
        }
    }
}

impl RunCaches for UseHierarchy {
    #[inline(always)]
    fn fetch_point(
        &mut self,
        instruction: (u64, u8),
        point: &FetchPoint,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Outcome {
        let (addr, len) = instruction;
        let outcome = self.fetch_for(addr, u32::from(len), owner);
        self.fetch_again(point.followers, point.mask);
        outcome
    }

    /// A read and a write are simulated alike.
    #[inline(always)]
    fn access(
        &mut self,
        addr: u64,
        size: u32,
        _: bool,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Outcome {
        self.data_for(addr, size, owner)
    }
}

/// How the caches' outcomes become events: the columns of the misses,
/// and whether a read-modify-write is read (Cachegrind) or written
/// (Callgrind).
#[derive(Clone, Copy, Debug)]
struct CacheRules {
    columns: CacheColumns,
    modify_is_read: bool,
}

/// [`Simulation::run_block`] of `block`, whose fetch points are `fetches`,
/// with caches and no branch simulation: each access's outcome gives its
/// misses directly.
#[inline(always)]
fn run_caches<C: RunCaches, S: RunSink>(
    caches: &mut C,
    tickets: &mut Tickets,
    CacheRules {
        columns,
        modify_is_read,
    }: CacheRules,
    block: &SimulatedBlock<'_>,
    fetches: &[FetchPoint],
    sink: &mut S,
) {
    let fetched = (columns.i1mr, columns.ilmr);
    let dirty = match C::DIRTY {
        true => columns.dirty.unwrap_or_default(),
        false => DirtyColumns::default(),
    };
    // The block by reference, its instructions looked up in each fetch:
    // a copy of the slice into a closure is a wide load of what the
    // replay has just stored in parts (a stall: the stores cannot
    // forward).
    let fetch = |caches: &mut C, tickets: &mut Tickets, point: &FetchPoint, sink: &mut S| {
        let at = point.at();
        if let Some(&instruction) = instruction_at(block, at) {
            let owner = &mut || tickets.issue(&mut |ticket| sink.loaded(at, ticket));
            let outcome = caches.fetch_point(instruction, point, owner);
            count_misses(sink, at, outcome, fetched);
            if C::DIRTY && outcome.dirty_miss() {
                sink.extra(at, dirty.ildmr);
            }
        }
    };
    let mut fetches = fetches.iter().peekable();
    for (position, access) in block.accesses() {
        while let Some(point) = fetches.next_if(|point| point.at() <= position) {
            fetch(caches, tickets, point, sink);
        }
        let read = is_read(access.kind, modify_is_read);
        let owner = &mut || tickets.issue(&mut |ticket| sink.loaded(position, ticket));
        let outcome = caches.access(access.addr, access.size, read, owner);
        if read {
            count_misses(sink, position, outcome, (columns.d1mr, columns.dlmr));
        } else {
            count_misses(sink, position, outcome, (columns.d1mw, columns.dlmw));
        }
        if C::DIRTY && outcome.dirty_miss() {
            let column = if read { dirty.dldmr } else { dirty.dldmw };
            sink.extra(position, column);
        }
    }
    for point in fetches {
        fetch(caches, tickets, point, sink);
    }
}

/// The instruction at `position` of `block`, read through the block.
#[inline(always)]
fn instruction_at<'a>(block: &SimulatedBlock<'a>, position: usize) -> Option<&'a (u64, u8)> {
    block.instructions.get(position)
}

/// Reports the misses of an access of the instruction at `position` with
/// `outcome` in the columns `(l1, ll)`.
#[inline(always)]
fn count_misses(
    sink: &mut impl RunSink,
    position: usize,
    outcome: Outcome,
    (l1, ll): (usize, usize),
) {
    if outcome.l1_miss() {
        sink.extra(position, l1);
        if outcome.ll_miss() {
            sink.extra(position, ll);
        }
    }
}

/// The events one simulation step counts, once each: the columns of an
/// access and of its misses (at most three: L1, LL, dirty LL), one a byte, each plus 1 (0
/// ends them). Added where they go one column at a time, not through a
/// cost vector made for them: memory just written in parts is slow to
/// read back whole, so this is a word, in a register.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts(u32);

impl Counts {
    /// The event in `column`.
    pub fn one(column: usize) -> Counts {
        Counts::default().and(column, true)
    }

    /// These and, if `counted`, the event in `column` (below
    /// [`crate::events::MAX_EVENTS`]).
    #[inline]
    pub fn and(self, column: usize, counted: bool) -> Counts {
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

    /// These and, when `outcome` is a dirty miss, the event in `column`
    /// (the dirty misses' column, `None` without write-back).
    #[inline]
    fn dirty(self, outcome: Outcome, column: Option<usize>) -> Counts {
        match column {
            Some(column) => self.and(column, outcome.dirty_miss()),
            None => self,
        }
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

    /// Whether there are none.
    #[inline]
    pub fn is_empty(self) -> bool {
        self.0 == 0
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Options;

    /// A block of three instructions, the last in the next 64-byte line.
    const BLOCK: [(u64, u8); 3] = [(0x1000, 4), (0x1004, 4), (0x103e, 4)];

    /// The event set and simulation of `--cache-sim=yes` with the
    /// default caches.
    fn cache_simulation() -> (EventSet, Simulation) {
        let options = Options {
            cache_sim: true,
            ..Options::default()
        };
        let events = EventSet::new(&options);
        let simulation = Simulation::new(&events, &options).expect("the default caches");
        (events, simulation)
    }

    #[test]
    fn a_detached_simulation_tells_what_it_stands_for() {
        let (events, simulation) = cache_simulation();
        let detached = simulation.detached();
        assert!(detached.simulates_fetches() && detached.simulates_data());
        assert!(!detached.uses_cache_use());
        // A drain after one whose simulation ran ahead uses the fetch
        // points the stand-in made.
        let points = simulation.fetch_points(&BLOCK);
        assert_eq!(points.len(), 2);
        assert_eq!(detached.fetch_points(&BLOCK), points);
        let access = DataAccess {
            addr: 0x2000,
            size: 8,
            kind: AccessKind::Write,
        };
        let columns = events.cache.expect("cache events");
        assert_eq!(
            detached.every_run(Step::Data(access)),
            Counts::one(columns.dw)
        );
        assert_eq!(detached.every_run(Step::Fetch(0x1000, 4)), Counts::one(0));
    }

    /// What missed a first-level cache kept elsewhere counts its `Ir`,
    /// `Dr` or `Dw`, its first-level miss, and LL's when LL misses too.
    #[test]
    fn beyond_the_first_level_a_step_counts_its_miss_and_ll_s() {
        let (events, mut simulation) = cache_simulation();
        let columns = events.cache.expect("cache events");
        let fetch = Step::Fetch(0x1000, 4);
        let fetched = Counts::one(0).misses(Outcome::LlMiss, columns.i1mr, columns.ilmr);
        assert_eq!(simulation.beyond_first_level(fetch), fetched);
        let again = Counts::one(0).misses(Outcome::LlHit, columns.i1mr, columns.ilmr);
        assert_eq!(simulation.beyond_first_level(fetch), again);
        // Data: a write in the line fetched hits LL; a read elsewhere misses.
        let access = |addr, kind| {
            Step::Data(DataAccess {
                addr,
                size: 8,
                kind,
            })
        };
        let written = Counts::one(columns.dw).misses(Outcome::LlHit, columns.d1mw, columns.dlmw);
        let write = access(0x1008, AccessKind::Write);
        assert_eq!(simulation.beyond_first_level(write), written);
        let read = Counts::one(columns.dr).misses(Outcome::LlMiss, columns.d1mr, columns.dlmr);
        let far = access(0x9000, AccessKind::Read);
        assert_eq!(simulation.beyond_first_level(far), read);
    }

    #[test]
    fn every_run_of_a_block_counts_each_fetch_then_its_instruction_s_accesses() {
        let (events, simulation) = cache_simulation();
        let columns = events.cache.expect("cache events");
        let access = |kind| DataAccess {
            addr: 0,
            size: 8,
            kind,
        };
        let accesses = [
            (0, access(AccessKind::Read)),
            (2, access(AccessKind::Write)),
        ];
        let every = simulation.every_run_events(&BLOCK, accesses);
        let (dr, dw) = (columns.dr as u32, columns.dw as u32);
        assert_eq!(every, [(0, 0), (0, dr), (1, 0), (2, 0), (2, dw)]);
    }

    #[test]
    fn a_detached_cache_use_simulation_gives_the_same_fetch_masks() {
        let options = Options {
            cache_sim: true,
            cacheuse: true,
            ..Options::default()
        };
        let events = EventSet::new(&options);
        let simulation = Simulation::new(&events, &options).expect("the default caches");
        assert!(simulation.uses_cache_use());
        let points = simulation.fetch_points(&BLOCK);
        assert_ne!(points[0].mask, 0);
        assert_eq!(simulation.detached().fetch_points(&BLOCK), points);
    }

    #[test]
    fn tickets_are_told_and_reused_once_their_line_left() {
        let mut tickets = Tickets::default();
        let mut told = Vec::new();
        let first = tickets.issue(&mut |ticket| told.push(ticket));
        let second = tickets.issue(&mut |ticket| told.push(ticket));
        assert_ne!(first, second);
        tickets.release(first);
        let third = tickets.issue(&mut |ticket| told.push(ticket));
        assert_eq!(third, first);
        assert_eq!(told, [first, second, first]);
    }
}
