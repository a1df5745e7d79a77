//! Demangling of Rust and C++ symbol names.

/// Demangles a Rust (legacy or v0) or Itanium C++ name; other names are returned
/// unchanged. Rust hashes are left out.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(d) = sym.demangle(&cpp_demangle::DemangleOptions::default()) {
                return d;
            }
        }
    }
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn demangles() {
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_ZN3foo3barE"), "foo::bar");
        assert_eq!(
            demangle("_ZN3std2rt10lang_start17h0123456789abcdefE"),
            "std::rt::lang_start"
        );
        assert_eq!(demangle("_Z3addii"), "add(int, int)");
        assert_eq!(demangle("_Zbogus("), "_Zbogus(");
    }
}
