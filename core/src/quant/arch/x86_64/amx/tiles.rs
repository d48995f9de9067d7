//! The tile operations the AMX kernels use, as a trait with two implementations: [`Hardware`],
//! the instructions themselves (inline `asm!` on fixed `tmm` registers), and, in tests,
//! `emulated::Emulated`, their scalar semantics as the Intel SDM states them (vol. 2,
//! LDTILECFG, TILELOADD, TILEZERO, TDPBSSD, TILESTORED, TILERELEASE). The kernels are written once
//! over the trait, so that everything but the instruction encodings runs on any x86_64 machine.
//!
//! Rust's AMX intrinsics and the `amx-tile`/`amx-int8` target features are unstable (rustc 1.95),
//! so [`Hardware`] uses plain `asm!`, which the assembler takes whatever the target features; the
//! [`Amx`] token it holds is the proof that the CPU has the tiles and the OS lets this process
//! use them.

use core::arch::asm;

use crate::quant::arch::x86_64::tokens::Amx;

/// The eight tile registers of palette 1 as the kernels use them: `A0`, `A1` hold sixteen
/// activation columns each (one 32-byte block per row), `B0`, `B1` sixteen weight rows each in
/// the dword-interleaved layout `tdpbssd` takes (row `k` holds bytes `4k..4k + 4` of each weight
/// row), and `C<i><j>` the integer sums of `A<i>` against `B<j>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Tile {
    A0 = 0,
    A1 = 1,
    B0 = 2,
    B1 = 3,
    C00 = 4,
    C01 = 5,
    C10 = 6,
    C11 = 7,
}

impl Tile {
    /// The accumulator of `A<i>` against `B<j>`.
    pub(super) const fn c(i: usize, j: usize) -> Tile {
        match (i & 1, j & 1) {
            (0, 0) => Tile::C00,
            (0, _) => Tile::C01,
            (_, 0) => Tile::C10,
            _ => Tile::C11,
        }
    }

    /// The sources `(A<i>, B<j>)` of an accumulator `C<i><j>` (itself for the others), as
    /// `Hardware::dot` encodes them.
    pub(super) const fn sources(self) -> (Tile, Tile) {
        match self {
            Tile::C00 => (Tile::A0, Tile::B0),
            Tile::C01 => (Tile::A0, Tile::B1),
            Tile::C10 => (Tile::A1, Tile::B0),
            Tile::C11 => (Tile::A1, Tile::B1),
            t => (t, t),
        }
    }
}

/// Rows of an activation tile (columns of the output) and of a weight row group.
pub(super) const TILE_ROWS: usize = 16;
/// Bytes per row of an activation tile: one 32-value block.
pub(super) const A_COLSB: usize = 32;
/// Rows of a weight tile: a block's 32 bytes as eight dwords.
pub(super) const B_ROWS: usize = A_COLSB / 4;
/// Bytes per row of a weight tile and of an accumulator: sixteen dwords.
pub(super) const B_COLSB: usize = 64;
/// Bytes of an activation or weight tile as the kernels stage it.
pub(super) const TILE_BYTES: usize = TILE_ROWS * A_COLSB;
/// Bytes of an accumulator tile stored densely.
pub(super) const C_BYTES: usize = TILE_ROWS * B_COLSB;
const _: () = assert!(TILE_BYTES == B_ROWS * B_COLSB);

/// The 64-byte operand of LDTILECFG (SDM vol. 2, LDTILECFG, "tile configuration format"):
/// byte 0 the palette, byte 1 `start_row`, bytes 16 + 2t the little-endian `colsb` (bytes per
/// row) of tile `t`, byte 48 + t its rows; everything else reserved and zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
pub(super) struct TileConfig {
    pub(super) bytes: [u8; 64],
}

impl TileConfig {
    /// Palette 1 with tile `t` of `shapes[t] = (rows, colsb)`.
    pub(super) const fn palette1(shapes: [(u8, u16); 8]) -> TileConfig {
        let mut bytes = [0u8; 64];
        bytes[0] = 1;
        let mut t = 0;
        while t < 8 {
            let (rows, colsb) = shapes[t];
            let colsb = colsb.to_le_bytes();
            bytes[16 + 2 * t] = colsb[0];
            bytes[17 + 2 * t] = colsb[1];
            bytes[48 + t] = rows;
            t += 1;
        }
        TileConfig { bytes }
    }

