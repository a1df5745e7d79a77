//! Callgrind's call and return rules ([`ThreadState::enter_block`]), one
//! case each: a made-up program (functions, blocks of one-byte
//! instructions), the blocks a thread runs (address, stack pointer, how it
//! got there), and the call arcs and self costs that must come out.
//!
//! As in a dump, the calls still active at the end count what they cost so
//! far, and the thread's last block is not charged (Callgrind charges a
//! block when the next one starts). Each case runs block by block, in
//! whole runs of `Ir` alone, and in whole runs that cost a profile (the
//! path of filtered cache simulations), with the same outcome.

use std::collections::BTreeMap;
use std::sync::Arc;

use cgx_engine::symbols::SectionKind;
use cgx_engine::{Arrival, Block};

use super::{Listed, ProfiledRuns, Shared, ThreadState, Trigger};
use crate::context::Contexts;
use crate::costs::{Costs, Profile};
use crate::events::EventSet;
use crate::functions::{BlockInfo, Function, Functions};
use crate::sequences::Sequences;
use crate::Options;

/// A function of a made-up program.
#[derive(Clone, Copy)]
struct Func {
    name: &'static str,
    object: u32,
    section: SectionKind,
    /// Its cost goes to its caller (PLT stubs, `--fn-skip`).
    skip: bool,
    /// `--toggle-collect` names it.
    toggle: bool,
    /// `--dump-before`, `--dump-after`, `--zero-before` name it.
    dumps: (bool, bool, bool),
}

/// A function in the main program's text.
const fn text(name: &'static str, object: u32) -> Func {
    Func {
        name,
        object,
        section: SectionKind::Text,
        skip: false,
        toggle: false,
        dumps: (false, false, false),
    }
}

/// A block of a made-up program: its address, function, whether it is the
/// function's first instruction, and how many one-byte instructions it has.
type Blk = (u64, &'static str, bool, u64);

/// What the thread does next.
#[derive(Clone, Copy)]
enum Step {
    /// Runs the block at the address, with that stack pointer at its start,
    /// arriving that way.
    Run(u64, u64, Arrival),
    /// The kernel starts a signal handler.
    Signal,
    /// The handler returns.
    SigReturn,
    /// The block just run runs this many more times in its context
    /// (`Repeat::InContext`), with its call each time when `true`
    /// (`Repeat::Calls`).
    Again(u64, bool),
    /// The block just run jumps back to its start, this many times
    /// (`Repeat::Again`).
    Loop(u64),
}
use Step::{Again, Loop, Run, SigReturn, Signal};

const CALL: Arrival = Arrival::Call;
const RET: Arrival = Arrival::Return;
const JUMP: Arrival = Arrival::Jump { conditional: false };
const FALL: Arrival = Arrival::FallThrough;
const START: Arrival = Arrival::Start;

/// One rule's case.
struct Case<'a> {
    rule: &'static str,
    functions: &'a [Func],
    blocks: &'a [Blk],
    steps: &'a [Step],
    /// `--separate-recs`.
    recursions: u32,
    /// `--skip-direct-rec=yes`.
    skip_direct: bool,
    /// `--collect-atstart`.
    collect_atstart: bool,
    /// Call arcs: caller, callee (as Callgrind names their centres), calls,
    /// inclusive `Ir`.
    arcs: &'static [(&'static str, &'static str, u64, u64)],
    /// Self `Ir` of each centre that has some.
    self_ir: &'static [(&'static str, u64)],
    /// The dumps (by trigger) and zeroings (`zero`) functions asked for.
    triggers: &'static [&'static str],
}

const CASE: Case<'static> = Case {
    rule: "",
    functions: &[],
    blocks: &[],
    steps: &[],
    recursions: 2,
    skip_direct: false,
    collect_atstart: true,
    arcs: &[],
    self_ir: &[],
    triggers: &[],
};

/// The arcs, self costs and triggers of `case`'s run.
type Outcome = (
    Vec<(String, String, u64, u64)>,
    Vec<(String, u64)>,
    Vec<String>,
);

/// How [`run`] reports blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// Each block's start, then its instructions.
    Steps,
    /// Each block as one whole run of `Ir` alone (the path of the translate
    /// backend, with its shortcuts).
    Whole,
    /// Each block as one whole run costing its profile (`Ir` for each
    /// instruction: the path of filtered simulations).
    Profiled,
}

