//! `callgrind_control`: Valgrind 3.19's script, talking to cgx runs through
//! their control sockets instead of `vgdb`, with its options, its output
//! and its exit codes (0, even for its errors, which it prints on standard
//! output).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;

/// How long the client waits for a run's reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// A running profile: its program's process id and command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The program's process id.
    pub pid: i32,
    /// Its command line (program and arguments).
    pub command: String,
}

impl Run {
    /// The program's name as Valgrind's script matches it: the first word
    /// of its command line.
    fn program(&self) -> &str {
        self.command.split_whitespace().next().unwrap_or("")
    }
}

/// The runs serving requests in `folder`, by process id; sockets whose run
/// is gone are removed.
pub fn runs(folder: &Path) -> Vec<Run> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut runs: Vec<Run> = entries
        .flatten()
        .filter_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let socket = entry.path();
            let command_file = folder.join(format!("{pid}.cmd"));
            if UnixStream::connect(&socket).is_err() {
                let _ = std::fs::remove_file(&socket);
                let _ = std::fs::remove_file(&command_file);
                return None;
            }
            let command = std::fs::read_to_string(&command_file).ok()?;
            Some(Run {
                pid,
                command: command.trim_end().to_string(),
            })
        })
        .collect();
    runs.sort_by_key(|run| run.pid);
    runs
}

/// Sends `request` to the run of `pid`; its reply.
fn ask(folder: &Path, pid: i32, request: &str) -> std::io::Result<String> {
    let mut stream = UnixStream::connect(folder.join(pid.to_string()))?;
    stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
    stream.write_all(format!("{request}\n").as_bytes())?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    Ok(reply)
}

/// What the command line asks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Request {
    status: bool,
    backtrace: bool,
    /// `-e`: the events to show (empty: all).
    events: Option<Vec<String>>,
    dump: Option<String>,
    zero: bool,
    kill: bool,
    instrumentation: Option<String>,
    /// The runs named (pids or program names); empty: all.
    targets: Vec<String>,
}

/// What the options ask, or the text to print instead (help, version, an
/// error).
fn parse(args: &[String], name: &str) -> std::result::Result<Request, String> {
    let short_help = format!("See '{name} -h' for help.\n");
    let mut request = Request::default();
    // Options waiting for their argument: -d, -e, -i.
    let (mut dump_next, mut events_next, mut instr_next) = (false, false, false);
    for arg in args {
        if arg.starts_with('-') {
            if dump_next {
                dump_next = false;
            }
            if events_next {
                events_next = false;
            }
            match arg.as_str() {
                "-h" | "--help" => return Err(help()),
                "--version" => return Err("callgrind_control-3.19.0\n".into()),
                "-v" => {}
                "-s" | "--stat" => request.status = true,
                "-b" | "--back" => request.backtrace = true,
                "-e" => {
                    request.events = Some(Vec::new());
                    events_next = true;
                }
                "-z" | "--zero" => request.zero = true,
                "-k" | "--kill" => request.kill = true,
                "-i" | "--instr" => instr_next = true,
                "--instr=on" => request.instrumentation = Some("on".into()),
                "--instr=off" => request.instrumentation = Some("off".into()),
                "-d" | "--dump" => {
                    request.dump = Some(String::new());
                    dump_next = true;
                }
                _ if arg.starts_with("--vgdb-prefix=") => {}
                _ if arg.starts_with("-d=") || arg.starts_with("--dump=") => {
                    let hint = arg.split_once('=').map_or("", |(_, hint)| hint);
                    request.dump = Some(hint.to_string());
                }
                _ => {
                    return Err(format!(
                        "Error: unknown command line option '{arg}'.\n{short_help}"
                    ))
                }
            }
            continue;
        }
        if arg.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            if dump_next {
                dump_next = false;
                request.dump = Some(arg.clone());
                continue;
            }
            if events_next {
                events_next = false;
                request.events = Some(arg.split(',').map(str::to_string).collect());
                continue;
            }
            if instr_next {
                instr_next = false;
                if arg != "on" && arg != "off" {
                    return Err(format!(
                        "Error: need to specify 'on' or 'off' after '-i'.\n{short_help}"
                    ));
                }
                request.instrumentation = Some(arg.clone());
                continue;
            }
        }
        request.targets.push(arg.clone());
    }
    if instr_next {
        return Err(format!(
            "Error: need to specify 'on' or 'off' after '-i'.\n{short_help}"
        ));
    }
    Ok(request)
}

