//! `--mod-filename` and `--mod-funcname`: Perl-style `s/old/new/flags` rewrites of
//! names.

use std::borrow::Cow;

use regex::{Regex, RegexBuilder};

/// A search-and-replace expression `s/old/new/flags`: `old` is a regular
/// expression (Rust `regex` syntax), `new` the replacement, in which `$1`, `${1}`
/// and `\1` name groups; `\/` is a slash in either part. Flag `g` replaces every
/// match instead of the first, `i` ignores case.
#[derive(Clone, Debug)]
pub struct Rewrite {
    regex: Regex,
    replacement: String,
    all: bool,
}

impl Rewrite {
    /// Parses `s/old/new/flags`; the error says what is wrong with it.
    pub fn parse(expression: &str) -> Result<Rewrite, String> {
        let body = expression
            .strip_prefix("s/")
            .ok_or("it must have the form s/old/new/ (with optional flags g and i)")?;
        let parts = split_unescaped_slashes(body);
        let [old, new, flags] = parts.as_slice() else {
            return Err(format!(
                "it must have the form s/old/new/ with flags after the last '/' \
                 (found {} unescaped '/')",
                parts.len()
            ));
        };
        let (mut all, mut ignore_case) = (false, false);
        for flag in flags.chars() {
            match flag {
                'g' => all = true,
                'i' => ignore_case = true,
                other => return Err(format!("unknown flag '{other}' (only g and i exist)")),
            }
        }
        let regex = RegexBuilder::new(&old.replace("\\/", "/"))
            .case_insensitive(ignore_case)
            .build()
            .map_err(|error| {
                // The message spans lines (pattern, caret, what); keep the what.
                let message = error.to_string();
                let what = message.lines().last().unwrap_or_default().trim();
                format!(
                    "bad regular expression: {}",
                    what.strip_prefix("error: ").unwrap_or(what)
                )
            })?;
        Ok(Rewrite {
            regex,
            replacement: replacement_syntax(&new.replace("\\/", "/")),
            all,
        })
    }

    /// `name` rewritten (unchanged when the expression does not match).
    pub fn apply<'a>(&self, name: &'a str) -> Cow<'a, str> {
        if self.all {
            self.regex.replace_all(name, self.replacement.as_str())
        } else {
            self.regex.replace(name, self.replacement.as_str())
        }
    }
}

/// Splits at the slashes that no backslash escapes.
fn split_unescaped_slashes(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (index, c) in text.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '/' if !escaped => {
                parts.push(&text[start..index]);
                start = index + 1;
            }
            _ => escaped = false,
        }
    }
    parts.push(&text[start..]);
    parts
}

/// Turns Perl/Python group references `\1` into the `regex` crate's `${1}`.
fn replacement_syntax(new: &str) -> String {
    let mut out = String::with_capacity(new.len());
    let mut chars = new.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('\\', Some(digit)) if digit.is_ascii_digit() => {
                out.push_str("${");
                while let Some(&digit) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    out.push(digit);
                    chars.next();
                }
                out.push('}');
            }
            ('\\', Some(&next)) => {
                chars.next();
                if next == '$' {
                    out.push_str("$$");
                } else {
                    out.push(next);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(expression: &str, name: &str) -> String {
        Rewrite::parse(expression).unwrap().apply(name).into_owned()
    }

    #[test]
    fn first_match_unless_g() {
        assert_eq!(rewrite("s/a/b/", "aaa"), "baa");
        assert_eq!(rewrite("s/a/b/g", "aaa"), "bbb");
    }

    #[test]
    fn i_ignores_case() {
        assert_eq!(rewrite("s/v1/vN/", "V1/x.c"), "V1/x.c");
        assert_eq!(rewrite("s/v1/vN/i", "V1/x.c"), "vN/x.c");
        assert_eq!(rewrite("s/v[0-9]/vN/gi", "v1/V2.c"), "vN/vN.c");
    }

    #[test]
    fn escaped_slashes_and_groups() {
        assert_eq!(rewrite(r"s/\/a\//\/b\//", "/x/a/y.c"), "/x/b/y.c");
        assert_eq!(rewrite(r"s/(\w+)\.c/\1.h/", "dir/f.c"), "dir/f.h");
        assert_eq!(rewrite(r"s/(\w+)\.c/${1}_x/", "f.c"), "f_x");
        assert_eq!(rewrite(r"s/T\.[0-9]+/T.N/", "T.1234"), "T.N");
    }

    #[test]
    fn bad_expressions_are_rejected() {
        for bad in ["a/b/", "s/a/b", "s/a/b/c/", "s/a/b/x", "s/(/b/"] {
            assert!(Rewrite::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Rewrite::parse("s/(/b/").unwrap_err(),
            "bad regular expression: unclosed group"
        );
    }
}
