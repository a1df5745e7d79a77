//! Output file names, as Valgrind 3.19 makes them.
//!
//! The template (`--callgrind-out-file=`, default `callgrind.out.%p`) may hold
//! `%p` (the process id), `%q{VAR}` (an environment variable, which must be set)
//! and `%%` (a `%`). Valgrind appends to the expanded name `.N` for the Nth dump
//! a program asked for (the final dump gets no number) and `-NN` (the thread
//! number, two digits at least) with `--separate-threads=yes`, in that order:
//! `callgrind.out.1234`, `callgrind.out.1234.1`, `callgrind.out.1234-02`,
//! `callgrind.out.1234.1-02`.

use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// A parsed output file name template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    /// The template as given, for messages.
    text: String,
    pieces: Vec<Piece>,
}

/// A piece of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    /// Literal text (with `%%` and `%q{VAR}` already replaced).
    Text(String),
    /// `%p`.
    Pid,
}

/// Why a template was refused; the messages follow Valgrind's.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `%q` without `{`.
    #[error("expected '{{' after '%q'")]
    MissingBrace,
    /// `%q{VAR` without `}`.
    #[error("missing '}}' in %q specifier")]
    MissingClosingBrace,
    /// `%q{VAR}` names an unset variable.
    #[error("environment variable '{0}' is not set")]
    Unset(String),
    /// `%` followed by something else, or nothing.
    #[error("unknown '{0}' (expected %p, %q{{VAR}} or %%)")]
    Unknown(String),
}

impl Template {
    /// Parses `text`, looking `%q{VAR}` up with `env` (now: the variables are the
    /// ones the program starts with).
    pub fn parse(
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Template, TemplateError> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(at) = rest.find('%') {
            literal.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            let mut chars = after.chars();
            match chars.next() {
                Some('%') => {
                    literal.push('%');
                    rest = chars.as_str();
                }
                Some('p') => {
                    if !literal.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut literal)));
                    }
                    pieces.push(Piece::Pid);
                    rest = chars.as_str();
                }
                Some('q') => {
                    let braced = chars
                        .as_str()
                        .strip_prefix('{')
                        .ok_or(TemplateError::MissingBrace)?;
                    let end = braced.find('}').ok_or(TemplateError::MissingClosingBrace)?;
                    let name = &braced[..end];
                    let value = env(name).ok_or_else(|| TemplateError::Unset(name.to_string()))?;
                    literal.push_str(&value);
                    rest = &braced[end + 1..];
                }
                Some(other) => return Err(TemplateError::Unknown(format!("%{other}"))),
                None => return Err(TemplateError::Unknown("%".to_string())),
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Ok(Template {
            text: text.to_string(),
            pieces,
        })
    }

    /// Parses `text` with the variables of this process.
    pub fn from_env(text: &str) -> Result<Template, TemplateError> {
        Template::parse(text, |name| {
            std::env::var_os(name).map(|value| value.to_string_lossy().into_owned())
        })
    }

    /// The name for process `pid`, without suffixes.
    pub fn expand(&self, pid: i32) -> String {
        let mut name = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => name.push_str(text),
                Piece::Pid => name.push_str(&pid.to_string()),
            }
        }
        name
    }

    /// The file of one dump: the expanded name, then `.N` for the Nth dump the
    /// program asked for, then `-NN` for thread NN with `--separate-threads=yes`.
    pub fn dump_path(&self, pid: i32, sequence: Option<u32>, thread: Option<u32>) -> PathBuf {
        let mut name = self.expand(pid);
        if let Some(sequence) = sequence {
            name.push_str(&format!(".{sequence}"));
        }
        if let Some(thread) = thread {
            name.push_str(&format!("-{thread:02}"));
        }
        PathBuf::from(name)
    }

    /// Checks, before the program starts, that the profiles can be written: the
    /// folder exists and takes new files (a probe file is created and removed),
    /// and the name is not a folder. The name is expanded with `pid` (cgx's own:
    /// the program's is not known yet).
    pub fn check_writable(&self, pid: i32) -> Result<(), WriteCheckError> {
        let path = PathBuf::from(self.expand(pid));
        let fail = |error: io::Error| WriteCheckError {
            name: self.text.clone(),
            reason: os_message(&error),
        };
        if path.is_dir() {
            return Err(fail(io::Error::from_raw_os_error(21))); // EISDIR
        }
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        // metadata first: its errors are the clearest (ENOENT, ENOTDIR, EACCES).
        let metadata = fs::metadata(dir).map_err(fail)?;
        if !metadata.is_dir() {
            return Err(fail(io::Error::from_raw_os_error(20))); // ENOTDIR
        }
        let mut attempt = 0u32;
        loop {
            let probe = dir.join(format!(".cgx-probe-{pid}-{attempt}"));
            match OpenOptions::new().write(true).create_new(true).open(&probe) {
                Ok(file) => {
                    drop(file);
                    // Leaving the probe behind would be untidy but harmless.
                    let _ = fs::remove_file(&probe);
                    return Ok(());
                }
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => {
                    attempt += 1;
                }
                Err(error) => return Err(fail(error)),
            }
        }
    }
}