/// `func` of a made-up program as `Functions` knows it.
fn function(func: Func, options: &Options) -> Function {
    Function {
        object: Arc::from(format!("object{}", func.object)),
        file: Arc::from("???"),
        name: Arc::from(func.name),
        skip: func.skip,
        pop_on_jump: func.name.starts_with("_dl_runtime_resolve"),
        toggle_collect: func.toggle,
        dump_before: func.dumps.0,
        dump_after: func.dumps.1,
        zero_before: func.dumps.2,
        separate_recursions: options.separate_recursions,
        separate_callers: options.separate_callers,
    }
}

/// What the rules share, over these tables (the cost tables of key 0, no
/// back-dating).
fn shared<'a>(
    functions: &'a Functions,
    contexts: &'a mut Contexts,
    costs: &'a mut Costs,
    options: &'a Options,
    events: &'a EventSet,
) -> Shared<'a> {
    Shared {
        functions,
        contexts,
        costs,
        costs_key: 0,
        options,
        events,
        forest: None,
    }
}

/// Runs `case`'s steps through the rules, as `path` reports them.
fn run(case: &Case<'_>, path: Path) -> Outcome {
    let options = Options {
        separate_recursions: case.recursions,
        skip_direct_recursion: case.skip_direct,
        collect_atstart: case.collect_atstart,
        ..Options::default()
    };
    let events = EventSet::new(&options);
    let mut functions = Functions::default();
    let ids: BTreeMap<&str, (u32, Func)> = case
        .functions
        .iter()
        .map(|&func| {
            (
                func.name,
                (functions.insert(function(func, &options)), func),
            )
        })
        .collect();
    let mut contexts = Contexts::default();
    let mut costs = Costs::default();
    let mut thread = ThreadState::new(1, &options, events.len(), None);
    let mut tables = vec![None; case.blocks.len()];
    // Each block's profile: `Ir` for each of its instructions.
    let profiles: Vec<Arc<Profile>> = (0u32..)
        .zip(case.blocks)
        .map(|(number, &(_, _, _, len))| {
            let mut profile = Profile::new(number, len as usize, events.len());
            (0..len as usize).for_each(|position| profile.count(position, 0));
            Arc::new(profile)
        })
        .collect();
    let mut triggers = Vec::new();
    let mut last: Vec<(u64, u8)> = Vec::new();
    let mut last_number = 0;
    let (mut last_sp, mut last_info) = (0, None);
    for step in case.steps {
        let mut shared = shared(&functions, &mut contexts, &mut costs, &options, &events);
        let (addr, sp, arrival) = match *step {
            Signal => {
                thread.enter_signal_handler(&mut shared, 14);
                continue;
            }
            SigReturn => {
                thread.leave_signal_handler(&mut shared);
                continue;
            }
            Again(times, calls) if path == Path::Profiled => {
                let runs = ProfiledRuns {
                    times,
                    run: Listed::new(&last),
                    profile: &profiles[last_number],
                };
                thread.profiled_in_context(&mut shared, &runs, calls);
                continue;
            }
            Again(times, calls) => {
                thread.runs_in_context(&mut shared, times, &last, calls);
                continue;
            }
            Loop(times) => {
                let &(addr, _) = last.first().expect("a block before its loop");
                let again = Block {
                    addr,
                    sp: last_sp,
                    arrival: JUMP,
                };
                let info = last_info.expect("a block before its loop");
                let table = &mut tables[last_number];
                match path {
                    Path::Steps => (0..times).for_each(|_| {
                        thread.enter_block(&mut shared, addr, last_sp, JUMP, info);
                        thread.instructions_ir(&mut shared, &last);
                    }),
                    Path::Whole => {
                        let runs = super::RunsAgain {
                            start: again,
                            times,
                        };
                        thread.whole_block_ir_again(
                            &mut shared,
                            runs,
                            info,
                            Listed::new(&last),
                            table,
                        );
                    }
                    Path::Profiled => {
                        let runs = ProfiledRuns {
                            times,
                            run: Listed::new(&last),
                            profile: &profiles[last_number],
                        };
                        thread.profiled_again(&mut shared, &again, info, &runs, table);
                    }
                }
                continue;
            }
            Run(addr, sp, arrival) => (addr, sp, arrival),
        };
        let (number, &(_, name, is_entry, len)) = case
            .blocks
            .iter()
            .enumerate()
            .find(|(_, block)| block.0 == addr)
            .unwrap_or_else(|| panic!("{}: no block at {addr:#x}", case.rule));
        let (function, func) = ids[name];
        let info = BlockInfo {
            function,
            is_entry,
            object: func.object,
            section: func.section,
            // One region per object and section kind, as `Functions` numbers them.
            region: func.object * 3 + func.section as u32,
            number: number as u32,
        };
        let instructions: Vec<(u64, u8)> = (addr..addr + len).map(|at| (at, 1)).collect();
        last.clone_from(&instructions);
        (last_number, last_sp, last_info) = (number, sp, Some(info));
        let block = Block { addr, sp, arrival };
        match path {
            Path::Steps => {
                thread.enter_block(&mut shared, addr, sp, arrival, info);
                thread.instructions_ir(&mut shared, &instructions);
            }
            Path::Whole => thread.whole_block_ir(
                &mut shared,
                &block,
                info,
                Listed::new(&instructions),
                &mut tables[number],
            ),
            Path::Profiled => {
                let runs = ProfiledRuns {
                    times: 0,
                    run: Listed::new(&instructions),
                    profile: &profiles[number],
                };
                thread.whole_block_profiled(&mut shared, &block, info, &runs, &mut tables[number]);
            }
        }
        triggers.extend(
            thread
                .take_triggers()
                .into_iter()
                .map(|trigger| match trigger {
                    Trigger::Dump(trigger) => trigger,
                    Trigger::Zero => "zero".to_string(),
                }),
        );
    }
    thread.add_active_calls(&mut costs);
    let mut arcs: Vec<_> = costs
        .arcs
        .iter()
        .map(|(arc, cost)| {
            (
                contexts.name(arc.from, &functions),
                contexts.name(arc.to, &functions),
                cost.count,
                cost.inclusive.first().copied().unwrap_or(0),
            )
        })
        .collect();
    arcs.sort();
    let mut self_ir: BTreeMap<String, u64> = BTreeMap::new();
    let sum = costs
        .self_costs_by_instruction(&Sequences::default(), 1)
        .try_for_each(|(centre, _), cost| {
            *self_ir
                .entry(contexts.name(centre, &functions))
                .or_default() += cost[0];
            Ok::<(), ()>(())
        });
    assert_eq!(sum, Ok(()));
    let self_ir = self_ir.into_iter().filter(|&(_, ir)| ir > 0).collect();
    (arcs, self_ir, triggers)
}

