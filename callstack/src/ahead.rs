//! The simulation of a process run ahead of its collector, on another
//! thread, while a drain of records is replayed twice
//! ([`cgx_engine::EventSink::ahead`]): the simulator sees every step
//! first and sends what each step did (its misses, and with the cache-use
//! model the lines it loaded and what it charged) at the end of each chunk
//! of records; the collector then takes, for each step it would have
//! simulated, that step's report ([`Behind::next_step`]), in the same
//! order.
//!
//! The simulation needs nothing of the collector: the cache-use model
//! holds tickets for the owners of its lines (`Tickets` in
//! [`crate::simulation`]), and the collector learns which instruction and
//! call loaded each ticket's line when it takes the step that loaded it.
//! Only the collection state is the collector's: with the cache-use model
//! the simulation runs ahead only while collection cannot change.

use std::sync::mpsc::{channel, Receiver, Sender};

use cgx_engine::{Ahead, Block, BlockEvent, EventSink, NoAhead, SimulatedBlocks, Thread};
use cgx_sim::{Charge, LineChange, Owner};

use crate::simulation::{Counts, FetchPoint, RunSink, Simulation, Step};

/// What the simulation steps of one chunk of records did, in order; each
/// entry tagged with its step ([`tag`]).
#[derive(Debug, Default)]
struct ChunkReport {
    /// How many steps the chunk had.
    steps: u64,
    /// Each miss: its tag with the position and column.
    misses: Vec<u64>,
    /// Each line loaded: its tag with the position, and its ticket.
    loads: Vec<(u64, Owner)>,
    /// The cache-use charges, and the step of each.
    charges: Vec<Charge>,
    charge_steps: Vec<u64>,
    /// The cache-use line changes, and the step of each.
    changes: Vec<LineChange>,
    change_steps: Vec<u64>,
}

impl ChunkReport {
    /// The report with no steps, its lists keeping their room.
    fn emptied(mut self) -> ChunkReport {
        self.steps = 0;
        self.misses.clear();
        self.loads.clear();
        self.charges.clear();
        self.charge_steps.clear();
        self.changes.clear();
        self.change_steps.clear();
        self
    }
}

/// Chunk reports the collector is done with, kept from one drain to the
/// next: their lists are filled again instead of grown from nothing (with
/// the cache-use model, megabytes a chunk).
#[derive(Debug, Default)]
pub(crate) struct Spares(Vec<ChunkReport>);

/// Spare chunk reports kept at most: as many as can be in flight.
const SPARES: usize = 8;

/// Step `step` of a chunk, the instruction at `position` of its run and
/// event column `column`, as one word.
fn tag(step: u64, position: usize, column: usize) -> u64 {
    let position = position.min(0xffff) as u64;
    (step << 24) | (position << 8) | (column as u64 & 0xff)
}

/// The step of a [`tag`].
fn step_of(tag: u64) -> u64 {
    tag >> 24
}

/// The position and column of a [`tag`].
pub(crate) fn position_and_column(tag: u64) -> (usize, usize) {
    (((tag >> 8) & 0xffff) as usize, (tag & 0xff) as usize)
}

/// What one step did, for the collector.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StepReport<'a> {
    /// Its misses ([`position_and_column`] of each).
    pub misses: &'a [u64],
    /// The lines it loaded: the position of the loading instruction
    /// ([`position_and_column`]) and the line's ticket.
    pub loads: &'a [(u64, Owner)],
    /// The cache-use model's charges.
    pub charges: &'a [Charge],
    /// The cache-use model's line changes.
    pub changes: &'a [LineChange],
}

impl StepReport<'_> {
    /// Whether the cache-use model charged or moved lines.
    #[inline]
    pub fn has_cache_use(&self) -> bool {
        !self.charges.is_empty() || !self.changes.is_empty()
    }
}

/// The simulation running ahead (an [`Ahead`] sink): it simulates every
/// step of the events it sees and sends their reports on at each chunk's
/// end.
pub struct SimulationAhead {
    simulation: Simulation,
    /// The fetches of each block's runs, by key
    /// ([`Simulation::fetch_points`]).
    fetch_points: Vec<Option<Box<[FetchPoint]>>>,
    chunk: ChunkReport,
    /// To the collector, until the drain's last chunk.
    sender: Option<Sender<ChunkReport>>,
    /// Reports to fill next: those of earlier drains, then those the
    /// collector sends back.
    spares: Spares,
    spent: Receiver<ChunkReport>,
}

