//! Valgrind's command line for `cgx run`: the options before the program name,
//! spelled as Valgrind spells them (`--opt=value`, `yes`/`no` booleans), and the
//! program with its arguments.
//!
//! Parsing is strict, like Valgrind's: an option cgx does not know, or one the
//! chosen tool does not have (`--dump-instr=yes` with `--tool=cachegrind`), is an
//! error, and so is a malformed value.
//!
//! The simulations follow Valgrind 3.19, quirks included: Cachegrind simulates
//! the caches unless `--cache-sim=no`; Callgrind does not, but any of its cache
//! options (`--cacheuse=yes|no`, `--simulate-wb=yes|no`,
//! `--simulate-hwpref=yes|no`, `--I1`, `--D1`, `--LL`) turns the cache
//! simulation on, and `--cacheuse=yes` also turns `--dump-instr` on, each at
//! its place on the command line (a later `--cache-sim=no` or
//! `--dump-instr=no` wins).

use std::ffi::OsString;

use cgx_sim::{CacheConfig, CacheLevel, ConfigError};

/// The tool whose profiles `cgx run` writes (`--tool=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    /// Callgrind: call graph and inclusive costs (`callgrind.out.%p`), the default.
    Callgrind,
    /// Cachegrind: self costs by file, function and line (`cachegrind.out.%p`).
    Cachegrind,
}

impl Tool {
    /// The tool's name, as `--tool=` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Callgrind => "callgrind",
            Tool::Cachegrind => "cachegrind",
        }
    }

    /// The output file name Valgrind uses when none is given.
    pub fn default_out_file(self) -> &'static str {
        match self {
            Tool::Callgrind => "callgrind.out.%p",
            Tool::Cachegrind => "cachegrind.out.%p",
        }
    }
}

/// How the program is traced (`--backend=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Single-steps every instruction: exact, and very slow. The reference
    /// the translate backend is checked against.
    Step,
    /// Runs instrumented copies of the program's blocks from a code cache in
    /// the tracee: fast. The default.
    Translate,
}

impl Backend {
    /// The backend's name, as `--backend=` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Step => "step",
            Backend::Translate => "translate",
        }
    }
}

/// Everything `cgx run` was told, with Valgrind's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// `--tool=callgrind|cachegrind`.
    pub tool: Tool,
    /// `--backend=step|translate`.
    pub backend: Backend,
    /// 1 by default; each `-q` subtracts one, each `-v` adds one. At 0 and below
    /// cgx prints nothing but errors.
    pub verbosity: i32,
    /// `--time-stamp=yes`: messages carry the time since the start.
    pub time_stamp: bool,
    /// `--trace-children=yes`: follow `execve` into new programs.
    pub trace_children: bool,
    /// `--trace-children-skip=PATTERN,...`: programs not followed, by name.
    pub trace_children_skip: Vec<String>,
    /// `--trace-children-skip-by-arg=PATTERN,...`: programs not followed, by
    /// an argument.
    pub trace_children_skip_by_arg: Vec<String>,
    /// `--machine=host` turns it off: the program sees Valgrind's processor,
    /// no vDSO and no `clone3` (cgx's own option, see
    /// `cgx_engine::RunOptions`).
    pub valgrind_machine: bool,
    /// `--callgrind-out-file=` / `--cachegrind-out-file=`, not yet expanded.
    pub out_file: Option<String>,
    /// Where Valgrind's messages go: `--log-fd=1|2`, `--log-file=NAME` (not
    /// yet expanded).
    pub log: LogOption,
    /// `--dump-instr=yes`.
    pub dump_instr: bool,
    /// `--dump-line=no` turns it off.
    pub dump_line: bool,
    /// `--compress-strings=no` turns it off.
    pub compress_strings: bool,
    /// `--compress-pos=no` turns it off.
    pub compress_pos: bool,
    /// `--collect-jumps=yes`.
    pub collect_jumps: bool,
    /// `--separate-recs=N` (default 2).
    pub separate_recs: u32,
    /// `--separate-callers=N` (default 0).
    pub separate_callers: u32,
    /// `--separate-recsN=PATTERN`, in the order given: (pattern, N).
    pub separate_recs_of: Vec<(String, u32)>,
    /// `--separate-callersN=PATTERN`, in the order given: (pattern, N).
    pub separate_callers_of: Vec<(String, u32)>,
    /// `--separate-threads=yes`.
    pub separate_threads: bool,
    /// `--skip-plt=no` turns it off.
    pub skip_plt: bool,
    /// `--demangle=no` turns it off.
    pub demangle: bool,
    /// `--show-below-main=yes`.
    pub show_below_main: bool,
    /// `--skip-direct-rec=yes`.
    pub skip_direct_rec: bool,
    /// `--extra-debuginfo-path=FOLDER` and
    /// `--allow-mismatched-debuginfo=yes`: where else debug files are.
    pub debug_places: cgx_engine::symbols::DebugPlaces,
    /// `--fn-skip=PATTERN`, in the order given.
    pub fn_skip: Vec<String>,
    /// `--obj-skip=PATTERN`, in the order given.
    pub obj_skip: Vec<String>,
    /// `--toggle-collect=PATTERN`, in the order given.
    pub toggle_collect: Vec<String>,
    /// `--pop-on-jump`: every function's jumps into another are returns
    /// and calls.
    pub pop_on_jump: bool,
    /// `--pop-on-jump=PATTERN`, in the order given: these functions' so.
    pub pop_on_jump_of: Vec<String>,
    /// `--dump-before=PATTERN`, in the order given.
    pub dump_before: Vec<String>,
    /// `--dump-after=PATTERN`, in the order given.
    pub dump_after: Vec<String>,
    /// `--zero-before=PATTERN`, in the order given.
    pub zero_before: Vec<String>,
    /// `--dump-every-bb=N` (0, the default: never).
    pub dump_every_bb: u64,
    /// `--collect-atstart=no` turns it off.
    pub collect_atstart: bool,
    /// `--instr-atstart=no` (Callgrind) or `--instr-at-start=no`
    /// (Cachegrind 3.22) turns it off.
    pub instr_atstart: bool,
    /// `--combine-dumps=yes`.
    pub combine_dumps: bool,
    /// `--cache-sim=yes`: simulate I1, D1 and LL (Cachegrind's default; for
    /// Callgrind also turned on by its other cache options).
    pub cache_sim: bool,
    /// `--branch-sim=yes`: simulate the branch predictors.
    pub branch_sim: bool,
    /// `--cacheuse=yes` (Callgrind): cache-use metrics `AcCost1 SpLoss1 AcCost2
    /// SpLoss2`.
    pub cacheuse: bool,
    /// `--cacheuse-inclusive=no` (Callgrind, cgx's own) leaves the inclusive
    /// cache-use costs zero, as Valgrind does; by default they are exact.
    pub cacheuse_inclusive: bool,
    /// `--collect-bus=yes`: `Ge`, Callgrind's global bus events.
    pub collect_bus: bool,
    /// `--collect-systime=no|yes|msec|usec|nsec` (Callgrind): each system
    /// call's count and time (`sysCount sysTime`, `sysCpuTime` with `nsec`).
    pub collect_systime: cgx_callstack::SystemTime,
    /// `--simulate-wb=yes` (Callgrind): a write-back LL, counting the LL
    /// misses that evict a dirty line (`ILdmr DLdmr DLdmw`); off with cache use.
    pub simulate_wb: bool,
    /// `--simulate-hwpref=yes` (Callgrind): the stream prefetcher into LL;
    /// off with cache use.
    pub simulate_hwpref: bool,
    /// `--I1=size,assoc,line` (checked as Valgrind checks it).
    pub i1: Option<CacheConfig>,
    /// `--D1=size,assoc,line`.
    pub d1: Option<CacheConfig>,
    /// `--LL=size,assoc,line` (or `--L2=`, Valgrind's old spelling).
    pub ll: Option<CacheConfig>,
    /// The program to run, as given (looked up on `PATH` by the engine).
    pub program: OsString,
    /// The program's arguments.
    pub args: Vec<OsString>,
}

