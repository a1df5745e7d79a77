//! Where the profiles of a run go: each dump is written as soon as the
//! collector completes it (named as Valgrind names it), its costs are added to
//! its process's totals, and the process's messages are printed on stderr.

use std::path::Path;

use anyhow::{Context, Result};
use cgx_formats::{CallgrindOptions, Format, Profile};

use super::options::{Backend, Options, Tool};
use super::outfile::Template;
use super::summary::{self, Totals};

/// Writes the dumps of a run and reports on its processes.
pub struct Output {
    template: Template,
    tool: Tool,
    backend: Backend,
    callgrind: CallgrindOptions,
    verbosity: i32,
    command: String,
    /// The processes in the order they appeared.
    processes: Vec<Process>,
    failed: bool,
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
    /// is the command line for the header.
    pub fn new(options: &Options, template: Template, command: String) -> Output {
        Output {
            template,
            tool: options.tool,
            backend: options.backend,
            callgrind: CallgrindOptions {
                compress_strings: options.compress_strings,
                compress_positions: options.compress_pos,
            },
            verbosity: options.verbosity,
            command,
            processes: Vec::new(),
            failed: false,
        }
    }

    /// Process `pid` starts running: prints the header.
    pub fn started(&mut self, pid: i32) {
        self.process(pid);
        if self.verbosity > 0 {
            eprint!(
                "{}",
                summary::header(pid, self.tool, self.backend, &self.command)
            );
        }
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
                    eprintln!("--{pid}-- Dump to {}", shown.display());
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
                let converted = cgx_converters::to_cachegrind(profile)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                cgx_formats::write_path(&converted, Format::Cachegrind, path)?
            }
        }
        Ok(())
    }

    /// Process `pid` ended, killed by `signal` or not: prints its termination
    /// message and its summary (once its dumps are written).
    pub fn exited(&mut self, pid: i32, signal: Option<i32>) {
        let verbose = self.verbosity > 0;
        let tool = self.tool;
        let process = self.process(pid);
        if let Some(signal) = signal {
            if verbose {
                eprint!("{}", summary::termination(pid, signal));
            }
        }
        if process.dumped && !process.summarized {
            process.summarized = true;
            if verbose {
                eprint!(
                    "{}",
                    summary::summary(pid, tool, &process.totals, signal.is_some())
                );
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use cgx_formats::{Events, FunctionId, Part, Position, PositionKinds, Record};

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
        Output::new(&options, template, "./prog".into())
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

    #[test]
    fn a_failed_write_is_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = output(&dir.path().join("gone"), Tool::Callgrind, "x.%p");
        out.write(1, None, None, &profile(1));
        assert!(out.failed());
        assert_eq!(out.totals(1).unwrap().get("Ir"), 1);
    }
}
