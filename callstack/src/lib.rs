//! The collector of cgx: turns the engine's events into Callgrind profiles.
//!
//! Per thread a shadow call stack of call arcs (JCCs) with inclusive costs by
//! the global-counter method (seed 004, method 3), and Callgrind's rules for
//! what is a call, a return and a function context (DESIGN.md, "Facts").
//!
//! - [`Options`]: Callgrind's collection options.
//! - [`Collector`]: an [`cgx_engine::EventSink`] for all traced processes; it
//!   hands back finished [`Dump`]s (a process exited, or a client request asked
//!   for a dump).
//!
//! With simulation, each instruction's costs come from the cache and branch
//! simulators (cgx-sim), and cache-use costs, known only when a line is
//! evicted, reach the call arcs through the back-dating tree (cgx-backdate).
//!
//! One module per concept, as in Callgrind: `thread` holds the rules
//! for calls and returns, `functions` what a block belongs to, `keys` the
//! blocks a block-based backend numbers (found without hashing), `context` the
//! names with callers and recursion levels, `costs` the tables, `pending` a
//! block's instructions not charged yet (a whole block as one run of its
//! table, as Callgrind's execution counters), `sequences` Cachegrind's
//! whole blocks counted, `attribution` Cachegrind's instructions charged
//! with simulation, `events` the columns, `simulation` the simulators'
//! outcomes as costs, `cacheuse` who owns a cache line and where its costs
//! go, `process` the client requests and dumps, `dump` the conversion to a
//! profile part.

mod ahead;
mod attribution;
mod cacheuse;
mod collector;
mod context;
mod control;
mod costs;
mod dump;
mod events;
mod functions;
mod keys;

mod pending;
mod process;
mod run_misses;
mod sequences;
mod simulation;
mod system_time;
mod thread;

pub use ahead::SimulationAhead;
pub use collector::Collector;
pub use control::Control;
pub use system_time::SystemTime;

use cgx_formats::{Profile, TooManyNames};

/// What can go wrong while collecting.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A profile needs more distinct names than the format can number.
    #[error("the profile of process {pid} cannot be written: {source}")]
    TooManyNames {
        /// The process.
        pid: i32,
        /// The underlying limit.
        source: TooManyNames,
    },
    /// The caches given cannot be simulated.
    #[error("the caches cannot be simulated: {0}")]
    Caches(#[from] cgx_sim::CacheUseError),
    /// The simulation run ahead of the collector and the collector took
    /// other steps (a defect of cgx: the profile would be wrong).
    #[error("process {pid}: the simulation and the collector went out of step (please report)")]
    OutOfStep {
        /// The process.
        pid: i32,
    },
}

