//! Callgrind's attribution of whole blocks and single instructions that
//! cost their `Ir` alone (no simulation): each block run goes through the
//! thread's call/return rules, the runs of a block in one context counted
//! as Callgrind's execution counters count them.

use cgx_engine::{Block, Place, Repeat, WholeBlocks};

use super::{costs_key, Process};
use crate::simulation::Step;
use crate::thread::{RunsAgain, Shared};

impl Process {
    /// Where the block at `addr` is for the rules of contexts
    /// (`EventSink::place`, `Functions::place`), with
    /// [`crate::Options::quiet_runs`]. The process's maps are read again
    /// when it is in none of the last ones read. With `--fn-skip` or
    /// `--obj-skip`, the block's function is looked up (and the block
    /// numbered) to say whether it is skipped.
    pub fn place(&mut self, addr: u64) -> Option<Place> {
        if !self.options.quiet_runs() {
            return None;
        }
        if !self.symbols.knows(addr) {
            // Code mapped since they were read, as `Functions::block` does.
            let _ = self.symbols.refresh(self.pid as u32);
        }
        let mut place = self.functions.place(addr, &self.symbols);
        place.skipped &= self.options.skip_plt;
        if !self.options.fn_skip.is_empty() || !self.options.obj_skip.is_empty() {
            let info = self
                .functions
                .block(addr, &mut self.symbols, self.pid, &self.options);
            place.skipped = self.functions.get(info.function).skip;
        }
        Some(place)
    }

    /// A block starts on thread `tid`.
    pub fn block(&mut self, tid: i32, block: Block) {
        if !self.instrumenting {
            return;
        }
        self.blocks += 1;
        if self.options.cachegrind {
            return;
        }
        let info = self
            .functions
            .block(block.addr, &mut self.symbols, self.pid, &self.options);
        self.with_thread(tid, |thread, shared| {
            thread.enter_block(shared, block.addr, block.sp, block.arrival, info);
        });
    }

    /// A whole block runs on thread `tid`: it starts and all of
    /// `instructions` execute, with no other event between them.
    pub fn block_executed(&mut self, tid: i32, block: Block, instructions: &[(u64, u8)]) {
        if self.options.cachegrind && !self.simulation.simulates_fetches() {
            self.block(tid, block);
            if self.instrumenting {
                self.count_sequence(tid, instructions);
            }
            return;
        }
        if self.options.cachegrind || self.simulation.simulates_fetches() {
            self.block(tid, block);
            self.instructions(tid, instructions);
            return;
        }
        if !self.instrumenting {
            return;
        }
        self.blocks += 1;
        let info = self
            .functions
            .block(block.addr, &mut self.symbols, self.pid, &self.options);
        self.with_thread(tid, |thread, shared| {
            thread.enter_block(shared, block.addr, block.sp, block.arrival, info);
            thread.instructions_ir(shared, instructions);
        });
    }

    /// Whole blocks run on thread `tid`, one after another: without
    /// simulation and Cachegrind's attribution, the thread and its tables
    /// are looked up once for all of them.
    pub fn blocks_executed(&mut self, tid: i32, blocks: &mut WholeBlocks<'_>) {
        if self.options.filtered {
            match (self.instrumenting, self.options.cachegrind) {
                (true, true) => self.blocks_filtered(tid, blocks),
                (true, false) => self.blocks_attributed(tid, blocks),
                (false, _) => blocks.for_each(drop),
            }
            return;
        }
        if self.options.cachegrind && !self.simulation.simulates_fetches() {
            match self.instrumenting {
                true => self.count_sequences(tid, blocks),
                false => blocks.for_each(drop),
            }
            return;
        }
        let one_by_one = self.options.cachegrind
            || self.simulation.simulates_fetches()
            || !self.instrumenting
            || self.options.has_block_triggers();
        if one_by_one {
            for whole in blocks {
                for block in whole.starts() {
                    self.block_executed(tid, block, whole.instructions);
                }
            }
            return;
        }
        // Creates the thread and its tables when they are new.
        self.with_thread(tid, |_, _| ());
        let Process {
            pid,
            threads,
            functions,
            keys,
            symbols,
            contexts,
            costs,
            options,
            events,
            forest,
            blocks: blocks_run,
            ..
        } = self;
        let Some(thread) = threads.get_mut(&tid) else {
            return;
        };
        let costs_key = costs_key(options, thread.number);
        let Some(costs) = costs.get_mut(&costs_key) else {
            return;
        };
        // Each block by reference, field by field: a copy would be wide
        // loads of what the iterator has just stored in parts (a stall:
        // the stores cannot forward).
        for ref whole in blocks.by_ref() {
            *blocks_run += 1;
            let (key, addr, instructions) = (whole.key, whole.block.addr, whole.instructions);
            let known = keys.get(key, addr, instructions, || {
                functions.block(addr, symbols, *pid, options)
            });
            let mut shared = Shared {
                functions,
                contexts,
                costs,
                costs_key,
                options,
                events,
                forest: forest.as_mut(),
            };
            let run = known.run(instructions);
            let table = &mut known.table;
            thread.whole_block_ir(&mut shared, &whole.block, known.info, run, table);
            if whole.repeats > 0 {
                *blocks_run += whole.repeats;
                let times = whole.repeats;
                match whole.repeat {
                    Repeat::Again => {
                        let runs = RunsAgain {
                            start: whole.again,
                            times,
                        };
                        thread.whole_block_ir_again(&mut shared, runs, known.info, run, table);
                    }
                    Repeat::InContext | Repeat::Calls => {
                        let calls = whole.repeat == Repeat::Calls;
                        thread.runs_in_context(&mut shared, times, instructions, calls);
                    }
                }
            }
        }
    }

    /// An instruction executes on thread `tid`.
    #[inline]
    pub fn instruction(&mut self, tid: i32, addr: u64, len: u8) {
        if !self.instrumenting {
            return;
        }
        if self.options.cachegrind {
            self.charge_to_own_function(tid, addr, len);
            self.settle_cache_use();
            return;
        }
        if !self.simulation.simulates_fetches() {
            // Only Ir: no simulator to ask.
            self.with_thread(tid, |thread, shared| {
                thread.instruction(shared.costs, addr, len);
                if let Some(cost) = thread.last_cost(shared.costs) {
                    cost[0] += 1;
                }
            });
            return;
        }
        self.add_to_last(tid, Some((addr, len)), Step::Fetch(addr, len));
    }

    /// The instructions of a whole block executed on thread `tid`, with no
    /// other event between them: without simulation they are pending in
    /// one go.
    pub fn instructions(&mut self, tid: i32, instructions: &[(u64, u8)]) {
        if !self.instrumenting {
            return;
        }
        if self.options.cachegrind || self.simulation.simulates_fetches() {
            for &(addr, len) in instructions {
                self.instruction(tid, addr, len);
            }
            return;
        }
        self.with_thread(tid, |thread, shared| {
            thread.instructions_ir(shared, instructions);
        });
    }
}