/// The output folder cannot take the profiles: `cannot write NAME: REASON`.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot write {name}: {reason}")]
pub struct WriteCheckError {
    /// The output name as given.
    pub name: String,
    /// The system's message, e.g. "No such file or directory".
    pub reason: String,
}

/// An I/O error's message without Rust's " (os error N)".
pub fn os_message(error: &io::Error) -> String {
    let text = error.to_string();
    match text.rfind(" (os error ") {
        Some(at) if error.raw_os_error().is_some() => text[..at].to_string(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/me".to_string()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn expand(text: &str, pid: i32) -> Result<String, TemplateError> {
        Template::parse(text, env).map(|template| template.expand(pid))
    }

    #[test]
    fn percent_sequences() {
        assert_eq!(
            expand("callgrind.out.%p", 42),
            Ok("callgrind.out.42".into())
        );
        assert_eq!(expand("%p.%p", 7), Ok("7.7".into()));
        assert_eq!(expand("a%%b%%%p", 7), Ok("a%b%7".into()));
        assert_eq!(expand("%q{HOME}/out.%p", 7), Ok("/home/me/out.7".into()));
        assert_eq!(expand("x%q{EMPTY}y", 7), Ok("xy".into()));
        assert_eq!(expand("plain", 7), Ok("plain".into()));
        assert_eq!(expand("", 7), Ok("".into()));
        assert_eq!(expand("é%pü", 7), Ok("é7ü".into()));
    }

    #[test]
    fn bad_templates() {
        let message = |text| expand(text, 1).map_err(|e| e.to_string());
        assert_eq!(
            message("x.%q{NOPE}"),
            Err("environment variable 'NOPE' is not set".into())
        );
        assert_eq!(message("x.%q"), Err("expected '{' after '%q'".into()));
        assert_eq!(message("x.%qHOME"), Err("expected '{' after '%q'".into()));
        assert_eq!(
            message("x.%q{HOME"),
            Err("missing '}' in %q specifier".into())
        );
        assert_eq!(
            message("x.%z"),
            Err("unknown '%z' (expected %p, %q{VAR} or %%)".into())
        );
        assert_eq!(
            message("x.%"),
            Err("unknown '%' (expected %p, %q{VAR} or %%)".into())
        );
        assert_eq!(
            message("x.%é"),
            Err("unknown '%é' (expected %p, %q{VAR} or %%)".into())
        );
    }

    #[test]
    fn dump_names_as_valgrind_writes_them() {
        let template = Template::parse("callgrind.out.%p", env).unwrap();
        let name = |sequence, thread| template.dump_path(6529, sequence, thread);
        assert_eq!(name(None, None), PathBuf::from("callgrind.out.6529"));
        assert_eq!(name(Some(1), None), PathBuf::from("callgrind.out.6529.1"));
        assert_eq!(name(None, Some(1)), PathBuf::from("callgrind.out.6529-01"));
        assert_eq!(
            name(Some(1), Some(2)),
            PathBuf::from("callgrind.out.6529.1-02")
        );
        assert_eq!(
            name(Some(12), Some(123)),
            PathBuf::from("callgrind.out.6529.12-123")
        );
        let template = Template::parse("out.%p.x", env).unwrap();
        assert_eq!(
            template.dump_path(6535, Some(2), Some(1)),
            PathBuf::from("out.6535.x.2-01")
        );
    }

    #[test]
    fn writability_is_checked_before_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let good =
            Template::parse(&format!("{}/callgrind.out.%p", dir.path().display()), env).unwrap();
        assert_eq!(good.check_writable(1), Ok(()));
        // The probe is gone.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);

        let missing = Template::parse("/nonexistent/x", env).unwrap();
        assert_eq!(
            missing.check_writable(1).map_err(|e| e.to_string()),
            Err("cannot write /nonexistent/x: No such file or directory".into())
        );
        let folder = Template::parse(&dir.path().display().to_string(), env).unwrap();
        assert_eq!(
            folder.check_writable(1).map_err(|e| e.reason),
            Err("Is a directory".into())
        );
        let file = dir.path().join("file");
        fs::write(&file, "").unwrap();
        let under_file = Template::parse(&format!("{}/x.%p", file.display()), env).unwrap();
        assert_eq!(
            under_file.check_writable(1).map_err(|e| e.reason),
            Err("Not a directory".into())
        );
    }

    #[test]
    fn a_read_only_folder_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o555)).unwrap();
        let template = Template::parse(&format!("{}/x", dir.path().display()), env).unwrap();
        let result = template.check_writable(1);
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        if result.is_ok() {
            return; // root writes anywhere
        }
        assert_eq!(
            result.map_err(|e| e.reason),
            Err("Permission denied".into())
        );
    }
}