/// Checks `case`, block by block and in whole runs.
fn check(case: &Case<'_>) {
    let (arcs, self_ir, triggers) = run(case, Path::Steps);
    let block_by_block = (arcs.clone(), self_ir.clone(), triggers.clone());
    assert_eq!(
        run(case, Path::Whole),
        block_by_block,
        "{}: whole runs",
        case.rule
    );
    let profiled = run(case, Path::Profiled);
    assert_eq!(profiled, block_by_block, "{}: profiled runs", case.rule);
    assert_eq!(triggers, case.triggers, "{}: triggers", case.rule);
    let want_arcs: Vec<_> = case
        .arcs
        .iter()
        .map(|&(from, to, calls, inclusive)| (from.to_string(), to.to_string(), calls, inclusive))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(arcs, want_arcs, "{}: call arcs", case.rule);
    let want_self: Vec<_> = case
        .self_ir
        .iter()
        .map(|&(name, ir)| (name.to_string(), ir))
        .collect::<BTreeMap<_, _>>()
        .into_iter()
        .collect();
    assert_eq!(self_ir, want_self, "{}: self Ir", case.rule);
}

/// main: 0x100 (2 instructions), its return point 0x102 (2), 0x104 (1).
const MAIN: [Blk; 3] = [
    (0x100, "main", true, 2),
    (0x102, "main", false, 2),
    (0x104, "main", false, 1),
];

#[test]
fn a_call_and_its_return() {
    check(&Case {
        rule: "a call pushes an arc; the return adds its cost to it",
        functions: &[text("main", 0), text("f", 0)],
        blocks: &[MAIN[0], MAIN[1], MAIN[2], (0x200, "f", true, 3)],
        steps: &[
            Run(0x100, 0x8000, START),
            Run(0x200, 0x7ff8, CALL),
            Run(0x102, 0x8000, RET),
            Run(0x104, 0x8000, FALL),
        ],
        arcs: &[("main", "f", 1, 3)],
        self_ir: &[("main", 4), ("f", 3)],
        ..CASE
    });
}

#[test]
fn a_jump_to_a_first_instruction_is_a_call() {
    check(&Case {
        rule: "a tail jump to another function's entry is a call from the jumping function; \
               the return pops both frames",
        functions: &[text("main", 0), text("a", 0), text("b", 0)],
        blocks: &[
            MAIN[0],
            MAIN[1],
            MAIN[2],
            (0x200, "a", true, 2),
            (0x300, "b", true, 3),
        ],
        steps: &[
            Run(0x100, 0x8000, START),
            Run(0x200, 0x7ff8, CALL),
            Run(0x300, 0x7ff8, JUMP),
            Run(0x102, 0x8000, RET),
            Run(0x104, 0x8000, FALL),
        ],
        arcs: &[("main", "a", 1, 5), ("a", "b", 1, 3)],
        self_ir: &[("main", 4), ("a", 2), ("b", 3)],
        ..CASE
    });
}

