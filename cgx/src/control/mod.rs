//! Live control of running profiles, as Valgrind's `callgrind_control`
//! gives it: list the runs, dump, zero, switch instrumentation, status and
//! backtraces.
//!
//! Each `cgx run` with Callgrind's rules serves requests on a Unix socket
//! named after the program's process id in the user's control folder
//! ([`folder`]: `$TMPDIR/cgx-control-UID/PID`, the program's command line
//! beside it in `PID.cmd`). A request is one line, one of Callgrind's
//! monitor commands (`dump [HINT]`, `zero`, `instrumentation [on|off]`,
//! `status [internal]`); the reply is the text Callgrind's monitor prints
//! for it, then the connection closes. To serve a request the run has the
//! tracer stop the program's main thread with the engine's control signal,
//! which the program never sees: a program blocked in a system call (a
//! server in `epoll_wait`) is served at once and goes on waiting.

use std::path::PathBuf;

use cgx_callstack::Control;

pub mod client;
pub mod server;

/// The folder of the current user's control sockets.
pub fn folder() -> PathBuf {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("cgx-control-{uid}"))
}

/// The monitor command of a request line; `None` for one Callgrind's
/// monitor does not know.
pub fn parse(line: &str) -> Option<Control> {
    let mut words = line.split_whitespace();
    let command = match words.next()? {
        "dump" => Control::Dump {
            // Callgrind names the dump after the whole command.
            trigger: line.trim().to_string(),
        },
        "zero" => Control::Zero,
        "instrumentation" => Control::Instrumentation(match words.next() {
            None => None,
            Some("on") => Some(true),
            Some("off") => Some(false),
            Some(_) => return None,
        }),
        "status" => Control::Status {
            internal: words.next() == Some("internal"),
        },
        _ => return None,
    };
    Some(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_callgrinds_monitor_commands() {
        let dump = |trigger: &str| {
            Some(Control::Dump {
                trigger: trigger.into(),
            })
        };
        assert_eq!(parse("dump"), dump("dump"));
        assert_eq!(
            parse("dump before the loop\n"),
            dump("dump before the loop")
        );
        assert_eq!(parse("zero"), Some(Control::Zero));
        assert_eq!(
            parse("instrumentation off"),
            Some(Control::Instrumentation(Some(false)))
        );
        assert_eq!(
            parse("instrumentation on"),
            Some(Control::Instrumentation(Some(true)))
        );
        assert_eq!(
            parse("instrumentation"),
            Some(Control::Instrumentation(None))
        );
        assert_eq!(parse("instrumentation maybe"), None);
        assert_eq!(
            parse("status internal"),
            Some(Control::Status { internal: true })
        );
        assert_eq!(parse("status"), Some(Control::Status { internal: false }));
        assert_eq!(parse("v.kill"), None);
        assert_eq!(parse(""), None);
    }
}