impl Options {
    /// Options with Valgrind's defaults for `program`.
    pub fn new(program: OsString) -> Options {
        Options {
            tool: Tool::Callgrind,
            backend: Backend::Translate,
            verbosity: 1,
            time_stamp: false,
            trace_children: false,
            trace_children_skip: Vec::new(),
            trace_children_skip_by_arg: Vec::new(),
            valgrind_machine: true,
            out_file: None,
            log: LogOption::Fd(2),
            dump_instr: false,
            dump_line: true,
            compress_strings: true,
            compress_pos: true,
            collect_jumps: false,
            separate_recs: 2,
            separate_callers: 0,
            separate_recs_of: Vec::new(),
            separate_callers_of: Vec::new(),
            separate_threads: false,
            skip_plt: true,
            demangle: true,
            show_below_main: false,
            skip_direct_rec: false,
            debug_places: cgx_engine::symbols::DebugPlaces::default(),
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
            combine_dumps: false,
            cache_sim: false,
            branch_sim: false,
            cacheuse: false,
            cacheuse_inclusive: true,
            collect_bus: false,
            collect_systime: cgx_callstack::SystemTime::No,
            simulate_wb: false,
            simulate_hwpref: false,
            i1: None,
            d1: None,
            ll: None,
            program,
            args: Vec::new(),
        }
    }

    /// The output file name template: the one given or the tool's default.
    pub fn out_file(&self) -> &str {
        self.out_file
            .as_deref()
            .unwrap_or_else(|| self.tool.default_out_file())
    }

    /// The option that set the output file, for messages: `--callgrind-out-file`.
    pub fn out_file_option(&self) -> String {
        format!("--{}-out-file", self.tool.name())
    }

    /// Whether the caches are configured (detected, with the warnings Valgrind
    /// prints): always for Cachegrind, which writes their `desc:` lines even
    /// with `--cache-sim=no`; with the cache simulation for Callgrind.
    pub fn configures_caches(&self) -> bool {
        self.tool == Tool::Cachegrind || self.cache_sim
    }

    /// Whether the run serves `callgrind_control`, as Valgrind's Callgrind
    /// does: Callgrind's runs with the translate backend (which restarts a
    /// wait the control interrupts).
    pub fn serves_control(&self) -> bool {
        self.tool == Tool::Callgrind && self.backend == Backend::Translate
    }

    /// Whether a simulation (caches, branches, cache use) needs the data
    /// accesses and branches of the run, or `--collect-bus` its atomic
    /// instructions (the engine reports them with those events).
    pub fn simulations(&self) -> bool {
        self.cache_sim || self.branch_sim || self.cacheuse || self.collect_bus
    }
}

/// Why a command line was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    /// An option cgx does not know (or the tool does not have).
    #[error("unknown option: {option}{hint}")]
    Unknown {
        /// The argument as given.
        option: String,
        /// An explanation appended to the message (may be empty).
        hint: &'static str,
    },
    /// A known option with a value that is not valid.
    #[error("bad option: {option}: {reason}")]
    Bad {
        /// The argument as given.
        option: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No program after the options.
    #[error("no program specified (usage: cgx run [OPTIONS] PROGRAM [ARGS...])")]
    NoProgram,
}

/// The options whose value is `yes` or `no`, for the hint on a bare `--dump-instr`.
const BOOLEAN_OPTIONS: &[&str] = &[
    "--trace-children",
    "--dump-instr",
    "--dump-line",
    "--compress-strings",
    "--compress-pos",
    "--collect-jumps",
    "--separate-threads",
    "--skip-plt",
    "--skip-direct-rec",
    "--demangle",
    "--show-below-main",
    "--collect-atstart",
    "--instr-atstart",
    "--instr-at-start",
    "--time-stamp",
    "--combine-dumps",
    "--cache-sim",
    "--branch-sim",
    "--cacheuse",
    "--cacheuse-inclusive",
    "--collect-bus",
    "--collect-systime",
    "--simulate-wb",
    "--simulate-hwpref",
    "--simulate-sectors",
];

/// `--log-fd=N` or `--log-file=NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogOption {
    /// A file descriptor: 1 or 2.
    Fd(u32),
    /// A file name, `%p` and `%q{VAR}` not yet expanded.
    File(String),
}