/// The collector's side: the report of each step, in the order the
/// simulation ran them.
#[derive(Debug)]
pub(crate) struct Behind {
    receiver: Receiver<ChunkReport>,
    chunk: ChunkReport,
    /// Back to the simulation, each report once taken.
    spent: Sender<ChunkReport>,
    /// The next step of `chunk`, and where its entries start in the four
    /// lists.
    step: u64,
    at: [usize; 4],
    /// The first step from `step` on with entries (`u64::MAX` if none):
    /// the steps before it are taken with one comparison.
    next_busy: u64,
    /// A step was asked for that the simulation had not run.
    overrun: bool,
}

/// A simulation to run ahead, with `fetch_points` and `spares` kept from
/// earlier drains, and the collector's side of it.
pub(crate) fn split(
    simulation: Simulation,
    fetch_points: Vec<Option<Box<[FetchPoint]>>>,
    spares: Spares,
) -> (SimulationAhead, Behind) {
    let (sender, receiver) = channel();
    let (spent_sender, spent) = channel();
    let mut ahead = SimulationAhead {
        simulation,
        fetch_points,
        chunk: ChunkReport::default(),
        sender: Some(sender),
        spares,
        spent,
    };
    ahead.chunk = ahead.spare();
    let behind = Behind {
        receiver,
        chunk: ChunkReport::default(),
        spent: spent_sender,
        step: 0,
        at: [0; 4],
        next_busy: u64::MAX,
        overrun: false,
    };
    (ahead, behind)
}

impl SimulationAhead {
    /// The simulation, the fetch points and the spare reports, back after
    /// the drain (once the collector's side is dropped).
    pub(crate) fn into_parts(self) -> (Simulation, Vec<Option<Box<[FetchPoint]>>>, Spares) {
        let SimulationAhead {
            simulation,
            fetch_points,
            mut spares,
            spent,
            ..
        } = self;
        let room = SPARES.saturating_sub(spares.0.len());
        spares.0.extend(spent.try_iter().take(room));
        (simulation, fetch_points, spares)
    }

    /// An empty report to fill next.
    fn spare(&mut self) -> ChunkReport {
        let spare = self.spares.0.pop().or_else(|| self.spent.try_recv().ok());
        spare.map(ChunkReport::emptied).unwrap_or_default()
    }

    /// Simulates one `step` and keeps its report.
    #[inline]
    fn step(&mut self, step: Step) {
        let SimulationAhead {
            simulation, chunk, ..
        } = self;
        let at = chunk.steps;
        let loads = &mut chunk.loads;
        let counts = simulation.step(step, &mut |ticket| loads.push((tag(at, 0, 0), ticket)));
        let (_, misses) = counts.split_first();
        misses.for_each(|column| chunk.misses.push(tag(at, 0, column)));
        chunk.end_step(simulation);
    }
}

impl ChunkReport {
    /// Ends the current step: takes the cache-use model's reports of it.
    #[inline]
    fn end_step(&mut self, simulation: &mut Simulation) {
        match simulation.cache_use() {
            Some((charges, changes)) => {
                self.end_step_with(charges, changes);
                simulation.clear_cache_use();
            }
            None => self.steps += 1,
        }
    }

    /// Ends the current step, whose cache-use charges and line changes
    /// are `charges` and `changes` (most steps have none).
    #[inline(always)]
    fn end_step_with(&mut self, charges: &[Charge], changes: &[LineChange]) {
        if !charges.is_empty() || !changes.is_empty() {
            self.keep_cache_use(charges, changes);
        }
        self.steps += 1;
    }

    /// Keeps `charges` and `changes` as the current step's.
    #[inline(never)]
    fn keep_cache_use(&mut self, charges: &[Charge], changes: &[LineChange]) {
        let step = self.steps;
        self.charges.extend_from_slice(charges);
        self.charge_steps.resize(self.charges.len(), step);
        self.changes.extend_from_slice(changes);
        self.change_steps.resize(self.changes.len(), step);
    }
}

/// Where [`Simulation::run_block`] reports a run, for
/// [`SimulationAhead`].
struct RunReport<'a> {
    chunk: &'a mut ChunkReport,
}

impl RunSink for RunReport<'_> {
    #[inline]
    fn loaded(&mut self, position: usize, ticket: Owner) {
        let step = self.chunk.steps;
        self.chunk.loads.push((tag(step, position, 0), ticket));
    }

    #[inline]
    fn extra(&mut self, position: usize, column: usize) {
        let step = self.chunk.steps;
        self.chunk.misses.push(tag(step, position, column));
    }
}

