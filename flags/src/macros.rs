//! The `define_flags!` macro: turns the declarative table in `table.rs` into
//! the static [`FlagInfo`](crate::FlagInfo) slice and one typed handle per flag.

/// Maps a HotSpot type keyword to its [`FlagType`](crate::FlagType).
macro_rules! flag_type {
    (bool) => {
        $crate::FlagType::Bool
    };
    (int) => {
        $crate::FlagType::Int
    };
    (uint) => {
        $crate::FlagType::Uint
    };
    (intx) => {
        $crate::FlagType::Intx
    };
    (uintx) => {
        $crate::FlagType::Uintx
    };
    (uint64_t) => {
        $crate::FlagType::Uint64
    };
    (size_t) => {
        $crate::FlagType::SizeT
    };
    (double) => {
        $crate::FlagType::Double
    };
    (ccstr) => {
        $crate::FlagType::Ccstr
    };
}

/// Maps a HotSpot type keyword to the Rust type its accessor returns.
macro_rules! flag_rust_type {
    (bool) => {
        bool
    };
    (int) => {
        i32
    };
    (uint) => {
        u32
    };
    (intx) => {
        i64
    };
    (uintx) => {
        u64
    };
    (uint64_t) => {
        u64
    };
    (size_t) => {
        usize
    };
    (double) => {
        f64
    };
    (ccstr) => {
        str
    };
}

/// Builds a constant [`Value`](crate::Value) of the given HotSpot type.
macro_rules! flag_value {
    (bool, $v:expr) => {
        $crate::Value::Bool($v)
    };
    (int, $v:expr) => {
        $crate::Value::Int($v as i64)
    };
    (intx, $v:expr) => {
        $crate::Value::Int($v as i64)
    };
    (uint, $v:expr) => {
        $crate::Value::Uint($v as u64)
    };
    (uintx, $v:expr) => {
        $crate::Value::Uint($v as u64)
    };
    (uint64_t, $v:expr) => {
        $crate::Value::Uint($v as u64)
    };
    (size_t, $v:expr) => {
        $crate::Value::Uint($v as u64)
    };
    (double, $v:expr) => {
        $crate::Value::Double($v as f64)
    };
    (ccstr, $v:expr) => {
        $crate::Value::Str(::std::borrow::Cow::Borrowed($v))
    };
}

/// Maps a table kind keyword to `(FlagKind, platform_dependent)`.
macro_rules! flag_kind {
    (product) => {
        ($crate::FlagKind::Product, false)
    };
    (product_pd) => {
        ($crate::FlagKind::Product, true)
    };
    (diagnostic) => {
        ($crate::FlagKind::Diagnostic, false)
    };
    (experimental) => {
        ($crate::FlagKind::Experimental, false)
    };
    (manageable) => {
        ($crate::FlagKind::Manageable, false)
    };
}

/// Declares the flag table.
///
/// Each entry reads `kind(type, Name, default, "doc") [range(min, max) | type_range()]
/// [constraint(function, Phase)];` where `kind` is `product`, `product_pd`, `diagnostic`,
/// `experimental` or `manageable`, and `type` is one of HotSpot's type keywords.
/// `type_range()` marks a flag HotSpot checks with a constraint function and no range: it
/// prints the type's own range in `-XX:+PrintFlagsRanges` (rtvm checks it in ergonomics).
macro_rules! define_flags {
    ($(
        $kind:ident ( $ty:ident, $name:ident, $default:expr, $doc:literal )
        $( range ( $min:expr, $max:expr ) )?
        $( type_range ( $($tr:tt)? ) )?
        $( constraint ( $check:path, $phase:ident ) )?
        ;
    )*) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[derive(Clone, Copy)]
        #[repr(usize)]
        enum Index { $( $name, )* }

        /// Every flag rtvm knows, in declaration order.
        pub static FLAGS: &[$crate::FlagInfo] = &[
            $(
                $crate::FlagInfo {
                    name: stringify!($name),
                    kind: flag_kind!($kind).0,
                    platform_dependent: flag_kind!($kind).1,
                    ty: flag_type!($ty),
                    default: flag_value!($ty, $default),
                    range: define_flags!(@range $ty $(, $min, $max)?),
                    type_range: define_flags!(@type_range $( type_range ( $($tr)? ) )?),
                    constraint: define_flags!(@constraint $( $check, $phase )?),
                    doc: $doc,
                },
            )*
        ];

        /// Typed handles, one per flag, named exactly as the flag.
        ///
        /// `flags.get(flag::AlwaysPreTouch)` returns a `bool`; no string look-ups at use
        /// sites.
        // The descriptions are HotSpot's plain text (`hsperfdata_<pid>`), not Markdown.
        #[allow(non_upper_case_globals, rustdoc::invalid_html_tags)]
        pub mod flag {
            $(
                #[doc = $doc]
                pub const $name: $crate::Flag<flag_rust_type!($ty)> =
                    $crate::Flag::new(super::Index::$name as usize);
            )*
        }
    };
    (@range $ty:ident) => { None };
    (@range $ty:ident, $min:expr, $max:expr) => {
        Some((flag_value!($ty, $min), flag_value!($ty, $max)))
    };
    (@type_range) => { false };
    (@type_range type_range ( )) => { true };
    (@constraint) => { None };
    (@constraint $check:path, $phase:ident) => {
        Some($crate::Constraint { check: $check, phase: $crate::Phase::$phase })
    };
}