#[test]
fn a_fall_through_to_a_first_instruction_is_a_call() {
    check(&Case {
        rule: "falling through into the next function's entry is a call",
        functions: &[text("main", 0), text("g", 0)],
        blocks: &[MAIN[0], (0x102, "g", true, 2), (0x104, "g", false, 1)],
        steps: &[
            Run(0x100, 0x8000, START),
            Run(0x102, 0x8000, FALL),
            Run(0x104, 0x8000, FALL),
        ],
        arcs: &[("main", "g", 1, 2)],
        self_ir: &[("main", 2), ("g", 2)],
        ..CASE
    });
}

#[test]
fn a_jump_into_another_object_is_a_call() {
    check(&Case {
        rule: "a jump into the middle of code of another object is a call, and so is the jump \
               back (a second instance of main)",
        functions: &[text("main", 0), text("x", 1)],
        blocks: &[MAIN[0], MAIN[1], MAIN[2], (0x900, "x", false, 2)],
        steps: &[
            Run(0x100, 0x8000, START),
            Run(0x900, 0x8000, JUMP),
            Run(0x102, 0x8000, JUMP),
            Run(0x104, 0x8000, FALL),
        ],
        arcs: &[("main", "x", 1, 4), ("x", "main'2", 1, 2)],
        self_ir: &[("main", 2), ("x", 2), ("main'2", 2)],
        ..CASE
    });
}

#[test]
fn a_jump_within_a_function_is_no_call() {
    check(&Case {
        rule: "a jump or fall-through within a function changes nothing but the block",
        functions: &[text("main", 0)],
        blocks: &MAIN,
        steps: &[
            Run(0x100, 0x8000, START),
            Run(0x104, 0x8000, JUMP),
            Run(0x102, 0x8000, JUMP),
            Run(0x104, 0x8000, FALL),
        ],
        arcs: &[],
        self_ir: &[("main", 5)],
        ..CASE
    });
}

#[test]
fn a_return_to_no_frame_is_a_call() {
    check(&Case {
        rule: "a return at the top frame's stack pointer to an address no frame returns to is \
               a jump that counts as a call (Callgrind's return without call)",
        functions: &[text("main", 0), text("f", 0)],
        blocks: &[
            MAIN[0],
            (0x200, "f", true, 3),
            (0x210, "f", false, 2),
            (0x212, "f", false, 1),
        ],
        steps: &[
            Run(0x100, 0x8000, START),
            Run(0x200, 0x7ff8, CALL),
            Run(0x210, 0x7ff8, RET),
            Run(0x212, 0x7ff8, FALL),
        ],
        arcs: &[("main", "f", 1, 5), ("f", "f'2", 1, 2)],
        self_ir: &[("main", 2), ("f", 3), ("f'2", 2)],
        ..CASE
    });
}

#[test]
fn frames_below_the_stack_pointer_are_popped() {
    check(&Case {
        rule: "a jump that leaves the stack above two frames (longjmp) pops both",
        functions: &[text("main", 0), text("a", 0), text("b", 0)],
        blocks: &[
            MAIN[0],
            MAIN[1],
            MAIN[2],
            (0x200, "a", true, 2),
            (0x300, "b", true, 3),
        ],
        steps: &[
            Run(0x100, 0x8000, START),
            Run(0x200, 0x7ff8, CALL),
            Run(0x300, 0x7ff0, CALL),
            Run(0x102, 0x8000, JUMP),
            Run(0x104, 0x8000, FALL),
        ],
        arcs: &[("main", "a", 1, 5), ("a", "b", 1, 3)],
        self_ir: &[("main", 4), ("a", 2), ("b", 3)],
        ..CASE
    });
}

/// f calling itself three times deep.
const RECURSION: &[Step] = &[
    Run(0x100, 0x8000, START),
    Run(0x200, 0x7ff8, CALL),
    Run(0x200, 0x7ff0, CALL),
    Run(0x200, 0x7fe8, CALL),
    Run(0x203, 0x7fe8, FALL),
];

