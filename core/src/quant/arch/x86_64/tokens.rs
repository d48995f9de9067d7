//! Capability tokens: zero-sized values that prove this CPU has a kernel level's instructions.
//!
//! A token is made only by its level check (`try_new`, or [`Avx512Vnni::vbmi`]) or, unchecked, by
//! the table glue in `mod.rs` after `pick!`'s check. Every SIMD kernel entry takes its token by
//! value, and [`kernel!`] compiles the entry's body in a private function whose
//! `#[target_feature]` the token must cover (a compile-time check), so no caller reaches an
//! instruction its CPU may lack without first holding the proof.

use crate::quant::level::Level;

/// A level's proof of its target features.
pub(crate) trait Token: Copy {
    /// The target features the token proves, comma-separated as `#[target_feature]` takes them.
    const FEATURES: &'static str;
}

/// AVX2 and F16C (the `avx2` level).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2 {
    _proof: (),
}

/// AVX-512 F, BW, VL and VNNI on top of [`Avx2`] (the `avx512vnni` level).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx512Vnni {
    _proof: (),
}

/// AVX-512 VBMI on top of [`Avx512Vnni`] (no level of its own: the VNNI kernels branch on it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx512Vbmi {
    _proof: (),
}

/// AMX-TILE and AMX-INT8, detected and granted (`level::grant_amx`), on top of [`Avx512Vnni`]
/// (the `amx` level). Rust names no AMX target feature on stable, so the token proves the AVX-512
/// VNNI features to `#[target_feature]` and the tiles to the inline `asm!` that takes it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Amx {
    _proof: (),
}

impl Token for Avx2 {
    const FEATURES: &'static str = "avx2,f16c";
}

impl Token for Avx512Vnni {
    const FEATURES: &'static str = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni";
}

impl Token for Avx512Vbmi {
    const FEATURES: &'static str = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi";
}

impl Token for Amx {
    const FEATURES: &'static str = Avx512Vnni::FEATURES;
}

impl Amx {
    /// The token, if this CPU has the `amx` level and the tiles were granted.
    pub(crate) fn try_new() -> Option<Amx> {
        Level::Amx.is_available().then_some(Amx { _proof: () })
    }

    /// The token without the check.
    ///
    /// # Safety
    /// The CPU must have AMX-TILE, AMX-INT8 and every feature of [`Avx512Vnni`], the OS must save
    /// the tile state, and this process must hold the OS's permission to use it.
    pub(crate) const unsafe fn new_unchecked() -> Amx {
        Amx { _proof: () }
    }

    /// The level below, which this one includes.
    #[inline(always)]
    pub(crate) fn vnni(self) -> Avx512Vnni {
        Avx512Vnni { _proof: () }
    }
}

impl Avx2 {
    /// The token, if this CPU and build have the `avx2` level.
    pub(crate) fn try_new() -> Option<Avx2> {
        Level::Avx2.is_available().then_some(Avx2 { _proof: () })
    }

    /// The token without the check.
    ///
    /// # Safety
    /// The CPU must have AVX2 and F16C (and the OS save YMM state).
    pub(crate) const unsafe fn new_unchecked() -> Avx2 {
        Avx2 { _proof: () }
    }
}

impl Avx512Vnni {
    /// The token, if this CPU and build have the `avx512vnni` level.
    pub(crate) fn try_new() -> Option<Avx512Vnni> {
        Level::Avx512Vnni
            .is_available()
            .then_some(Avx512Vnni { _proof: () })
    }

    /// The token without the check.
    ///
    /// # Safety
    /// The CPU must have every feature of [`Avx512Vnni::FEATURES`](Token::FEATURES) (and the OS
    /// save ZMM and opmask state).
    pub(crate) const unsafe fn new_unchecked() -> Avx512Vnni {
        Avx512Vnni { _proof: () }
    }

    /// The level below, which this one includes.
    #[inline(always)]
    pub(crate) fn avx2(self) -> Avx2 {
        Avx2 { _proof: () }
    }

    /// The VBMI token, if the CPU has AVX-512 VBMI too (known at compile time, or detected).
    #[inline(always)]
    pub(crate) fn vbmi(self) -> Option<Avx512Vbmi> {
        vbmi_available().then_some(Avx512Vbmi { _proof: () })
    }
}