/// The help text.
fn help() -> String {
    "Observe the status and control currently active callgrind runs.\n\
     (C) 2003-2011, Josef Weidendorfer (Josef.Weidendorfer@gmx.de)\n\n\
     Usage: callgrind_control [options] [pid|program-name...]\n\n\
     If no pids/names are given, an action is applied to all currently\n\
     active Callgrind runs. Default action is printing short information.\n\n\
     Options:\n\
     \x20 -h --help         Show this help text\n\
     \x20 --version         Show version\n\
     \x20 -s --stat         Show statistics\n\
     \x20 -b --back         Show stack/back trace\n\
     \x20 -e [<A>,...]      Show event counters for <A>,... (default: all)\n\
     \x20 --dump[=<s>]      Request a dump optionally using <s> as description\n\
     \x20 -z --zero         Zero all event counters\n\
     \x20 -k --kill         Kill\n\
     \x20 -i --instr=on|off Switch instrumentation state on/off\n\
     Uncommon options:\n\
     \x20 --vgdb-prefix=<prefix> Only provide this if the same was given to Valgrind\n\n"
        .into()
}

/// Runs `callgrind_control` with `args` on the runs of `folder`; returns
/// what it prints.
pub fn control(args: &[String], name: &str, folder: &Path) -> String {
    let request = match parse(args, name) {
        Ok(request) => request,
        Err(text) => return text,
    };
    let all = runs(folder);
    let mut chosen: Vec<&Run> = Vec::new();
    for target in &request.targets {
        let matching: Vec<&Run> = match target.parse::<i32>() {
            Ok(pid) => all.iter().filter(|run| run.pid == pid).collect(),
            Err(_) => all
                .iter()
                .filter(|run| run.program().ends_with(target.as_str()))
                .collect(),
        };
        if matching.is_empty() {
            return format!(
                "Error: Callgrind task with PID/name '{target}' not detected.\n\
                 See '{name} -h' for help.\n"
            );
        }
        for run in matching {
            if !chosen.contains(&run) {
                chosen.push(run);
            }
        }
    }
    if all.is_empty() {
        return "No active callgrind runs detected.\n".into();
    }
    if chosen.is_empty() {
        chosen = all.iter().collect();
    }
    let command = if request.status || request.backtrace || request.events.is_some() {
        Some("status internal".to_string())
    } else if let Some(mode) = &request.instrumentation {
        Some(format!("instrumentation {mode}"))
    } else if request.kill {
        None
    } else if request.zero {
        Some("zero".into())
    } else {
        request.dump.as_ref().map(|hint| match hint.is_empty() {
            true => "dump".to_string(),
            false => format!("dump {hint}"),
        })
    };
    let mut out = String::new();
    for run in chosen {
        out.push_str(&format!("PID {}: {}\n", run.pid, run.command));
        if request.kill {
            // SAFETY: kill takes plain integers.
            unsafe { libc::kill(run.pid, libc::SIGKILL) };
            out.push_str("  OK.\n");
            continue;
        }
        let Some(command) = &command else { continue };
        let reply = match ask(folder, run.pid, command) {
            Ok(reply) => reply,
            Err(error) => {
                out.push_str(&format!("  Error: no answer from the run ({error}).\n"));
                continue;
            }
        };
        if command != "status internal" {
            out.push_str("  OK.\n");
            continue;
        }
        let status = Status::parse(&reply);
        if status.instrumentation == "off" {
            out.push_str("  No information available as instrumentation is switched off.\n\n");
            return out;
        }
        out.push_str(&status.report(&request));
        out.push('\n');
    }
    out
}

/// What a run's `status internal` reply says.
#[derive(Debug, Default)]
struct Status {
    instrumentation: String,
    values: BTreeMap<String, String>,
    events: Vec<String>,
    threads: Vec<String>,
    /// Per thread: the functions of its frames, outermost first, with the
    /// calls of each frame but the last and their costs.
    frames: BTreeMap<u32, Vec<Frame>>,
    /// Per thread: its cost since the last dump.
    totals: BTreeMap<u32, Vec<String>>,
}

/// A frame of a thread's backtrace.
#[derive(Clone, Debug, Default)]
struct Frame {
    function: String,
    calls: Option<String>,
    events: Vec<String>,
}

