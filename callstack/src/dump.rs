//! Turns a process's cost tables into a Callgrind part, as Callgrind's dump
//! writes it: self cost per instruction (or per source line), a call record
//! for every arc with a non-zero inclusive cost, and the jumps taken.

use std::collections::BTreeMap;

use cgx_engine::symbols::Symbols;
use cgx_formats::{
    EventDef, Events, FunctionId, NameId, Names, Part, PartHeader, Position, PositionKinds, Record,
    TooManyNames,
};
use cgx_sim::DescStyle;
use rustc_hash::FxHashMap;

use crate::context::{Centre, Contexts};
use crate::costs::{add, Costs};
use crate::events::EventSet;
use crate::functions::{object_address, Functions};
use crate::sequences::Sequences;
use crate::Options;

/// What a part's header says besides the costs.
pub(crate) struct PartInfo<'a> {
    /// The process.
    pub pid: i32,
    /// The dump's number (`part:`).
    pub part: u32,
    /// The thread (`thread:`), with `--separate-threads=yes`.
    pub thread: Option<u32>,
    /// Why the dump was made (`desc: Trigger:`).
    pub trigger: &'a str,
    /// Blocks executed at the previous dump and now (`desc: Timerange:`).
    pub blocks: (u64, u64),
    /// The counted cost since the last dump (`summary:`); the totals when
    /// `None`.
    pub summary: Option<Vec<u64>>,
}

/// What names the functions and places of a part, and the instruction
/// sequences its costs count runs of.
pub(crate) struct Naming<'a> {
    /// The contexts of the process.
    pub contexts: &'a Contexts,
    /// Its functions.
    pub functions: &'a Functions,
    /// Its symbols, for the source positions of instructions.
    pub symbols: &'a Symbols,
    /// Its instruction sequences, whose runs the costs count.
    pub sequences: &'a Sequences,
}

