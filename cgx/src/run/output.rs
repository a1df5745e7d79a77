//! Where the profiles of a run go: each dump is written as soon as the
//! collector completes it (named as Valgrind names it), its costs are added to
//! its process's totals, and the process's messages are printed on stderr.
//!
//! Cachegrind files are converted from the collector's Callgrind profiles and
//! laid out as Cachegrind writes them: its `desc: I1 cache:         …` lines
//! and its event order, `Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw Bc Bcm Bi Bim`.

use std::path::Path;

use anyhow::{Context, Result};
use cgx_formats::{CallgrindOptions, Events, Format, Part, Profile, Record};
use cgx_sim::{CachesConfig, DescStyle};

use super::caches::{CacheSetup, Message};
use super::log::Log;
use super::options::{Backend, Options, Tool};
use super::outfile::Template;
use super::summary::{self, Simulations, Totals};

/// Cachegrind's event order (`cg_main.c`); the events of a file are a subset.
const CACHEGRIND_EVENTS: [&str; 13] = [
    "Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw", "Bc", "Bcm", "Bi", "Bim",
];

/// Writes the dumps of a run and reports on its processes.
pub struct Output {
    template: Template,
    tool: Tool,
    backend: Backend,
    callgrind: CallgrindOptions,
    verbosity: i32,
    /// The run serves `callgrind_control` ([`Options::serves_control`]).
    serves_control: bool,
    /// `--trace-children=yes`: an untraced `execve` was skipped on purpose.
    trace_children: bool,
    command: String,
    simulations: Simulations,
    /// The simulated caches, for the `desc:` lines of Cachegrind files.
    caches: Option<CachesConfig>,
    /// What Valgrind prints at a program's start after its header (about
    /// the caches, the positions).
    startup: Vec<Message>,
    /// The processes in the order they appeared.
    processes: Vec<Process>,
    failed: bool,
    /// Where the messages go.
    log: Log,
}

/// What is known of one process.
#[derive(Debug)]
struct Process {
    pid: i32,
    totals: Totals,
    /// Whether any dump of it arrived.
    dumped: bool,
    /// Whether its summary was printed.
    summarized: bool,
}

impl Output {
    /// An output for a run with `options`, files named by `template`; `command`
    /// is the command line for the header; `caches` the simulated caches, when
    /// they were configured; messages go to `log`.
    pub fn new(
        options: &Options,
        template: Template,
        command: String,
        caches: Option<CacheSetup>,
        log: Log,
    ) -> Output {
        let (caches, mut startup) = match caches {
            Some(setup) => (Some(setup.config), setup.messages),
            None => (None, Vec::new()),
        };
        if options.tool == Tool::Callgrind && !options.dump_instr && !options.dump_line {
            // Callgrind's positions are then lines all the same, and it
            // says so first, even with -q.
            let message = Message::User("Using source line as position.".into());
            startup.insert(0, message);
        }
        Output {
            template,
            tool: options.tool,
            backend: options.backend,
            callgrind: CallgrindOptions {
                compress_strings: options.compress_strings,
                compress_positions: options.compress_pos,
            },
            verbosity: options.verbosity,
            serves_control: options.serves_control(),
            trace_children: options.trace_children,
            command,
            simulations: Simulations {
                cache: options.cache_sim,
                branch: options.branch_sim,
            },
            caches,
            startup,
            processes: Vec::new(),
            failed: false,
            log,
        }
    }

    /// Process `pid` starts running the program of the command line:
    /// prints the header and what Valgrind says at its start (its
    /// `--PID--` warnings come even with `-q`).
    pub fn started(&mut self, pid: i32) {
        self.process(pid);
        let text = self.start_text(pid, &self.command);
        self.log.write(pid, &text);
    }

    /// Process `pid` ran `execve` of the traced program `program` with
    /// `args` after its first: Valgrind starts again in it, and says all
    /// it says at a start again, with the new command line.
    pub fn exec_traced<A: AsRef<str>>(&mut self, pid: i32, program: &str, args: &[A]) {
        let command = summary::shown_command(program, args);
        let text = self.start_text(pid, &command);
        self.log.write(pid, &text);
    }