    /// Tile `t`'s `(rows, colsb)`.
    pub(super) const fn shape(&self, t: usize) -> (usize, usize) {
        let t = t & 7;
        let colsb = u16::from_le_bytes([self.bytes[16 + 2 * t], self.bytes[17 + 2 * t]]);
        (self.bytes[48 + t] as usize, colsb as usize)
    }

    /// Whether `len` bytes from a pointer hold tile `t`'s rows `stride` bytes apart.
    pub(super) const fn fits(&self, t: Tile, len: usize, stride: usize) -> bool {
        let (rows, colsb) = self.shape(t as usize);
        if rows == 0 || colsb == 0 {
            return false;
        }
        match (rows - 1).checked_mul(stride) {
            Some(last) => match last.checked_add(colsb) {
                Some(end) => end <= len,
                None => false,
            },
            None => false,
        }
    }
}

/// The kernels' configuration: activation tiles of 16 × 32 bytes, weight tiles of 8 × 64 bytes,
/// accumulators of 16 × 64 bytes (16 × 16 dwords). `tdpbssd` wants the accumulator's rows equal to
/// A's (16), its `colsb` equal to B's (64) and A's `colsb / 4` equal to B's rows (8).
pub(super) const KERNEL_CONFIG: TileConfig = {
    let a = (TILE_ROWS as u8, A_COLSB as u16);
    let b = (B_ROWS as u8, B_COLSB as u16);
    let c = (TILE_ROWS as u8, B_COLSB as u16);
    TileConfig::palette1([a, a, b, b, c, c, c, c])
};

/// The tile instructions the kernels use, on the registers of [`Tile`]. Loads and stores take
/// slices and check them against the configured shape: one that does not fit does nothing (the
/// kernels always pass fitting ones; an emulation in a test panics instead).
pub(super) trait Tiles {
    /// LDTILECFG: configures the tiles (and zeroes their data).
    fn configure(&mut self, config: &TileConfig);
    /// TILEZERO: zeroes tile `t`.
    fn zero(&mut self, t: Tile);
    /// TILELOADD: tile `t`'s rows from `src`, `stride` bytes apart.
    fn load(&mut self, t: Tile, src: &[u8], stride: usize);
    /// TDPBSSD `c, a, b` with `(a, b) = c.sources()`: each dword of `c` plus the dot products of
    /// the signed bytes of `a`'s row and `b`'s dword column.
    fn dot(&mut self, c: Tile);
    /// TILESTORED: tile `t`'s rows to `dst`, `stride` bytes apart.
    fn store(&mut self, t: Tile, dst: &mut [u8], stride: usize);
    /// TILERELEASE: back to the initial state (no configuration, tiles zero).
    fn release(&mut self);
}

/// One block's accumulators as the kernels store them, by `2 · i + j` for `C<i><j>`: row `lane`
/// holds the sixteen int32 of activation row `lane` against the weight tile's sixteen rows. On
/// whole cache lines: a 64-byte row (a TILESTORED row, a vector load) that straddles two lines
/// costs two accesses (docs/kernel-experiments.md, "AMX buffers on cache lines").
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct BlockSums(pub(super) [[i32; C_BYTES / 4]; 4]);

impl BlockSums {
    pub(super) const ZERO: BlockSums = BlockSums([[0; C_BYTES / 4]; 4]);
}

/// Every accumulator `C<i><j>` with `i < column_tiles` and `j < row_tiles` (both at most 2):
/// zeroed, `A<i>` times `B<j>` into it, stored to `sums[2 · i + j]`.
#[inline(always)]
pub(super) fn multiply_into<T: Tiles>(
    tiles: &mut T,
    column_tiles: usize,
    row_tiles: usize,
    sums: &mut BlockSums,
) {
    for i in 0..column_tiles.min(2) {
        for j in 0..row_tiles.min(2) {
            let c = Tile::c(i, j);
            tiles.zero(c);
            tiles.dot(c);
            tiles.store(c, bytemuck::cast_slice_mut(&mut sums.0[2 * i + j]), B_COLSB);
        }
    }
}