#[test]
fn recursion_levels_up_to_separate_recs() {
    let blocks = &[MAIN[0], (0x200, "f", true, 3), (0x203, "f", false, 1)];
    check(&Case {
        rule: "the second and deeper active instances are one centre, f'2, by default",
        functions: &[text("main", 0), text("f", 0)],
        blocks,
        steps: RECURSION,
        arcs: &[
            ("main", "f", 1, 9),
            ("f", "f'2", 1, 6),
            ("f'2", "f'2", 1, 3),
        ],
        self_ir: &[("main", 2), ("f", 3), ("f'2", 6)],
        ..CASE
    });
    check(&Case {
        rule: "with --separate-recs=3 the third instance is f'3",
        functions: &[text("main", 0), text("f", 0)],
        blocks,
        steps: RECURSION,
        recursions: 3,
        arcs: &[
            ("main", "f", 1, 9),
            ("f", "f'2", 1, 6),
            ("f'2", "f'3", 1, 3),
        ],
        self_ir: &[("main", 2), ("f", 3), ("f'2", 3), ("f'3", 3)],
        ..CASE
    });
    check(&Case {
        rule: "with --separate-recs=1 every instance is f",
        functions: &[text("main", 0), text("f", 0)],
        blocks,
        steps: RECURSION,
        recursions: 1,
        arcs: &[("main", "f", 1, 9), ("f", "f", 2, 9)],
        self_ir: &[("main", 2), ("f", 9)],
        ..CASE
    });
    check(&Case {
        rule: "with --skip-direct-rec=yes f's calls of itself count no level: every instance is f",
        functions: &[text("main", 0), text("f", 0)],
        blocks,
        steps: RECURSION,
        skip_direct: true,
        arcs: &[("main", "f", 1, 9), ("f", "f", 2, 9)],
        self_ir: &[("main", 2), ("f", 9)],
        ..CASE
    });
}

#[test]
fn a_signal_handler_is_a_root_of_its_own() {
    check(&Case {
        rule: "a handler's cost is not the interrupted function's, inclusively or not",
        functions: &[text("main", 0), text("f", 0), text("h", 0)],
        blocks: &[
            MAIN[0],
            MAIN[1],
            MAIN[2],
            (0x200, "f", true, 3),
            (0x203, "f", false, 1),
            (0x400, "h", true, 3),
            (0x403, "h", false, 1),
        ],
        steps: &[
            Run(0x100, 0x8000, START),
            Run(0x200, 0x7ff8, CALL),
            Signal,
            Run(0x400, 0x7000, START),
            Run(0x403, 0x7000, FALL),
            SigReturn,
            Run(0x203, 0x7ff8, FALL),
            Run(0x102, 0x8000, RET),
            Run(0x104, 0x8000, FALL),
        ],
        arcs: &[("main", "f", 1, 4)],
        self_ir: &[("main", 4), ("f", 4), ("h", 3)],
        ..CASE
    });
}

/// A PLT stub: no object's text, skipped.
const PLT: Func = Func {
    name: "0x0000000000000500 [PLT]",
    object: 2,
    section: SectionKind::Plt,
    skip: true,
    toggle: false,
    dumps: (false, false, false),
};

#[test]
fn a_skipped_function_costs_its_caller() {
    check(&Case {
        rule: "a PLT stub's cost goes to the call site, and the call it jumps to comes from \
               that site",
        functions: &[text("main", 0), PLT, text("puts", 1)],
        blocks: &[
            MAIN[0],
            MAIN[1],
            MAIN[2],
            (0x500, PLT.name, false, 1),
            (0x900, "puts", true, 3),
        ],
        steps: &[
            Run(0x100, 0x8000, START),
            Run(0x500, 0x7ff8, CALL),
            Run(0x900, 0x7ff8, JUMP),
            Run(0x102, 0x8000, RET),
            Run(0x104, 0x8000, FALL),
        ],
        arcs: &[("main", "puts", 1, 3)],
        self_ir: &[("main", 5), ("puts", 3)],
        ..CASE
    });
}

#[test]
fn a_jump_out_of_the_resolver_replaces_its_call() {
    check(&Case {
        rule: "the lazy-binding resolver's jump to the resolved function replaces the \
               resolver's call: both are calls from the PLT stub's call site",
        functions: &[
            text("main", 0),
            PLT,
            text("_dl_runtime_resolve_xsave", 3),
            text("puts", 1),
        ],
        blocks: &[
            MAIN[0],
            MAIN[1],
            MAIN[2],
            (0x500, PLT.name, false, 1),
            (0x700, "_dl_runtime_resolve_xsave", true, 2),
            (0x900, "puts", true, 3),
        ],
        steps: &[
            Run(0x100, 0x8000, START),
            Run(0x500, 0x7ff8, CALL),
            Run(0x700, 0x7fe8, JUMP),
            Run(0x900, 0x7ff8, JUMP),
            Run(0x102, 0x8000, RET),
            Run(0x104, 0x8000, FALL),
        ],
        arcs: &[
            ("main", "_dl_runtime_resolve_xsave", 1, 2),
            ("main", "puts", 1, 3),
        ],
        self_ir: &[("main", 5), ("_dl_runtime_resolve_xsave", 2), ("puts", 3)],
        ..CASE
    });
}