impl Avx512Vbmi {
    /// The token, if this CPU and build have the `avx512vnni` level and AVX-512 VBMI.
    #[cfg(test)]
    pub(crate) fn try_new() -> Option<Avx512Vbmi> {
        Avx512Vnni::try_new()?.vbmi()
    }

    /// The level it extends.
    #[inline(always)]
    pub(crate) fn vnni(self) -> Avx512Vnni {
        Avx512Vnni { _proof: () }
    }
}

/// Whether the VNNI kernels may use VBMI's `vpermb`: in the build's target features, or detected
/// (a test may hide it on its thread, see `detect::hide`).
fn vbmi_available() -> bool {
    #[cfg(test)]
    if super::detect::hidden().avx512vbmi {
        return false;
    }
    cfg!(all(
        target_feature = "avx512vbmi",
        target_feature = "avx512vl"
    )) || { super::detect::features().avx512vbmi }
}

/// Whether every feature of the comma-separated `needed` is one of `provided`'s (compile time).
pub(crate) const fn covers(provided: &str, needed: &str) -> bool {
    let (p, n) = (provided.as_bytes(), needed.as_bytes());
    let mut start = 0;
    while start < n.len() {
        let mut end = start;
        while end < n.len() && n[end] != b',' {
            end += 1;
        }
        if !has_feature(p, n, start, end) {
            return false;
        }
        start = end + 1;
    }
    true
}

/// Whether `needed[start..end]` is one of the comma-separated names of `provided`.
const fn has_feature(provided: &[u8], needed: &[u8], start: usize, end: usize) -> bool {
    let mut at = 0;
    while at < provided.len() {
        let mut stop = at;
        while stop < provided.len() && provided[stop] != b',' {
            stop += 1;
        }
        if stop - at == end - start {
            let mut k = 0;
            while k < end - start && provided[at + k] == needed[start + k] {
                k += 1;
            }
            if k == end - start {
                return true;
            }
        }
        at = stop + 1;
    }
    false
}

