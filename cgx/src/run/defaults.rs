//! Valgrind's default options: the words of `~/.valgrindrc`, of the
//! `VALGRIND_OPTS` variable and of `./.valgrindrc`, in that order, come
//! before the command line's options (so the command line wins). An option
//! prefixed with a tool's name (`--callgrind:dump-instr=yes`), there or on
//! the command line, counts for that tool only. As Valgrind, `./.valgrindrc`
//! is read only when it is a regular file of the user that is not
//! writable by others.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The texts the default options come from, each optional.
#[derive(Debug, Default)]
pub struct Sources {
    /// `~/.valgrindrc`.
    pub home_rc: Option<String>,
    /// `VALGRIND_OPTS`.
    pub env: Option<String>,
    /// `./.valgrindrc`.
    pub cwd_rc: Option<String>,
}

impl Sources {
    /// Reads them from this process's environment and files.
    pub fn read() -> Sources {
        let home_rc = std::env::var_os("HOME")
            .map(|home| Path::new(&home).join(".valgrindrc"))
            .and_then(|path| fs::read_to_string(path).ok());
        let cwd = Path::new(".valgrindrc");
        // SAFETY: geteuid has no preconditions and cannot fail.
        let user = unsafe { libc::geteuid() };
        let cwd_rc = fs::metadata(cwd)
            .ok()
            .filter(|metadata| {
                metadata.is_file() && metadata.uid() == user && metadata.mode() & 0o002 == 0
            })
            .and_then(|_| fs::read_to_string(cwd).ok());
        Sources {
            home_rc,
            env: std::env::var("VALGRIND_OPTS").ok(),
            cwd_rc,
        }
    }

    /// Their words, in Valgrind's order.
    fn words(&self) -> impl Iterator<Item = &str> {
        [&self.home_rc, &self.env, &self.cwd_rc]
            .into_iter()
            .flatten()
            .flat_map(|text| text.split_whitespace())
    }
}

/// The command line `args` (options, program, its arguments) with the
/// default options of `sources` before its options, and tool-prefixed
/// options kept (without their prefix) only for the tool chosen: the last
/// `--tool=` of all of them, else `default_tool`.
pub fn with_defaults(sources: &Sources, args: &[OsString], default_tool: &str) -> Vec<OsString> {
    let program = args
        .iter()
        .position(|arg| !arg.as_encoded_bytes().starts_with(b"-"))
        .unwrap_or(args.len());
    let (options, rest) = args.split_at(program);
    let mut all: Vec<OsString> = sources.words().map(OsString::from).collect();
    all.extend(options.iter().cloned());
    let tool = all
        .iter()
        .filter_map(|arg| arg.to_str()?.strip_prefix("--tool="))
        .next_back()
        .unwrap_or(default_tool)
        .to_string();
    let mut expanded: Vec<OsString> = all
        .into_iter()
        .filter_map(|arg| match tool_prefixed(&arg) {
            Some((prefix, option)) if prefix == tool => Some(OsString::from(format!("--{option}"))),
            Some(_) => None,
            None => Some(arg),
        })
        .collect();
    expanded.extend(rest.iter().cloned());
    expanded
}

/// `("callgrind", "dump-instr=yes")` for `--callgrind:dump-instr=yes`.
fn tool_prefixed(arg: &OsString) -> Option<(&str, &str)> {
    let option = arg.to_str()?.strip_prefix("--")?;
    let (tool, rest) = option.split_once(':')?;
    // A value may hold a colon (`--log-file=a:b`): the prefix comes first.
    let tool_like = !tool.is_empty() && tool.bytes().all(|b| b.is_ascii_lowercase());
    tool_like.then_some((tool, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn defaults_come_first_in_valgrinds_order_and_the_command_line_last() {
        let sources = Sources {
            home_rc: Some("--dump-line=no\n--callgrind:dump-instr=yes".into()),
            env: Some("  --tool=callgrind --cachegrind:cache-sim=no ".into()),
            cwd_rc: Some("--separate-threads=yes".into()),
        };
        let args = strings(&["-q", "./prog", "--tool=x", "--callgrind:y"]);
        assert_eq!(
            with_defaults(&sources, &args, "memcheck"),
            strings(&[
                "--dump-line=no",
                "--dump-instr=yes",
                "--tool=callgrind",
                "--separate-threads=yes",
                "-q",
                "./prog",
                "--tool=x",
                "--callgrind:y",
            ])
        );
    }

    #[test]
    fn the_last_tool_decides_which_prefixed_options_count() {
        let sources = Sources {
            env: Some("--tool=callgrind --callgrind:dump-instr=yes".into()),
            ..Sources::default()
        };
        let args = strings(&["--tool=cachegrind", "--cachegrind:cache-sim=no", "prog"]);
        assert_eq!(
            with_defaults(&sources, &args, "callgrind"),
            strings(&[
                "--tool=callgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                "prog"
            ])
        );
        // No --tool anywhere: the default tool's.
        let args = strings(&[
            "--callgrind:dump-instr=yes",
            "--memcheck:leak-check=full",
            "p",
        ]);
        assert_eq!(
            with_defaults(&Sources::default(), &args, "callgrind"),
            strings(&["--dump-instr=yes", "p"])
        );
        // A colon in a value is not a prefix.
        let args = strings(&["--log-file=a:b", "p"]);
        assert_eq!(with_defaults(&Sources::default(), &args, "callgrind"), args);
    }
}