    /// What [`Output::started`] prints for the program run as `command`.
    fn start_text(&self, pid: i32, command: &str) -> String {
        let mut text = String::new();
        if self.verbosity > 0 {
            text = summary::header(pid, self.tool, self.backend, command);
        }
        for message in &self.startup {
            text.push_str(&message.render(pid));
        }
        if self.verbosity > 0 && self.serves_control {
            // Callgrind's hint, after the caches' warnings as in Valgrind.
            text.push_str(&format!(
                "=={pid}== For interactive control, run 'callgrind_control -h'.\n"
            ));
        }
        text
    }

    /// Writes one dump of process `pid` (see [`Template::dump_path`]) and adds
    /// it to the process's totals. A file that cannot be written is reported at
    /// once; the run goes on and [`Output::failed`] tells.
    pub fn write(
        &mut self,
        pid: i32,
        sequence: Option<u32>,
        thread: Option<u32>,
        profile: &Profile,
    ) {
        let process = self.process(pid);
        process.totals.add(profile);
        process.dumped = true;
        let path = self.template.dump_path(pid, sequence, thread);
        match self.write_file(profile, &path) {
            Ok(()) => {
                if self.verbosity > 1 {
                    let shown = std::path::absolute(&path).unwrap_or(path);
                    let text = format!("--{pid}-- Dump to {}\n", shown.display());
                    self.log.write(pid, &text);
                }
            }
            Err(error) => {
                eprintln!("cgx: {error:#}");
                self.failed = true;
            }
        }
    }

    /// Writes `profile` to `path` in the tool's format.
    fn write_file(&self, profile: &Profile, path: &Path) -> Result<()> {
        match self.tool {
            Tool::Callgrind => {
                cgx_formats::write_path(profile, Format::Callgrind(self.callgrind), path)?
            }
            Tool::Cachegrind => {
                let mut converted = cgx_converters::to_cachegrind(profile)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                for part in &mut converted.parts {
                    cachegrind_layout(part, self.caches.as_ref());
                }
                cgx_formats::write_path(&converted, Format::Cachegrind, path)?
            }
        }
        Ok(())
    }

    /// Process `pid` ran `execve` of `program`, which is not traced: says so
    /// in one line, with the option that follows it.
    pub fn exec_untraced(&mut self, pid: i32, program: &Path) {
        // With --trace-children=yes the program was skipped as asked.
        if self.verbosity > 0 && !self.trace_children {
            self.log
                .write(pid, &format!("{}\n", exec_hint(pid, program)));
        }
    }

    /// Process `pid` ended, killed by `signal` or not: prints its termination
    /// message and its summary (once its dumps are written).
    pub fn exited(&mut self, pid: i32, signal: Option<i32>) {
        let verbose = self.verbosity > 0;
        let tool = self.tool;
        let simulations = self.simulations;
        let process = self.process(pid);
        let mut text = String::new();
        if let Some(signal) = signal {
            if verbose {
                text.push_str(&summary::termination(pid, signal));
            }
        }
        if process.dumped && !process.summarized {
            process.summarized = true;
            if verbose {
                text.push_str(&summary::summary(pid, tool, simulations, &process.totals));
            }
        }
        self.log.write(pid, &text);
    }

    /// The run is over and every dump written: prints the summaries of the
    /// processes whose end was not reported.
    pub fn finish(&mut self) {
        let pids: Vec<i32> = self
            .processes
            .iter()
            .filter(|process| process.dumped && !process.summarized)
            .map(|process| process.pid)
            .collect();
        for pid in pids {
            self.exited(pid, None);
        }
    }

    /// Whether a profile could not be written.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// The sizes of the back-dating tree of process `pid` over its run:
    /// printed with `-v`.
    pub fn statistics(&mut self, pid: i32, statistics: &cgx_backdate::Statistics) {
        if self.verbosity > 1 {
            self.log.write(pid, &summary::statistics(pid, statistics));
        }
    }

    /// What the translate backend did in process `pid`: printed with `-v`.
    pub fn translated(&mut self, pid: i32, translated: &super::trace::Translated) {
        if self.verbosity > 1 {
            self.log.write(pid, &summary::translated(pid, translated));
        }
    }

    /// Whether any profile was written (or tried).
    pub fn written(&self) -> bool {
        self.processes.iter().any(|process| process.dumped)
    }

    /// The totals of process `pid` so far.
    #[cfg(test)]
    fn totals(&self, pid: i32) -> Option<&Totals> {
        self.processes
            .iter()
            .find(|process| process.pid == pid)
            .map(|process| &process.totals)
    }