/// Parses `cgx run`'s arguments: options up to the first argument that does not
/// start with `-`, which is the program; the rest are its arguments.
pub fn parse(args: &[OsString]) -> Result<Options, OptionError> {
    let split = args
        .iter()
        .position(|arg| !arg.as_encoded_bytes().starts_with(b"-"))
        .ok_or(OptionError::NoProgram)?;
    let mut options = Options::new(args[split].clone());
    options.args = args[split + 1..].to_vec();
    let mut flags = Vec::with_capacity(split);
    for arg in &args[..split] {
        match arg.to_str() {
            Some(arg) => flags.push(arg),
            None => {
                return Err(OptionError::Unknown {
                    option: arg.to_string_lossy().into_owned(),
                    hint: "",
                })
            }
        }
    }
    // The tool decides which options exist, wherever --tool= is (as Valgrind).
    for arg in &flags {
        if let Some(tool) = arg.strip_prefix("--tool=") {
            options.tool = match tool {
                "callgrind" => Tool::Callgrind,
                "cachegrind" => Tool::Cachegrind,
                _ => return Err(bad(arg, "cgx has the tools callgrind and cachegrind")),
            };
        }
    }
    // Valgrind 3.19's defaults: Cachegrind simulates the caches, Callgrind not.
    options.cache_sim = options.tool == Tool::Cachegrind;
    for arg in flags {
        parse_one(&mut options, arg)?;
    }
    Ok(options)
}