/// Builds the part for `costs`, interning names into `names`.
pub(crate) fn build_part(
    names: &mut Names,
    costs: &Costs,
    naming: &Naming<'_>,
    options: &Options,
    events: &EventSet,
    info: &PartInfo<'_>,
) -> Result<Part, TooManyNames> {
    let positions = PositionKinds {
        instr: options.dump_instr,
        line: options.dump_line || !options.dump_instr,
    };
    let mut part_events = Events::new(events.names.iter().copied());
    if events.system.is_some() {
        part_events.defs = options
            .collect_systime
            .long_names()
            .iter()
            .map(|&(name, long_name)| EventDef {
                name: name.to_string(),
                formula: None,
                long_name: Some(long_name.to_string()),
            })
            .collect();
    }
    let mut part = Part::new(part_events, positions);
    let caches = if events.cache.is_some() {
        options
            .caches
            .desc_lines(DescStyle::Callgrind)
            .map(|line| line.trim_start_matches("desc: ").to_string())
    } else {
        ["I1 cache: ", "D1 cache: ", "LL cache: "].map(String::from)
    };
    part.header = PartHeader {
        pid: Some(info.pid as u64),
        thread: info.thread.map(u64::from),
        part: Some(u64::from(info.part)),
        cmd: Some(PartHeader::command_line(&options.command)),
        desc: caches
            .into_iter()
            .chain([
                format!(
                    "Timerange: Basic block {} - {}",
                    info.blocks.0, info.blocks.1
                ),
                format!("Trigger: {}", info.trigger),
            ])
            .collect(),
        extra: Vec::new(),
    };
    let Naming {
        contexts,
        functions,
        symbols,
        ..
    } = *naming;
    // The source file (if known) and line (0 if unknown) of an instruction.
    let source = |addr: u64| {
        let (file, line) = symbols.source_line(addr);
        (file, u64::from(line))
    };
    let mut function_ids: FxHashMap<Centre, FunctionId> = FxHashMap::default();
    let mut function_of = |names: &mut Names, centre: Centre| -> Result<FunctionId, TooManyNames> {
        if let Some(id) = function_ids.get(&centre) {
            return Ok(*id);
        }
        let function = functions.get(contexts.function(centre.cxt));
        let id = FunctionId {
            object: names.intern(&function.object)?,
            file: names.intern(&function.file)?,
            name: names.intern(&contexts.name(centre, functions))?,
        };
        function_ids.insert(centre, id);
        Ok(id)
    };

    // Self costs, in centre and address order; by line unless by address.
    let self_costs = costs.self_costs_by_instruction(naming.sequences, events.len());
    let mut totals = vec![0u64; events.len()];
    // The row of each line in `line_costs`, rows of `width` counts one
    // after another (one allocation, not one per line).
    let width = self_costs.width();
    let mut by_line: BTreeMap<(Centre, NameId, u64), usize> = BTreeMap::new();
    let mut line_costs: Vec<u64> = Vec::new();
    self_costs.try_for_each(|(centre, addr), cost| {
        add(&mut totals, cost);
        let function = function_of(names, centre)?;
        let (file, line) = source(addr);
        let file = match file {
            Some(file) => names.intern(&file)?,
            None => function.file,
        };
        if options.dump_instr {
            let at = Position {
                instr: object_address(symbols, addr),
                line: if positions.line { line } else { 0 },
            };
            part.push(
                function,
                &Record::Cost {
                    file,
                    at,
                    costs: cost,
                },
            );
        } else {
            let row = *by_line.entry((centre, file, line)).or_insert_with(|| {
                line_costs.resize(line_costs.len() + width, 0);
                line_costs.len() / width - 1
            });
            add(&mut line_costs[row * width..(row + 1) * width], cost);
        }
        Ok(())
    })?;
    drop(self_costs);
    for ((centre, file, line), &row) in &by_line {
        let function = function_of(names, *centre)?;
        let cost = &line_costs[row * width..(row + 1) * width];
        let at = Position {
            instr: 0,
            line: *line,
        };
        part.push(
            function,
            &Record::Cost {
                file: *file,
                at,
                costs: cost,
            },
        );
    }

    // The position of the instruction at `addr` on `line`, as far as the
    // part has positions of each kind.
    let position = |addr: u64, line: u64| Position {
        instr: match positions.instr {
            true => object_address(symbols, addr),
            false => 0,
        },
        line: if positions.line { line } else { 0 },
    };

    // Calls with a non-zero inclusive cost.
    let mut arcs: Vec<_> = costs
        .arcs
        .iter()
        .filter(|(_, cost)| cost.dumped())
        .collect();
    arcs.sort_by_key(|(arc, _)| **arc);
    for (arc, cost) in arcs {
        let caller = function_of(names, arc.from)?;
        let callee = function_of(names, arc.to)?;
        let (site_file, site_line) = source(arc.site);
        let file = match site_file {
            Some(file) => names.intern(&file)?,
            None => caller.file,
        };
        let (_, target_line) = source(arc.target);
        part.push(
            caller,
            &Record::Call {
                file,
                at: position(arc.site, site_line),
                callee,
                target: position(arc.target, target_line),
                count: cost.count,
                inclusive: &cost.inclusive,
            },
        );
    }

    // Jumps, where the target's position says something.
    let mut jumps: Vec<_> = costs.jumps.iter().collect();
    jumps.sort_by_key(|(jump, _)| **jump);
    for (jump, count) in jumps {
        let (target_file, target_line) = source(jump.target);
        if !options.dump_instr && target_line == 0 {
            continue;
        }
        let function = function_of(names, jump.from)?;
        let (site_file, site_line) = source(jump.site);
        let file = match site_file {
            Some(file) => names.intern(&file)?,
            None => function.file,
        };
        let target_file = match target_file {
            Some(target_file) => names.intern(&target_file)?,
            None => file,
        };
        let target_fn = function_of(names, jump.to)?.name;
        let (executed, followed) = if count.conditional {
            let executions = costs
                .block_executions
                .get(&(jump.from, jump.from_block))
                .copied()
                .unwrap_or(count.taken);
            (executions, Some(count.taken))
        } else {
            (count.taken, None)
        };
        part.push(
            function,
            &Record::Jump {
                file,
                at: position(jump.site, site_line),
                target_file,
                target_fn,
                target: position(jump.target, target_line),
                executed,
                followed,
            },
        );
    }

    part.summary = Some(info.summary.clone().unwrap_or_else(|| totals.clone()));
    part.totals = Some(totals);
    Ok(part)
}
