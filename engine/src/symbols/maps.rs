//! Parsing of `/proc/PID/maps`.

use super::SymbolsError;

/// One line of `/proc/PID/maps`: a range of the address space and what backs it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mapping {
    /// First address of the range.
    pub start: u64,
    /// One past the last address of the range.
    pub end: u64,
    /// Permissions as the kernel writes them, e.g. `r-xp`.
    pub perms: String,
    /// Offset in the backing file of the byte mapped at `start`.
    pub offset: u64,
    /// Device number of the backing file (`major:minor` in the file).
    pub dev: (u32, u32),
    /// Inode of the backing file, 0 for anonymous memory.
    pub inode: u64,
    /// The path or pseudo-name (`[heap]`, `[vdso]`, ...), empty for anonymous memory.
    pub path: String,
}

impl Mapping {
    /// Whether the range is executable.
    pub fn is_executable(&self) -> bool {
        self.perms.as_bytes().get(2) == Some(&b'x')
    }

    /// Whether the range is readable but not writable (where code may be
    /// whose execute permission was taken away).
    pub fn is_read_only(&self) -> bool {
        self.perms.as_bytes().first() == Some(&b'r') && self.perms.as_bytes().get(1) == Some(&b'-')
    }

    /// Whether the range is backed by a file (its path is absolute).
    pub fn is_file(&self) -> bool {
        self.path.starts_with('/')
    }

    /// Parses one line; `None` if it is malformed.
    pub fn parse_line(line: &str) -> Option<Mapping> {
        let mut rest = line;
        let mut field = || {
            let t = rest.trim_start();
            let end = t.find(char::is_whitespace).unwrap_or(t.len());
            rest = &t[end..];
            Some(&t[..end]).filter(|f| !f.is_empty())
        };
        let range = field()?;
        let perms = field()?;
        let offset = field()?;
        let dev = field()?;
        let inode = field()?;
        let (start, end) = range.split_once('-')?;
        let (major, minor) = dev.split_once(':')?;
        Some(Mapping {
            start: u64::from_str_radix(start, 16).ok()?,
            end: u64::from_str_radix(end, 16).ok()?,
            perms: perms.to_owned(),
            offset: u64::from_str_radix(offset, 16).ok()?,
            dev: (
                u32::from_str_radix(major, 16).ok()?,
                u32::from_str_radix(minor, 16).ok()?,
            ),
            inode: inode.parse().ok()?,
            path: rest.trim().to_owned(),
        })
    }
}

/// Parses the whole text of a `/proc/PID/maps` file.
pub fn parse_maps(text: &str) -> Result<Vec<Mapping>, SymbolsError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            Mapping::parse_line(l).ok_or_else(|| SymbolsError::BadMapsLine {
                line: i + 1,
                text: l.to_owned(),
            })
        })
        .collect()
}

/// Reads and parses `/proc/<pid>/maps`.
pub fn read_maps(pid: u32) -> Result<Vec<Mapping>, SymbolsError> {
    parse_maps(&read_maps_text(pid)?)
}

/// The text of `/proc/<pid>/maps`.
pub(super) fn read_maps_text(pid: u32) -> Result<String, SymbolsError> {
    let path = format!("/proc/{pid}/maps");
    std::fs::read_to_string(&path).map_err(|source| SymbolsError::Io { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines() {
        let m = Mapping::parse_line(
            "7f1c2a428000-7f1c2a5bd000 r-xp 00028000 08:01 1835086   /usr/lib/x86_64-linux-gnu/libc.so.6",
        )
        .unwrap();
        assert_eq!(m.start, 0x7f1c2a428000);
        assert_eq!(m.end, 0x7f1c2a5bd000);
        assert_eq!(m.offset, 0x28000);
        assert_eq!(m.dev, (8, 1));
        assert_eq!(m.inode, 1835086);
        assert_eq!(m.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        assert!(m.is_executable() && m.is_file());
        let anon = Mapping::parse_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0").unwrap();
        assert_eq!(anon.path, "");
        let sp = Mapping::parse_line("1000-2000 r-xp 0 00:05 7 /tmp/a b (deleted)").unwrap();
        assert_eq!(sp.path, "/tmp/a b (deleted)");
        assert!(parse_maps("zz-1 r-xp 0 0:0 0\n").is_err());
    }
}