/// Parses one option into `options`.
fn parse_one(options: &mut Options, arg: &str) -> Result<(), OptionError> {
    let (name, value) = match arg.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (arg, None),
    };
    let callgrind = options.tool == Tool::Callgrind;
    let cachegrind = options.tool == Tool::Cachegrind;
    match (name, value) {
        ("-q" | "--quiet", None) => options.verbosity -= 1,
        ("-v" | "--verbose", None) => options.verbosity += 1,
        ("--tool", Some(_)) => {} // done first
        ("--backend", Some(value)) => {
            options.backend = match value {
                "step" => Backend::Step,
                "translate" => Backend::Translate,
                _ => {
                    return Err(bad(
                        arg,
                        format!(
                            "unknown backend '{value}' (the backends are 'step' and 'translate')"
                        ),
                    ))
                }
            }
        }
        ("--trace-children", Some(value)) => options.trace_children = yes_no(arg, value)?,
        // Valgrind's core options that change nothing Callgrind and
        // Cachegrind do, checked as Valgrind checks them: these tools
        // report no errors (so no error exit code, no error backtraces, no
        // variable names in them), and cgx runs threads at the same time.
        ("--log-file", Some(value)) => options.log = LogOption::File(file_name(arg, value)?),
        ("--log-fd", Some(value)) => {
            let fd = number(arg, value)?;
            if !matches!(fd, 1 | 2) {
                return Err(bad(arg, "cgx writes its messages to fd 1 or 2 only"));
            }
            options.log = LogOption::Fd(fd);
        }
        ("--log-socket", Some(_)) => {
            return Err(bad(
                arg,
                "cgx does not send its messages to a socket (use --log-file)",
            ))
        }
        ("--error-exitcode", Some(value)) => {
            number::<u32>(arg, value)?;
        }
        ("--num-callers", Some(value)) => {
            if !(1..=500).contains(&number::<u32>(arg, value)?) {
                return Err(bad(arg, "must be between 1 and 500"));
            }
        }
        ("--read-var-info" | "--read-inline-info" | "--child-silent-after-fork", Some(value)) => {
            yes_no(arg, value)?;
        }
        // No gdbserver: the program runs as without one (Valgrind's
        // default starts one that waits for no one).
        ("--vgdb", Some(value)) => one_of(arg, value, &["no", "yes", "full"])?,
        ("--vgdb-error", Some(value)) => {
            number::<u32>(arg, value)?;
        }
        // cgx checks rewritten code by its own rule (code that may change
        // with no system call: writable, shared or memfd mappings).
        ("--smc-check", Some(value)) => {
            one_of(arg, value, &["none", "stack", "all", "all-non-file"])?
        }
        ("--fair-sched", Some(value)) => one_of(arg, value, &["no", "yes", "try"])?,
        // The rest of Valgrind's core options: for its other tools (errors,
        // suppressions, fd tracking, the allocator's red zones), its
        // debugger, its own code cache, stacks and threads, its reading of
        // debug information and other systems than Linux (cgx reads no
        // debug files from a `--debuginfo-server`).
        (
            "--error-limit"
            | "--exit-on-first-error"
            | "--show-error-list"
            | "--default-suppressions"
            | "--keep-debuginfo"
            | "--dsymutil"
            | "--sigill-diagnostics"
            | "--show-emwarns"
            | "--run-libc-freeres"
            | "--run-cxx-freeres"
            | "--vgdb-shadow-registers",
            Some(value),
        ) => {
            yes_no(arg, value)?;
        }
        ("--xml", Some(value)) => {
            if yes_no(arg, value)? {
                return Err(bad(arg, "Callgrind and Cachegrind have no XML output"));
            }
        }
        ("--gen-suppressions" | "--track-fds", Some(value)) => {
            one_of(arg, value, &["no", "yes", "all"])?
        }
        ("--resync-filter", Some(value)) => one_of(arg, value, &["no", "yes", "verbose"])?,
        (
            "--max-stackframe"
            | "--main-stacksize"
            | "--max-threads"
            | "--num-transtab-sectors"
            | "--avg-transtab-entry-size"
            | "--valgrind-stacksize"
            | "--redzone-size"
            | "--merge-recursive-frames"
            | "--unw-stack-scan-thresh"
            | "--unw-stack-scan-frames"
            | "--vgdb-poll"
            | "--input-fd"
            | "--xml-fd",
            Some(value),
        ) => {
            number::<u64>(arg, value)?;
        }
        ("--suppressions" | "--xml-file" | "--vgdb-prefix", Some(value)) => {
            file_name(arg, value)?;
        }
        (
            "--error-markers"
            | "--fullpath-after"
            | "--xml-user-comment"
            | "--xml-socket"
            | "--require-text-symbol"
            | "--soname-synonyms"
            | "--sim-hints"
            | "--kernel-variant"
            | "--vgdb-stop-at"
            | "--aspace-minaddr"
            | "--debuginfo-server",
            Some(_),
        ) => {}
        ("--time-stamp", Some(value)) => options.time_stamp = yes_no(arg, value)?,
        ("--trace-children-skip", Some(value)) => {
            options.trace_children_skip.extend(patterns(value));
        }
        ("--trace-children-skip-by-arg", Some(value)) => {
            options.trace_children_skip_by_arg.extend(patterns(value));
        }
        ("--machine", Some(value)) => {
            options.valgrind_machine = match value {
                "valgrind" => true,
                "host" => false,
                _ => {
                    return Err(bad(
                        arg,
                        format!(
                            "unknown machine '{value}' (the machines are 'valgrind' and 'host')"
                        ),
                    ))
                }
            }
        }
        ("--callgrind-out-file", Some(value)) if callgrind => {
            options.out_file = Some(file_name(arg, value)?)
        }
        ("--cachegrind-out-file", Some(value)) if cachegrind => {
            options.out_file = Some(file_name(arg, value)?)
        }
        ("--dump-instr", Some(value)) if callgrind => options.dump_instr = yes_no(arg, value)?,
        ("--dump-line", Some(value)) if callgrind => options.dump_line = yes_no(arg, value)?,
        ("--compress-strings", Some(value)) if callgrind => {
            options.compress_strings = yes_no(arg, value)?
        }
        ("--compress-pos", Some(value)) if callgrind => options.compress_pos = yes_no(arg, value)?,
        ("--collect-jumps", Some(value)) if callgrind => {
            options.collect_jumps = yes_no(arg, value)?
        }
        (name, Some(value)) if callgrind && per_function(name, "--separate-recs").is_some() => {
            let n = per_function(name, "--separate-recs").unwrap_or_default();
            options.separate_recs_of.push((pattern(arg, value)?, n));
        }
        (name, Some(value)) if callgrind && per_function(name, "--separate-callers").is_some() => {
            let n = per_function(name, "--separate-callers").unwrap_or_default();
            options.separate_callers_of.push((pattern(arg, value)?, n));
        }
        ("--separate-recs", Some(value)) if callgrind => {
            options.separate_recs = number(arg, value)?
        }
        ("--separate-callers", Some(value)) if callgrind => {
            options.separate_callers = number(arg, value)?
        }
        ("--separate-threads", Some(value)) if callgrind => {
            options.separate_threads = yes_no(arg, value)?
        }
        ("--skip-plt", Some(value)) if callgrind => options.skip_plt = yes_no(arg, value)?,
        ("--skip-direct-rec", Some(value)) if callgrind => {
            options.skip_direct_rec = yes_no(arg, value)?
        }
        // Core options that name functions.
        ("--demangle", Some(value)) => options.demangle = yes_no(arg, value)?,
        ("--show-below-main", Some(value)) => options.show_below_main = yes_no(arg, value)?,
        ("--extra-debuginfo-path", Some(value)) => {
            options.debug_places.extra = Some(file_name(arg, value)?.into());
        }
        ("--allow-mismatched-debuginfo", Some(value)) => {
            options.debug_places.allow_mismatched = yes_no(arg, value)?;
        }
        ("--fn-skip", Some(value)) if callgrind => options.fn_skip.push(pattern(arg, value)?),
        ("--obj-skip", Some(value)) if callgrind => options.obj_skip.push(pattern(arg, value)?),
        ("--dump-before", Some(value)) if callgrind => {
            options.dump_before.push(pattern(arg, value)?);
        }
        ("--dump-after", Some(value)) if callgrind => {
            options.dump_after.push(pattern(arg, value)?);
        }
        ("--zero-before", Some(value)) if callgrind => {
            options.zero_before.push(pattern(arg, value)?);
        }
        ("--dump-every-bb", Some(value)) if callgrind => {
            options.dump_every_bb = number(arg, value)?;
        }
        // A jump from the function into another as its return and a call
        // from its caller: every function's (bare), or these functions'.
        ("--pop-on-jump", None) if callgrind => options.pop_on_jump = true,
        ("--pop-on-jump", Some(value)) if callgrind => {
            options.pop_on_jump_of.push(pattern(arg, value)?);
        }
        ("--toggle-collect", Some(value)) if callgrind => {
            options.toggle_collect.push(pattern(arg, value)?);
            // As in Valgrind: collection then starts off, unless a later
            // --collect-atstart=yes says otherwise.
            options.collect_atstart = false;
        }
        ("--collect-atstart", Some(value)) if callgrind => {
            options.collect_atstart = yes_no(arg, value)?
        }
        ("--instr-atstart", Some(value)) if callgrind => {
            options.instr_atstart = yes_no(arg, value)?
        }
        // Cachegrind 3.22's: instrumentation starts off until the program's
        // CACHEGRIND_START_INSTRUMENTATION.
        ("--instr-at-start", Some(value)) if cachegrind => {
            options.instr_atstart = yes_no(arg, value)?
        }
        ("--combine-dumps", Some(value)) if callgrind => {
            options.combine_dumps = yes_no(arg, value)?
        }
        ("--cache-sim", Some(value)) => options.cache_sim = yes_no(arg, value)?,
        // Callgrind's old spelling.
        ("--simulate-cache", Some(value)) if callgrind => options.cache_sim = yes_no(arg, value)?,
        ("--branch-sim", Some(value)) => options.branch_sim = yes_no(arg, value)?,
        ("--cacheuse", Some(value)) if callgrind => {
            options.cacheuse = yes_no(arg, value)?;
            // As Callgrind: use counts are per instruction, and any cache
            // option turns the cache simulation on.
            if options.cacheuse {
                options.dump_instr = true;
            }
            options.cache_sim = true;
        }
        ("--collect-bus", Some(value)) if callgrind => options.collect_bus = yes_no(arg, value)?,
        ("--collect-systime", Some(value)) if callgrind => {
            options.collect_systime = system_time(arg, value)?
        }
        ("--cacheuse-inclusive", Some(value)) if callgrind => {
            options.cacheuse_inclusive = yes_no(arg, value)?
        }
        // Like every cache option of Callgrind, either value turns the
        // cache simulation on.
        ("--simulate-wb", Some(value)) if callgrind => {
            options.simulate_wb = yes_no(arg, value)?;
            options.cache_sim = true;
        }
        ("--simulate-hwpref", Some(value)) if callgrind => {
            options.simulate_hwpref = yes_no(arg, value)?;
            options.cache_sim = true;
        }
        // Accepted by Callgrind 3.19, which simulates no sectors: it only
        // turns the cache simulation on, as its other cache options do.
        ("--simulate-sectors", Some(value)) if callgrind => {
            yes_no(arg, value)?;
            options.cache_sim = true;
        }
        ("--I1" | "--D1" | "--LL" | "--L2", Some(value)) => {
            let level = match name {
                "--I1" => CacheLevel::I1,
                "--D1" => CacheLevel::D1,
                _ => CacheLevel::LL,
            };
            let config = cache(arg, level, value)?;
            match level {
                CacheLevel::I1 => options.i1 = Some(config),
                CacheLevel::D1 => options.d1 = Some(config),
                CacheLevel::LL => options.ll = Some(config),
            }
            if callgrind {
                options.cache_sim = true;
            }
        }
        // Callgrind 3.19's options that cgx does not support: said so, not
        // taken for a typo.
        (name, _) if callgrind && not_supported(name) => {
            return Err(bad(
                arg,
                "an option of Callgrind 3.19 that cgx does not support",
            ));
        }
        _ => {
            let hint = if value.is_none() && BOOLEAN_OPTIONS.contains(&name) {
                " (say =yes or =no, as Valgrind)"
            } else {
                ""
            };
            return Err(OptionError::Unknown {
                option: arg.to_string(),
                hint,
            });
        }
    }
    Ok(())
}

