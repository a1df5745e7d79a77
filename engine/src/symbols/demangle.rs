//! Demangling of Rust and C++ symbol names.
//!
//! C++ names are demangled as Valgrind demangles them, by GNU libiberty's
//! demangler: libstdc++ carries the same one (`__cxa_demangle`), which is
//! looked up once in the system's libstdc++. `cpp_demangle` stands in on a
//! system without it; it renders some names otherwise (`std::istream` as
//! `std::basic_istream<char, std::char_traits<char> >`, an empty parameter
//! pack as `<bool, >`, a reference to a nested class before the class's
//! last name), so Valgrind's names need libstdc++.

use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::OnceLock;

/// Demangles a Rust (legacy or v0) or Itanium C++ name; other names are returned
/// unchanged. Rust hashes are left out.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        if let Some(d) = libiberty_demangle(name) {
            return d;
        }
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(d) = sym.demangle(&cpp_demangle::DemangleOptions::default()) {
                return d;
            }
        }
    }
    name.to_owned()
}

/// `char *__cxa_demangle(const char *mangled, char *buffer, size_t *length,
/// int *status)`: the demangled name in memory from `malloc`, or null.
type CxaDemangle =
    unsafe extern "C" fn(*const c_char, *mut c_char, *mut usize, *mut c_int) -> *mut c_char;

/// libstdc++'s `__cxa_demangle`, when this system has a libstdc++.
fn cxa_demangle() -> Option<CxaDemangle> {
    static FOUND: OnceLock<Option<CxaDemangle>> = OnceLock::new();
    *FOUND.get_or_init(|| {
        let library = CString::new("libstdc++.so.6").ok()?;
        let symbol = CString::new("__cxa_demangle").ok()?;
        // SAFETY: both strings are NUL-terminated; the library stays loaded
        // (never closed), so the function's address stays valid; a library
        // or symbol not found gives null, checked.
        unsafe {
            let handle = libc::dlopen(library.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            if handle.is_null() {
                return None;
            }
            let address = libc::dlsym(handle, symbol.as_ptr());
            if address.is_null() {
                return None;
            }
            Some(std::mem::transmute::<*mut libc::c_void, CxaDemangle>(
                address,
            ))
        }
    })
}

/// `name` demangled by libiberty's demangler (through libstdc++), as
/// Valgrind demangles it; `None` without libstdc++ or when it fails.
fn libiberty_demangle(name: &str) -> Option<String> {
    let demangle = cxa_demangle()?;
    let mangled = CString::new(name).ok()?;
    let mut status: c_int = -1;
    // SAFETY: `mangled` is NUL-terminated; with a null buffer and length
    // the function allocates the result with `malloc` (freed below) and
    // writes only `status`.
    unsafe {
        let result = demangle(
            mangled.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut status,
        );
        if result.is_null() {
            return None;
        }
        let text = (status == 0).then(|| CStr::from_ptr(result).to_string_lossy().into_owned());
        libc::free(result.cast());
        text
    }
}

#[cfg(test)]
mod tests {
    use super::{demangle, libiberty_demangle};

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

    #[test]
    fn cpp_names_are_valgrinds() {
        // Valgrind's names (libiberty's), where cpp_demangle's differ.
        let cases = [
            (
                "_ZNK10__cxxabiv120__si_class_type_info11__do_upcastEPKNS_17__class_type_infoEPKvRNS1_15__upcast_resultE",
                "__cxxabiv1::__si_class_type_info::__do_upcast(__cxxabiv1::__class_type_info const*, \
                 void const*, __cxxabiv1::__class_type_info::__upcast_result&) const",
            ),
            ("_ZNKSi6gcountEv", "std::istream::gcount() const"),
            (
                "_ZNSbIwSt11char_traitsIwESaIwEEC1IPwEET_S5_RKS1_",
                "std::basic_string<wchar_t, std::char_traits<wchar_t>, std::allocator<wchar_t> \
                 >::basic_string<wchar_t*>(wchar_t*, wchar_t*, std::allocator<wchar_t> const&)",
            ),
            ("_Z1fIJEEvv", "void f<>()"),
        ];
        assert_eq!(libiberty_demangle("_Z1fv").as_deref(), Some("f()"));
        for (mangled, valgrinds) in cases {
            assert_eq!(demangle(mangled), valgrinds, "{mangled}");
        }
    }
}