impl EventSink for SimulationAhead {
    type Ahead = NoAhead;

    fn block(&mut self, _: Thread, _: Block) {}

    fn instruction(&mut self, _: Thread, addr: u64, len: u8) {
        if self.simulation.simulates_fetches() {
            self.step(Step::Fetch(addr, len));
        }
    }

    fn instruction_event(&mut self, _: Thread, addr: u64, event: BlockEvent) {
        let (data, branches) = (
            self.simulation.simulates_data(),
            self.simulation.simulates_branches(),
        );
        match event {
            BlockEvent::Access(access) if data => self.step(Step::Data(access)),
            BlockEvent::Conditional(taken) if branches => {
                self.step(Step::Conditional(addr, taken));
            }
            BlockEvent::Indirect(target) if branches => self.step(Step::Indirect(addr, target)),
            _ => {}
        }
    }

    fn blocks_simulated(&mut self, _: Thread, blocks: &mut SimulatedBlocks<'_>) {
        let SimulationAhead {
            simulation,
            fetch_points,
            chunk,
            ..
        } = self;
        while let Some(ref run) = blocks.next() {
            let slot = run.key as usize;
            if fetch_points.len() <= slot {
                fetch_points.resize(slot + 1, None);
            }
            let points =
                fetch_points[slot].get_or_insert_with(|| simulation.fetch_points(run.instructions));
            simulation.run_block(run, points, &mut RunReport { chunk });
            chunk.end_step(simulation);
            // A loop of one block: its runs right after this one, each a
            // step, without looking the block up again.
            if let Some(repeats) = blocks.repeats(run) {
                let ended = |report: &mut RunReport, charges: &[Charge], changes: &[LineChange]| {
                    report.chunk.end_step_with(charges, changes);
                };
                let report = &mut RunReport { chunk };
                if !simulation.run_again(&repeats, points, report, ended) {
                    repeats.for_each_run(|again| {
                        simulation.run_block_again(again, points, &mut RunReport { chunk });
                        chunk.end_step(simulation);
                    });
                }
                blocks.skip(&repeats);
            }
        }
    }
}

impl Ahead for SimulationAhead {
    fn chunk_done(&mut self, last: bool) {
        let spare = self.spare();
        let chunk = std::mem::replace(&mut self.chunk, spare);
        if let Some(sender) = &self.sender {
            // The collector may be gone (an error ended the drain).
            let _ = sender.send(chunk);
        }
        if last {
            // The collector then finds no more reports, should it ask.
            self.sender = None;
        }
    }
}

impl Behind {
    /// The report of the next step. The collector replays a chunk only
    /// after the simulation sent its reports, so they are here; an empty
    /// one for a step the simulation did not run (a defect, which
    /// [`Behind::all_taken`] then tells).
    #[inline(always)]
    pub fn next_step(&mut self) -> StepReport<'_> {
        if self.step < self.next_busy.min(self.chunk.steps) {
            self.step += 1;
            return StepReport::default();
        }
        self.busy_step()
    }

    /// [`Behind::next_step`] for a step with entries, or the first of a
    /// chunk.
    #[inline(never)]
    fn busy_step(&mut self) -> StepReport<'_> {
        while self.step >= self.chunk.steps {
            match self.receiver.try_recv() {
                Ok(chunk) => {
                    let spent = std::mem::replace(&mut self.chunk, chunk);
                    // The simulation may be done (its last chunk sent).
                    let _ = self.spent.send(spent);
                    (self.step, self.at) = (0, [0; 4]);
                    self.next_busy = first_busy(&self.chunk, &self.at);
                }
                Err(_) => {
                    self.overrun = true;
                    return StepReport::default();
                }
            }
        }
        if self.step < self.next_busy {
            self.step += 1;
            return StepReport::default();
        }
        let step = self.step;
        self.step += 1;
        let chunk = &self.chunk;
        let [misses, loads, charges, changes] = &mut self.at;
        let misses = take_step(&chunk.misses, misses, |&miss| step_of(miss) == step);
        let loads = take_step(&chunk.loads, loads, |&(at, _)| step_of(at) == step);
        let charge_count = count_step(&chunk.charge_steps, *charges, step);
        let change_count = count_step(&chunk.change_steps, *changes, step);
        let report = StepReport {
            misses,
            loads,
            charges: chunk
                .charges
                .get(*charges..*charges + charge_count)
                .unwrap_or_default(),
            changes: chunk
                .changes
                .get(*changes..*changes + change_count)
                .unwrap_or_default(),
        };
        *charges += charge_count;
        *changes += change_count;
        self.next_busy = first_busy(chunk, &self.at);
        report
    }

    /// Whether every step the simulation ran was taken, and no other; the
    /// reports go back to the simulation.
    pub fn all_taken(self) -> bool {
        let Behind {
            receiver,
            chunk,
            spent,
            step,
            overrun,
            ..
        } = self;
        let mut taken = !overrun && step >= chunk.steps;
        let _ = spent.send(chunk);
        for chunk in receiver.try_iter() {
            taken &= chunk.steps == 0;
            let _ = spent.send(chunk);
        }
        taken
    }
}