/// The tile instructions themselves, on a CPU that has them (the [`Amx`] token).
pub(super) struct Hardware {
    _token: Amx,
    /// The configuration in effect, `None` before [`Tiles::configure`] and after release: no
    /// tile instruction but LDTILECFG runs then (they would fault).
    config: Option<TileConfig>,
}

impl Hardware {
    pub(super) fn new(token: Amx) -> Hardware {
        Hardware {
            _token: token,
            config: None,
        }
    }

    /// Whether tile `t` of the configuration in effect fits `len` bytes at `stride`.
    fn fits(&self, t: Tile, len: usize, stride: usize) -> bool {
        self.config.is_some_and(|c| c.fits(t, len, stride))
    }
}

/// The text of each tile instruction [`Hardware`] runs, by register number: one definition that
/// `Hardware` and the encoding test (`tests::encodings_are_the_sdms`) both assemble.
macro_rules! text {
    (tileloadd $n:literal, $base:literal, $index:literal) => {
        concat!("tileloadd tmm", $n, ", [", $base, " + ", $index, "*1]")
    };
    (tilestored $n:literal, $base:literal, $index:literal) => {
        concat!("tilestored [", $base, " + ", $index, "*1], tmm", $n)
    };
    (tilezero $n:literal) => {
        concat!("tilezero tmm", $n)
    };
    // Intel syntax: the accumulator, then A (its rows are the accumulator's), then B.
    (tdpbssd $c:literal, $a:literal, $b:literal) => {
        concat!("tdpbssd tmm", $c, ", tmm", $a, ", tmm", $b)
    };
    (ldtilecfg $base:literal) => {
        concat!("ldtilecfg [", $base, "]")
    };
    (tilerelease) => {
        "tilerelease"
    };
}

/// `$m!(n, args)` for tile `$t`, `n` its register number (the [`Tile`] discriminant, checked
/// below), one arm per tile.
macro_rules! per_tile {
    ($t:expr, $m:ident!($($args:tt)*)) => {
        match $t {
            Tile::A0 => $m!(0, $($args)*),
            Tile::A1 => $m!(1, $($args)*),
            Tile::B0 => $m!(2, $($args)*),
            Tile::B1 => $m!(3, $($args)*),
            Tile::C00 => $m!(4, $($args)*),
            Tile::C01 => $m!(5, $($args)*),
            Tile::C10 => $m!(6, $($args)*),
            Tile::C11 => $m!(7, $($args)*),
        }
    };
}
const _: () = {
    let tiles = [
        Tile::A0,
        Tile::A1,
        Tile::B0,
        Tile::B1,
        Tile::C00,
        Tile::C01,
        Tile::C10,
        Tile::C11,
    ];
    let mut n = 0;
    while n < 8 {
        assert!(tiles[n] as usize == n);
        n += 1;
    }
};

/// The accumulators [`Hardware::dot`] multiplies into, with their sources' register numbers:
/// `$m!(accumulator, c, a, b)` for each (each checked against [`Tile::sources`]).
macro_rules! accumulators {
    ($m:ident) => {
        $m!(C00, 4, 0, 2);
        $m!(C01, 5, 0, 3);
        $m!(C10, 6, 1, 2);
        $m!(C11, 7, 1, 3);
    };
}
macro_rules! check_sources {
    ($acc:ident, $c:literal, $a:literal, $b:literal) => {
        const _: () = {
            let (a, b) = Tile::$acc.sources();
            assert!(Tile::$acc as u8 == $c && a as u8 == $a && b as u8 == $b);
        };
    };
}
accumulators!(check_sources);

macro_rules! load {
    ($n:literal, $p:expr, $s:expr) => {
        asm!(text!(tileloadd $n, "{p}", "{s}"), p = in(reg) $p, s = in(reg) $s, options(nostack, readonly, preserves_flags))
    };
}
macro_rules! store {
    ($n:literal, $p:expr, $s:expr) => {
        asm!(text!(tilestored $n, "{p}", "{s}"), p = in(reg) $p, s = in(reg) $s, options(nostack, preserves_flags))
    };
}
macro_rules! zero {
    ($n:literal,) => {
        asm!(text!(tilezero $n), options(nostack, nomem, preserves_flags))
    };
}