/// SIMD kernel entries: each `fn name(token: T, args) -> R { body }` preceded by its
/// `#[target_feature(enable = "...")]` becomes a safe `name` taking the token, whose body runs in
/// a private function compiled with exactly those features; the features must be among the
/// token's `T::FEATURES` or the build fails.
macro_rules! kernel {
    ($(
        $(#[doc = $doc:expr])*
        #[target_feature(enable = $features:literal)]
        $vis:vis fn $name:ident($token:ident: $T:ty $(, $arg:ident: $ty:ty)* $(,)?) $(-> $ret:ty)?
        $body:block
    )*) => {$(
        $(#[doc = $doc])*
        #[inline]
        $vis fn $name($token: $T $(, $arg: $ty)*) $(-> $ret)? {
            const _: () = assert!(
                $crate::quant::arch::x86_64::tokens::covers(
                    <$T as $crate::quant::arch::x86_64::tokens::Token>::FEATURES,
                    $features
                ),
                "the token does not prove every feature the kernel enables"
            );
            #[target_feature(enable = $features)]
            fn body($token: $T $(, $arg: $ty)*) $(-> $ret)? $body
            // SAFETY: the token, made only where the CPU has its `FEATURES`, covers `$features`
            // (checked above).
            unsafe { body($token $(, $arg)*) }
        }
    )*};
}
pub(crate) use kernel;

/// A kernel written once over its token (a body generic over `Primitives`), as [`kernel!`]
/// entries at every x86_64 level: `$avx2` at AVX2, `$vnni_only` and `$vbmi` at AVX-512 VNNI
/// without and with VBMI, and `$vnni`, the VNNI level's entry, which runs `$vbmi` where the CPU
/// has VBMI. With `; $name = a, b, c` after the signature the body sees `$name`, the closure
/// `|w, x| a/b/c(token, w, x)` of its own level (a multi-row kernel's single-row fallback).
macro_rules! every_level {
    (
        $(#[doc = $doc:expr])*
        fn $avx2:ident, $vnni_only:ident, $vbmi:ident => $vnni:ident(
            $token:ident $(, $arg:ident: $ty:ty)* $(,)?
        ) $(-> $ret:ty)?
        $(; $single:ident = $s_avx2:ident, $s_vnni_only:ident, $s_vbmi:ident)?
        $body:block
    ) => {
        $crate::quant::arch::x86_64::tokens::kernel! {
            $(#[doc = $doc])*
            #[target_feature(enable = "avx2,f16c")]
            pub(super) fn $avx2(
                $token: $crate::quant::arch::x86_64::tokens::Avx2 $(, $arg: $ty)*
            ) $(-> $ret)? {
                $(let $single = |w: &[_], x: &[_]| $s_avx2($token, w, x);)?
                $body
            }

            $(#[doc = $doc])*
            #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
            fn $vnni_only(
                $token: $crate::quant::arch::x86_64::tokens::Avx512Vnni $(, $arg: $ty)*
            ) $(-> $ret)? {
                $(let $single = |w: &[_], x: &[_]| $s_vnni_only($token, w, x);)?
                $body
            }

            $(#[doc = $doc])*
            #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
            fn $vbmi(
                $token: $crate::quant::arch::x86_64::tokens::Avx512Vbmi $(, $arg: $ty)*
            ) $(-> $ret)? {
                $(let $single = |w: &[_], x: &[_]| $s_vbmi($token, w, x);)?
                $body
            }
        }

        $(#[doc = $doc])*
        pub(super) fn $vnni(
            token: $crate::quant::arch::x86_64::tokens::Avx512Vnni $(, $arg: $ty)*
        ) $(-> $ret)? {
            match token.vbmi() {
                Some(vbmi) => $vbmi(vbmi $(, $arg)*),
                None => $vnni_only(token $(, $arg)*),
            }
        }
    };
}
pub(crate) use every_level;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::arch::x86_64::detect;

    #[test]
    fn covers_checks_every_feature() {
        assert!(covers(Avx2::FEATURES, "avx2"));
        assert!(covers(Avx2::FEATURES, "f16c,avx2"));
        assert!(!covers(Avx2::FEATURES, "avx2,avx512f"));
        assert!(!covers(Avx2::FEATURES, "avx"));
        assert!(covers(Avx512Vnni::FEATURES, Avx2::FEATURES));
        assert!(!covers(Avx512Vnni::FEATURES, Avx512Vbmi::FEATURES));
        assert!(covers(Avx512Vbmi::FEATURES, Avx512Vnni::FEATURES));
    }

    /// A token exists exactly where its level does: hidden from detection on this thread, none
    /// can be made (unless the build's own target features guarantee the level).
    #[test]
    fn no_token_without_the_level() {
        // Fill the process-wide level caches before hiding anything on this thread.
        let _ = crate::quant::level::detect();
        let has = detect::features();
        assert_eq!(Avx2::try_new().is_some(), Level::Avx2.is_available());
        assert_eq!(
            Avx512Vnni::try_new().is_some(),
            Level::Avx512Vnni.is_available()
        );
        assert_eq!(
            Avx512Vbmi::try_new().is_some(),
            Level::Avx512Vnni.is_available()
                && (has.avx512vbmi || cfg!(target_feature = "avx512vbmi"))
        );
        assert_eq!(Amx::try_new().is_some(), Level::Amx.is_available());
        detect::hide(detect::Features {
            avx2: true,
            avx512vnni: true,
            avx512vbmi: true,
        });
        let compiled_avx2 = cfg!(all(target_feature = "avx2", target_feature = "f16c"));
        let compiled_vnni = cfg!(all(
            target_feature = "avx512vnni",
            target_feature = "avx512vl",
            target_feature = "avx512bw"
        ));
        assert_eq!(Avx2::try_new().is_some(), compiled_avx2);
        assert_eq!(Avx512Vnni::try_new().is_some(), compiled_vnni);
        assert!(Avx512Vbmi::try_new().is_none());
        // AMX includes VNNI: hidden with it.
        assert!(Amx::try_new().is_none() || compiled_vnni);
        detect::hide(detect::Features {
            avx2: false,
            avx512vnni: false,
            avx512vbmi: true,
        });
        assert_eq!(Avx2::try_new().is_some(), Level::Avx2.is_available());
        assert!(Avx512Vbmi::try_new().is_none());
        if let Some(vnni) = Avx512Vnni::try_new() {
            assert!(vnni.vbmi().is_none());
        }
        detect::hide(detect::Features {
            avx2: false,
            avx512vnni: false,
            avx512vbmi: false,
        });
        assert_eq!(Avx2::try_new().is_some(), has.avx2 || compiled_avx2);
    }
}