    /// The record of process `pid`, made on first sight.
    fn process(&mut self, pid: i32) -> &mut Process {
        let index = match self.processes.iter().position(|process| process.pid == pid) {
            Some(index) => index,
            None => {
                self.processes.push(Process {
                    pid,
                    totals: Totals::default(),
                    dumped: false,
                    summarized: false,
                });
                self.processes.len() - 1
            }
        };
        &mut self.processes[index]
    }
}

/// The line that tells that process `pid` left the run with `execve` of
/// `program`.
fn exec_hint(pid: i32, program: &Path) -> String {
    let program = if program.as_os_str().is_empty() {
        "another program".to_string()
    } else {
        program.display().to_string()
    };
    format!(
        "cgx: process {pid} ran execve of {program}, which is not traced: its profile ends there \
         (--trace-children=yes follows execve)"
    )
}

/// Lays out a part converted to Cachegrind as Cachegrind writes it: the three
/// `desc:` lines of its caches (Cachegrind writes them whatever it simulates,
/// and no other), and its events in Cachegrind's order (others after them).
fn cachegrind_layout(part: &mut Part, caches: Option<&CachesConfig>) {
    if let Some(caches) = caches {
        part.header.desc = caches
            .desc_lines(DescStyle::Cachegrind)
            .iter()
            .map(|line| line.trim_start_matches("desc: ").to_string())
            .collect();
    }
    let names = &part.events.names;
    let mut order: Vec<usize> = CACHEGRIND_EVENTS
        .iter()
        .filter_map(|event| part.events.index_of(event))
        .collect();
    order.extend((0..names.len()).filter(|i| !CACHEGRIND_EVENTS.contains(&names[*i].as_str())));
    if order.iter().enumerate().all(|(at, &from)| at == from) {
        return;
    }
    let permute = |costs: &[u64]| -> Vec<u64> {
        order
            .iter()
            .map(|&from| costs.get(from).copied().unwrap_or(0))
            .collect()
    };
    let events = Events::new(order.iter().map(|&from| names[from].clone()));
    let mut reordered = Part::new(events, part.positions);
    reordered.header = part.header.clone();
    reordered.summary = part.summary.as_deref().map(permute);
    reordered.totals = part.totals.as_deref().map(permute);
    let width = part.events.len();
    for (function, records) in part.functions() {
        let index = reordered.function_index(function);
        records.for_each(width, |record| match record {
            Record::Cost { file, at, costs } => reordered.push_at(
                index,
                &Record::Cost {
                    file,
                    at,
                    costs: &permute(costs),
                },
            ),
            Record::Call {
                file,
                at,
                callee,
                target,
                count,
                inclusive,
            } => reordered.push_at(
                index,
                &Record::Call {
                    file,
                    at,
                    callee,
                    target,
                    count,
                    inclusive: &permute(inclusive),
                },
            ),
            jump @ Record::Jump { .. } => reordered.push_at(index, &jump),
        });
    }
    *part = reordered;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::log::Destination;
    use cgx_formats::{FunctionId, Position, PositionKinds};

    /// A profile with `ir` instructions in `main`.
    fn profile(ir: u64) -> Profile {
        let mut profile = Profile::default();
        let object = profile.names.intern("prog").unwrap();
        let file = profile.names.intern("prog.c").unwrap();
        let name = profile.names.intern("main").unwrap();
        let mut part = Part::new(Events::new(["Ir"]), PositionKinds::default());
        part.header.cmd = Some("./prog".into());
        part.push(
            FunctionId { object, file, name },
            &Record::Cost {
                file,
                at: Position { instr: 0, line: 3 },
                costs: &[ir],
            },
        );
        part.summary = Some(vec![ir]);
        part.totals = Some(vec![ir]);
        profile.parts.push(part);
        profile
    }

    fn output(dir: &Path, tool: Tool, out_file: &str) -> Output {
        let mut options = Options::new("./prog".into());
        options.tool = tool;
        options.verbosity = 0;
        let template = Template::parse(&format!("{}/{out_file}", dir.display()), |_| None).unwrap();
        Output::new(
            &options,
            template,
            "./prog".into(),
            None,
            Log::new(Destination::Stderr),
        )
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn callgrind_dumps_are_written_and_added_up() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = output(dir.path(), Tool::Callgrind, "callgrind.out.%p");
        out.started(7);
        out.write(7, Some(1), None, &profile(10));
        out.write(7, None, Some(2), &profile(5));
        out.write(8, None, None, &profile(1));
        out.exited(7, Some(11));
        out.finish();
        assert!(!out.failed());
        assert_eq!(out.totals(7).unwrap().get("Ir"), 15);
        assert_eq!(out.totals(8).unwrap().get("Ir"), 1);
        assert_eq!(
            names(dir.path()),
            ["callgrind.out.7-02", "callgrind.out.7.1", "callgrind.out.8"]
        );
        let read = cgx_formats::read_path(&dir.path().join("callgrind.out.7.1")).unwrap();
        assert_eq!(read.parts[0].totals, Some(vec![10]));
        let text = std::fs::read_to_string(dir.path().join("callgrind.out.8")).unwrap();
        assert!(text.starts_with("# callgrind format\n"), "{text}");
    }

    #[test]
    fn cachegrind_dumps_are_converted() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = output(dir.path(), Tool::Cachegrind, "cachegrind.out.%p");
        out.write(9, None, None, &profile(42));
        assert!(!out.failed());
        let text = std::fs::read_to_string(dir.path().join("cachegrind.out.9")).unwrap();
        assert!(text.contains("events: Ir\n"), "{text}");
        assert!(text.contains("fn=main\n"), "{text}");
        assert!(text.contains("summary: 42\n"), "{text}");
        assert!(!text.contains("calls="), "{text}");
    }

    /// A Callgrind-ordered profile with every simulated event, in `main` at
    /// line 3 and `f` at line 7 (as the collector makes it for Cachegrind),
    /// and Callgrind's desc lines.
    fn simulated_profile() -> Profile {
        let events = [
            "Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "Bc", "Bcm", "Bi",
            "Bim",
        ];
        let mut profile = Profile::default();
        let object = profile.names.intern("prog").unwrap();
        let file = profile.names.intern("prog.c").unwrap();
        let mut part = Part::new(Events::new(events), PositionKinds::default());
        part.header.cmd = Some("./prog".into());
        part.header.desc = vec![
            "I1 cache: 32768 B, 64 B, 8-way associative".into(),
            "Timerange: Basic block 0 - 9".into(),
        ];
        for (function, line, base) in [("main", 3, 100), ("f", 7, 200)] {
            let name = profile.names.intern(function).unwrap();
            let costs: Vec<u64> = (0..13).map(|i| base + i).collect();
            part.push(
                FunctionId { object, file, name },
                &Record::Cost {
                    file,
                    at: Position { instr: 0, line },
                    costs: &costs,
                },
            );
        }
        profile.parts.push(part);
        profile
    }

    #[test]
    fn cachegrind_files_have_cachegrinds_layout() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = output(dir.path(), Tool::Cachegrind, "cachegrind.out.%p");
        out.caches = Some(CachesConfig {
            i1: cgx_sim::CacheConfig::new(32768, 8, 64),
            d1: cgx_sim::CacheConfig::new(32768, 8, 64),
            ll: cgx_sim::CacheConfig::new(268_435_456, 2, 64),
        });
        out.write(9, None, None, &simulated_profile());
        assert!(!out.failed());
        let text = std::fs::read_to_string(dir.path().join("cachegrind.out.9")).unwrap();
        // As `valgrind --tool=cachegrind --branch-sim=yes` writes it here.
        assert_eq!(
            text,
            "desc: I1 cache:         32768 B, 64 B, 8-way associative\n\
             desc: D1 cache:         32768 B, 64 B, 8-way associative\n\
             desc: LL cache:         268435456 B, 64 B, 2-way associative\n\
             cmd: ./prog\n\
             events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw Bc Bcm Bi Bim\n\
             fl=prog.c\n\
             fn=main\n\
             3 100 103 106 101 104 107 102 105 108 109 110 111 112\n\
             fl=prog.c\n\
             fn=f\n\
             7 200 203 206 201 204 207 202 205 208 209 210 211 212\n\
             summary: 300 306 312 302 308 314 304 310 316 318 320 322 324\n"
        );
        assert_eq!(out.totals(9).unwrap().get("D1mw"), 105 + 205);
    }

    #[test]
    fn cachegrind_order_of_a_subset() {
        let profile = simulated_profile();
        let part = &profile.parts[0];
        let (function, _) = part.functions().next().unwrap();
        // Dr and Dw move behind I1mr, others go last; the costs follow.
        let mut subset = Part::new(
            Events::new(["Ir", "Dr", "Dw", "I1mr", "AcCost1"]),
            part.positions,
        );
        subset.push(
            function,
            &Record::Cost {
                file: function.file,
                at: Position { instr: 0, line: 1 },
                costs: &[1, 2, 3, 4, 5],
            },
        );
        subset.summary = Some(vec![1, 2, 3, 4, 5]);
        cachegrind_layout(&mut subset, None);
        assert_eq!(subset.events.names, ["Ir", "I1mr", "Dr", "Dw", "AcCost1"]);
        assert_eq!(subset.summary, Some(vec![1, 4, 2, 3, 5]));
        let mut costs = Vec::new();
        for (_, records) in subset.functions() {
            records.for_each(5, |record| {
                if let Record::Cost { costs: c, .. } = record {
                    costs.push(c.to_vec());
                }
            });
        }
        assert_eq!(costs, [vec![1, 4, 2, 3, 5]]);
        // Without caches the desc lines stay; in order, nothing changes.
        let mut ir = Part::new(Events::new(["Ir"]), part.positions);
        ir.header.desc = vec!["x".into()];
        cachegrind_layout(&mut ir, None);
        assert_eq!(ir.header.desc, ["x"]);
        assert_eq!(ir.events.names, ["Ir"]);
    }

    #[test]
    fn callgrind_says_when_it_takes_lines_as_positions_even_when_quiet() {
        let dir = tempfile::tempdir().unwrap();
        let template =
            Template::parse(&format!("{}/x.%p", dir.path().display()), |_| None).unwrap();
        let start = |dump_line: bool, dump_instr: bool, tool: Tool| {
            let mut options = Options::new("./prog".into());
            (options.verbosity, options.dump_line) = (0, dump_line);
            (options.dump_instr, options.tool) = (dump_instr, tool);
            let log = Log::new(Destination::Stderr);
            let out = Output::new(&options, template.clone(), "./prog".into(), None, log);
            out.start_text(7, "./prog")
        };
        let message = "==7== Using source line as position.\n";
        assert_eq!(start(false, false, Tool::Callgrind), message);
        assert_eq!(start(true, false, Tool::Callgrind), "");
        assert_eq!(start(false, true, Tool::Callgrind), "");
        assert_eq!(start(false, false, Tool::Cachegrind), "");
    }

    #[test]
    fn cache_warnings_follow_each_header_even_when_quiet() {
        let dir = tempfile::tempdir().unwrap();
        let setup = CacheSetup {
            config: CachesConfig::DEFAULT,
            messages: vec![
                Message::Debug(
                    "warning: L3 cache found, using its data for the LL simulation.".into(),
                ),
                Message::User("Cache configuration used:".into()),
            ],
        };
        let template =
            Template::parse(&format!("{}/x.%p", dir.path().display()), |_| None).unwrap();
        let mut options = Options::new("./prog".into());
        options.verbosity = 0;
        let out = Output::new(
            &options,
            template.clone(),
            "./prog".into(),
            Some(setup.clone()),
            Log::new(Destination::Stderr),
        );
        assert_eq!(
            out.start_text(7, "./prog"),
            "--7-- warning: L3 cache found, using its data for the LL simulation.\n\
             ==7== Cache configuration used:\n"
        );
        options.verbosity = 1;
        let out = Output::new(
            &options,
            template,
            "./prog".into(),
            Some(setup),
            Log::new(Destination::Stderr),
        );
        // Each program's start: the first, and each one a traced
        // `execve` runs (as a new Valgrind would).
        for command in ["./prog", "/bin/echo a\\ b"] {
            let text = out.start_text(7, command);
            assert!(text.starts_with("==7== Callgrind, "), "{text}");
            let end = format!(
                "==7== Command: {command}\n==7== \n\
                 --7-- warning: L3 cache found, using its data for the LL simulation.\n\
                 ==7== Cache configuration used:\n\
                 ==7== For interactive control, run 'callgrind_control -h'.\n"
            );
            assert!(text.ends_with(&end), "{text}");
        }
    }

    #[test]
    fn a_failed_write_is_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = output(&dir.path().join("gone"), Tool::Callgrind, "x.%p");
        out.write(1, None, None, &profile(1));
        assert!(out.failed());
        assert_eq!(out.totals(1).unwrap().get("Ir"), 1);
    }
}