impl Tiles for Hardware {
    #[inline(always)]
    fn configure(&mut self, config: &TileConfig) {
        // SAFETY: the token proves AMX-TILE and the OS's permission; `config` is a valid palette
        // 1 configuration of 64 readable bytes (checked by the emulation's tests against the
        // SDM's rules: palette 1, reserved bytes zero, at most 16 rows of 64 bytes).
        unsafe {
            asm!(text!(ldtilecfg "{cfg}"), cfg = in(reg) config.bytes.as_ptr(), options(nostack, readonly, preserves_flags));
        }
        self.config = Some(*config);
    }

    #[inline(always)]
    fn zero(&mut self, t: Tile) {
        if self.config.is_none() {
            return;
        }
        // SAFETY: tiles configured (above); no memory access.
        unsafe { per_tile!(t, zero!()) }
    }

    #[inline(always)]
    fn load(&mut self, t: Tile, src: &[u8], stride: usize) {
        if !self.fits(t, src.len(), stride) {
            return;
        }
        let p = src.as_ptr();
        // SAFETY: tiles configured; the instruction reads rows × colsb bytes at `stride` apart
        // from `p`, all inside `src` (checked by `fits`).
        unsafe { per_tile!(t, load!(p, stride)) }
    }

    #[inline(always)]
    fn dot(&mut self, c: Tile) {
        if self.config.is_none() {
            return;
        }
        macro_rules! arm {
            ($acc:ident, $c:literal, $a:literal, $b:literal) => {
                if c == Tile::$acc {
                    // SAFETY: tiles configured with the kernels' shapes (A 16 × 32 bytes, B 8 ×
                    // 64, C 16 × 64, which TDPBSSD takes: C.rows = A.rows, C.colsb = B.colsb,
                    // A.colsb / 4 = B.rows); the three registers differ; no memory access.
                    unsafe {
                        asm!(text!(tdpbssd $c, $a, $b), options(nostack, nomem, preserves_flags));
                    }
                }
            };
        }
        // Not an accumulator: no instruction.
        accumulators!(arm);
    }

    #[inline(always)]
    fn store(&mut self, t: Tile, dst: &mut [u8], stride: usize) {
        if !self.fits(t, dst.len(), stride) {
            return;
        }
        let p = dst.as_mut_ptr();
        // SAFETY: tiles configured; the instruction writes rows × colsb bytes at `stride` apart
        // from `p`, all inside `dst` (checked by `fits`), which this borrow holds exclusively.
        unsafe { per_tile!(t, store!(p, stride)) }
    }

    #[inline(always)]
    fn release(&mut self) {
        // SAFETY: the token proves AMX-TILE; TILERELEASE takes no operand and is valid
        // configured or not.
        unsafe {
            asm!(text!(tilerelease), options(nostack, nomem, preserves_flags));
        }
        self.config = None;
    }
}

impl Drop for Hardware {
    /// Releases the tiles if a kernel left them configured (so the OS need not save them).
    fn drop(&mut self) {
        if self.config.is_some() {
            self.release();
        }
    }
}

