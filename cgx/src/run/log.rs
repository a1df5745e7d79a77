//! Where Valgrind's messages go (the `==PID==` and `--PID--` lines): stderr
//! by default, stdout with `--log-fd=1`, or a file per process named like the
//! profiles with `--log-file=NAME` (`%p` the process id, `%q{VAR}` an
//! environment variable), created when the process starts, as Valgrind's.
//! With `--time-stamp=yes` each message line carries the time since the run
//! started, as Valgrind's: `==00:00:00:01.234 PID== `.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::outfile::{os_message, Template};

/// Where the messages go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// Standard error (`--log-fd=2`, the default).
    Stderr,
    /// Standard output (`--log-fd=1`).
    Stdout,
    /// A file for each process (`--log-file=NAME`).
    File(Template),
}

/// The messages of a run.
pub struct Log {
    destination: Destination,
    /// The files written so far, by name.
    files: HashMap<PathBuf, File>,
    /// With `--time-stamp=yes`, when the run started.
    started: Option<Instant>,
}

impl Log {
    /// Messages to `destination`.
    pub fn new(destination: Destination) -> Log {
        Log {
            destination,
            files: HashMap::new(),
            started: None,
        }
    }

    /// Messages stamped with the time since `started` (`--time-stamp=yes`).
    pub fn stamped(mut self, started: Instant) -> Log {
        self.started = Some(started);
        self
    }

    /// Writes `text`, messages about process `pid`. A log file that cannot be
    /// written is reported on stderr, where the messages then go.
    pub fn write(&mut self, pid: i32, text: &str) {
        if text.is_empty() {
            return;
        }
        let stamped;
        let text = match self.started {
            Some(started) => {
                stamped = time_stamped(text, started.elapsed());
                stamped.as_str()
            }
            None => text,
        };
        let template = match &self.destination {
            Destination::Stderr => {
                eprint!("{text}");
                return;
            }
            Destination::Stdout => {
                print!("{text}");
                let _ = std::io::stdout().flush();
                return;
            }
            Destination::File(template) => template,
        };
        let path = template.dump_path(pid, None, None);
        let file = match self.files.get_mut(&path) {
            Some(file) => Ok(file),
            None => match File::create(&path) {
                Ok(file) => Ok(self.files.entry(path.clone()).or_insert(file)),
                Err(error) => Err(error),
            },
        };
        let written = file.and_then(|file| file.write_all(text.as_bytes()));
        if let Err(error) = written {
            eprintln!(
                "cgx: cannot write the log file {}: {}",
                path.display(),
                os_message(&error)
            );
            self.destination = Destination::Stderr;
            eprint!("{text}");
        }
    }
}

/// `text` with `elapsed` in each message line, after its first two
/// characters (`==PID== ` becomes `==DD:HH:MM:SS.mmm PID== `).
fn time_stamped(text: &str, elapsed: Duration) -> String {
    let millis = elapsed.as_millis();
    let seconds = millis / 1000;
    let stamp = format!(
        "{:02}:{:02}:{:02}:{:02}.{:03} ",
        seconds / 86_400,
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60,
        millis % 1000
    );
    text.split_inclusive('\n')
        .map(|line| match line.get(..2) {
            Some(mark @ ("==" | "--")) => format!("{mark}{stamp}{}", &line[2..]),
            _ => line.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_per_process_created_at_its_first_message() {
        let dir = tempfile::tempdir().unwrap();
        let name = format!("{}/log.%p", dir.path().display());
        let template = Template::parse(&name, |_| None).unwrap();
        let mut log = Log::new(Destination::File(template));
        log.write(10, "==10== one\n");
        log.write(11, "==11== other\n");
        log.write(10, "==10== two\n");
        log.write(12, "");
        let read = |pid: i32| std::fs::read_to_string(dir.path().join(format!("log.{pid}")));
        assert_eq!(read(10).unwrap(), "==10== one\n==10== two\n");
        assert_eq!(read(11).unwrap(), "==11== other\n");
        assert!(read(12).is_err(), "no message, no file");
    }

    #[test]
    fn an_unwritable_log_falls_back_to_stderr() {
        let template = Template::parse("/nonexistent-folder/log", |_| None).unwrap();
        let mut log = Log::new(Destination::File(template));
        log.write(1, "==1== message\n");
        assert_eq!(log.destination, Destination::Stderr);
    }

    #[test]
    fn time_stamps_go_after_the_mark_as_valgrinds() {
        let elapsed = Duration::from_millis(90_061_234);
        assert_eq!(
            time_stamped("==7== Command: x\n==7== \n--7-- warning\n", elapsed),
            "==01:01:01:01.234 7== Command: x\n==01:01:01:01.234 7== \n\
             --01:01:01:01.234 7-- warning\n"
        );
        assert_eq!(
            time_stamped("==7== x", Duration::from_millis(165)),
            "==00:00:00:00.165 7== x"
        );
    }
}