/// The first step of `chunk` with entries in one of its four lists from
/// `at` on (`u64::MAX` if none).
#[inline]
fn first_busy(chunk: &ChunkReport, at: &[usize; 4]) -> u64 {
    let [misses, loads, charges, changes] = *at;
    let head = |step: Option<u64>| step.unwrap_or(u64::MAX);
    let first = head(chunk.misses.get(misses).map(|&miss| step_of(miss)));
    if chunk.loads.is_empty() && chunk.charge_steps.is_empty() && chunk.change_steps.is_empty() {
        return first;
    }
    first
        .min(head(chunk.loads.get(loads).map(|&(at, _)| step_of(at))))
        .min(head(chunk.charge_steps.get(charges).copied()))
        .min(head(chunk.change_steps.get(changes).copied()))
}

/// The entries of `entries` from `*at` on that are of the step
/// (`of_step`), moving `at` past them.
#[inline]
fn take_step<'a, T>(entries: &'a [T], at: &mut usize, of_step: impl Fn(&T) -> bool) -> &'a [T] {
    let rest = entries.get(*at..).unwrap_or_default();
    let count = rest.iter().take_while(|entry| of_step(entry)).count();
    *at += count;
    &rest[..count]
}

/// How many of `steps` from `at` on are `step`.
#[inline]
fn count_step(steps: &[u64], at: usize, step: u64) -> usize {
    let rest = steps.get(at..).unwrap_or_default();
    rest.iter().take_while(|&&of| of == step).count()
}

/// The every-run events `counts` of a step and the misses `misses` of its
/// report (at most two: an L1 and an LL miss).
#[inline]
pub(crate) fn with_misses(counts: Counts, misses: &[u64]) -> Counts {
    misses.iter().fold(counts, |counts, &miss| {
        let (_, column) = position_and_column(miss);
        counts.and(column, true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventSet;
    use crate::Options;

    /// A simulation of `--cache-sim=yes`, to run ahead.
    fn simulation() -> Simulation {
        let options = Options {
            cache_sim: true,
            ..Options::default()
        };
        Simulation::new(&EventSet::new(&options), &options).expect("the default caches")
    }

    /// The simulation's side sends a chunk of `steps` steps, the first with
    /// a miss.
    fn send_chunk(ahead: &mut SimulationAhead, steps: u64, last: bool) {
        ahead.chunk.misses.push(tag(0, 1, 2));
        ahead.chunk.steps = steps;
        ahead.chunk_done(last);
    }

    #[test]
    fn reports_taken_come_back_empty_for_the_next_drain() {
        let (mut ahead, mut behind) = split(simulation(), Vec::new(), Spares::default());
        send_chunk(&mut ahead, 2, true);
        assert_eq!(behind.next_step().misses, &[tag(0, 1, 2)]);
        assert!(behind.next_step().misses.is_empty());
        assert!(behind.all_taken());
        let (simulation, fetch_points, spares) = ahead.into_parts();
        assert!(!spares.0.is_empty(), "the reports came back");
        // The next drain starts from nothing but the lists' room.
        let (mut ahead, mut behind) = split(simulation, fetch_points, spares);
        send_chunk(&mut ahead, 1, true);
        assert_eq!(behind.next_step().misses, &[tag(0, 1, 2)]);
        assert!(behind.all_taken(), "one step, the new one");
    }

    #[test]
    fn a_step_left_untaken_is_told() {
        let (mut ahead, mut behind) = split(simulation(), Vec::new(), Spares::default());
        send_chunk(&mut ahead, 2, false);
        send_chunk(&mut ahead, 1, true);
        assert_eq!(behind.next_step().misses, &[tag(0, 1, 2)]);
        assert!(
            !behind.all_taken(),
            "a step of the first chunk and the second chunk"
        );
        let (_, _, spares) = ahead.into_parts();
        assert!(spares.0.len() <= SPARES);
    }
}
