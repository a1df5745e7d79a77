//! `cgx run [VALGRIND OPTIONS] PROGRAM [ARGS...]`: runs a program under cgx and
//! writes its profiles, as `valgrind --tool=callgrind|cachegrind` does.
//!
//! One module per job: [`options`] reads Valgrind's command line, [`caches`]
//! detects the simulated caches, [`outfile`] names the files, [`trace`] runs
//! the engine with the collector, [`output`] writes the dumps and [`summary`]
//! words what is printed on stderr.

mod caches;
pub mod defaults;
mod log;
mod options;
mod outfile;
mod output;
mod summary;
#[cfg(test)]
mod summary_fixtures;
mod trace;

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{anyhow, Result};
use cgx_callstack::{Collector, Dump};
use cgx_engine::Exit;
use cgx_sim::CachesConfig;

use log::Log;
use options::{Backend, LogOption, Options, Tool};
use outfile::Template;
use output::Output;

/// Arguments of `cgx run`: Valgrind's options, then the program and its arguments.
#[derive(clap::Args)]
#[command(
    after_help = OPTIONS_HELP,
    override_usage = "cgx run [OPTIONS] PROGRAM [ARGS]..."
)]
pub struct RunArgs {
    /// Valgrind-style options (listed below), then the program and its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<OsString>,
}