/// A command line as Valgrind shows it (`Command:`, `cmd:`): the program
/// as named and its arguments, joined by spaces.
pub fn command_line<A: AsRef<str>>(program: &str, args: &[A]) -> String {
    std::iter::once(program)
        .chain(args.iter().map(AsRef::as_ref))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Callgrind's collection and dump options, with Valgrind's defaults.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--separate-recs=N` (default 2): recursion levels shown as `fn'2` …
    pub separate_recursions: u32,
    /// `--separate-callers=N` (default 0): caller chains in names, `fn'caller`.
    pub separate_callers: u32,
    /// `--separate-recsN=PATTERN`: another number of recursion levels for
    /// these functions (the last pattern that matches counts).
    pub separate_recursions_of: Vec<(String, u32)>,
    /// `--separate-callersN=PATTERN`: another number of callers in the names
    /// of these functions (the last pattern that matches counts).
    pub separate_callers_of: Vec<(String, u32)>,
    /// `--separate-threads=yes`: one dump per thread.
    pub separate_threads: bool,
    /// `--skip-plt=yes` (default): PLT stubs' cost goes to their caller.
    pub skip_plt: bool,
    /// `--skip-direct-rec=yes`: a function's calls of itself count no
    /// recursion level (default: they do).
    pub skip_direct_recursion: bool,
    /// `--demangle=yes` (default): C++ and Rust function names demangled.
    pub demangle: bool,
    /// `--show-below-main=yes`: the functions that call `main` keep their
    /// names (default: `(below main)`).
    pub show_below_main: bool,
    /// `--fn-skip=PATTERN`: functions whose cost goes to their caller.
    pub fn_skip: Vec<String>,
    /// `--obj-skip=PATTERN`: objects (by path or file name) all of whose
    /// functions' cost goes to their callers, as with `--fn-skip`.
    pub obj_skip: Vec<String>,
    /// `--toggle-collect=PATTERN`: collection toggles while inside these.
    pub toggle_collect: Vec<String>,
    /// `--pop-on-jump`: a jump from any function into another is its
    /// return and a call from its caller (default: only from
    /// `_dl_runtime_resolve`).
    pub pop_on_jump: bool,
    /// `--pop-on-jump=PATTERN`: the functions that do so besides.
    pub pop_on_jump_of: Vec<String>,
    /// `--dump-before=PATTERN`: a dump when one of these is entered.
    pub dump_before: Vec<String>,
    /// `--dump-after=PATTERN`: a dump when one of these is left.
    pub dump_after: Vec<String>,
    /// `--zero-before=PATTERN`: costs zeroed when one of these is entered.
    pub zero_before: Vec<String>,
    /// `--dump-every-bb=N` (0: never): a dump once more than N blocks ran
    /// since the last one it made.
    pub dump_every_bb: u64,
    /// `--collect-atstart=yes` (default).
    pub collect_atstart: bool,
    /// `--instr-atstart=yes` (default).
    pub instr_atstart: bool,
    /// `--dump-instr=yes`: positions by instruction address.
    pub dump_instr: bool,
    /// `--dump-line=yes` (default): positions by source line.
    pub dump_line: bool,
    /// `--collect-jumps=yes`: jump= / jcnd= lines.
    pub collect_jumps: bool,
    /// `--combine-dumps=yes`: all dumps of a process as parts of one file.
    pub combine_dumps: bool,
    /// Cachegrind's attribution instead of Callgrind's: every instruction is
    /// charged to its own function (no call graph, PLT stubs are functions),
    /// and a thread's last block counts (Callgrind never charges it: it adds
    /// a block's cost when the next one starts).
    pub cachegrind: bool,
    /// The command line for the `cmd:` header.
    pub command: String,
    /// `--cache-sim=yes`: I1/D1/LL simulation (`Dr Dw I1mr D1mr D1mw ILmr
    /// DLmr DLmw`).
    pub cache_sim: bool,
    /// `--branch-sim=yes`: branch predictors (`Bc Bcm Bi Bim`).
    pub branch_sim: bool,
    /// `--cacheuse=yes`: cache-use metrics (`AcCost1 SpLoss1 AcCost2
    /// SpLoss2`), simulated with the cache simulation (zero without it, as in
    /// Valgrind).
    pub cacheuse: bool,
    /// `--cacheuse-inclusive=yes` (default): exact inclusive cache-use costs
    /// from the back-dating tree; `no` leaves them zero, as Valgrind does.
    pub cacheuse_inclusive: bool,
    /// `--collect-bus=yes`: `Ge`, one per atomic read-modify-write run.
    pub collect_bus: bool,
    /// `--collect-systime`: `sysCount sysTime` (and `sysCpuTime`), each
    /// system call's count and time.
    pub collect_systime: SystemTime,
    /// `--simulate-wb=yes` and `--simulate-hwpref=yes` as given; they apply
    /// only with the cache simulation and without cache use
    /// ([`Options::cache_extensions`]).
    pub extensions: cgx_sim::Extensions,
    /// The simulated caches (detected, or `--I1`/`--D1`/`--LL`).
    pub caches: cgx_sim::CachesConfig,
    /// The backend filters the fetches and data accesses that hit the
    /// most recently used line of their set (`RunOptions::filter`): runs
    /// and events come counted, and only the other fetches and accesses
    /// are simulated.
    pub filtered: bool,
}

impl Options {
    /// Whether blocks may dump or zero as they run (entering or leaving
    /// functions with `--dump-before`, `--dump-after`, `--zero-before`; a
    /// number of blocks with `--dump-every-bb`): blocks then go one by
    /// one, each one's dumps made before the next.
    pub fn has_block_triggers(&self) -> bool {
        self.dump_every_bb > 0
            || [&self.dump_before, &self.dump_after, &self.zero_before]
                .iter()
                .any(|patterns| !patterns.is_empty())
    }

