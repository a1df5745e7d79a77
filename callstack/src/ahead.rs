//! The simulation of a process run ahead of its collector, on another
//! thread, while a drain of records is replayed twice
//! ([`cgx_engine::EventSink::ahead`]): the simulator sees every step
//! first and sends the misses of each chunk of records on; the collector
//! then takes, for each step it would have simulated, that step's misses
//! ([`MissesBehind::next_step`]), in the same order.
//!
//! Only without the cache-use model (whose line owners come from the call
//! stack): then the simulation needs nothing of the collector, and the
//! steps of a drain are the same whatever the call stack does.

use std::sync::mpsc::{channel, Receiver, Sender};

use cgx_engine::{Ahead, Block, DataAccess, EventSink, SimulatedBlocks, Thread};

use crate::simulation::{Counts, FetchPoint, RunSink, Simulation, Step};

/// The misses of the simulation steps of one chunk of records.
#[derive(Debug, Default)]
struct ChunkMisses {
    /// How many steps the chunk had.
    steps: u64,
    /// Each miss of them, in order ([`miss`]).
    misses: Vec<u64>,
}

/// A miss of step `step` of a chunk, at the instruction at `position` of
/// its run, in event column `column`, as one word.
fn miss(step: u64, position: usize, column: usize) -> u64 {
    let position = position.min(0xffff) as u64;
    (step << 24) | (position << 8) | (column as u64 & 0xff)
}

/// The step of a [`miss`] word.
fn step_of(miss: u64) -> u64 {
    miss >> 24
}

/// The position and column of a [`miss`] word.
pub(crate) fn position_and_column(miss: u64) -> (usize, usize) {
    (((miss >> 8) & 0xffff) as usize, (miss & 0xff) as usize)
}

/// The simulation running ahead (an [`Ahead`] sink): it simulates every
/// step of the events it sees and sends the misses on at each chunk's end.
pub(crate) struct SimulationAhead {
    simulation: Simulation,
    /// The fetches of each block's runs, by key
    /// ([`Simulation::fetch_points`]).
    fetch_points: Vec<Option<Box<[FetchPoint]>>>,
    chunk: ChunkMisses,
    /// To the collector, until the drain's last chunk.
    sender: Option<Sender<ChunkMisses>>,
}

/// The collector's side: the misses of each step, in the order the
/// simulation ran them.
#[derive(Debug)]
pub(crate) struct MissesBehind {
    receiver: Receiver<ChunkMisses>,
    chunk: ChunkMisses,
    /// The next step of `chunk`, and its first miss.
    step: u64,
    at: usize,
    /// A step was asked for that the simulation had not run.
    overrun: bool,
}

/// A simulation to run ahead, with `fetch_points` known from earlier
/// drains, and the collector's side of it.
pub(crate) fn split(
    simulation: Simulation,
    fetch_points: Vec<Option<Box<[FetchPoint]>>>,
) -> (SimulationAhead, MissesBehind) {
    let (sender, receiver) = channel();
    let ahead = SimulationAhead {
        simulation,
        fetch_points,
        chunk: ChunkMisses::default(),
        sender: Some(sender),
    };
    let behind = MissesBehind {
        receiver,
        chunk: ChunkMisses::default(),
        step: 0,
        at: 0,
        overrun: false,
    };
    (ahead, behind)
}

impl SimulationAhead {
    /// The simulation and the fetch points, back after the drain.
    pub fn into_parts(self) -> (Simulation, Vec<Option<Box<[FetchPoint]>>>) {
        (self.simulation, self.fetch_points)
    }

    /// Simulates one `step` and keeps its misses.
    #[inline]
    fn step(&mut self, step: Step) {
        let counts = self.simulation.step(step, &mut || 0);
        let (_, misses) = counts.split_first();
        let at = self.chunk.steps;
        misses.for_each(|column| self.chunk.misses.push(miss(at, 0, column)));
        self.chunk.steps += 1;
    }
}

/// Where [`Simulation::run_block`] reports a run's misses, for
/// [`SimulationAhead`].
struct RunMisses<'a> {
    chunk: &'a mut ChunkMisses,
}

