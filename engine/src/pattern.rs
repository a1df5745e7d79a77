//! Valgrind's wildcard patterns (`--fn-skip`, `--toggle-collect`,
//! `--trace-children-skip`): `*` matches any run of characters, `?` any one
//! character.

/// Whether `name` matches the wildcard `pattern`.
pub fn matches(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    let (mut p, mut n) = (0, 0);
    // Where the last `*` was, and the name position it currently covers up to.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == '?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((star_p, star_n)) => {
                    p = star_p + 1;
                    n = star_n + 1;
                    star = Some((star_p, star_n + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn wildcards_match_as_in_valgrind() {
        assert!(matches("main", "main"));
        assert!(!matches("main", "mainly"));
        assert!(matches("fib*", "fib"));
        assert!(matches("fib*", "fibonacci"));
        assert!(matches("*::push", "std::vector::push"));
        assert!(matches("f?b", "fib"));
        assert!(!matches("f?b", "fb"));
        assert!(matches("*a*b*", "xxaxxbxx"));
        assert!(!matches("*a*b", "xxaxxbxxc"));
        assert!(matches("*", ""));
    }
}