#[test]
fn toggle_collect_collects_inside_the_function() {
    let toggled = Func {
        toggle: true,
        ..text("t", 0)
    };
    check(&Case {
        rule: "--toggle-collect=t with --collect-atstart=no collects t's cost only",
        functions: &[text("main", 0), toggled],
        blocks: &[MAIN[0], MAIN[1], MAIN[2], (0x200, "t", true, 3)],
        steps: &[
            Run(0x100, 0x8000, START),
            Run(0x200, 0x7ff8, CALL),
            Run(0x102, 0x8000, RET),
            Run(0x104, 0x8000, FALL),
        ],
        collect_atstart: false,
        arcs: &[("main", "t", 1, 3)],
        self_ir: &[("t", 3)],
        ..CASE
    });
}

#[test]
fn a_return_with_no_frame_is_an_arc_from_the_returned_to_function() {
    check(&Case {
        rule: "a return on an empty call stack (Callgrind's underflow) counts the returning \
               function as called from the function returned into",
        functions: &[text("main", 0), text("f", 0)],
        blocks: &[MAIN[1], MAIN[2], (0x210, "f", false, 2)],
        steps: &[
            Run(0x210, 0x8000, START),
            Run(0x102, 0x8008, RET),
            Run(0x104, 0x8008, FALL),
        ],
        arcs: &[("main", "f", 1, 2)],
        self_ir: &[("main", 2), ("f", 2)],
        ..CASE
    });
}

#[test]
fn a_loop_within_a_function_stays_in_its_context() {
    check(&Case {
        rule: "blocks looping within a function run in its context, and count in its call's \
               inclusive cost",
        functions: &[text("main", 0), text("f", 0)],
        blocks: &[
            MAIN[0],
            MAIN[1],
            MAIN[2],
            (0x200, "f", true, 1),
            (0x201, "f", false, 2),
            (0x203, "f", false, 1),
        ],
        steps: &[
            Run(0x100, 0x8000, START),
            Run(0x200, 0x7ff8, CALL),
            Run(0x201, 0x7ff8, FALL),
            Run(0x203, 0x7ff8, FALL),
            Run(0x201, 0x7ff8, JUMP),
            Run(0x203, 0x7ff8, FALL),
            Run(0x201, 0x7ff8, JUMP),
            Run(0x203, 0x7ff8, FALL),
            Run(0x102, 0x8000, RET),
            Run(0x104, 0x8000, FALL),
        ],
        arcs: &[("main", "f", 1, 10)],
        self_ir: &[("main", 4), ("f", 10)],
        ..CASE
    });
}

#[test]
fn a_block_looping_on_itself_counts_each_run_in_its_context() {
    check(&Case {
        rule: "a block that jumps back to its start runs in its function's context each time, \
               in its call's inclusive cost",
        functions: &[text("main", 0), text("f", 0)],
        blocks: &[
            MAIN[0],
            MAIN[1],
            MAIN[2],
            (0x200, "f", true, 1),
            (0x201, "f", false, 2),
        ],
        steps: &[
            Run(0x100, 0x8000, START),
            Run(0x200, 0x7ff8, CALL),
            Run(0x201, 0x7ff8, FALL),
            Loop(4),
            Run(0x102, 0x8000, RET),
            Run(0x104, 0x8000, FALL),
        ],
        arcs: &[("main", "f", 1, 11)],
        self_ir: &[("main", 4), ("f", 11)],
        ..CASE
    });
}

/// main: 0x100 (1 instruction), a call 0x101 (2), its return point
/// 0x103 (1, a jump back to 0x101 or on), 0x104 (1); f: 0x200 (3).
const CALLING: [Blk; 5] = [
    (0x100, "main", true, 1),
    (0x101, "main", false, 2),
    (0x103, "main", false, 1),
    (0x104, "main", false, 1),
    (0x200, "f", true, 3),
];

/// Three calls of `CALLING`'s 0x200 from its 0x101, one by one.
const THREE_CALLS: [Step; 11] = [
    Run(0x100, 0x8000, START),
    Run(0x101, 0x8000, FALL),
    Run(0x200, 0x7ff8, CALL),
    Run(0x103, 0x8000, RET),
    Run(0x101, 0x8000, JUMP),
    Run(0x200, 0x7ff8, CALL),
    Run(0x103, 0x8000, RET),
    Run(0x101, 0x8000, JUMP),
    Run(0x200, 0x7ff8, CALL),
    Run(0x103, 0x8000, RET),
    Run(0x104, 0x8000, FALL),
];

