//! The names of a report: file, function and object names of all profiles,
//! interned once, after `--mod-filename` and `--mod-funcname`.

use std::collections::BTreeSet;

use cgx_formats::{NameId, Names};

use super::rewrite::Rewrite;
use super::table::Interner;

/// The names of all profiles of a report.
#[derive(Debug, Default)]
pub(crate) struct ReportNames {
    /// File names (after `--mod-filename`).
    pub files: Interner,
    /// Function names (after `--mod-funcname`).
    pub functions: Interner,
    /// Object names.
    pub objects: Interner,
    /// The original names of each file id (several, when `--mod-filename`
    /// merges them).
    pub original_files: Vec<BTreeSet<String>>,
}

/// `--mod-filename` and `--mod-funcname`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Rewrites<'a> {
    /// Applied to file names.
    pub file: Option<&'a Rewrite>,
    /// Applied to function names.
    pub function: Option<&'a Rewrite>,
}

const UNMAPPED: u32 = u32::MAX;

/// Maps the name ids of one profile to the report's ids, rewriting and interning
/// each name the first time it is asked for.
pub(crate) struct NameMap<'p> {
    names: &'p Names,
    rewrites: Rewrites<'p>,
    file: Vec<u32>,
    function: Vec<u32>,
    object: Vec<u32>,
}

impl<'p> NameMap<'p> {
    /// A map for the profile whose names are `names`.
    pub fn new(names: &'p Names, rewrites: Rewrites<'p>) -> NameMap<'p> {
        NameMap {
            names,
            rewrites,
            file: vec![UNMAPPED; names.len()],
            function: vec![UNMAPPED; names.len()],
            object: vec![UNMAPPED; names.len()],
        }
    }

    /// The report's id of the file `id`.
    pub fn file(&mut self, id: NameId, to: &mut ReportNames) -> u32 {
        if let Some(&mapped) = self.file.get(id.index()).filter(|&&m| m != UNMAPPED) {
            return mapped;
        }
        let original = self.names.get(id);
        let mapped = match self.rewrites.file {
            Some(rewrite) => to.files.intern(&rewrite.apply(original)),
            None => to.files.intern(original),
        };
        let index = mapped as usize;
        if to.original_files.len() <= index {
            to.original_files.resize_with(index + 1, BTreeSet::new);
        }
        to.original_files[index].insert(original.to_string());
        remember(&mut self.file, id, mapped)
    }

    /// The report's id of the function `id`.
    pub fn function(&mut self, id: NameId, to: &mut ReportNames) -> u32 {
        if let Some(&mapped) = self.function.get(id.index()).filter(|&&m| m != UNMAPPED) {
            return mapped;
        }
        let original = self.names.get(id);
        let mapped = match self.rewrites.function {
            Some(rewrite) => to.functions.intern(&rewrite.apply(original)),
            None => to.functions.intern(original),
        };
        remember(&mut self.function, id, mapped)
    }

    /// The report's id of the object `id`.
    pub fn object(&mut self, id: NameId, to: &mut ReportNames) -> u32 {
        if let Some(&mapped) = self.object.get(id.index()).filter(|&&m| m != UNMAPPED) {
            return mapped;
        }
        let mapped = to.objects.intern(self.names.get(id));
        remember(&mut self.object, id, mapped)
    }
}

fn remember(map: &mut [u32], id: NameId, mapped: u32) -> u32 {
    if let Some(slot) = map.get_mut(id.index()) {
        *slot = mapped;
    }
    mapped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_rewritten_once_and_merged() {
        let mut names = Names::default();
        let a = names.intern("v1/a.c").unwrap();
        let b = names.intern("v2/a.c").unwrap();
        let rewrite = Rewrite::parse("s/v[0-9]/vN/").unwrap();
        let rewrites = Rewrites {
            file: Some(&rewrite),
            function: None,
        };
        let mut report = ReportNames::default();
        let mut map = NameMap::new(&names, rewrites);
        let (ra, rb) = (map.file(a, &mut report), map.file(b, &mut report));
        assert_eq!(ra, rb);
        assert_eq!(report.files.get(ra), "vN/a.c");
        let originals: Vec<&str> = report.original_files[ra as usize]
            .iter()
            .map(String::as_str)
            .collect();
        assert_eq!(originals, ["v1/a.c", "v2/a.c"]);
        // Function names are not rewritten by --mod-filename.
        let f = map.function(a, &mut report);
        assert_eq!(report.functions.get(f), "v1/a.c");
    }
}