/// Whether `name` is an option Callgrind 3.19 takes and cgx does not:
/// `--dump-bb` and `--dump-bbs` (basic-block numbers and lists in the
/// profile), `--collect-alloc` (its two allocation events), `--mangle-names`,
/// `--fn-groupN` and `--ct-verbose[N]` (tracing).
fn not_supported(name: &str) -> bool {
    let digits = |prefix: &str| {
        name.strip_prefix(prefix)
            .filter(|digits| digits.bytes().all(|byte| byte.is_ascii_digit()))
    };
    matches!(
        name,
        "--dump-bb" | "--dump-bbs" | "--collect-alloc" | "--mangle-names"
    ) || digits("--fn-group").is_some_and(|n| n.parse().is_ok_and(|n: u32| n > 0))
        || digits("--ct-verbose").is_some()
}

/// A [`OptionError::Bad`] for `arg`.
fn bad(arg: &str, reason: impl Into<String>) -> OptionError {
    OptionError::Bad {
        option: arg.to_string(),
        reason: reason.into(),
    }
}

/// Valgrind's booleans: exactly `yes` or `no`.
/// Checks that `value` is one of `values`.
fn one_of(arg: &str, value: &str, values: &[&str]) -> Result<(), OptionError> {
    if values.contains(&value) {
        return Ok(());
    }
    let quoted: Vec<String> = values.iter().map(|value| format!("'{value}'")).collect();
    let listed = match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    Err(bad(
        arg,
        format!("invalid value '{value}' (should be {listed})"),
    ))
}

fn yes_no(arg: &str, value: &str) -> Result<bool, OptionError> {
    match value {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(bad(
            arg,
            format!("invalid boolean value '{value}' (should be 'yes' or 'no')"),
        )),
    }
}

/// The unit of `--collect-systime` (`yes` is `msec`, as in Valgrind 3.19).
fn system_time(arg: &str, value: &str) -> Result<cgx_callstack::SystemTime, OptionError> {
    use cgx_callstack::SystemTime;
    match value {
        "no" => Ok(SystemTime::No),
        "yes" | "msec" => Ok(SystemTime::Msec),
        "usec" => Ok(SystemTime::Usec),
        "nsec" => Ok(SystemTime::Nsec),
        _ => Err(bad(
            arg,
            format!("invalid value '{value}' (should be 'no', 'yes', 'msec', 'usec' or 'nsec')"),
        )),
    }
}

/// A decimal number, 0 or more.
fn number<N: std::str::FromStr>(arg: &str, value: &str) -> Result<N, OptionError> {
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(number) = value.parse() {
            return Ok(number);
        }
    }
    Err(bad(
        arg,
        format!("invalid integer value '{value}' (should be 0 or more)"),
    ))
}

/// An output file name: not empty (its `%` sequences are checked later).
fn file_name(arg: &str, value: &str) -> Result<String, OptionError> {
    if value.is_empty() {
        return Err(bad(arg, "no file name given"));
    }
    Ok(value.to_string())
}

/// A function name pattern: not empty.
/// N of an option `NAMEN` (`--separate-recs3` for `--separate-recs`): a
/// setting for the functions the option's value names.
fn per_function(option: &str, name: &str) -> Option<u32> {
    let digits = option.strip_prefix(name)?;
    match digits.bytes().all(|byte| byte.is_ascii_digit()) && !digits.is_empty() {
        true => digits.parse().ok(),
        false => None,
    }
}

/// The comma-separated patterns of `value`, as Valgrind splits them (empty
/// ones left out).
fn patterns(value: &str) -> impl Iterator<Item = String> + '_ {
    value
        .split(',')
        .filter(|field| !field.is_empty())
        .map(str::to_string)
}

fn pattern(arg: &str, value: &str) -> Result<String, OptionError> {
    if value.is_empty() {
        return Err(bad(arg, "no pattern given"));
    }
    Ok(value.to_string())
}