    /// Whether a backend may report the runs of a block that keep their
    /// thread's context as repeats of an earlier run of it in the same
    /// context rather than in the order they ran (`cgx_engine::RunOptions::quiet_runs`;
    /// [`Collector`] gives blocks places, `EventSink::place`): with Callgrind's
    /// attribution of `Ir` alone (no simulation, no bus events), no jumps
    /// collected, no block triggers and no `--pop-on-jump`
    /// ([`Options::pops_on_jumps`]), where such a run only adds to its
    /// block's count in the context and to the inclusive costs of the
    /// call arcs around it; also with the cache simulation when the backend
    /// filters its fetches and accesses ([`Options::filtered`]), whose
    /// misses then come apart, each naming its run.
    pub fn quiet_runs(&self) -> bool {
        !self.cachegrind
            && (!self.cache_sim || self.filtered)
            && !self.branch_sim
            && !self.cacheuse
            && !self.collect_bus
            && !self.collect_jumps
            && !self.has_block_triggers()
            && !self.pops_on_jumps()
    }

    /// Whether `--pop-on-jump` makes jumps out of other functions than
    /// `_dl_runtime_resolve` returns (which quiet runs' calls counted whole
    /// across tail jumps do not know).
    pub fn pops_on_jumps(&self) -> bool {
        self.pop_on_jump || !self.pop_on_jump_of.is_empty()
    }

    /// The write-back and prefetch behaviours the cache simulation has:
    /// those asked for, with Callgrind's cache simulation and without cache
    /// use (Valgrind 3.19 turns them off with `--cacheuse=yes`); `None` when
    /// none applies.
    pub fn cache_extensions(&self) -> Option<cgx_sim::Extensions> {
        let applies = self.cache_sim && !self.cacheuse && !self.cachegrind;
        let any = self.extensions.write_back || self.extensions.prefetch;
        (applies && any).then_some(self.extensions)
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            separate_recursions: 2,
            separate_callers: 0,
            separate_recursions_of: Vec::new(),
            separate_callers_of: Vec::new(),
            separate_threads: false,
            skip_plt: true,
            skip_direct_recursion: false,
            demangle: true,
            show_below_main: false,
            fn_skip: Vec::new(),
            obj_skip: Vec::new(),
            toggle_collect: Vec::new(),
            pop_on_jump: false,
            pop_on_jump_of: Vec::new(),
            dump_before: Vec::new(),
            dump_after: Vec::new(),
            zero_before: Vec::new(),
            dump_every_bb: 0,
            collect_atstart: true,
            instr_atstart: true,
            dump_instr: false,
            dump_line: true,
            collect_jumps: false,
            combine_dumps: false,
            cachegrind: false,
            command: String::new(),
            cache_sim: false,
            branch_sim: false,
            cacheuse: false,
            cacheuse_inclusive: true,
            collect_bus: false,
            collect_systime: SystemTime::No,
            extensions: cgx_sim::Extensions::default(),
            caches: cgx_sim::CachesConfig::DEFAULT,
            filtered: false,
        }
    }
}

/// One profile ready to be written: what Valgrind writes as one file.
#[derive(Debug)]
pub struct Dump {
    /// The process it belongs to (`%p` of the output name).
    pub pid: i32,
    /// The dump's number when the program asked for dumps (DUMP_STATS):
    /// Valgrind appends `.N` to the file name; `None` for the final dump of a
    /// process that never asked.
    pub sequence: Option<u32>,
    /// The thread's number (1, 2, …) with `--separate-threads=yes`: Valgrind
    /// appends `-01`, `-02` … to the file name.
    pub thread: Option<u32>,
    /// The profile.
    pub profile: Profile,
}

#[cfg(test)]
mod options_tests {
    use super::Options;

    #[test]
    fn quiet_runs_only_where_the_rules_need_no_order() {
        assert!(Options::default().quiet_runs());
        let with = |change: fn(&mut Options)| {
            let mut options = Options::default();
            change(&mut options);
            options.quiet_runs()
        };
        assert!(!with(|options| options.collect_jumps = true));
        assert!(!with(|options| options.pop_on_jump = true));
        assert!(!with(|options| options.pop_on_jump_of = vec!["f".into()]));
        assert!(!with(|options| options.dump_before = vec!["f".into()]));
        assert!(with(|options| options.skip_direct_recursion = true));
    }
}