impl Status {
    fn parse(reply: &str) -> Status {
        let mut status = Status::default();
        for line in reply.lines() {
            let Some((key, value)) = line.split_once(": ") else {
                continue;
            };
            let parts: Vec<&str> = key.split('-').collect();
            let number = |at: usize| parts.get(at).and_then(|part| part.parse::<u32>().ok());
            match (parts.as_slice(), number(1), number(2)) {
                (["function", _, _], Some(thread), Some(_)) => {
                    status.frames.entry(thread).or_default().push(Frame {
                        function: value.to_string(),
                        ..Frame::default()
                    });
                }
                (["calls", _, _], Some(thread), Some(_)) => {
                    if let Some(frame) = status.frames.entry(thread).or_default().last_mut() {
                        frame.calls = Some(value.to_string());
                    }
                }
                (["events", _, _], Some(thread), Some(_)) => {
                    if let Some(frame) = status.frames.entry(thread).or_default().last_mut() {
                        frame.events = value.split_whitespace().map(str::to_string).collect();
                    }
                }
                (["events", _], Some(thread), None) => {
                    let values = value.split_whitespace().map(str::to_string).collect();
                    status.totals.insert(thread, values);
                }
                (["instrumentation"], _, _) => status.instrumentation = value.to_string(),
                (["events"], _, _) => {
                    status.events = value.split_whitespace().map(str::to_string).collect();
                }
                (["threads"], _, _) => {
                    status.threads = value.split_whitespace().map(str::to_string).collect();
                }
                _ => {
                    status.values.insert(key.to_string(), value.to_string());
                }
            }
        }
        status
    }

    fn value(&self, key: &str) -> String {
        let value = self.values.get(key).map_or("0", String::as_str);
        commify(value)
    }

    /// What `callgrind_control` prints of it for `request`.
    fn report(&self, request: &Request) -> String {
        let mut out = String::new();
        if request.status {
            if request.events.is_none() {
                out.push_str(&format!(
                    "  Number of running threads: {}, thread IDs: {}\n",
                    self.threads.len(),
                    self.threads.join(" ")
                ));
                out.push_str(&format!("  Events collected: {}\n", self.events.join(" ")));
            }
            out.push_str(&format!(
                "  Functions: {} (executed {}, contexts {})\n",
                self.value("distinct-functions"),
                self.value("executed-calls"),
                self.value("distinct-contexts")
            ));
            out.push_str(&format!(
                "  Basic blocks: {} (executed {}, call sites {})\n",
                self.value("distinct-bbs"),
                self.value("executed-bbs"),
                self.value("distinct-calls")
            ));
        }
        let shown = self.shown_events(request);
        if request.events.is_some() {
            let widths = self.widths(self.totals.values());
            out.push_str("\n  Totals:");
            out.push_str(&self.header(&shown, &widths));
            out.push('\n');
            for (thread, totals) in &self.totals {
                out.push_str(&format!("   Th{thread:>2}  "));
                out.push_str(&cells(totals, &shown, &widths));
                out.push('\n');
            }
        }
        if request.backtrace {
            let frames = self.frames.values().flatten().map(|frame| &frame.events);
            let widths = self.widths(frames);
            for (thread, frames) in &self.frames {
                out.push_str("\n  Frame: ");
                if request.events.is_some() {
                    out.push_str(&self.header(&shown, &widths));
                }
                out.push_str(&format!("Backtrace for Thread {thread}\n"));
                for (depth, at) in (0..frames.len()).rev().enumerate().take(100) {
                    let frame = &frames[at];
                    out.push_str(&format!("   [{depth:>2}]  "));
                    if request.events.is_some() {
                        let events = at
                            .checked_sub(1)
                            .and_then(|up| frames.get(up))
                            .map_or(&[][..], |up| &up.events[..]);
                        out.push_str(&cells(events, &shown, &widths));
                    }
                    out.push_str(&frame.function);
                    if let Some(calls) = at.checked_sub(1).and_then(|up| frames[up].calls.as_ref())
                    {
                        out.push_str(&format!(" ({calls} x)"));
                    }
                    out.push('\n');
                }
                out.push('\n');
            }
        }
        out
    }

    /// The positions of the events to show.
    fn shown_events(&self, request: &Request) -> Vec<usize> {
        match &request.events {
            Some(names) if !names.is_empty() => names
                .iter()
                .filter_map(|name| self.events.iter().position(|event| event == name))
                .collect(),
            _ => (0..self.events.len()).collect(),
        }
    }