/// The instruction texts above, assembled by the toolchain, against their encodings built by
/// hand from the SDM's opcode tables (vol. 2: VEX.128 with map 0F38, W0; the prefix `pp`, the
/// opcode, and ModRM/SIB with the registers where the SDM puts them: TDPBSSD's destination in
/// ModRM.reg, its first source (A) in ModRM.rm, its second (B) in VEX.vvvv, inverted). This checks
/// the operand order of the texts `Hardware` runs, which the emulation cannot see.
#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    macro_rules! all_texts {
        ($($n:literal)*; $($acc:ident $c:literal $a:literal $b:literal)*) => {
            core::arch::global_asm!(
                ".pushsection .rodata.miniquant_amx_texts,\"a\"",
                ".globl miniquant_amx_texts",
                "miniquant_amx_texts:",
                $(text!(tileloadd $n, "rax", "rcx"),)*
                $(text!(tilestored $n, "rax", "rcx"),)*
                $(text!(tilezero $n),)*
                $(text!(tdpbssd $c, $a, $b),)*
                text!(ldtilecfg "rax"),
                text!(tilerelease),
                ".popsection",
            );
        };
    }
    all_texts!(0 1 2 3 4 5 6 7; C00 4 0 2 C01 5 0 3 C10 6 1 2 C11 7 1 3);

    /// 8 loads and 8 stores of 6 bytes, 8 zeroes and 4 products of 5, LDTILECFG and TILERELEASE.
    const TEXT_BYTES: usize = 16 * 6 + 12 * 5 + 5 + 5;

    extern "C" {
        static miniquant_amx_texts: [u8; TEXT_BYTES];
    }

    /// A VEX.128.0F38.W0 instruction with no extended registers: `C4`, `RXB.mmmmm` = `E2`,
    /// `W.vvvv.L.pp` with `vvvv` the inverted register, the opcode, then `modrm` (and more).
    fn vex(vvvv: u8, pp: u8, opcode: u8, rest: &[u8]) -> Vec<u8> {
        let mut out = std::vec![0xc4, 0xe2, ((!vvvv & 0xf) << 3) | pp, opcode];
        out.extend_from_slice(rest);
        out
    }

    /// `Hardware`'s bounds check before a load or store: the last row's end within the slice.
    #[test]
    fn fits_checks_the_last_row_end() {
        use super::{Tile, KERNEL_CONFIG};
        // A tiles: 16 rows of 32 bytes; C tiles 16 rows of 64.
        assert!(KERNEL_CONFIG.fits(Tile::A0, 16 * 32, 32));
        assert!(!KERNEL_CONFIG.fits(Tile::A0, 16 * 32 - 1, 32));
        assert!(KERNEL_CONFIG.fits(Tile::A1, 15 * 34 + 32, 34));
        assert!(!KERNEL_CONFIG.fits(Tile::C11, 16 * 64 - 1, 64));
        assert!(KERNEL_CONFIG.fits(Tile::B0, 7 * 64 + 64, 64));
        assert!(!KERNEL_CONFIG.fits(Tile::B0, usize::MAX, usize::MAX));
        let none = super::TileConfig::palette1([(0, 0); 8]);
        assert!(!none.fits(Tile::A0, 1 << 20, 32));
    }

    #[test]
    fn encodings_are_the_sdms() {
        const NP: u8 = 0b00;
        const F3: u8 = 0b10;
        const F2: u8 = 0b11;
        let modrm = |md: u8, reg: u8, rm: u8| md << 6 | reg << 3 | rm;
        // SIB for [rax + rcx*1]: scale 0, index rcx (1), base rax (0).
        let sib = 0b00_001_000;
        let mut expected = Vec::new();
        // TILELOADD tmm, sibmem: VEX.128.F2.0F38.W0 4B !(11):rrr:100.
        for n in 0..8 {
            expected.extend(vex(0, F2, 0x4b, &[modrm(0, n, 0b100), sib]));
        }
        // TILESTORED sibmem, tmm: VEX.128.F3.0F38.W0 4B !(11):rrr:100.
        for n in 0..8 {
            expected.extend(vex(0, F3, 0x4b, &[modrm(0, n, 0b100), sib]));
        }
        // TILEZERO tmm: VEX.128.F2.0F38.W0 49 11:rrr:000.
        for n in 0..8 {
            expected.extend(vex(0, F2, 0x49, &[modrm(3, n, 0)]));
        }
        // TDPBSSD tmm1, tmm2, tmm3: VEX.128.F2.0F38.W0 5E 11:rrr:bbb; tmm1 (the accumulator)
        // in reg, tmm2 (A) in rm, tmm3 (B) in vvvv.
        for (c, a, b) in [(4, 0, 2), (5, 0, 3), (6, 1, 2), (7, 1, 3)] {
            expected.extend(vex(b, F2, 0x5e, &[modrm(3, c, a)]));
        }
        // LDTILECFG m512: VEX.128.NP.0F38.W0 49 !(11):000:bbb, [rax].
        expected.extend(vex(0, NP, 0x49, &[modrm(0, 0, 0)]));
        // TILERELEASE: VEX.128.NP.0F38.W0 49 C0.
        expected.extend(vex(0, NP, 0x49, &[0xc0]));
        // SAFETY: the symbol is the assembled block above, `TEXT_BYTES` long, read-only data.
        let assembled = unsafe { miniquant_amx_texts };
        assert_eq!(expected.len(), TEXT_BYTES);
        assert_eq!(assembled[..], expected[..]);
    }
}