/// The same calls, each block's repeats in the context of its first run:
/// the calling block's repeats make its call again.
const THREE_CALLS_AGAIN: [Step; 8] = [
    Run(0x100, 0x8000, START),
    Run(0x101, 0x8000, FALL),
    Again(2, true),
    Run(0x200, 0x7ff8, CALL),
    Again(2, false),
    Run(0x103, 0x8000, RET),
    Again(2, false),
    Run(0x104, 0x8000, FALL),
];

#[test]
fn calls_made_again_in_context_count_as_the_calls_run_one_by_one() {
    const FUNCTIONS: [Func; 2] = [text("main", 0), text("f", 0)];
    let outcome = |rule, steps| Case {
        rule,
        functions: &FUNCTIONS,
        blocks: &CALLING,
        steps,
        arcs: &[("main", "f", 3, 9)],
        self_ir: &[("main", 10), ("f", 9)],
        ..CASE
    };
    check(&outcome("three calls, one by one", &THREE_CALLS));
    check(&outcome(
        "the same calls, each block's repeats in the context of its first run: the calling \
         block's repeats count their calls on the arc of its call",
        &THREE_CALLS_AGAIN,
    ));
}

#[test]
fn calls_made_again_into_a_toggled_function_count_as_one_by_one() {
    const FUNCTIONS: [Func; 2] = [
        text("main", 0),
        Func {
            toggle: true,
            ..text("f", 0)
        },
    ];
    let outcome = |rule, steps| Case {
        rule,
        functions: &FUNCTIONS,
        blocks: &CALLING,
        steps,
        collect_atstart: false,
        arcs: &[("main", "f", 3, 9)],
        self_ir: &[("f", 9)],
        ..CASE
    };
    check(&outcome(
        "three calls of a function that toggles collection, one by one",
        &THREE_CALLS,
    ));
    check(&outcome(
        "the same calls repeated in context",
        &THREE_CALLS_AGAIN,
    ));
}

#[test]
fn calls_made_again_through_a_plt_stub_count_on_the_arc_of_its_jump() {
    const FUNCTIONS: [Func; 3] = [text("main", 0), PLT, text("puts", 1)];
    const BLOCKS: [Blk; 5] = [
        CALLING[0],
        CALLING[1],
        CALLING[2],
        CALLING[3],
        (0x500, PLT.name, false, 1),
    ];
    const PUTS: Blk = (0x900, "puts", true, 3);
    let blocks = [BLOCKS[0], BLOCKS[1], BLOCKS[2], BLOCKS[3], BLOCKS[4], PUTS];
    let outcome = |rule, steps| Case {
        rule,
        functions: &FUNCTIONS,
        blocks: &blocks,
        steps,
        arcs: &[("main", "puts", 3, 9)],
        self_ir: &[("main", 13), ("puts", 9)],
        ..CASE
    };
    check(&outcome(
        "three calls through a PLT stub, one by one",
        &[
            Run(0x100, 0x8000, START),
            Run(0x101, 0x8000, FALL),
            Run(0x500, 0x7ff8, CALL),
            Run(0x900, 0x7ff8, JUMP),
            Run(0x103, 0x8000, RET),
            Run(0x101, 0x8000, JUMP),
            Run(0x500, 0x7ff8, CALL),
            Run(0x900, 0x7ff8, JUMP),
            Run(0x103, 0x8000, RET),
            Run(0x101, 0x8000, JUMP),
            Run(0x500, 0x7ff8, CALL),
            Run(0x900, 0x7ff8, JUMP),
            Run(0x103, 0x8000, RET),
            Run(0x104, 0x8000, FALL),
        ],
    ));
    check(&outcome(
        "the same calls repeated in context",
        &[
            Run(0x100, 0x8000, START),
            Run(0x101, 0x8000, FALL),
            Again(2, true),
            Run(0x500, 0x7ff8, CALL),
            Again(2, false),
            Run(0x900, 0x7ff8, JUMP),
            Again(2, false),
            Run(0x103, 0x8000, RET),
            Again(2, false),
            Run(0x104, 0x8000, FALL),
        ],
    ));
}