    /// The width of each event's column for `rows`.
    fn widths<'a>(&self, rows: impl Iterator<Item = &'a Vec<String>>) -> Vec<usize> {
        let mut widths: Vec<usize> = self.events.iter().map(String::len).collect();
        for row in rows {
            for (width, value) in widths.iter_mut().zip(row) {
                *width = (*width).max(commify(value).len());
            }
        }
        widths
    }

    fn header(&self, shown: &[usize], widths: &[usize]) -> String {
        shown
            .iter()
            .map(|&at| {
                let width = widths.get(at).copied().unwrap_or(0);
                format!(
                    "{:>width$} ",
                    self.events.get(at).map_or("", String::as_str)
                )
            })
            .collect()
    }
}

/// A row of counts in the columns `shown`, `.` where none.
fn cells(values: &[String], shown: &[usize], widths: &[usize]) -> String {
    shown
        .iter()
        .map(|&at| {
            let width = widths.get(at).copied().unwrap_or(0);
            let value = values
                .get(at)
                .map_or(".".to_string(), |value| commify(value));
            format!("{value:>width$} ")
        })
        .collect()
}

/// `value` with a comma every three digits when it is a count, as the
/// script prints counts.
fn commify(value: &str) -> String {
    match value.parse::<i64>() {
        Ok(count) => cgx_converters::annotate::commify(count),
        Err(_) => value.to_string(),
    }
}

/// `callgrind_control ARGS` as the shim runs it: prints and exits 0.
pub fn run(args: &[std::ffi::OsString]) -> Result<()> {
    let args: Vec<String> = args
        .iter()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    // Valgrind's script names itself as it was started.
    let name = std::env::args()
        .next()
        .unwrap_or_else(|| "callgrind_control".into());
    let text = control(&args, &name, &super::folder());
    std::io::stdout().write_all(text.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn options_as_the_script_reads_them() {
        let parsed = parse(&args("-d before_loop 123"), "cc").expect("valid");
        assert_eq!(parsed.dump.as_deref(), Some("before_loop"));
        assert_eq!(parsed.targets, ["123"]);
        // A number after -d is a target, not a hint.
        let parsed = parse(&args("-d 123"), "cc").expect("valid");
        assert_eq!(
            (parsed.dump.as_deref(), &parsed.targets[..]),
            (Some(""), &["123".to_string()][..])
        );
        let parsed = parse(&args("--dump=x -i off -e Ir,Dr -s -b prog"), "cc").expect("valid");
        assert_eq!(parsed.dump.as_deref(), Some("x"));
        assert_eq!(parsed.instrumentation.as_deref(), Some("off"));
        assert_eq!(
            parsed.events,
            Some(vec!["Ir".to_string(), "Dr".to_string()])
        );
        assert!(parsed.status && parsed.backtrace);
        assert_eq!(parsed.targets, ["prog"]);
        assert_eq!(
            parse(&args("-i"), "cc"),
            Err("Error: need to specify 'on' or 'off' after '-i'.\nSee 'cc -h' for help.\n".into())
        );
        assert_eq!(
            parse(&args("-q"), "cc"),
            Err("Error: unknown command line option '-q'.\nSee 'cc -h' for help.\n".into())
        );
    }

    #[test]
    fn the_status_reply_prints_as_the_scripts() {
        let reply = "instrumentation: on\nexecuted-bbs: 1200\nexecuted-calls: 30\n\
                     distinct-bbs: 90\ndistinct-calls: 12\ndistinct-functions: 10\n\
                     distinct-contexts: 11\nevents: Ir\npart: 0\nthreads: 1\ncurrent-tid: 1\n\
                     events-1: 1234567\nframes-1: 1\nfunction-1-0: main\ncalls-1-0: 1\n\
                     events-1-0: 4000\nfunction-1-1: wait\n";
        let status = Status::parse(reply);
        let request = parse(&args("-s -e -b"), "cc").expect("valid");
        assert_eq!(
            status.report(&request),
            "  Functions: 10 (executed 30, contexts 11)\n\
             \x20 Basic blocks: 90 (executed 1,200, call sites 12)\n\
             \n  Totals:       Ir \n   Th 1  1,234,567 \n\
             \n  Frame:    Ir Backtrace for Thread 1\n\
             \x20  [ 0]  4,000 wait (1 x)\n\
             \x20  [ 1]      . main\n\n"
        );
        let request = parse(&args("-s"), "cc").expect("valid");
        assert_eq!(
            status.report(&request),
            "  Number of running threads: 1, thread IDs: 1\n  Events collected: Ir\n\
             \x20 Functions: 10 (executed 30, contexts 11)\n\
             \x20 Basic blocks: 90 (executed 1,200, call sites 12)\n"
        );
    }
}