/// The options of `cgx run`, for `cgx run --help`.
pub const OPTIONS_HELP: &str = "\
Options (Valgrind's spellings; booleans are =yes or =no; they end at the program's name):
  --tool=callgrind|cachegrind   the profile to write [callgrind]
  --callgrind-out-file=NAME     [callgrind.out.%p]; %p process id, %q{VAR} environment
  --cachegrind-out-file=NAME    [cachegrind.out.%p]  variable, %% a percent sign
  --log-file=NAME               Valgrind's messages to a file per process (%p, %q{VAR})
  --log-fd=1|2                  Valgrind's messages to stdout or stderr [2]
  -q, --quiet                   print nothing but errors
  -v, --verbose                 also print the name of every file written
  --trace-children=no|yes       follow execve into new programs [no]
  --trace-children-skip=PATTERN,...         ... but not into the programs these name
  --trace-children-skip-by-arg=PATTERN,...  ... nor those with an argument they match
  --time-stamp=no|yes           messages carry the time since the start [no]
  --demangle=yes|no             C++ and Rust function names demangled [yes]
  --show-below-main=no|yes      the functions calling main by their names [no:
                                (below main)]
  --extra-debuginfo-path=FOLDER debug files also under FOLDER at their object's
                                folder (FOLDER/usr/bin/prog.debug for /usr/bin/prog)
  --allow-mismatched-debuginfo=no|yes  if no debug file is found, take FOLDER's
                                copy of the object's path, unchecked [no]
  --error-exitcode=N, --fair-sched=no|yes|try, --num-callers=N, --read-var-info=no|yes,
  --read-inline-info=no|yes, --child-silent-after-fork=no|yes, --vgdb=no|yes|full,
  --vgdb-error=N, --smc-check=none|stack|all|all-non-file, and the rest of Valgrind's
  core options for its other tools, its debugger, its code cache, stacks and threads
  (--error-limit, --suppressions, --track-fds, --main-stacksize, --max-threads, ...)
                                checked and accepted as Valgrind's; they change nothing
                                here (these tools report no errors; threads run at once;
                                there is no gdbserver; rewritten code is always checked
                                where it can change)
  --machine=valgrind|host       the machine the program sees [valgrind]:
                                valgrind: as under Valgrind, so libc takes the same
                                paths: cpuid describes Valgrind's processor as this
                                host runs it (the xsave area of leaf 0xd is the host's;
                                the host's own cpuid if it lacks an instruction set
                                Valgrind's announces), there is no vDSO, and
                                clone3 fails (ENOSYS), as Valgrind has none;
                                host: this machine as it is;
                                on both, rseq fails (ENOSYS) as under Valgrind
  --backend=translate|step      how the program is traced [translate]:
                                translate: runs instrumented copies of the program's
                                code from a cache in its memory (fast). It traces
                                threads, fork, vfork and exec, with every simulation;
                                a program it cannot handle (one that uses the gs
                                segment, ...) stops it with an error (exit 1) and its
                                profile is not to be trusted;
                                step: single steps every instruction (exact, slow:
                                about 60,000 instructions a second; the reference)
  --cache-sim=yes|no            simulate the I1, D1 and LL caches: Ir Dr Dw I1mr D1mr
                                D1mw ILmr DLmr DLmw [callgrind: no; cachegrind: yes,
                                Valgrind 3.19's default]
  --branch-sim=no|yes           simulate the branch predictors: Bc Bcm Bi Bim [no]
  --I1=SIZE,ASSOC,LINE_SIZE     the simulated caches, in bytes [detected with CPUID
  --D1=SIZE,ASSOC,LINE_SIZE     as Valgrind does]; for callgrind they turn the cache
  --LL=SIZE,ASSOC,LINE_SIZE     simulation on, as in Valgrind
Callgrind only:
  --cacheuse=no|yes             cache use: AcCost1 SpLoss1 AcCost2 SpLoss2; turns the
                                cache simulation and --dump-instr on, as in Valgrind
                                (and, as there, --cacheuse=no turns the former on)
  --cacheuse-inclusive=yes|no   exact inclusive cache-use costs [yes] (cgx's own;
                                no gives Valgrind's zero inclusive costs, to compare)
  --simulate-wb=no|yes          write-back LL: ILdmr DLdmr DLdmw, misses evicting a
                                dirty line; turns the cache simulation on (either
                                value), off with --cacheuse=yes, as in Valgrind
  --simulate-hwpref=no|yes      hardware prefetch of sequential streams into LL;
                                turns the cache simulation on, off with --cacheuse=yes
  --simulate-sectors=no|yes     accepted as by Valgrind, which simulates no sectors:
                                turns the cache simulation on
  --dump-instr=no|yes           positions by instruction address [no]
  --dump-line=yes|no            positions by source line [yes]
  --compress-strings=yes|no     name compression [yes]
  --compress-pos=yes|no         relative positions [yes]
  --collect-jumps=no|yes        jump= and jcnd= lines [no]
  --separate-recs=N             recursion levels as fn'2 ... [2]
  --separate-callers=N          callers in names [0]
  --separate-recsN=PATTERN      N recursion levels for these functions
  --separate-callersN=PATTERN   N callers in the names of these functions
  --separate-threads=no|yes     one file per thread, NAME-01, NAME-02 ... [no]
  --skip-direct-rec=no|yes      yes: a function calling itself is no new recursion
                                level [no, as Callgrind 3.19 does, whose help says yes]
  --skip-plt=yes|no             PLT stubs' cost goes to their caller [yes]
  --pop-on-jump                 a jump from a function into another is its return
                                and a call from its caller
  --pop-on-jump=PATTERN         ... from these functions only
  --fn-skip=PATTERN             functions whose cost goes to their caller
  --obj-skip=PATTERN            every function of these objects (path or file
                                name), as --fn-skip (not in Valgrind 3.19)
  --toggle-collect=PATTERN      collection toggles inside these functions
  --dump-before=PATTERN         a dump when entering these functions
  --dump-after=PATTERN          a dump when leaving these functions
  --zero-before=PATTERN         zero the costs when entering these functions
  --dump-every-bb=N             a dump every N blocks [0: never]
  --collect-atstart=yes|no      collect from the start [yes]
  --instr-atstart=yes|no        instrument from the start [yes]
  --combine-dumps=no|yes        all dumps of a process in one file [no]
  --collect-bus=no|yes          Ge: atomic read-modify-writes [no]
  --collect-systime=no|yes|msec|usec|nsec
                                sysCount sysTime: system calls and their wall
                                time in the unit (yes: msec); nsec adds
                                sysCpuTime, the thread's CPU time [no]
The caches' warnings (--PID-- warning: ...) come even with -q, as from Valgrind.

Files: NAME for the profile of each process; NAME.N for the Nth dump a program asked
for (CALLGRIND_DUMP_STATS); NAME-NN for thread NN with --separate-threads=yes. The
folder is checked before the program starts. cgx exits with the program's exit code,
128+N when it was killed by signal N (its profile is written all the same), 127 or 126
when it cannot be started, 1 when it cannot be traced (a 32-bit program, another
processor's, ptrace forbidden) and for errors of cgx (a profile that could not be
written: then at least 1). SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGALRM, SIGUSR1,
SIGUSR2, SIGTSTP and SIGCONT sent to cgx are passed on to the program; Ctrl-Z stops
the program and cgx, and a stopped program stays stopped until SIGCONT. An execve without
--trace-children=yes ends the process's profile, with a line saying so.";

/// Runs `cgx run`: returns the program's exit code, or an error of cgx.
pub fn run(args: &RunArgs) -> Result<ExitCode> {
    let args = defaults::with_defaults(&defaults::Sources::read(), &args.args, "callgrind");
    run_with_defaults(&args)
}

/// [`run`] on a command line that has Valgrind's default options already
/// (see [`defaults`]).
pub fn run_with_defaults(args: &[OsString]) -> Result<ExitCode> {
    let options = options::parse(args)?;
    cgx_engine::symbols::look_for_debug_files(options.debug_places.clone());
    let template = Template::from_env(options.out_file()).map_err(|error| {
        anyhow!(
            "bad option: {}={}: {error}",
            options.out_file_option(),
            options.out_file()
        )
    })?;
    template.check_writable(std::process::id() as i32)?;
    let log = match &options.log {
        LogOption::Fd(1) => log::Destination::Stdout,
        LogOption::Fd(_) => log::Destination::Stderr,
        LogOption::File(name) => {
            let log = Template::from_env(name)
                .map_err(|error| anyhow!("bad option: --log-file={name}: {error}"))?;
            log.check_writable(std::process::id() as i32)?;
            log::Destination::File(log)
        }
    };
    // As Valgrind: the caches are configured (and their warnings known)
    // before the program starts; an unusable one stops the run here.
    let caches = if options.configures_caches() {
        Some(caches::detect(&options)?)
    } else {
        None
    };
    let (command_line, shown) = command_lines(&options);
    let filter = caches
        .as_ref()
        .and_then(|setup| l1_filter(&options, &setup.config));
    let collector = Collector::new(collector_options(
        &options,
        command_line.clone(),
        caches.as_ref().map(|setup| setup.config),
        filter.is_some(),
    ))?;
    let control = options.serves_control().then(|| command_line.clone());
    let log = match options.time_stamp {
        true => Log::new(log).stamped(std::time::Instant::now()),
        false => Log::new(log),
    };
    let mut output = Output::new(&options, template, shown, caches, log);
    let command = cgx_engine::Command::new(&options.program).args(&options.args);
    let mut listener = Report {
        output: &mut output,
        failed: false,
    };
    let run_options = cgx_engine::RunOptions {
        trace_children: options.trace_children,
        trace_children_skip: options.trace_children_skip.clone(),
        trace_children_skip_by_arg: options.trace_children_skip_by_arg.clone(),
        // Cachegrind's branches are counted on its superblocks.
        superblocks: options.tool == Tool::Cachegrind,
        valgrind_machine: options.valgrind_machine,
        simulations: options.simulations(),
        branches: options.branch_sim,
        counts_only: options.tool == Tool::Cachegrind && !options.simulations(),
        quiet_runs: collector.options().quiet_runs(),
        job_control: true,
        system_calls: options.collect_systime.clocks(),
        filter,
    };
    let result = trace::trace(
        &command,
        &run_options,
        options.backend,
        collector,
        &mut listener,
        control,
    );
    let collector_failed = listener.failed;
    output.finish();
    let failed = collector_failed || output.failed();
    match result {
        Ok(exit) => {
            let code = exit_code(exit);
            Ok(ExitCode::from(if failed && code == 0 { 1 } else { code }))
        }
        Err(error) => match error.shell_exit_code() {
            Some(code) => {
                eprintln!("cgx: {error}");
                Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
            }
            None if options.backend == Backend::Translate => Err(anyhow!(
                "{}",
                translate_failure(&options.program, &error, output.written())
            )),
            None => Err(error.into()),
        },
    }
}

/// The filter of first-level cache hits the translate backend runs with,
/// when the options allow it ([`filters`]) and this host and `caches`
/// too (see [`cgx_engine::L1Filter`]).
fn l1_filter(options: &Options, caches: &CachesConfig) -> Option<cgx_engine::L1Filter> {
    let geometry = |cache: &cgx_sim::CacheConfig| cgx_engine::FilterGeometry {
        line_size: cache.line_size,
        sets: cache.sets(),
        ways: cache.assoc,
    };
    let (i1, d1) = (geometry(&caches.i1), geometry(&caches.d1));
    filters(options)
        .then(|| cgx_engine::L1Filter::for_host(i1, d1, caches.min_line_size()))
        .flatten()
}

/// Whether `options` let the translate backend filter the first-level
/// caches' hits: Cachegrind's cache simulation alone (no branch
/// simulation), or Callgrind's with no write-back or prefetch, no timed
/// system calls (a timed call's block is reported on its own, apart from
/// the runs whose records keep their misses) and the collector's options
/// with which runs keep their context (`Options::quiet_runs`).
fn filters(options: &Options) -> bool {
    let tool = match options.tool {
        Tool::Cachegrind => !options.branch_sim,
        Tool::Callgrind => {
            !options.simulate_wb
                && !options.simulate_hwpref
                && options.collect_systime == cgx_callstack::SystemTime::No
                && collector_options(options, String::new(), None, true).quiet_runs()
        }
    };
    tool && options.cache_sim && options.backend == Backend::Translate
}

/// The message for a run of `program` the translate backend could not
/// finish: what it could not handle, and that a profile it wrote is
/// incomplete.
fn translate_failure(program: &OsStr, error: &cgx_engine::Error, written: bool) -> String {
    let profile = if written {
        "the profile written is incomplete and cannot be trusted"
    } else {
        "no profile was written"
    };
    format!(
        "{}: --backend=translate cannot trace this program: {error}; {profile} \
         (--backend=step can)",
        Path::new(program).display()
    )
}

/// The command line as a profile's `cmd:` line and `callgrind_control`
/// show it (see [`cgx_callstack::command_line`]), and as Valgrind's
/// `Command:` line does ([`summary::shown_command`]).
fn command_lines(options: &Options) -> (String, String) {
    let program = options.program.to_string_lossy();
    let args: Vec<_> = options
        .args
        .iter()
        .map(|arg| arg.to_string_lossy())
        .collect();
    (
        cgx_callstack::command_line(&program, &args),
        summary::shown_command(&program, &args),
    )
}

/// The collector's options for this run, simulating `caches` (when they were
/// configured), with the backend filtering first-level hits when
/// `filtered`. Cachegrind has no dumps on request nor threads: all of a
/// process goes into one file (combined parts, added up when converted), and
/// costs are attributed as Cachegrind does.
fn collector_options(
    options: &Options,
    command: String,
    caches: Option<CachesConfig>,
    filtered: bool,
) -> cgx_callstack::Options {
    let cachegrind = options.tool == Tool::Cachegrind;
    cgx_callstack::Options {
        separate_recursions: options.separate_recs,
        separate_callers: options.separate_callers,
        separate_recursions_of: options.separate_recs_of.clone(),
        separate_callers_of: options.separate_callers_of.clone(),
        separate_threads: options.separate_threads,
        skip_plt: options.skip_plt,
        skip_direct_recursion: options.skip_direct_rec,
        demangle: options.demangle,
        show_below_main: options.show_below_main,
        fn_skip: options.fn_skip.clone(),
        obj_skip: options.obj_skip.clone(),
        toggle_collect: options.toggle_collect.clone(),
        pop_on_jump: options.pop_on_jump,
        pop_on_jump_of: options.pop_on_jump_of.clone(),
        dump_before: options.dump_before.clone(),
        dump_after: options.dump_after.clone(),
        zero_before: options.zero_before.clone(),
        dump_every_bb: options.dump_every_bb,
        collect_atstart: options.collect_atstart,
        instr_atstart: options.instr_atstart,
        dump_instr: options.dump_instr,
        dump_line: options.dump_line,
        collect_jumps: options.collect_jumps,
        combine_dumps: options.combine_dumps || cachegrind,
        cachegrind,
        command,
        cache_sim: options.cache_sim,
        branch_sim: options.branch_sim,
        cacheuse: options.cacheuse,
        cacheuse_inclusive: options.cacheuse_inclusive,
        collect_bus: options.collect_bus,
        collect_systime: options.collect_systime,
        extensions: cgx_sim::Extensions {
            write_back: options.simulate_wb,
            prefetch: options.simulate_hwpref,
        },
        caches: caches.unwrap_or_default(),
        filtered,
    }
}

/// The exit code for how the program ended: its own, or 128 + the signal.
fn exit_code(exit: Exit) -> u8 {
    match exit {
        Exit::Code(code) => u8::try_from(code & 0xff).unwrap_or(1),
        Exit::Signal { signal, .. } => u8::try_from(128 + signal).unwrap_or(255),
    }
}

/// Passes what happens during the run to the [`Output`].
struct Report<'a> {
    output: &'a mut Output,
    failed: bool,
}

impl trace::Listener for Report<'_> {
    fn process_started(&mut self, pid: i32) {
        self.output.started(pid);
    }

    fn dumps(&mut self, dumps: Vec<Dump>) {
        for dump in dumps {
            self.output
                .write(dump.pid, dump.sequence, dump.thread, &dump.profile);
        }
    }

    fn process_exited(&mut self, pid: i32, exit: Exit) {
        let signal = match exit {
            Exit::Code(_) => None,
            Exit::Signal { signal, .. } => Some(signal),
        };
        self.output.exited(pid, signal);
    }

    fn exec_untraced(&mut self, pid: i32, program: &std::path::Path) {
        self.output.exec_untraced(pid, program);
    }

    fn exec_traced(&mut self, pid: i32, name: &str, args: &[String]) {
        self.output.exec_traced(pid, name, args);
    }

    fn collector_failed(&mut self, error: cgx_callstack::Error) {
        eprintln!("cgx: {error}");
        self.failed = true;
    }

    fn statistics(&mut self, pid: i32, statistics: &cgx_backdate::Statistics) {
        self.output.statistics(pid, statistics);
    }

    fn translated(&mut self, pid: i32, translated: &trace::Translated) {
        self.output.translated(pid, translated);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_as_a_shell_gives_them() {
        assert_eq!(exit_code(Exit::Code(0)), 0);
        assert_eq!(exit_code(Exit::Code(3)), 3);
        assert_eq!(exit_code(Exit::Code(255)), 255);
        let killed = |signal| Exit::Signal {
            signal,
            core_dumped: false,
        };
        assert_eq!(exit_code(killed(11)), 139);
        assert_eq!(exit_code(killed(9)), 137);
        assert_eq!(exit_code(killed(64)), 192);
    }

    #[test]
    fn the_command_line_as_valgrind_shows_it() {
        let mut options = Options::new("./prog".into());
        options.args = vec!["a".into(), "b c".into()];
        let (cmd, shown) = command_lines(&options);
        assert_eq!(cmd, "./prog a b c");
        assert_eq!(shown, "./prog a b\\ c");
    }

    #[test]
    fn a_failure_of_the_translate_backend_says_what_it_means() {
        let error = cgx_engine::Error::Unexpected("translate: the program uses gs".into());
        assert_eq!(
            translate_failure(OsStr::new("./prog"), &error, true),
            "./prog: --backend=translate cannot trace this program: unexpected tracee state: \
             translate: the program uses gs; the profile written is incomplete and cannot \
             be trusted (--backend=step can)"
        );
        assert!(translate_failure(OsStr::new("./prog"), &error, false)
            .ends_with("; no profile was written (--backend=step can)"));
    }

    #[test]
    fn collector_options_follow_the_tool() {
        let mut options = Options::new("p".into());
        options.separate_recs = 5;
        options.fn_skip = vec!["f*".into()];
        let callgrind = collector_options(&options, "p".into(), None, false);
        assert_eq!(callgrind.separate_recursions, 5);
        assert_eq!(callgrind.fn_skip, ["f*"]);
        assert!(!callgrind.cachegrind && !callgrind.combine_dumps);
        assert_eq!(callgrind.command, "p");
        assert!(!callgrind.cache_sim && !callgrind.branch_sim && !callgrind.cacheuse);
        assert!(callgrind.cacheuse_inclusive);
        assert_eq!(callgrind.caches, CachesConfig::DEFAULT);
        options.tool = Tool::Cachegrind;
        let cachegrind = collector_options(&options, "p".into(), None, false);
        assert!(cachegrind.cachegrind && cachegrind.combine_dumps);
    }

    #[test]
    fn collector_options_carry_the_simulations() {
        let mut options = Options::new("p".into());
        options.cache_sim = true;
        options.branch_sim = true;
        options.cacheuse = true;
        options.cacheuse_inclusive = false;
        let caches = CachesConfig {
            ll: cgx_sim::CacheConfig::new(1 << 20, 16, 64),
            ..CachesConfig::DEFAULT
        };
        let collector = collector_options(&options, "p".into(), Some(caches), false);
        assert!(collector.cache_sim && collector.branch_sim && collector.cacheuse);
        assert!(!collector.cacheuse_inclusive);
        assert_eq!(collector.caches, caches);
        // Cache use without the cache simulation (--cacheuse=yes
        // --cache-sim=no): the events stay, with zeros, as in Valgrind.
        options.cache_sim = false;
        let collector = collector_options(&options, "p".into(), Some(caches), false);
        assert!(collector.cacheuse && !collector.cache_sim);
    }

    #[test]
    fn the_filter_takes_the_cache_simulations_alone() {
        let cache_sim = |tool: Tool| {
            let mut options = Options::new("p".into());
            options.tool = tool;
            options.cache_sim = true;
            options
        };
        for tool in [Tool::Cachegrind, Tool::Callgrind] {
            assert!(filters(&cache_sim(tool)), "{tool:?}");
            let mut branches = cache_sim(tool);
            branches.branch_sim = true;
            assert!(!filters(&branches), "{tool:?} with branches");
            let mut step = cache_sim(tool);
            step.backend = Backend::Step;
            assert!(!filters(&step), "{tool:?} stepped");
            let mut none = cache_sim(tool);
            none.cache_sim = false;
            assert!(!filters(&none), "{tool:?} without the simulation");
        }
        // Callgrind's: not with what makes a hit change the cache, what
        // needs every access or every run in order, or timed calls.
        let changes: [fn(&mut Options); 6] = [
            |options| options.simulate_wb = true,
            |options| options.simulate_hwpref = true,
            |options| options.cacheuse = true,
            |options| options.collect_jumps = true,
            |options| options.dump_before = vec!["f".into()],
            |options| options.collect_systime = cgx_callstack::SystemTime::Msec,
        ];
        for (index, change) in changes.iter().enumerate() {
            let mut options = cache_sim(Tool::Callgrind);
            change(&mut options);
            assert!(!filters(&options), "change {index}");
        }
    }
}