/// `size,assoc,line_size`, checked as Valgrind checks it (the line size a power
/// of two of at least 16 bytes, the number of sets a power of two, …).
fn cache(arg: &str, level: CacheLevel, value: &str) -> Result<CacheConfig, OptionError> {
    CacheConfig::parse_option(level, value).map_err(|error| {
        let reason = match error {
            ConfigError::Syntax { .. } => {
                "expected size,assoc,line_size: three whole numbers separated by commas".to_string()
            }
            ConfigError::OutOfRange { field, .. } => {
                format!("{field} must be a positive number below 2^31")
            }
            ConfigError::Geometry { reason, .. } => reason.to_string(),
        };
        bad(arg, reason)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<OsString> {
        text.split_whitespace().map(OsString::from).collect()
    }

    fn ok(text: &str) -> Options {
        match parse(&args(text)) {
            Ok(options) => options,
            Err(error) => panic!("{text}: {error}"),
        }
    }

    fn error(text: &str) -> String {
        match parse(&args(text)) {
            Ok(options) => panic!("{text}: accepted as {options:?}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn defaults_are_valgrinds() {
        let options = ok("./prog");
        assert_eq!(options, Options::new("./prog".into()));
        assert_eq!(options.tool, Tool::Callgrind);
        assert_eq!(options.out_file(), "callgrind.out.%p");
        assert_eq!(options.separate_recs, 2);
        assert!(options.dump_line && options.skip_plt && options.compress_strings);
    }

    #[test]
    fn options_stop_at_the_program() {
        let options = ok("-q --dump-instr=yes prog -v --foo x");
        assert_eq!(options.program, "prog");
        assert_eq!(options.args, args("-v --foo x"));
        assert_eq!(options.verbosity, 0);
        assert!(options.dump_instr);
    }

    #[test]
    fn every_callgrind_option() {
        let options = ok(
            "--tool=callgrind --callgrind-out-file=out.%p --dump-instr=yes \
             --dump-line=no --compress-strings=no --compress-pos=no --collect-jumps=yes \
             --separate-recs=10 --separate-callers=3 --separate-threads=yes --skip-plt=no \
             --fn-skip=a* --fn-skip=b --toggle-collect=main --collect-atstart=no \
             --instr-atstart=no --combine-dumps=yes --trace-children=yes -v -v \
             --cache-sim=no --branch-sim=yes --cacheuse=no --I1=32768,8,64 \
             --cacheuse-inclusive=no --backend=step p",
        );
        let mut expected = Options::new("p".into());
        expected.out_file = Some("out.%p".into());
        expected.dump_instr = true;
        expected.dump_line = false;
        expected.compress_strings = false;
        expected.compress_pos = false;
        expected.collect_jumps = true;
        expected.separate_recs = 10;
        expected.separate_callers = 3;
        expected.separate_threads = true;
        expected.skip_plt = false;
        expected.fn_skip = vec!["a*".into(), "b".into()];
        expected.toggle_collect = vec!["main".into()];
        expected.collect_atstart = false;
        expected.instr_atstart = false;
        expected.combine_dumps = true;
        expected.trace_children = true;
        expected.verbosity = 3;
        expected.backend = Backend::Step;
        // --cacheuse=no and --I1 turn the cache simulation on, as in Callgrind.
        expected.cache_sim = true;
        expected.branch_sim = true;
        expected.cacheuse_inclusive = false;
        expected.i1 = Some(CacheConfig::new(32768, 8, 64));
        assert_eq!(options, expected);
    }

    #[test]
    fn cachegrind_has_its_own_options() {
        let options = ok("--cachegrind-out-file=cg.out --tool=cachegrind --LL=1048576,16,64 p");
        assert_eq!(options.tool, Tool::Cachegrind);
        assert_eq!(options.out_file(), "cg.out");
        assert_eq!(ok("--tool=cachegrind p").out_file(), "cachegrind.out.%p");
        assert_eq!(
            error("--tool=cachegrind --dump-instr=yes p"),
            "unknown option: --dump-instr=yes"
        );
        assert_eq!(
            error("--tool=cachegrind --callgrind-out-file=x p"),
            "unknown option: --callgrind-out-file=x"
        );
        assert_eq!(
            error("--cachegrind-out-file=x p"),
            "unknown option: --cachegrind-out-file=x"
        );
    }

    #[test]
    fn naming_options_are_valgrinds() {
        let options = ok("p");
        assert!(options.demangle && !options.show_below_main);
        let options = ok("--demangle=no --show-below-main=yes p");
        assert!(!options.demangle && options.show_below_main);
        assert_eq!(ok("--skip-direct-rec=no p"), ok("p"));
        assert!(ok("--skip-direct-rec=yes p").skip_direct_rec);
        let pops = ok("--pop-on-jump --pop-on-jump=f* --pop-on-jump=g p");
        assert!(pops.pop_on_jump && pops.pop_on_jump_of == ["f*", "g"]);
        let pattern = ok("--pop-on-jump=yes p");
        assert!(!pattern.pop_on_jump && pattern.pop_on_jump_of == ["yes"]);
        assert_eq!(
            error("--tool=cachegrind --pop-on-jump p"),
            "unknown option: --pop-on-jump"
        );
        assert!(error("--demangle=0 p").contains("should be 'yes' or 'no'"));
        assert!(error("--demangle p").contains("say =yes or =no"));
        let places = ok("--extra-debuginfo-path=/opt/debug --allow-mismatched-debuginfo=yes p");
        let expected = cgx_engine::symbols::DebugPlaces {
            extra: Some("/opt/debug".into()),
            allow_mismatched: true,
        };
        assert_eq!(places.debug_places, expected);
        assert_eq!(ok("p").debug_places, Default::default());
        assert!(error("--extra-debuginfo-path= p").contains("no file name given"));
        assert!(error("--allow-mismatched-debuginfo=1 p").contains("should be 'yes' or 'no'"));
    }

    #[test]
    fn core_options_that_change_nothing_here_are_checked_and_accepted() {
        // As iai-callgrind passes them.
        let options = ok("--tool=callgrind --error-exitcode=0 --fair-sched=try \
                          --num-callers=12 --read-var-info=no p");
        assert_eq!(options, ok("--tool=callgrind p"));
        assert_eq!(
            ok("--tool=cachegrind --fair-sched=yes p"),
            ok("--tool=cachegrind p")
        );
        assert_eq!(
            error("--error-exitcode=x p"),
            "bad option: --error-exitcode=x: invalid integer value 'x' (should be 0 or more)"
        );
        assert_eq!(
            error("--fair-sched=maybe p"),
            "bad option: --fair-sched=maybe: invalid value 'maybe' (should be 'no', 'yes' or 'try')"
        );
        assert_eq!(
            error("--num-callers=0 p"),
            "bad option: --num-callers=0: must be between 1 and 500"
        );
        assert!(error("--read-var-info=1 p").contains("should be 'yes' or 'no'"));
        let more = "--vgdb=no --vgdb-error=0 --read-inline-info=yes \
                    --child-silent-after-fork=yes --smc-check=all-non-file p";
        assert_eq!(ok(more), ok("p"));
        assert_eq!(
            error("--smc-check=some p"),
            "bad option: --smc-check=some: invalid value 'some' \
             (should be 'none', 'stack', 'all' or 'all-non-file')"
        );
        assert!(error("--vgdb=maybe p").contains("should be 'no', 'yes' or 'full'"));
        let rest = "--error-limit=no --exit-on-first-error=no --show-error-list=no \
                    --default-suppressions=yes --keep-debuginfo=no --run-libc-freeres=no \
                    --run-cxx-freeres=yes --gen-suppressions=all --track-fds=yes \
                    --main-stacksize=16777216 --max-stackframe=2000000 --max-threads=500 \
                    --num-transtab-sectors=24 --valgrind-stacksize=1048576 \
                    --suppressions=a.supp --error-markers=begin,end --fullpath-after= \
                    --sim-hints=no-nptl-pthread-stackcache --xml=no --vgdb-stop-at=none p";
        assert_eq!(ok(rest), ok("p"));
        assert_eq!(
            ok(&format!("--tool=cachegrind {rest}")),
            ok("--tool=cachegrind p")
        );
        assert_eq!(
            error("--xml=yes p"),
            "bad option: --xml=yes: Callgrind and Cachegrind have no XML output"
        );
        assert!(error("--error-limit=1 p").contains("should be 'yes' or 'no'"));
        assert!(error("--main-stacksize=big p").contains("invalid integer value 'big'"));
        assert!(error("--track-fds=some p").contains("should be 'no', 'yes' or 'all'"));
        assert_eq!(
            error("--suppressions= p"),
            "bad option: --suppressions=: no file name given"
        );
    }

    #[test]
    fn the_log_goes_to_a_file_or_a_descriptor() {
        assert_eq!(ok("p").log, LogOption::Fd(2));
        assert_eq!(
            ok("--log-file=log.%p p").log,
            LogOption::File("log.%p".into())
        );
        assert_eq!(ok("--log-fd=1 p").log, LogOption::Fd(1));
        assert_eq!(ok("--log-file=x --log-fd=2 p").log, LogOption::Fd(2));
        assert_eq!(
            error("--log-fd=5 p"),
            "bad option: --log-fd=5: cgx writes its messages to fd 1 or 2 only"
        );
        assert!(
            error("--log-socket=127.0.0.1:1500 p").contains("not send its messages to a socket")
        );
        assert_eq!(
            error("--log-file= p"),
            "bad option: --log-file=: no file name given"
        );
    }

    #[test]
    fn write_back_and_prefetch_are_callgrind_cache_options() {
        let options = ok("--simulate-wb=yes --simulate-hwpref=yes p");
        assert!(options.simulate_wb && options.simulate_hwpref && options.cache_sim);
        // Either value turns the cache simulation on, as in Valgrind; a
        // later --cache-sim=no wins.
        assert!(ok("--simulate-wb=no p").cache_sim);
        assert!(ok("--simulate-hwpref=no p").cache_sim);
        // Sectors are not simulated: the option only turns the caches on.
        let sectors = ok("--simulate-sectors=yes p");
        assert!(sectors.cache_sim && !sectors.simulate_wb && !sectors.simulate_hwpref);
        assert!(error("--simulate-sectors=maybe p").contains("invalid boolean value"));
        let off = ok("--simulate-wb=yes --cache-sim=no p");
        assert!(off.simulate_wb && !off.cache_sim);
        assert_eq!(
            error("--simulate-wb p"),
            "unknown option: --simulate-wb (say =yes or =no, as Valgrind)"
        );
        assert!(error("--simulate-hwpref=maybe p").starts_with("bad option"));
        // Cachegrind has neither.
        assert_eq!(
            error("--tool=cachegrind --simulate-wb=yes p"),
            "unknown option: --simulate-wb=yes"
        );
    }

    #[test]
    fn unknown_options_are_refused() {
        assert_eq!(error("--foo p"), "unknown option: --foo");
        // Callgrind's options cgx does not support: said so, not unknown.
        for option in [
            "--dump-bb=yes",
            "--dump-bbs=yes",
            "--collect-alloc=yes",
            "--mangle-names=no",
            "--fn-group3=main",
            "--ct-verbose=1",
            "--ct-verbose2=main",
        ] {
            assert_eq!(
                error(&format!("{option} p")),
                format!(
                    "bad option: {option}: an option of Callgrind 3.19 that cgx does not support"
                )
            );
        }
        assert_eq!(error("--fn-groupx=f p"), "unknown option: --fn-groupx=f");
        assert_eq!(error("--fn-group=f p"), "unknown option: --fn-group=f");
        assert_eq!(error("--fn-group0=f p"), "unknown option: --fn-group0=f");
        assert_eq!(
            error("--tool=cachegrind --dump-bb=yes p"),
            "unknown option: --dump-bb=yes"
        );
        assert_eq!(error("-q=yes p"), "unknown option: -q=yes");
        assert_eq!(
            error("--dump-instr p"),
            "unknown option: --dump-instr (say =yes or =no, as Valgrind)"
        );
        assert_eq!(error("--tool p"), "unknown option: --tool");
    }

    #[test]
    fn values_are_checked() {
        assert_eq!(
            error("--dump-instr=maybe p"),
            "bad option: --dump-instr=maybe: invalid boolean value 'maybe' (should be 'yes' or 'no')"
        );
        assert_eq!(
            error("--dump-instr=YES p"),
            "bad option: --dump-instr=YES: invalid boolean value 'YES' (should be 'yes' or 'no')"
        );
        for value in ["x", "-1", "", "+3", "99999999999"] {
            assert_eq!(
                error(&format!("--separate-recs={value} p")),
                format!(
                    "bad option: --separate-recs={value}: invalid integer value '{value}' (should be 0 or more)"
                )
            );
        }
        assert_eq!(
            error("--tool=memcheck p"),
            "bad option: --tool=memcheck: cgx has the tools callgrind and cachegrind"
        );
        assert_eq!(
            error("--backend=fast p"),
            "bad option: --backend=fast: unknown backend 'fast' (the backends are 'step' \
             and 'translate')"
        );
        assert_eq!(
            error("--callgrind-out-file= p"),
            "bad option: --callgrind-out-file=: no file name given"
        );
        assert_eq!(
            error("--fn-skip= p"),
            "bad option: --fn-skip=: no pattern given"
        );
    }

    #[test]
    fn cache_geometries_are_checked() {
        assert_eq!(
            error("--I1=32768,3,64 p"),
            "bad option: --I1=32768,3,64: the number of sets, size / (line size × \
             associativity), is not a whole power of two"
        );
        assert_eq!(
            error("--D1=1024,1,8 p"),
            "bad option: --D1=1024,1,8: the line size is smaller than 16 bytes"
        );
        assert_eq!(
            error("--LL=98304,1,96 p"),
            "bad option: --LL=98304,1,96: the line size is not a power of two"
        );
        assert_eq!(
            error("--LL=64,1,64 p"),
            "bad option: --LL=64,1,64: the cache size is not larger than the line size"
        );
        assert_eq!(
            error("--I1=32768,8 p"),
            "bad option: --I1=32768,8: expected size,assoc,line_size: three whole numbers \
             separated by commas"
        );
        assert_eq!(
            error("--D1=99999999999,8,64 p"),
            "bad option: --D1=99999999999,8,64: size must be a positive number below 2^31"
        );
        for value in ["1,2", "a,b,c", "1,2,3,4", "", "0,1,64", "32768,-8,64"] {
            assert!(error(&format!("--LL={value} p"))
                .starts_with(&format!("bad option: --LL={value}: ")));
        }
        // Valgrind's old spelling of --LL.
        assert_eq!(
            ok("--L2=262144,8,64 p").ll,
            Some(CacheConfig::new(262144, 8, 64))
        );
        // Valgrind's parser allows blanks and signs.
        assert_eq!(
            ok("--tool=cachegrind --I1=+32768,8,64 p").i1,
            Some(CacheConfig::new(32768, 8, 64))
        );
    }

    /// (cache_sim, branch_sim, cacheuse, dump_instr) of a command line.
    fn simulations(text: &str) -> (bool, bool, bool, bool) {
        let options = ok(text);
        (
            options.cache_sim,
            options.branch_sim,
            options.cacheuse,
            options.dump_instr,
        )
    }

    #[test]
    fn simulation_defaults_are_valgrind_3_19s() {
        assert_eq!(simulations("p"), (false, false, false, false));
        assert_eq!(
            simulations("--tool=cachegrind p"),
            (true, false, false, false)
        );
        assert_eq!(
            simulations("--tool=cachegrind --cache-sim=no --branch-sim=yes p"),
            (false, true, false, false)
        );
        assert_eq!(
            simulations("--cache-sim=yes --branch-sim=yes p"),
            (true, true, false, false)
        );
        assert!(ok("p").cacheuse_inclusive);
        assert!(!ok("p").configures_caches());
        assert!(ok("--cache-sim=yes p").configures_caches());
        assert!(ok("--tool=cachegrind --cache-sim=no p").configures_caches());
        assert!(!ok("--branch-sim=yes p").configures_caches());
    }

    #[test]
    fn cache_options_turn_callgrinds_cache_simulation_on() {
        // --cacheuse=yes: cache simulation and instruction positions.
        assert_eq!(simulations("--cacheuse=yes p"), (true, false, true, true));
        // Any cache option does, at its place on the command line (Valgrind
        // 3.19 does exactly this).
        assert_eq!(simulations("--cacheuse=no p"), (true, false, false, false));
        assert_eq!(
            simulations("--LL=262144,8,64 p"),
            (true, false, false, false)
        );
        assert_eq!(
            simulations("--LL=262144,8,64 --cache-sim=no p"),
            (false, false, false, false)
        );
        assert_eq!(
            simulations("--cacheuse=yes --dump-instr=no p"),
            (true, false, true, false)
        );
        assert_eq!(
            simulations("--dump-instr=no --cacheuse=yes p"),
            (true, false, true, true)
        );
        assert_eq!(
            simulations("--cacheuse=yes --cache-sim=no p"),
            (false, false, true, true)
        );
        assert_eq!(
            simulations("--simulate-cache=yes p"),
            (true, false, false, false)
        );
        // Not for Cachegrind's --I1.
        assert_eq!(
            simulations("--tool=cachegrind --cache-sim=no --I1=32768,8,64 p"),
            (false, false, false, false)
        );
    }

    #[test]
    fn cacheuse_is_callgrinds() {
        assert_eq!(
            error("--tool=cachegrind --cacheuse=no p"),
            "unknown option: --cacheuse=no"
        );
        assert_eq!(
            error("--tool=cachegrind --cacheuse-inclusive=no p"),
            "unknown option: --cacheuse-inclusive=no"
        );
        assert_eq!(
            error("--cacheuse-inclusive p"),
            "unknown option: --cacheuse-inclusive (say =yes or =no, as Valgrind)"
        );
        assert_eq!(
            error("--cacheuse=1 p"),
            "bad option: --cacheuse=1: invalid boolean value '1' (should be 'yes' or 'no')"
        );
        assert!(!ok("--cacheuse-inclusive=no p").cacheuse_inclusive);
    }

    #[test]
    fn backends() {
        assert_eq!(ok("p").backend, Backend::Translate);
        assert_eq!(ok("--backend=step p").backend, Backend::Step);
        assert_eq!(ok("--backend=translate p").backend, Backend::Translate);
        assert_eq!(
            ok("--backend=translate --backend=step p").backend,
            Backend::Step
        );
        assert_eq!(
            ok("--tool=cachegrind --cache-sim=no --backend=translate p").backend,
            Backend::Translate
        );
        assert!(ok("--backend=translate --dump-instr=yes --collect-jumps=yes p").dump_instr);
        assert_eq!(
            error("--backend= p"),
            "bad option: --backend=: unknown backend '' (the backends are 'step' and 'translate')"
        );
        assert_eq!(error("--backend p"), "unknown option: --backend");
    }

    #[test]
    fn the_translate_backend_takes_simulations() {
        for text in [
            "--backend=translate --cache-sim=yes p",
            "--backend=translate --branch-sim=yes p",
            "--backend=translate --cacheuse=yes p",
            "--tool=cachegrind --backend=translate p",
        ] {
            let options = ok(text);
            assert_eq!(options.backend, Backend::Translate, "{text}");
            assert!(options.simulations(), "{text}");
        }
        // A later --cache-sim=no wins, as always.
        assert!(!ok("--backend=translate --LL=262144,8,64 --cache-sim=no p").simulations());
        assert!(!ok("--tool=cachegrind --cache-sim=no p").simulations());
    }

    #[test]
    fn a_program_is_needed() {
        assert_eq!(
            error("-q --dump-instr=yes"),
            "no program specified (usage: cgx run [OPTIONS] PROGRAM [ARGS...])"
        );
        assert_eq!(error(""), error("-v"));
    }

    #[test]
    fn options_for_some_functions_carry_their_number() {
        assert_eq!(per_function("--separate-recs3", "--separate-recs"), Some(3));
        assert_eq!(
            per_function("--separate-callers12", "--separate-callers"),
            Some(12)
        );
        assert_eq!(per_function("--separate-recs", "--separate-recs"), None);
        assert_eq!(per_function("--separate-recsx", "--separate-recs"), None);
        assert_eq!(per_function("--separate-threads", "--separate-recs"), None);
        let options = ok("--separate-recs3=fib --separate-callers2=f* x");
        assert_eq!(options.separate_recs_of, [("fib".to_string(), 3)]);
        assert_eq!(options.separate_callers_of, [("f*".to_string(), 2)]);
    }

    #[test]
    fn arguments_that_are_not_utf8() {
        use std::os::unix::ffi::OsStrExt;
        let odd = std::ffi::OsStr::from_bytes(b"--x\xff").to_os_string();
        let error = parse(&[odd, "p".into()]).map(drop);
        assert_eq!(
            error,
            Err(OptionError::Unknown {
                option: "--x\u{fffd}".into(),
                hint: ""
            })
        );
        let program = std::ffi::OsStr::from_bytes(b"./\xff").to_os_string();
        let options = parse(&[program.clone(), "\u{e9}".into()]);
        assert_eq!(options.map(|o| o.program), Ok(program));
    }
}