impl RunSink for RunMisses<'_> {
    fn owner(&mut self, _: usize) -> cgx_sim::Owner {
        0
    }

    #[inline]
    fn extra(&mut self, position: usize, column: usize) {
        let step = self.chunk.steps;
        self.chunk.misses.push(miss(step, position, column));
    }
}

impl EventSink for SimulationAhead {
    fn block(&mut self, _: Thread, _: Block) {}

    fn instruction(&mut self, _: Thread, addr: u64, len: u8) {
        if self.simulation.simulates_fetches() {
            self.step(Step::Fetch(addr, len));
        }
    }

    fn data_access(&mut self, _: Thread, access: DataAccess) {
        if self.simulation.simulates_data() {
            self.step(Step::Data(access));
        }
    }

    fn conditional_branch(&mut self, _: Thread, addr: u64, taken: bool) {
        if self.simulation.simulates_branches() {
            self.step(Step::Conditional(addr, taken));
        }
    }

    fn indirect_branch(&mut self, _: Thread, addr: u64, target: u64) {
        if self.simulation.simulates_branches() {
            self.step(Step::Indirect(addr, target));
        }
    }

    fn blocks_simulated(&mut self, _: Thread, blocks: &mut SimulatedBlocks<'_>) {
        let SimulationAhead {
            simulation,
            fetch_points,
            chunk,
            ..
        } = self;
        for run in blocks {
            let slot = run.key as usize;
            if fetch_points.len() <= slot {
                fetch_points.resize(slot + 1, None);
            }
            let points =
                fetch_points[slot].get_or_insert_with(|| simulation.fetch_points(run.instructions));
            simulation.run_block(&run, points, &mut RunMisses { chunk });
            chunk.steps += 1;
        }
    }
}

impl Ahead for SimulationAhead {
    fn chunk_done(&mut self, last: bool) {
        let chunk = std::mem::take(&mut self.chunk);
        if let Some(sender) = &self.sender {
            // The collector may be gone (an error ended the drain).
            let _ = sender.send(chunk);
        }
        if last {
            // The collector then finds no more misses, should it ask.
            self.sender = None;
        }
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

impl MissesBehind {
    /// The misses of the next step ([`position_and_column`] of each).
    /// The collector replays a chunk only after the simulation sent its
    /// misses, so they are here; none for a step the simulation did not
    /// run (a defect, which [`MissesBehind::all_taken`] then reports).
    #[inline]
    pub fn next_step(&mut self) -> &[u64] {
        while self.step >= self.chunk.steps {
            match self.receiver.try_recv() {
                Ok(chunk) => (self.chunk, self.step, self.at) = (chunk, 0, 0),
                Err(_) => {
                    self.overrun = true;
                    return &[];
                }
            }
        }
        let (step, start) = (self.step, self.at);
        let misses = self.chunk.misses.get(start..).unwrap_or_default();
        let count = misses
            .iter()
            .take_while(|&&miss| step_of(miss) == step)
            .count();
        self.step += 1;
        self.at += count;
        &misses[..count]
    }

    /// Whether every step the simulation ran was taken, and no other.
    pub fn all_taken(&mut self) -> bool {
        !self.overrun
            && self.step >= self.chunk.steps
            && std::iter::from_fn(|| self.receiver.try_recv().ok()).all(|chunk| chunk.steps == 0)
    }
}

/// Adds the misses of a step (from [`MissesBehind::next_step`]) to `cost`.
#[inline]
pub(crate) fn add_misses(misses: &[u64], cost: &mut [u64]) {
    for &miss in misses {
        let (_, column) = position_and_column(miss);
        if let Some(sum) = cost.get_mut(column) {
            *sum += 1;
        }
    }
}

/// The every-run events `counts` of a step and its misses, the next step
/// of `behind` (at most two: an L1 and an LL miss).
#[inline]
pub(crate) fn with_misses(counts: Counts, behind: &mut MissesBehind) -> Counts {
    behind.next_step().iter().fold(counts, |counts, &miss| {
        let (_, column) = position_and_column(miss);
        counts.and(column, true)
    })
}