#[test]
fn entering_and_leaving_a_function_dump_and_zero() {
    let dumped = Func {
        dumps: (true, true, false),
        ..text("f", 0)
    };
    let zeroed = Func {
        dumps: (false, false, true),
        ..text("g", 0)
    };
    check(&Case {
        rule: "--dump-before=f and --dump-after=f dump when f is entered and left with no \
               other instance active (not at its recursive call); --zero-before=g zeroes",
        functions: &[text("main", 0), dumped, zeroed],
        blocks: &[
            MAIN[0],
            MAIN[1],
            MAIN[2],
            (0x200, "f", true, 3),
            (0x203, "f", false, 1),
            (0x300, "g", true, 2),
        ],
        steps: &[
            Run(0x100, 0x8000, START),
            Run(0x200, 0x7ff8, CALL),
            Run(0x200, 0x7ff0, CALL),
            Run(0x203, 0x7ff8, RET),
            Run(0x102, 0x8000, RET),
            Run(0x300, 0x7ff8, CALL),
            Run(0x104, 0x8000, RET),
        ],
        arcs: &[("main", "f", 1, 7), ("f", "f'2", 1, 3), ("main", "g", 1, 2)],
        self_ir: &[("main", 4), ("f", 4), ("f'2", 3), ("g", 2)],
        triggers: &["--dump-before=f", "--dump-after=f", "zero"],
        ..CASE
    });
}

#[test]
fn a_whole_run_counts_in_a_table_only_while_the_table_holds_its_instructions() {
    // Code changed under one start address: a block of two instructions at
    // 0x101 and one of three, each known by its own key (with its own
    // memory of where its runs count), run in turn in main's context; the
    // table of 0x101 in main grows to three instructions at the first run
    // of the longer block. Whole runs of `Ir` alone and whole runs that
    // cost a profile (`Ir` for each instruction) count the same.
    for profiled in [false, true] {
        assert_eq!(
            self_ir_of_grown_table(profiled),
            BTreeMap::from([(0x101, 5), (0x102, 5), (0x103, 2)]),
            "profiled: {profiled}"
        );
    }
}

/// The self `Ir` by instruction of
/// [`a_whole_run_counts_in_a_table_only_while_the_table_holds_its_instructions`]'s
/// runs, in whole runs of `Ir` alone or (`profiled`) that cost a profile.
fn self_ir_of_grown_table(profiled: bool) -> BTreeMap<u64, u64> {
    let options = Options::default();
    let events = EventSet::new(&options);
    let mut functions = Functions::default();
    let main = functions.insert(function(text("main", 0), &options));
    let info = |number| BlockInfo {
        function: main,
        is_entry: false,
        object: 0,
        section: SectionKind::Text,
        region: 0,
        number,
    };
    let mut contexts = Contexts::default();
    let mut costs = Costs::default();
    let mut thread = ThreadState::new(1, &options, events.len(), None);
    let two: Vec<(u64, u8)> = vec![(0x101, 1), (0x102, 1)];
    let three: Vec<(u64, u8)> = vec![(0x101, 1), (0x102, 1), (0x103, 1)];
    let end: Vec<(u64, u8)> = vec![(0x200, 1)];
    let (mut two_at, mut three_at, mut end_at) = (None, None, None);
    let runs = [
        (&two, 0, 0),
        (&two, 0, 0),
        (&three, 0, 1),
        (&two, 0, 0),
        (&three, 0, 1),
        (&end, 1, 2),
    ];
    for (at, &(instructions, number, cache)) in runs.iter().enumerate() {
        let mut shared = shared(&functions, &mut contexts, &mut costs, &options, &events);
        let block = Block {
            addr: instructions[0].0,
            sp: 0x8000,
            arrival: if at == 0 { START } else { JUMP },
        };
        let cached = match cache {
            0 => &mut two_at,
            1 => &mut three_at,
            _ => &mut end_at,
        };
        let run = Listed::new(instructions);
        if profiled {
            let mut profile = Profile::new(cache as u32, instructions.len(), events.len());
            (0..instructions.len()).for_each(|position| profile.count(position, 0));
            let runs = ProfiledRuns {
                times: 0,
                run,
                profile: &Arc::new(profile),
            };
            thread.whole_block_profiled(&mut shared, &block, info(number), &runs, cached);
        } else {
            thread.whole_block_ir(&mut shared, &block, info(number), run, cached);
        }
    }
    let mut ir: BTreeMap<u64, u64> = BTreeMap::new();
    let sum = costs
        .self_costs_by_instruction(&Sequences::default(), 1)
        .try_for_each(|(_, addr), cost| {
            *ir.entry(addr).or_default() += cost[0];
            Ok::<(), ()>(())
        });
    assert_eq!(sum, Ok(()));
    // The last block is not charged (the next block's start would).
    ir
}
